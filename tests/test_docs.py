"""The docs site: it builds with Sphinx with warnings as errors, its reference pages cover
every public name and every command, and the examples of every tutorial page (and of the
quick start) run from the installed wheel in an empty directory, with the machinery that
runs the README's (tests/readme.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT
from readme import PAGES, README, examples, run_examples, skipped_lines

DOCS = ROOT / "docs"


def test_the_readme_is_a_landing_page():
    lines = README.read_text().splitlines()
    assert len(lines) < 120
    # every relative link of the README names a file of the checkout
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text()):
        assert (ROOT / target).exists(), target


def test_every_page_runs_something():
    assert {p.stem for p in PAGES} == {
        "quickstart", "own-table", "add-a-form", "fit-and-predict", "paired-ci",
        "design-and-ledger", "search", "cluster",
    }  # fmt: skip
    for page in PAGES:
        assert examples(page), page  # and shell_commands accounted for every sh line


def test_only_the_cluster_across_machines_is_not_run():
    skipped = [s for p in PAGES for s in skipped_lines(p) if s.startswith("fitrules")]
    assert skipped == ["fitrules simulate main --out main.csv --scheduler tcp://HOST:8786"]


# slow (a minute or more): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_the_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", DOCS, out],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "WARNING" not in res.stderr, res.stderr
    import fitrules
    from fitrules.cli import build_parser

    api = (out / "reference" / "api.html").read_text()
    for name in fitrules.__all__:
        if name != "__version__":
            assert f'id="fitrules.{name}"' in api, name
    cli = (out / "reference" / "cli.html").read_text()
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for command in sub.choices:
        assert f"<h2>fitrules {command}" in cli, command
    assert "usage: fitrules compare" in cli


# what each page's run must leave behind or print, beyond every command exiting 0
EXPECT = {
    "quickstart": {
        "files": ["reports/first/report.md", "reports/mine/report.md", "out.json"],
        "printed": {"ci": "paired_tuned.csv"},
    },
    "own-table": {
        "files": ["my_runs.csv", "reports/mine/report.md"],
        "printed": {
            "validate my_runs.csv --metric val/loss --seed-col run_seed --rename inner_steps=H":
                "cells: 20",
        },
    },
    "add-a-form": {
        "files": ["forms.toml"],
        "printed": {"compare --forms composition,mine --splits 100": "composition vs mine"},
    },
    "fit-and-predict": {
        "printed": {
            "fit --form additive --intervals --predict H=8,keep=0.25": [
                "information criteria", "prediction at H=8, keep=0.25", "prediction intervals",
            ],
            "fit --form composition --predict H=8,keep=0.25 --runs 3": "for the mean of 3 new runs",
        },
    },
    "paired-ci": {
        "files": ["reports/paired-ci"],
        # the numbers the page quotes
        "printed": {"ci": ["paired_tuned.csv", "-0.0101", "-0.0201", "-0.0001"]},
    },
    "design-and-ledger": {
        "files": ["reports/mine-design", "predictions.jsonl", "new.csv", "new.manifest.json"],
        "printed": {
            "simulate main --cell H=8,keep=0.25,lr=3e-4 --seeds 0,1,2 --out new.csv":
                "new.csv: 3 runs",
            # the numbers the page quotes
            "predict --form composition --at H=8,keep=0.25 --runs 3 --tolerance 1 --ledger "
            "predictions.jsonl": ["2.1679", "2.1272 to 2.2086"],
            "score --ledger predictions.jsonl --data new.csv": ["2.1679", "2.1562", "+0.544"],
            "ledger verify --ledger predictions.jsonl": "chain intact",
        },
    },
    "search": {
        "files": ["forms.toml", "reports/search-tuned"],
        "printed": {
            "compare --forms composition,log_additive,searched_k2 --splits 300": "searched_k2",
        },
    },
    "cluster": {
        "files": ["cell.csv", "cell.manifest.json"],
        "printed": {
            "simulate main --cell H=4,keep=0.5,lr=3e-4 --seeds 0,1 --out cell.csv "
            "--scheduler local:2": "cell.csv: 2 runs",
        },
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_example_of_the_page_runs_from_the_wheel(page, installed, tmp_path):
    if page.stem == "cluster":  # as the cluster tests: the test extra brings Dask
        pytest.importorskip("distributed")
    _, bin_, _, env = installed
    env = {**env, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    work = tmp_path / "work"
    work.mkdir()
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    outputs = run_examples(page, bin_, work, scripts, env)
    expect = EXPECT[page.stem]
    for name in expect.get("files", []):
        assert (work / name).exists(), name
    for command, texts in expect.get("printed", {}).items():
        for text in [texts] if isinstance(texts, str) else texts:
            assert text in outputs[command], (command, text, outputs[command])
