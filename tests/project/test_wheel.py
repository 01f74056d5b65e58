"""A wheel works anywhere: built from the checkout, installed into a fresh virtual environment,
run from an empty directory with no checkout in sight."""

from __future__ import annotations

import zipfile
from pathlib import Path

from conftest import ROOT
from readme import run_ok


def test_wheel_holds_every_module_and_the_data(installed):
    """The wheel holds every module of the package and its data files."""
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
    """The installed wheel imports its own copy and reads its own data directory."""
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
    """python -m fitrules --version runs from the installed wheel."""
    _, bin_, work, env = installed
    out = run_ok([bin_ / "python", "-m", "fitrules", "--version"], work, env).stdout
    assert out.startswith("fitrules ")
