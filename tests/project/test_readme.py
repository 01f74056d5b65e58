"""The README: a landing page whose examples run from the wheel and whose counts match the
committed default report."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT
from readme import README, blocks, examples, run_examples


def test_the_readme_is_a_landing_page():
    """The README is under 120 lines, and each of its relative links names a file."""
    lines = README.read_text().splitlines()
    assert len(lines) < 120
    # every relative link of the README names a file of the checkout
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text()):
        assert (ROOT / target).exists(), target


def test_readme_counts_match_the_committed_default_report():
    """Every 'N of M splits' quoted in the README and docs is the committed report's count."""
    doc = json.loads((ROOT / "reports" / "default" / "results.json").read_text())
    (row,) = [r for r in doc["paired"] if (r["a"], r["b"]) == ("composition", "additive")]
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = 0
    for page in pages:  # the README's and the docs pages' (the verdict page) quotes
        text = page.read_text().replace("\n", " ")
        for won, of in re.findall(r"(\d+)\s+of\s+(\d+)\s+splits", text):
            assert (int(won), int(of)) == (row["a_better"], row["n"]), page
            found += 1
    assert found >= 2


@pytest.mark.slow
def test_every_readme_example_runs_from_the_wheel_in_an_empty_directory(installed, tmp_path):
    """The README's examples (its sh blocks' fitrules commands, its python block); the docs
    pages' run in tests/test_docs.py, with the same machinery (tests/readme.py)."""
    _, bin_, _, env = installed
    env = {**env, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    kinds = [kind for kind, _ in examples(README)]
    assert kinds.count("sh") >= 1 and kinds.count("python") >= 1
    shell = tmp_path / "sh"
    shell.mkdir()
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    outputs = run_examples(README, bin_, shell, scripts, env)
    main = outputs["compare --splits 300"]
    assert "data: data/main.csv" in main and "where lr == 3e-4" in main
    assert "composition" in main and "corrected resampled t" in main
    assert list(shell.iterdir()) == []  # the main job and the python block read, never write
    (python,) = [out for key, out in outputs.items() if 'load_example("main"' in key]
    (answer,) = blocks("text", README)  # the answer the README quotes is the one printed
    assert answer.strip() and python.startswith(answer)
    assert "prediction at H=8, keep=0.25" in python
    (law,) = [out for key, out in outputs.items() if "N, D" in key]
    assert "exponents: N* ~ C^" in law and law.startswith("allocate: chinchilla")
    assert "chinchilla predicts the held-out cells best" in law and "shared" in law
    index = run_examples(ROOT / "docs" / "index.md", bin_, shell, scripts, env)
    assert all("predicts the held-out cells best" in out for out in index.values())
    assert list(shell.iterdir()) == []


def test_the_first_screen_asks_both_questions():
    """The README's first screen and the docs index each show the DiLoCo question and the
    scaling-law one (a law fitted to N x D runs, its allocation at a budget, two laws
    compared) as Python that runs; the index's scaling-law example is the README's."""
    first_screen = README.read_text().split("\n## From Python", 1)[0]
    index = (ROOT / "docs" / "index.md").read_text()
    law = [b for b in blocks("python", README) if "N, D" in b]
    assert len(law) == 1 and law[0] in first_screen
    for call in ("fr.allocate(", "fr.compare(", "budgets="):
        assert call in law[0]
    assert "fitrules compare --splits 300" in first_screen
    assert law[0] in blocks("python", ROOT / "docs" / "index.md")
    assert any("composition" in b and "fr.compare(" in b
               for b in blocks("python", ROOT / "docs" / "index.md"))  # fmt: skip
    assert index.index("composition") < index.index("N, D")
