"""A wheel works anywhere: built from the checkout, installed into a fresh virtual environment,
run from an empty directory with no checkout in sight.

No network: the wheel is built with --no-build-isolation (setuptools >= 70.1 from the test
extra) and installed with --no-deps; the fresh environment sees this environment's
site-packages (numpy, pandas, ...) through a .pth file, which adds the folder to sys.path
without running the editable-install hook that lives there, so ``import fitrules`` can only
find the installed wheel.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from readme import README, blocks, examples, run_examples, run_ok


def test_wheel_holds_every_module_and_the_data(installed):
    wheel = installed[0]
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "fitrules").rglob("*.py")}
    assert modules <= names, f"not in the wheel: {sorted(modules - names)}"
    for data in (
        "main.csv",
        "paired_tuned.csv",
        "specs/main.toml",
        "corpus/shakespeare_slice.txt.xz",
    ):
        assert f"fitrules/_data/{data}" in names


def test_installed_wheel_reads_its_own_copy(installed):
    _, bin_, work, env = installed
    res = run_ok(
        [
            bin_ / "python",
            "-c",
            "import fitrules, fitrules.base.paths as p; print(fitrules.__file__); "
            "print(p.data_dir())",
        ],
        work,
        env,
    )
    module, data = res.stdout.split()
    assert Path(module).is_relative_to(bin_.parent) and Path(data).name == "_data"


def test_installed_wheel_runs_python_m(installed):
    _, bin_, work, env = installed
    out = run_ok([bin_ / "python", "-m", "fitrules", "--version"], work, env).stdout
    assert out.startswith("fitrules ")


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
