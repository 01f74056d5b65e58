"""The corpus a gpt run reads (fitrules.sim.corpus) and the grid that reads it: a text file read
in blocks into one small array, within its memory estimate; what is not a regular file refused
without waiting; a table and its manifest tied to the version of the corpus its runs read.

Without PyTorch: the runs here are made by the gpt backend with its training replaced (the
``untrained`` fixture), so the default suite covers the corpus's part of a grid; the same with
real training is in tests/sim/test_gpt.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fitrules.base import limits
from fitrules.base.errors import LimitError, SimError
from fitrules.sim import corpus, gpt, runner
from fitrules.sim import spec as spec_module
from fitrules.sim.runner import simulate
from fitrules.sim.spec import cell_spec, parse_spec

SETTINGS = """
layers = 1
width = 16
heads = 2
context = 16
batch = 4
steps = 3
eval_windows = 8
M = 2
H = 2
"""


def _spec(corpus_setting: str, seeds=(0, 1)) -> str:
    return (f'name = "c"\nmodel = "gpt"\nseeds = {list(seeds)}\n[fixed]{SETTINGS}'
            f'corpus = "{corpus_setting}"\n')  # fmt: skip


def _text(seed: int, n: int = 4_000) -> str:
    """Seeded text of ``n`` characters, some of them outside ASCII."""
    rng = np.random.default_rng(seed)
    return "".join(rng.choice(list("abcdefgh é—\n"), size=n))


@pytest.fixture
def untrained(monkeypatch):
    """gpt runs without PyTorch: each run reads its corpus and writes its row as a real run
    does, but its training is skipped (zero parameters, a loss of 1)."""

    def train(cfg, text, history=None):
        return np.zeros(cfg.shape(text.vocab_size).n_params, np.float32), np.ones(cfg.M), False

    monkeypatch.setattr(gpt, "train", train)
    monkeypatch.setattr(gpt, "mean_loss", lambda params, text, cfg: 1.0)
    monkeypatch.setattr(runner, "require_torch", lambda: None)
    monkeypatch.setattr(spec_module, "require_torch", lambda: None)


def _reference(raw: bytes) -> tuple[np.ndarray, str]:
    """The codes and vocabulary of ``raw`` read whole, as the reader did before it read in
    blocks."""
    points = np.frombuffer(raw.decode("utf-8").encode("utf-32-le"), dtype=np.uint32)
    vocab, codes = np.unique(points, return_inverse=True)
    return codes, "".join(map(chr, vocab.tolist()))


@pytest.mark.parametrize("chunk", [4, 7, 2**18])
def test_a_file_read_in_blocks_gives_the_codes_of_the_file_read_whole(tmp_path, monkeypatch, chunk):
    """Characters of 1 to 4 bytes cut by the blocks' edges, a byte-order mark and \\r\\n: the
    codes, vocabulary and sha256 are those of the whole text, in the smallest unsigned type."""
    monkeypatch.setattr(corpus, "READ_CHUNK", chunk)
    rng = np.random.default_rng(0)
    text = "\ufeff" + "".join(rng.choice(list("ab \n\r\u00e9\u2014\u1f6e\U0001f600\u4e2d"), 3_000))
    path = tmp_path / "mixed.txt"
    path.write_bytes(text.encode())
    got = corpus.read_text_corpus(path)
    codes, vocab = _reference(path.read_bytes())
    np.testing.assert_array_equal(np.concatenate([got.train, got.valid]), codes)
    assert got.vocab == vocab and got.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert got.train.dtype == np.uint8 and len(got.valid) == len(codes) - int(len(codes) * 0.9)


def test_the_codes_take_the_smallest_type_that_holds_the_vocabulary(tmp_path):
    """Up to 256 distinct characters take a byte each, up to 65,536 two."""
    path = tmp_path / "wide.txt"
    path.write_text("".join(map(chr, range(0x4E00, 0x4E00 + 300))) * 3, encoding="utf-8")
    assert corpus.read_text_corpus(path).train.dtype == np.uint16


@pytest.mark.parametrize(
    "raw",
    [b"a \xe9", b"ab\xff cd", b"xyz" + "\U0001f600".encode()[:3], b"x" * 5 + b"\xc3\x28z"],
)
def test_text_that_is_not_utf8_is_refused_at_its_byte(tmp_path, monkeypatch, raw):
    """A byte that is not UTF-8, also where a block cuts it, is named at its offset in the
    file, as Python's decoder names it."""
    monkeypatch.setattr(corpus, "READ_CHUNK", 4)
    path = tmp_path / "bad.txt"
    path.write_bytes(raw)
    with pytest.raises(UnicodeDecodeError) as whole:
        raw.decode("utf-8")
    with pytest.raises(SimError, match=rf"corpus='.*bad.txt': is not UTF-8 text \(byte "
                       rf"{whole.value.start}\)"):  # fmt: skip
        corpus.read_text_corpus(path)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's VmHWM")
