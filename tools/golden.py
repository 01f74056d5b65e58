"""Golden files: every result class's text, HTML and JSON for one small example, kept under
``tests/golden/`` (``NAME.txt``, ``NAME.html.txt``, ``NAME.json``).

    python -m tools.golden                 # write them all (only those that differ)
    python -m tools.golden --check         # a unified diff of each that differs; exit 1
    python -m tools.golden compare fit     # only these examples

A change to what a result prints or writes is reviewed as the diff of these files in the
commit that makes it: regenerate them, read the diff, commit both. ``tests/project/
test_golden.py`` rebuilds each example and fails with the same diff, and fails for a result
class of the package without an example here.

Each example runs through the public API only, on a shipped grid or a seeded table, in a fresh
empty working folder (a ledger is written there). Masked, since they change between runs or
machines and nothing else is: timestamps, the ledger's hashes (they chain the records'
times), the working folder's, the data folder's and the checkout's paths, and the version
(an uninstalled checkout has none). Text and HTML are compared exactly: they pin what a
reader sees. JSON pins structure, names, strings and integers exactly and its floating-point
numbers (and hexadecimal floats such as ``constants_exact``) to what the methods promise, not
to floating point's last bits, which differ between machines' BLAS kernels and thread counts:
within ``REL`` relative or ``ABS`` absolute (see there why those values).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import inspect
import json
import math
import os
import pkgutil
import re
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import fitrules as fr

HERE = Path(__file__).resolve().parent.parent
GOLDEN = HERE / "tests" / "golden"
SUFFIXES = ("txt", "html.txt", "json")  # HTML kept as text: a reviewed diff, not a page
# JSON floats this close are equal. A split's fit stops once a step gains less than 1e-9 of its
# objective (engine/fit/lm.py, engine/fit/search.py), which leaves its constants and what is
# derived from them uncertain to about sqrt(1e-9) = 3e-5 relative; only the training objective
# itself is promised to 1e-9. The guided split search takes a path that a last-bit difference in
# an objective value can change, so OpenBLAS's core types (Haswell, Zen, Prescott, Sandybridge,
# the detected one) reach points that differ within that uncertainty: measured up to 2.5e-5 (the
# condition number of an ill-conditioned split), 6e-6 in a held-out error, 6e-10 in a training
# objective. REL is three times the stop rule's uncertainty and four times the largest measured
# difference. ABS covers numbers that are zero up to rounding (a seed-offset sd of 1.4e-13 moved
# by 4% between kernels).
REL = 1e-4
ABS = 1e-12
HEX_FLOAT = re.compile(r"-?0x[0-9a-f]\.?[0-9a-f]*p[+-]\d+|[-+]?(inf|nan)")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?")
VERSION = re.compile(r'("fitrules_version": )"[^"]*"')
LEDGER = "ledger.jsonl"


def _main():
    return fr.load_example("main", where="lr == 3e-4")


def _chinchilla():
    """A 5 x 5 grid of Hoffmann et al.'s law in N and D with 0.5% seeded noise."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n, d = np.meshgrid(np.geomspace(5e7, 5e9, 5), np.geomspace(1e9, 1e11, 5))
    loss = (1.69 + 406.4 / n**0.34 + 410.7 / d**0.28) * np.exp(0.005 * rng.standard_normal(n.shape))
    return pd.DataFrame({"N": n.ravel(), "D": d.ravel(), "loss": loss.ravel()})


def _predicted():
    """One prediction written to the working folder's ledger."""
    return fr.predict(_main(), "composition", "H=16,keep=0.25", ledger=LEDGER, resamples=20)


# name -> (the result's class, what makes it); each runs in a fresh empty working folder
EXAMPLES: dict[str, tuple[str, Callable]] = {
    "compare": ("Comparison", lambda: fr.compare(
        _main(), forms=["composition", "additive"], splits=40, progress=False)),
    "fit": ("FittedForm", lambda: fr.fit(_main(), "composition", intervals=True)),
    "fit_profile": ("FittedForm", lambda: fr.fit(_main(), "composition", intervals="profile")),
    "prediction": ("Prediction", lambda: fr.fit(
        _main(), "composition", intervals=True).predict(H=8, keep=0.25)),
    "ci": ("PairedIntervals", lambda: fr.ci(
        fr.load_example("paired_tuned"), baseline="algo=sync", treatment="algo=diloco,H=16",
        tune="lr")),
    "tune": ("Tuning", lambda: fr.tune(fr.load_example("tuned"), "lr")),
    "validate": ("Validation", lambda: fr.validate(fr.load_example("main"))),
    "design": ("Design", lambda: fr.design(
        _main(), forms=["composition", "additive"], budget=6, splits=10, resamples=20)),
    "search": ("Search", lambda: fr.search(
        _main(), terms=1, max_constants=3, splits=4, inner_splits=3, jobs=1, progress=False)),
    "allocate": ("Allocation", lambda: fr.allocate(
        _chinchilla(), "chin(N, D) = E + A/N**alpha + B/D**beta", budgets="1e19:1e23:3")),
    "predict": ("LedgerEntry", _predicted),
    "score": ("Scores", lambda: (_predicted(), fr.score(_main(), LEDGER))[1]),
    "verify_ledger": ("LedgerCheck", lambda: (_predicted(), fr.verify_ledger(LEDGER))[1]),
}  # fmt: skip


