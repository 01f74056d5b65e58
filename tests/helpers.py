"""Helpers for tests that drive the command line in-process and check what it leaves."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pandas as pd

from fitrules.cli import main

ONE_LINE = re.compile(r"^fitrules( [a-z]+)*: (error: .+|interrupted|terminated)$")


def snapshot(root: Path) -> dict[str, float]:
    """Every path under ``root`` (files and directories) with its modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = p.lstat().st_mtime_ns
    return out


def run(argv, capsys) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``fitrules ARGV`` run in this process."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(argv, capsys, root: Path, match: str) -> str:
    """Assert ``fitrules ARGV`` exits 2 with one line matching ``match`` and changes nothing
    under ``root``; return the line."""
    before = snapshot(root)
    code, _, err = run(argv, capsys)
    _write_down(argv, code, err)
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert ONE_LINE.match(lines[0]), lines[0]
    assert re.search(match, lines[0]), (match, lines[0])
    assert snapshot(root) == before, "a refused command changed files"
    return lines[0]


def _write_down(argv, code: int, err: str) -> None:
    """Keep the refusal for ``tools/corpus.py`` when it asks (FITRULES_CORPUS_REFUSALS)."""
    folder = os.environ.get("FITRULES_CORPUS_REFUSALS")
    if not folder:
        return
    row = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
           "argv": [str(a) for a in argv], "code": code, "err": err}  # fmt: skip
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


def predicted_into(capsys, ledger, data, *extra) -> None:
    """Run ``fitrules predict`` of the composition form at H=8, keep=0.25 over ``data``,
    recording it in ``ledger``; assert it succeeds."""
    code, out, err = run(
        ["predict", "--data", data, "--form", "composition", "--at", "H=8,keep=0.25",
         "--ledger", ledger, "--resamples", "20", *extra],
        capsys,
    )  # fmt: skip
    assert code == 0, err


def harness(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the columns ``fitrules simulate`` writes to name its spec."""
    return df.assign(spec="test", spec_sha256="0" * 64)


def write_table(df: pd.DataFrame, path: Path) -> Path:
    """Write ``df`` as CSV; a table with the harness's spec columns gets the manifest the
    harness writes beside it, so its checks (e.g. keep in (0, 1]) apply."""
    df.to_csv(path, index=False)
    if {"spec", "spec_sha256"} <= set(df.columns):
        manifest = path.with_name(path.stem + ".manifest.json")
        manifest.write_text('{"spec_sha256": "%s"}\n' % ("0" * 64))
    return path


def write_file(path: Path, text: str | bytes) -> Path:
    """Write ``text`` (bytes as they are) to ``path``; return the path."""
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def bad_table(tmp_path: Path, mutate=None) -> Path:
    """The composition grid changed by ``mutate`` (a function of the frame), written as
    bad.csv under ``tmp_path``."""
    from conftest import composition_grid

    df = composition_grid()
    return write_table(mutate(df) if mutate else df, tmp_path / "bad.csv")


def text_metric(row: int, text: str):
    """A mutation for :func:`bad_table`: the metric holds ``text`` in ``row``."""

    def mutate(df):
        df["loss"] = df["loss"].astype(object)
        df.loc[row, "loss"] = text
        return df

    return mutate


def negative_keep(row: int, keep: float):
    """A mutation for :func:`bad_table`: ``keep`` out of (0, 1] in ``row`` of a harness table."""

    def mutate(df):
        df.loc[row, "keep"] = keep
        return harness(df)

    return mutate


def png_ok(path) -> None:
    """A PNG of a real figure: a valid file, big enough, not blank."""
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    img = mpimg.imread(path)
    assert img.shape[0] > 200 and img.shape[1] > 200, path
    assert img[..., :3].std() > 0.02, f"{path} looks blank"


def slowed(monkeypatch, module, name: str, seconds: float = 0.05) -> None:
    """Make ``module.name`` sleep after it returns: it widens the window between reading a
    file and writing it back, where a missing lock loses a concurrent update."""
    real = getattr(module, name)

    def slow(*a, **k):
        out = real(*a, **k)
        time.sleep(seconds)
        return out

    monkeypatch.setattr(module, name, slow)


def at_once(work, n: int) -> list[Exception]:
    """Run ``work(i)`` for i in 0..n-1 in n threads started together; the exceptions they
    raised."""
    errors = []

    def one(i):
        try:
            work(i)
        except Exception as err:  # noqa: BLE001 - returned to the test
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