def test_reading_a_corpus_peaks_within_its_estimate(tmp_path):
    """A 7 MiB text (some characters of 2 and 3 bytes) is read in a fresh process within its
    estimate, ``corpus_facts(...).read_bytes``, and twice its size of peak resident memory
    (read whole, as before, it took about 36 times its size)."""
    path = tmp_path / "big.txt"
    rng = np.random.default_rng(1)
    words = np.array("the quick brown fox — jumps over a lazy dog and Ὦ φίλε runs\n".split(" "))
    path.write_text(" ".join(rng.choice(words, size=1_500_000)), encoding="utf-8")
    # the peak of this process's own memory (VmHWM): getrusage's ru_maxrss keeps the peak of
    # the process it was forked from, here pytest's, larger than the read
    script = (
        "import re, sys\n"
        "from fitrules.sim import corpus\n"
        "def peak():\n"
        "    status = open('/proc/self/status').read()\n"
        "    return int(re.search(r'VmHWM:\\s*(\\d+) kB', status).group(1)) * 1024\n"
        "open(sys.argv[2], 'w').write('warm up\\n')\n"
        "corpus.read_text_corpus(sys.argv[2])\n"
        "before = peak()\n"
        "corpus.read_text_corpus(sys.argv[1])\n"
        "print(peak() - before)\n"
    )
    res = subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / "w.txt")],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    added, size = int(res.stdout), path.stat().st_size
    assert added <= 2 * size, f"{added / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file"
    assert added <= corpus.corpus_facts(str(path)).read_bytes


def test_a_read_beyond_the_memory_budget_is_refused_in_one_line(tmp_path, monkeypatch):
    """With less memory free than the codes need, the read stops with one line naming the
    file and its characters."""
    path = tmp_path / "c.txt"
    path.write_text(_text(0), encoding="utf-8")
    monkeypatch.setattr(limits, "memory_budget", lambda: 2**20)
    with pytest.raises(LimitError, match=r"corpus='.*c.txt': reading its 4,000 characters "
                       r"would need about .* of memory, more than the"):  # fmt: skip
        corpus.read_text_corpus(path)