def result_classes() -> set[str]:
    """The names of every class in the package that renders itself and can write itself
    (``tests/api/test_writers.py`` checks each of them too): each needs an example here."""
    import pandas as pd

    from fitrules.base.results import Views

    names = set()
    for info in pkgutil.walk_packages(fr.__path__, "fitrules."):
        if info.name.startswith("fitrules._data"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if not inspect.isclass(obj) or obj.__module__ != module.__name__:
                continue
            if obj.__module__ == "fitrules.base.results" or issubclass(obj, pd.DataFrame):
                continue  # the protocol itself; a DataFrame's to_json is pandas' own
            if issubclass(obj, Views) or (hasattr(obj, "to_json") and hasattr(obj, "_repr_html_")):
                names.add(name)
    return names


@contextmanager
def _workdir():
    """A fresh empty working folder for the duration (no forms.toml, no ledger)."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="golden-") as work:
        os.chdir(work)
        try:
            yield Path(work)
        finally:
            os.chdir(before)


def _ledger_hashes(work: Path) -> list[str]:
    """The hashes of the records of the ledgers in ``work``: they chain the records' times."""
    out = []
    for path in work.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            out += [record[k] for k in ("sha256", "prev_sha256") if record.get(k)]
    return out


def _masked(text: str, work: Path, hashes: list[str]) -> str:
    paths = {str(work): "<work>", os.path.realpath(work): "<work>",
             str(fr.example_path("main").parent): "<data>", str(HERE): "<repo>"}  # fmt: skip
    for path in sorted(paths, key=len, reverse=True):  # the longest first: data/ is in <repo>
        text = text.replace(path, paths[path])
    for h in hashes:  # the hash and each prefix of it printed (a head's short form)
        text = re.sub(rf"\b{h[:12]}[0-9a-f]*\b", "<hash>", text)
    text = TIME.sub("<time>", text)
    return VERSION.sub(r'\1"<version>"', text)


def build(name: str) -> tuple[object, dict[str, str]]:
    """Make example ``name``; the result and its golden files' texts by suffix."""
    _, make = EXAMPLES[name]
    with _workdir() as work:
        result = make()
        views = {"txt": str(result), "html.txt": result._repr_html_()}
        if hasattr(result, "to_json"):
            views["json"] = result.to_json()
        hashes = _ledger_hashes(work)
        views = {k: _masked(v, work, hashes) for k, v in views.items()}
    return result, {k: v if v.endswith("\n") else v + "\n" for k, v in views.items()}


def _close(a, b) -> bool:
    """Equal, recursively: floats (and hexadecimal floats) to ``REL`` relative or ``ABS``
    absolute; integers, booleans, strings, keys and lengths exactly."""
    if type(a) is not type(b):
        return False  # 1 and 1.0, or a number and a string, differ
    if isinstance(a, str) and HEX_FLOAT.fullmatch(a) and HEX_FLOAT.fullmatch(b):
        a, b = float.fromhex(a), float.fromhex(b)
    if isinstance(a, float):
        both_nan = math.isnan(a) and math.isnan(b)
        return both_nan or a == b or math.isclose(a, b, rel_tol=REL, abs_tol=ABS)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_close, a, b))
    return a == b


def same(suffix: str, golden: str | None, now: str) -> bool:
    """Whether ``now`` matches the golden file's text (JSON numbers to ``REL``)."""
    if golden is None or golden == now:
        return golden == now
    if suffix != "json":
        return False
    try:
        return _close(json.loads(golden), json.loads(now))
    except ValueError:
        return False


def diff(name: str, views: dict[str, str], folder: Path = GOLDEN) -> list[str]:
    """Unified diffs (golden file -> now) of the example's files that differ, and of a
    golden file it no longer makes."""
    lines = []
    for suffix in SUFFIXES:
        path = folder / f"{name}.{suffix}"
        golden = path.read_text() if path.exists() else None
        now = views.get(suffix)
        if now is None:
            if golden is not None:
                lines.append(f"{path.relative_to(HERE)}: not made any more\n")
            continue
        if not same(suffix, golden, now):
            label = f"tests/golden/{name}.{suffix}"
            lines += difflib.unified_diff((golden or "").splitlines(keepends=True),
                                          now.splitlines(keepends=True),
                                          f"a/{label}", f"b/{label}")  # fmt: skip
    return lines


def write(name: str, views: dict[str, str], folder: Path = GOLDEN) -> list[str]:
    """Write the example's golden files that differ (and remove one it no longer makes);
    the paths changed."""
    folder.mkdir(parents=True, exist_ok=True)
    changed = []
    for suffix in SUFFIXES:
        path = folder / f"{name}.{suffix}"
        golden = path.read_text() if path.exists() else None
        now = views.get(suffix)
        if now is None and golden is not None:
            path.unlink()
        elif now is not None and not same(suffix, golden, now):
            path.write_text(now)
        else:
            continue
        changed.append(str(path.relative_to(HERE)))
    return changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help=f"examples (default: all): {', '.join(EXAMPLES)}")
    p.add_argument(
        "--check", action="store_true", help="write nothing; print a diff of each that differs"
    )
    a = p.parse_args(argv)
    if bad := [n for n in a.names if n not in EXAMPLES]:
        p.error(f"unknown example {bad[0]!r}; examples: {', '.join(EXAMPLES)}")
    problems = []
    if not a.names:
        covered = {cls for cls, _ in EXAMPLES.values()}
        problems += [f"{c}: a result class without an example\n"
                     for c in sorted(result_classes() - covered)]  # fmt: skip
    for name in a.names or EXAMPLES:
        _, views = build(name)
        if a.check:
            problems += diff(name, views)
        else:
            for path in write(name, views):
                print(f"wrote {path}")
    sys.stdout.writelines(problems)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
