"""The transformer backend of the harness (model = "gpt"): DiLoCo at M=1, H=1 is synchronous
training, the same seed the same table, a Dask cluster the local table, a corpus file of one's
own, the programme's settings (i.i.d. windows per worker, the lr schedule, weight decay on
matrices, tied embeddings, the presets, outer steps tuned per H), the device path equal to the
numpy path, bad settings refused in one line. Needs PyTorch (the refusal without it is tested
in tests/cli/test_simulate.py)."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fitrules.base.errors import FitrulesError, SimError
from fitrules.sim import gpt, runner
from fitrules.sim.gpt import PRESETS, GPTConfig
from fitrules.sim.runner import simulate
from fitrules.sim.spec import cell_spec, parse_spec

torch = pytest.importorskip("torch")

TINY = dict(layers=1, width=16, heads=2, context=16, batch=4, steps=12, eval_windows=32)
SPEC = """
name = "g"
model = "gpt"
seeds = [0, 1]
[fixed]
layers = 1
width = 16
heads = 2
context = 16
batch = 4
steps = 12
eval_windows = 32
M = 3
H = 4
"""


def test_one_worker_one_inner_step_uncompressed_is_synchronous_training():
    """DiLoCo at M=1, H=1, no compression, outer_lr=1 and no momentum takes the synchronous
    baseline's steps: the same training loss at every step and the same final parameters."""
    cfg = GPTConfig(**TINY, M=1, H=1, compressor="none", outer_lr=1.0, outer_momentum=0.0,
                    nesterov=False, weight_decay=0.1)  # fmt: skip
    corpus = cfg.text()
    local, sync = [], []
    p_local, _, diverged_local = gpt.train(cfg, corpus, local)
    p_sync, _, diverged_sync = gpt.train(replace(cfg, algo="sync"), corpus, sync)
    assert len(local) == len(sync) == cfg.steps and not (diverged_local or diverged_sync)
    np.testing.assert_allclose(local, sync, rtol=1e-6)
    np.testing.assert_allclose(p_local, p_sync, rtol=0, atol=1e-5)
    assert local[-1] < local[0]  # and it learns


def test_the_same_seed_gives_the_same_table_and_a_resume_the_same_runs(tmp_path):
    """A 2-run spec run twice gives the same table, number for number; a table cut to its
    first run resumes to it; the two seeds' runs differ."""
    spec = parse_spec(SPEC, "g.toml")
    one = simulate(spec, tmp_path / "one.csv", show_progress=False)
    two = simulate(spec, tmp_path / "two.csv", show_progress=False)
    pd.testing.assert_frame_equal(one.drop(columns="wall_s"), two.drop(columns="wall_s"),
                                  check_exact=True)  # fmt: skip
    assert one["loss"].iloc[0] != one["loss"].iloc[1] and not one["diverged"].any()
    assert one["model"].eq("gpt").all() and (one["tokens"] == 12 * 3 * 4 * 16).all()
    pd.read_csv(tmp_path / "two.csv").iloc[:1].to_csv(tmp_path / "two.csv", index=False)
    (tmp_path / "two.manifest.json").unlink()
    again = simulate(spec, tmp_path / "two.csv", show_progress=False)
    pd.testing.assert_frame_equal(one.drop(columns="wall_s"), again.drop(columns="wall_s"),
                                  check_exact=True)  # fmt: skip
    assert json.loads((tmp_path / "two.manifest.json").read_text())["runs_this_invocation"] == 1