def test_the_cap_is_within_what_its_read_may_take():
    """A file at the size cap, of the widest codes (4 bytes a character, one a byte), is
    estimated within the memory cap: the cap never asks for more than any machine is allowed."""
    facts = corpus.CorpusFacts(corpus.MAX_CORPUS_BYTES, "".join(map(chr, range(70_000))), "")
    assert facts.dtype.itemsize == 4
    assert facts.read_bytes <= limits.MEMORY_CAP_BYTES


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A file larger than the cap is refused in one line naming it, its size and the cap,
    and never opened."""
    path = tmp_path / "huge.txt"
    with open(path, "wb") as fh:
        fh.truncate(corpus.MAX_CORPUS_BYTES + 1)  # sparse: takes no disk
    monkeypatch.setattr(os, "open", lambda *a, **k: pytest.fail("the file was opened"))
    with pytest.raises(SimError, match=r"corpus='.*huge.txt': the file has 1,073,741,825 bytes, "
                       r"more than the 1,073,741,824 a corpus may have"):  # fmt: skip
        cell_spec(f"model=gpt,corpus={path}")


@pytest.mark.parametrize(
    "kind, match",
    [
        ("directory", r"corpus='.*': is a directory; give a file"),
        ("fifo", r"corpus='.*': is not a regular file \(a pipe, socket or device"),
        ("/dev/zero", r"corpus='/dev/zero': is not a regular file \(a pipe, socket or device"),
        ("missing", r"corpus='.*': cannot be read \(no such file\)"),
    ],
)
def test_what_is_not_a_regular_file_is_refused_in_one_line_without_waiting(tmp_path, kind, match):
    """A directory, a named pipe with no writer or /dev/zero given as a corpus is refused in
    one line saying what it is, at once (a fresh process, stopped after 60 s if it waited)."""
    path = {"directory": tmp_path, "/dev/zero": "/dev/zero"}.get(kind, tmp_path / "c.txt")
    if kind == "fifo":
        os.mkfifo(path)
    script = (
        "import sys\n"
        "from fitrules.base.errors import SimError\n"
        "from fitrules.sim.spec import cell_spec\n"
        "try:\n"
        "    cell_spec('model=gpt,corpus=' + sys.argv[1])\n"
        "except SimError as err:\n"
        "    print(err)\n"
    )
    res = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1 and re.search(match, lines[0]), lines


def test_a_file_changed_between_the_two_passes_is_refused(tmp_path):
    """A file whose bytes change between the pass that counts it and the pass that encodes
    it is refused, not encoded against another vocabulary."""
    path = tmp_path / "c.txt"
    path.write_text("abcabc\n" * 100)
    name, key = corpus._check_text_file(path)
    corpus._facts(name, key)  # the first pass, as a check before the run made it
    path.write_text("xyzxyz\n" * 100)  # the same size
    with pytest.raises(SimError, match="changed while it was read"):
        corpus._read_text(name, key)


def test_a_grid_resumed_after_its_corpus_changed_is_refused(tmp_path, monkeypatch, untrained):
    """A gpt grid stopped in its second run, resumed after its corpus file was edited, is
    refused in one line naming the file and both sha256s, with the table untouched (its cut-off
    line too); with the file restored it resumes to the table of an uninterrupted grid."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text(_text(0), encoding="utf-8")
    spec = parse_spec(_spec("c.txt"), "c.toml")
    whole = simulate(spec, tmp_path / "whole.csv", show_progress=False)
    out = tmp_path / "cut.csv"
    lines = whole.to_csv(index=False).splitlines(keepends=True)
    out.write_text("".join(lines[:2]) + lines[2][:40])  # the second run cut off mid-write
    before = out.read_bytes()
    old = hashlib.sha256((tmp_path / "c.txt").read_bytes()).hexdigest()
    (tmp_path / "c.txt").write_text(_text(1), encoding="utf-8")
    new = hashlib.sha256((tmp_path / "c.txt").read_bytes()).hexdigest()
    with pytest.raises(SimError) as info:
        simulate(spec, out, show_progress=False)
    assert str(info.value) == (
        f"{out}: its runs read corpus='c.txt' with sha256 {old[:12]}, but the file has sha256 "
        f"{new[:12]} now; restore the file, or write to a new out"
    )
    assert out.read_bytes() == before and not runner.manifest_path(out).exists()
    (tmp_path / "c.txt").write_text(_text(0), encoding="utf-8")
    again = simulate(spec, out, show_progress=False)
    pd.testing.assert_frame_equal(again.drop(columns="wall_s"), whole.drop(columns="wall_s"))


def test_a_finished_grid_rerun_after_its_corpus_changed_is_refused(tmp_path, untrained):
    """Rerunning a finished gpt grid after its corpus changed is refused too: the table stays
    the record of the version its runs read."""
    path = tmp_path / "c.txt"
    path.write_text(_text(0), encoding="utf-8")
    spec = parse_spec(_spec(str(path), seeds=[0]), "c.toml")
    simulate(spec, tmp_path / "t.csv", show_progress=False)
    path.write_text(_text(1), encoding="utf-8")
    with pytest.raises(SimError, match="its runs read corpus=.* restore the file"):
        simulate(spec, tmp_path / "t.csv", show_progress=False)


