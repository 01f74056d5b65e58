"""The docs site: it builds with Sphinx with warnings as errors, its reference pages cover every
public name and every command, and the examples of every page run."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys

import pytest
from exports import mlflow_runs, wandb_runs, wide_table, write_jsonl

from conftest import ROOT
from helpers import run
from readme import PAGES, examples, run_examples, skipped_lines

DOCS = ROOT / "docs"

# what each page's run must leave behind or print, beyond every command exiting 0
EXPECT = {
    "quickstart": {
        "files": ["reports/first/report.md", "reports/mine/report.md", "out.json"],
        "printed": {"ci": "paired_tuned.csv"},
    },
    "own-table": {
        "files": ["my_runs.csv", "reports/mine/report.md"],
        "printed": {
            "validate my_runs.csv --metric val/loss --seed-col run_seed "
            "--rename inner_steps=H": "cells: 20",
        },
    },
    "add-a-form": {
        "files": ["forms.toml"],
        "printed": {"compare --forms composition,mine --splits 100": "composition vs mine"},
    },
    "fit-and-predict": {
        "printed": {
            "fit --form additive --intervals --predict H=8,keep=0.25": [
                "information criteria",
                "prediction at H=8, keep=0.25",
                "prediction intervals",
            ],
            "fit --form composition --predict H=8,keep=0.25 --runs 3": "for the mean of 3 new runs",
            "allocate --data chin_runs.csv --form 'chin(N, D) = E + A/N**alpha + B/D**beta' "
            "--budgets 1e19:1e23:5": ["exponents: N* ~ C^", "optimum in closed form", "1e+23"],
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
            "simulate main --cell H=8,keep=0.25,lr=3e-4 --seeds 0,1,2 "
            "--out new.csv": "new.csv: 3 runs",
            # the numbers the page quotes
            "predict --form composition --at H=8,keep=0.25 --runs 3 --tolerance 1 --ledger "
            "predictions.jsonl": ["2.1679", "2.1296 to 2.1998"],
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
        # only with the gpt extra (tests/readme.py: needs_missing_torch)
        "with torch": {
            "simulate --cell model=gpt,layers=1,width=16,heads=2,context=16,steps=20 --seeds 0,1 "
            "--out gpt.csv": "gpt.csv: 2 runs",
        },
    },
}

PAGE = ROOT / "docs" / "input-formats.md"

FIGURES = DOCS / "figures"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _figures_script():
    """docs/figures/make_figures.py as a module (it is not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_figures", FIGURES / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")

FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)

FAST = ["--splits", "4", "--forms", "composition,omega_only"]