def test_a_dask_cluster_gives_the_local_table(tmp_path, distributed):
    """Compressed, attacked, median-aggregated runs on a Dask cluster give the local table."""
    text = SPEC.replace("M = 3\n", 'M = 3\ncompressor = "topk"\nkeep = 0.5\nattackers = 1\n'
                        'aggregator = "median"\nattack_mode = "coordinated"\n')  # fmt: skip
    spec = parse_spec(text, "g.toml")
    here = simulate(spec, tmp_path / "here.csv", show_progress=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as lc:
        there = simulate(spec, tmp_path / "there.csv", scheduler=lc.scheduler_address,
                         show_progress=False)  # fmt: skip
    pd.testing.assert_frame_equal(here.drop(columns="wall_s"), there.drop(columns="wall_s"),
                                  check_exact=True)  # fmt: skip
    assert runner._row_key(there.iloc[0].to_dict()) == runner.run_key(spec.runs[0])


def test_a_corpus_file_brings_its_own_characters_and_split(tmp_path):
    """corpus = PATH: the vocabulary is the file's distinct characters, the last tenth is
    validation, and the row records the file's sha256 and the sizes of its two parts."""
    raw = ("Ὦ φίλε, the quick brown fox — jumps. " * 60).encode()
    path = tmp_path / "mine.txt"
    path.write_bytes(raw)
    text = GPTConfig(corpus=str(path)).text()
    assert text.vocab == "".join(sorted(set(raw.decode())))
    row = gpt.run(GPTConfig(**TINY, M=2, H=2, corpus=str(path)))
    assert row["corpus_sha256"] == hashlib.sha256(raw).hexdigest()
    n = len(raw.decode())
    assert (row["train_chars"], row["valid_chars"]) == (int(n * 0.9), n - int(n * 0.9))
    assert row["n_params"] == GPTConfig(**TINY, corpus=str(path)).shape().n_params
    assert np.isfinite(row["loss"]) and row["loss"] < np.log(len(text.vocab))


def test_a_grid_on_a_corpus_file_is_tied_to_the_version_its_runs_read(tmp_path, monkeypatch):
    """A grid on a corpus file, stopped after one run and resumed after the file was edited,
    is refused naming the file and both sha256s; restored, it resumes to the uninterrupted
    table, and its manifest records the file's sha256 (not the shipped slice's)."""
    monkeypatch.chdir(tmp_path)
    good = ("to be, or not to be, that is the question: " * 80).encode()
    (tmp_path / "c.txt").write_bytes(good)
    spec = parse_spec(SPEC + 'corpus = "c.txt"\n', "g.toml")
    whole = simulate(spec, tmp_path / "whole.csv", show_progress=False)
    sha = hashlib.sha256(good).hexdigest()
    assert json.loads((tmp_path / "whole.manifest.json").read_text())["corpus_sha256"] == sha
    whole.iloc[:1].to_csv(tmp_path / "cut.csv", index=False)
    (tmp_path / "c.txt").write_bytes(good.replace(b"question", b"problem!"))
    edited = hashlib.sha256((tmp_path / "c.txt").read_bytes()).hexdigest()
    refusal = (rf"cut.csv: its runs read corpus='c.txt' with sha256 {sha[:12]}, but the file "
               rf"has sha256 {edited[:12]} now; restore")  # fmt: skip
    with pytest.raises(SimError, match=refusal):
        simulate(spec, tmp_path / "cut.csv", show_progress=False)
    (tmp_path / "c.txt").write_bytes(good)
    again = simulate(spec, tmp_path / "cut.csv", show_progress=False)
    pd.testing.assert_frame_equal(whole.drop(columns="wall_s"), again.drop(columns="wall_s"),
                                  check_exact=True)  # fmt: skip


@pytest.mark.parametrize(
    "cell, match",
    [
        ("heads=3", r"heads=3 must divide width=64"),
        ("layers=0", r"layers=0 must be from 1 to 64"),
        ("context=5000", r"context=5000 must be from 1 to 4,096"),
        ("lr=0", r"lr=0.0 is outside \(0, 1e6\]"),
        ("weight_decay=-1", r"weight_decay=-1.0 is outside \[0, 1e6\]"),
        ("algo=ring", r"algo='ring' is unknown; allowed: diloco, sync"),
        ("attackers=5", r"attackers=5 must be from 0 to M = 4"),
        ("attack=noise", r"attack='noise' is unknown; allowed: signflip, scale"),
        ("keep=0", r"keep=0.0 is outside \(0, 1\]"),
        ("embed=4", r"unknown factor 'embed'"),
        ("corpus=missing.txt", r"corpus='missing.txt': cannot be read \(no such file\)"),
        ("corpus=.", r"corpus='.': is a directory"),
        ("corpus=/dev/zero", r"corpus='/dev/zero': is not a regular file"),
        ("corpus=empty.txt", r"corpus='empty.txt': the file is empty"),
        ("corpus=short.txt", r"too few for context=64 and M=4"),
        ("corpus=latin1.txt", r"corpus='latin1.txt': is not UTF-8 text \(byte 2\)"),
        ("layers=64,width=8192,batch=16384", r"a gpt run at layers=64.* would need about"),
        ("sampling=random", r"sampling='random' is unknown; allowed: shards, iid"),
        ("warmup=600", r"warmup=600 must be from 0 to steps = 512"),
        ("warmup=-1", r"warmup=-1 must be from 0 to steps = 512"),
        ("schedule=linear", r"schedule='linear' is unknown; allowed: constant, cosine"),
        ("min_lr_fraction=2", r"min_lr_fraction=2.0 is outside \[0, 1\]"),
        ("decay_on=norms", r"decay_on='norms' is unknown; allowed: all, matrices"),
        ("tied=maybe", r"tied='maybe' is not a valid bool"),
        ("preset=1m", r"preset='1m' is unknown; allowed: '', 413k, 915k"),
        ("preset=915k,width=64", r"preset='915k' sets width=192, but width=64; give one of"),
        ("device=tpu", r"device='tpu' is unknown; allowed: '', cpu, cuda"),
        pytest.param("device=cuda", r"device='cuda': PyTorch sees no CUDA device here",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA here")),
    ],
)
def test_bad_gpt_settings_are_refused_in_one_line(tmp_path, monkeypatch, cell, match):
    """A bad setting of a gpt cell is refused in one line naming it, its value and what is
    allowed, before any run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "short.txt").write_text("to be or not to be\n")
    (tmp_path / "latin1.txt").write_bytes("a é".encode("latin-1"))
    with pytest.raises(FitrulesError, match=match) as info:  # memory: a LimitError
        cell_spec(f"model=gpt,{cell}")
    assert "\n" not in str(info.value)


def test_a_gpt_cell_and_spec_make_gpt_runs():
    """model=gpt in a cell or a spec makes GPTConfigs; a cell on a gpt spec keeps its model."""
    spec = cell_spec("model=gpt,H=4")
    assert isinstance(spec.runs[0], GPTConfig) and spec.runs[0].H == 4
    assert spec.name == "cell:model=gpt,H=4"
    assert cell_spec("model=gpt").runs == (GPTConfig(),)
    base = parse_spec(SPEC, "g.toml")
    assert cell_spec("H=2", base).runs[0] == replace(base.runs[0], H=2, seed=0)
    with pytest.raises(SimError, match="the spec given runs another model"):
        cell_spec("model=quadratic,H=2", base)


def _corpus_of(tmp_path, chars: int, size: int = 4_000) -> str:
    """A corpus file of ``size`` characters over the first ``chars`` printable characters."""
    alphabet = "".join(chr(c) for c in range(33, 33 + chars))
    text = "".join(np.random.default_rng(0).choice(list(alphabet), size))
    path = tmp_path / f"c{chars}.txt"
    path.write_text(alphabet + text)
    return str(path)


def test_iid_windows_differ_between_workers_cover_the_text_and_leave_validation_out(tmp_path):
    """sampling = "iid": each worker draws its own windows, every worker from the whole
    training text and never from the validation part; with shards worker 0 reads only its
    first M-th."""
    corpus_file = _corpus_of(tmp_path, 20, 600)
    cfg = GPTConfig(**{**TINY, "steps": 400}, M=2, sampling="iid", corpus=corpus_file)
    corpus = cfg.text()
    train = np.lib.stride_tricks.sliding_window_view(corpus.train, cfg.context)
    where = {w.tobytes(): i for i, w in enumerate(train.astype(np.int64))}  # all distinct
    assert len(where) == len(train)

    def starts(c: GPTConfig) -> np.ndarray:  # (steps, M, B): where each window starts
        return np.array([[[where[w.tobytes()] for w in worker] for worker in x]
                         for x, _ in gpt._batches(corpus, c)])  # fmt: skip

    iid = starts(cfg)
    n = len(train) - 1  # the last start leaves no next character: never drawn
    assert iid.max() < n and not np.array_equal(iid[:, 0], iid[:, 1])
    for m in range(2):
        assert len(np.unique(iid[:, m])) > 0.9 * n  # 1,600 draws over 542 windows
        assert iid[:, m].min() < 0.05 * n and iid[:, m].max() > 0.95 * n
    assert starts(replace(cfg, sampling="shards"))[:, 0].max() < n // 2


def test_weight_decay_with_decay_on_matrices_moves_only_the_linear_maps_weights():
    """One synchronous AdamW step with weight decay 0.5 against none: with decay_on =
    "matrices" only the weight matrices of the linear maps differ, by lr x decay x their
    start; with "all" the LayerNorm gains, embeddings and biases' neighbours differ too."""
    cfg = GPTConfig(**{**TINY, "steps": 1}, M=2, algo="sync", lr=1e-2)
    shape = cfg.shape()
    mask = shape.matrices().astype(bool)
    start = gpt.init_params(shape, np.random.default_rng([0, 0]))
    plain, _, _ = gpt.train(replace(cfg, weight_decay=0.0), cfg.text())
    only, _, _ = gpt.train(replace(cfg, weight_decay=0.5, decay_on="matrices"), cfg.text())
    every, _, _ = gpt.train(replace(cfg, weight_decay=0.5), cfg.text())
    np.testing.assert_array_equal(only[~mask], plain[~mask])
    np.testing.assert_allclose(plain[mask] - only[mask], 1e-2 * 0.5 * start[mask], atol=1e-7)
    # width 16, 37 characters: qkv 16 x 48, projection 16 x 16, MLP 16 x 64 and 64 x 16, head
    assert int(mask.sum()) == 768 + 256 + 1_024 + 1_024 + 16 * 37
    assert not np.array_equal(every[~mask], plain[~mask])


def test_tied_embeddings_make_the_token_embedding_the_head():
    """tied = true: no head matrix or bias (V x D + V fewer parameters), and the losses equal
    the untied model's whose head is the token embedding transposed with a zero bias."""
    cfg = GPTConfig(**TINY, M=2)
    untied, tied = cfg.shape(37), replace(cfg, tied=True).shape(37)
    assert untied.n_params - tied.n_params == 37 * 16 + 37
    p = gpt.init_params(tied, np.random.default_rng(1))
    views = {name: v[0] for name, v in gpt._views(p[None], tied).items()}
    full = np.concatenate([views[n].ravel() for n, _ in tied.blocks]
                          + [views["tok"].T.ravel(), np.zeros(37, np.float32)])  # fmt: skip
    x = torch.from_numpy(np.random.default_rng(2).integers(0, 37, (1, 3, 16)))
    y = torch.from_numpy(np.random.default_rng(3).integers(0, 37, (1, 3, 16)))
    a = gpt.losses(torch.from_numpy(p[None]), x, y, tied)
    b = gpt.losses(torch.from_numpy(full[None]), x, y, untied)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert gpt.run(replace(cfg, tied=True))["n_params"] == tied.n_params


def test_presets_have_the_programmes_parameter_counts_on_a_65_character_alphabet(tmp_path):
    """preset = "413k" and "915k" are tied 2-layer GPTs of width 128 and 192 at context 64:
    413,312 and 914,880 parameters on a 65-character alphabet (Tiny Shakespeare's); a spec
    naming a preset gets its sizes, and a cell naming one on a spec replaces the spec's."""
    corpus = _corpus_of(tmp_path, 65, 20_000)
    counts = {}
    for name in PRESETS:
        spec = parse_spec(f'model = "gpt"\n[fixed]\npreset = "{name}"\ncorpus = "{corpus}"\n')
        counts[name] = spec.runs[0].shape().n_params
    assert counts == {"413k": 413_312, "915k": 914_880}
    assert cell_spec("preset=915k", parse_spec(SPEC, "g.toml")).runs[0].width == 192
    assert GPTConfig(**PRESETS["413k"]).shape(37).n_params == 409_728  # the shipped slice


def test_the_lr_schedule_warms_up_linearly_and_decays_along_a_cosine():
    """inner_lr: lr x (t + 1) / warmup during the warm-up, then lr (constant) or a half
    cosine from lr to min_lr_fraction x lr over the steps left; the default is lr throughout."""
    cfg = GPTConfig(lr=1e-3, steps=110, warmup=10, schedule="cosine", min_lr_fraction=0.1)
    lrs = np.array([cfg.inner_lr(t) for t in range(cfg.steps)])
    np.testing.assert_allclose(lrs[:10], 1e-3 * np.arange(1, 11) / 10)
    np.testing.assert_allclose(lrs[10], 1e-3)
    np.testing.assert_allclose(lrs[60], 1e-4 + 0.5 * 9e-4)  # half way down
    assert np.all(np.diff(lrs[10:]) < 0) and lrs[-1] > 1e-4
    assert {GPTConfig(lr=3e-4).inner_lr(t) for t in range(512)} == {3e-4}
    a, b = [], []
    gpt.train(GPTConfig(**TINY, M=2), GPTConfig().text(), a)
    gpt.train(GPTConfig(**TINY, M=2, warmup=12), GPTConfig().text(), b)
    assert a[1] < b[1]  # a run at a 12th of its lr has barely moved after one step


@pytest.mark.parametrize(
    "settings",
    [
        dict(keep=0.5),
        dict(compressor="topk", keep=0.25, aggregator="median", attackers=1,
             attack_mode="coordinated"),  # fmt: skip
        dict(aggregator="trimmed", attackers=1, keep=0.5, masks="shared", attack="scale"),
        dict(algo="sync"),
        dict(tied=True, decay_on="matrices", weight_decay=0.1, schedule="cosine", warmup=3,
             sampling="iid", keep=0.5),  # fmt: skip
    ],
)
def test_the_device_path_on_the_cpu_gives_the_numpy_paths_run(settings):
    """device = "cpu" (parameters, compression and aggregation as torch tensors) makes the
    numpy path's run: the same loss within 1e-6 and parameters within 1e-6."""
    cfg = GPTConfig(**TINY, M=3, H=4, **settings)
    on_numpy, _, _ = gpt.train(cfg, cfg.text())
    on_device, _, _ = gpt.train(replace(cfg, device="cpu"), cfg.text())
    np.testing.assert_allclose(on_device, on_numpy, rtol=0, atol=1e-6)
    a, b = gpt.run(cfg)["loss"], gpt.run(replace(cfg, device="cpu"))["loss"]
    assert abs(a - b) < 1e-6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_the_device_path_runs_on_cuda_and_matches_the_cpu():
    """device = "cuda" runs on the GPU and ends within float32 tolerance of the CPU's run."""
    cfg = GPTConfig(**TINY, M=3, H=4, keep=0.5, device="cpu")
    a, b = gpt.run(cfg), gpt.run(replace(cfg, device="cuda"))
    assert b["device"] == "cuda" and abs(a["loss"] - b["loss"]) < 1e-3


def test_a_table_from_before_the_new_settings_resumes_as_their_defaults(tmp_path):
    """A table without the columns of the settings added since (their defaults are the
    behaviour before them) is read as runs at those defaults: nothing is run again."""
    spec = parse_spec(SPEC, "g.toml")
    whole = simulate(spec, tmp_path / "g.csv", show_progress=False)
    whole.drop(columns=list(GPTConfig.ADDED_SETTINGS)).to_csv(tmp_path / "g.csv", index=False)
    (tmp_path / "g.manifest.json").unlink()
    again = simulate(spec, tmp_path / "g.csv", show_progress=False)
    assert json.loads((tmp_path / "g.manifest.json").read_text())["runs_this_invocation"] == 0
    assert again["loss"].tolist() == whole["loss"].tolist()


def test_the_tune_job_chooses_outer_lr_and_momentum_per_h_by_cross_fitting(tmp_path):
    """fr.tune over outer_lr and outer_momentum on a gpt grid chooses a pair per H in each
    fold: the pair of the lowest mean loss on the fold's choosing seeds."""
    import fitrules as fr

    factors = "[[block]]\n[block.factors]\nH = [2, 4]\nouter_lr = [0.5, 1.0]\n"
    factors += "outer_momentum = [0.0, 0.9]\n"
    text = SPEC.replace("H = 4\n", "").replace("steps = 12", "steps = 8") + factors
    table = simulate(parse_spec(text, "g.toml"), tmp_path / "t.csv", show_progress=False)
    t = fr.tune(table, ["outer_lr", "outer_momentum"])
    assert sorted(t.choices["H"]) == [2, 2, 4, 4]
    for _, row in t.choices.iterrows():
        seed = row["choosing_seeds"][0]
        at = table[(table["H"] == row["H"]) & (table["seed"] == seed)]
        best = at.loc[at["loss"].idxmin()]
        assert (row["chosen_outer_lr"], row["chosen_outer_momentum"]) == (
            best["outer_lr"], best["outer_momentum"])
