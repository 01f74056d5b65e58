"""The transformer backend of the harness (model = "gpt"): DiLoCo at M=1, H=1 is synchronous
training, the same seed the same table, a Dask cluster the local table, a corpus file of one's
own, bad settings refused in one line. Needs PyTorch (the refusal without it is tested in
tests/cli/test_simulate.py)."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fitrules.base.errors import FitrulesError, SimError
from fitrules.sim import gpt, runner
from fitrules.sim.gpt import GPTConfig
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
