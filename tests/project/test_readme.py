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
    (python,) = [out for key, out in outputs.items() if "import fitrules" in key]
    (answer,) = blocks("text", README)  # the answer the README quotes is the one printed
    assert answer.strip() and python.startswith(answer)
    assert "prediction at H=8, keep=0.25" in python