@pytest.fixture
def exports(tmp_path, monkeypatch):
    wandb_runs().to_csv(tmp_path / "wandb_export.csv", index=False)
    mlflow_runs().to_csv(tmp_path / "mlflow_runs.csv", index=False)
    wide_table().to_csv(tmp_path / "wide.csv", index=False)
    write_jsonl(tmp_path / "runs.jsonl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _blocks(lang):
    return [b for kind, b in FENCE.findall(PAGE.read_text()) if kind == lang]


def test_every_page_runs_something():
    """The eight tutorial pages are the ones run, and each has examples to run."""
    assert {p.stem for p in PAGES} == {
        "quickstart", "own-table", "add-a-form", "fit-and-predict", "paired-ci",
        "design-and-ledger", "search", "cluster",
    }  # fmt: skip
    for page in PAGES:
        assert examples(page), page  # and shell_commands accounted for every sh line


def test_every_page_shows_the_figures_it_makes():
    """The quick start and every tutorial show, in order, the PNGs the figures script draws
    from their calls (only the cluster page, which writes a table, has none); each is
    committed, small, and shown by its page."""
    script = _figures_script()
    pages = {p.relative_to(DOCS).with_suffix("").as_posix(): p for p in PAGES}
    assert set(script.FIGURES) == set(pages)
    shown_anywhere = set()
    for name, page in pages.items():
        images = [(page.parent / m).resolve() for m in IMAGE.findall(page.read_text())]
        assert [i.name for i in images] == script.FIGURES[name], name
        assert bool(images) == (name != "tutorials/cluster"), name
        for image in images:
            assert image.parent == FIGURES and image.exists(), (name, image.name)
            assert image.stat().st_size < 100_000, image.name  # a modest dpi
            width, height = _png_size(image)
            assert width <= 800 and height <= 800, (image.name, width, height)
        shown_anywhere |= {i.name for i in images}
    assert {p.name for p in FIGURES.glob("*.png")} == shown_anywhere


# slow (about 4 minutes, most of it the default search): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_the_figures_script_still_draws_every_figure(tmp_path):
    """docs/figures/make_figures.py runs and draws every committed figure, at the committed
    size in pixels (what is drawn differs between machines in anti-aliasing only)."""
    res = subprocess.run([sys.executable, FIGURES / "make_figures.py", tmp_path],
                         capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert res.returncode == 0, res.stderr
    made = {p.name for p in tmp_path.glob("*.png")}
    assert made == {p.name for p in FIGURES.glob("*.png")}
    for name in made:
        assert _png_size(tmp_path / name) == _png_size(FIGURES / name), name


def test_only_the_cluster_across_machines_is_not_run():
    """The only fitrules command of the pages left unrun is the cluster one needing a scheduler."""
    skipped = [s for p in PAGES for s in skipped_lines(p) if s.startswith("fitrules")]
    assert skipped == ["fitrules simulate main --out main.csv --scheduler tcp://HOST:8786"]


# slow (a minute or more): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_the_docs_build_without_warnings(tmp_path):
    """The docs build without warnings; the reference lists every public name and command."""
    import importlib.util

    missing = [m for m in ("sphinx", "myst_parser", "numpydoc", "pydata_sphinx_theme")
               if importlib.util.find_spec(m) is None]  # fmt: skip
    if missing:  # CI's slow step installs the docs extra; say so rather than fail obscurely
        pytest.fail(f"the docs build needs {', '.join(missing)}: pip install -e '.[docs]'")
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


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_example_of_the_page_runs_from_the_wheel(page, installed, tmp_path):
    """A page's examples run from the installed wheel and leave the files and output it promises."""
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
    printed = dict(expect.get("printed", {}))
    if importlib.util.find_spec("torch") is not None:
        printed |= expect.get("with torch", {})
    for command, texts in printed.items():
        for text in [texts] if isinstance(texts, str) else texts:
            assert text in outputs[command], (command, text, outputs[command])


def test_the_commands_run(exports, capsys):
    """The three shell commands of the input-formats page run on the exports and read 20 cells."""
    commands = [c.replace("\\\n", " ") for c in _blocks("sh")]
    assert len(commands) == 3
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "fitrules"
        code, out, err = run([*argv[1:], *FAST], capsys)
        assert code == 0, (command, err)
        assert "in 20 cells" in out


def test_the_python_blocks_run(exports):
    """The three Python blocks of the input-formats page run and give the grid they describe."""
    blocks = _blocks("python")
    assert len(blocks) == 3
    scope: dict = {}
    for code in blocks:
        exec(code, scope)
    assert len(scope["c"].summary) == 2
    assert scope["g"].summary()["seeds_per_cell"] == {"min": 3, "median": 3.0, "max": 3}


def test_docs_say_what_is_detected_with_and_without_a_head():
    """The design tutorial says what the ledger detects with and without a recorded head."""
    text = (ROOT / "docs" / "tutorials" / "design-and-ledger.md").read_text()
    section = text[text.index("Predictions written before the run") :]
    section = section.split("\n## ", 1)[0]
    assert "Without a recorded head" in section and "With the head" in section
    assert "--head" in section and "ledger verify" in section
    assert "a changed, removed or reordered record is refused" not in section