def test_a_run_that_read_a_corpus_changed_mid_grid_is_failed_not_mixed(tmp_path, untrained):
    """A corpus edited while a grid runs: the runs that read the new version are failed and
    named, the table holds only runs of the version the grid started with, and a rerun with
    the file restored completes it."""
    path = tmp_path / "c.txt"
    path.write_text(_text(0), encoding="utf-8")
    first = hashlib.sha256(path.read_bytes()).hexdigest()
    spec = parse_spec(_spec(str(path), seeds=[0, 1, 2]), "c.toml")
    out = tmp_path / "t.csv"

    def edit(row):
        path.write_text(_text(1), encoding="utf-8")

    with pytest.raises(SimError, match=r"2 run\(s\) failed: seed=1: SimError: it read "
                       rf"corpus='.*c.txt' with sha256 \w{{12}}, not the {first[:12]} of the "
                       "grid's other runs"):  # fmt: skip
        simulate(spec, out, show_progress=False, on_run=edit)
    assert pd.read_csv(out)["corpus_sha256"].tolist() == [first]
    path.write_text(_text(0), encoding="utf-8")
    table = simulate(spec, out, show_progress=False)
    assert table["corpus_sha256"].eq(first).all() and len(table) == 3


def test_the_manifest_names_the_corpus_the_runs_read(tmp_path, untrained):
    """A gpt grid's manifest records the sha256 of the file its runs read; of two corpora,
    each by its setting; a quadratic grid's, which reads none, records none."""
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text(_text(0), encoding="utf-8")
    two.write_text(_text(1), encoding="utf-8")
    sha = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (one, two)}
    simulate(parse_spec(_spec(str(one), seeds=[0]), "c.toml"), tmp_path / "a.csv",
             show_progress=False)  # fmt: skip
    manifest = json.loads((tmp_path / "a.manifest.json").read_text())
    assert manifest["corpus_sha256"] == sha[one] and "corpora" not in manifest
    both = _spec(str(one), seeds=[0]) + f'[[block]]\n[[block]]\n[block.fixed]\ncorpus = "{two}"\n'
    simulate(parse_spec(both, "c.toml"), tmp_path / "b.csv", show_progress=False)
    manifest = json.loads((tmp_path / "b.manifest.json").read_text())
    assert manifest["corpus_sha256"] is None
    assert manifest["corpora"] == {str(one): sha[one], str(two): sha[two]}
    quad = 'model = "quadratic"\nseeds = [0]\n[fixed]\ndim = 4\nrounds = 4\nburn_in = 1\n'
    simulate(parse_spec(quad, "q.toml"), tmp_path / "q.csv", show_progress=False)
    assert json.loads((tmp_path / "q.manifest.json").read_text())["corpus_sha256"] is None


def test_a_manifest_that_named_another_corpus_is_written_again(tmp_path, untrained):
    """A finished gpt grid whose manifest names another corpus than its runs read (as
    manifests did before) gets a manifest naming theirs when rerun; the table is unchanged."""
    path = tmp_path / "c.txt"
    path.write_text(_text(0), encoding="utf-8")
    spec = parse_spec(_spec(str(path), seeds=[0]), "c.toml")
    out = tmp_path / "t.csv"
    simulate(spec, out, show_progress=False)
    manifest = runner.manifest_path(out)
    wrong = json.loads(manifest.read_text()) | {"corpus_sha256": corpus.load_corpus().sha256}
    manifest.write_text(json.dumps(wrong))
    before = out.read_bytes()
    simulate(spec, out, show_progress=False)
    assert json.loads(manifest.read_text())["corpus_sha256"] == (
        hashlib.sha256(path.read_bytes()).hexdigest()
    )
    assert out.read_bytes() == before


def test_a_gpt_table_is_another_models_runs_not_a_stranger(tmp_path, untrained):
    """A gpt table given as the output of an MLP or quadratic spec is refused as another
    model's runs, not as a table fitrules simulate did not write."""
    path = tmp_path / "c.txt"
    path.write_text(_text(0), encoding="utf-8")
    out = tmp_path / "g.csv"
    simulate(parse_spec(_spec(str(path), seeds=[0]), "c.toml"), out, show_progress=False)
    for text in ('seeds = [0]\n[fixed]\nsteps = 4\nwidth = 8\n',
                 'model = "quadratic"\nseeds = [0]\n[fixed]\ndim = 4\n'):  # fmt: skip
        with pytest.raises(SimError) as info:
            simulate(parse_spec(text, "o.toml"), out, show_progress=False)
        assert "not written by" not in str(info.value)
        assert "holds runs without the setting" in str(info.value)
