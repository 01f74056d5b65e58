"""A wheel works anywhere: built from the checkout, installed into a fresh virtual environment,
run from an empty directory with no checkout in sight.

No network: the wheel is built with --no-build-isolation (setuptools >= 70.1 from the test
extra) and installed with --no-deps; the fresh environment sees this environment's
site-packages (numpy, pandas, ...) through a .pth file, which adds the folder to sys.path
without running the editable-install hook that lives there, so ``import fitrules`` can only
find the installed wheel.
"""

from __future__ import annotations

import os
import shlex
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from readme import blocks, from_python


def _run(cmd, cwd, env, timeout=300):
    res = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert res.returncode == 0, f"{cmd}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return res


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the wheel, the fresh environment's bin folder, an empty working directory, env)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # build from a copy: no build/ or stale files in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.partial")
    for name in ("fitrules", "data"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FITRULES_DATA")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", tmp / "dist"],
        src,
        env,
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("fitrules-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp, env)
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    py = venv / "bin" / "python"
    _run(
        [py, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q",
         "--no-warn-script-location", wheel],
        tmp,
        env,
    )  # fmt: skip
    work = tmp / "empty"
    work.mkdir()
    return wheel, venv / "bin", work, env


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
    res = _run(
        [
            bin_ / "python",
            "-c",
            "import fitrules, fitrules.paths as p; print(fitrules.__file__); print(p.data_dir())",
        ],
        work,
        env,
    )
    module, data = res.stdout.split()
    assert Path(module).is_relative_to(bin_.parent) and Path(data).name == "_data"


def test_installed_wheel_runs_python_m(installed):
    _, bin_, work, env = installed
    out = _run([bin_ / "python", "-m", "fitrules", "--version"], work, env).stdout
    assert out.startswith("fitrules ")


# Lines of the README's sh blocks that set up an environment or develop fitrules itself, not
# examples of using it; any other line must be a fitrules command, and is run.
SETUP = (
    "python3 -m venv",
    ". .venv/bin/activate",
    "pip install",
    "python -m pytest",
    "dask scheduler",
    "dask worker",
    "mkdir -p ~/.config/dask",
    "printf 'distributed:",
    "ruff check",
    "mypy ",
    "make ",
    "python benchmarks/",
)


def _readme_commands() -> tuple[list[list[str]], list[str]]:
    """(the fitrules commands of the README's sh blocks, in order; the lines not run)."""
    commands, skipped = [], []
    for block in blocks("sh"):
        for line in block.splitlines():
            for part in (p.strip() for p in line.split("&&")):
                if not part:
                    continue
                argv = shlex.split(part, comments=True)
                if argv[0] == "fitrules" and "HOST" not in part:
                    commands.append(argv)
                else:
                    assert argv[0] == "fitrules" or part.startswith(SETUP), (
                        f"README line neither a fitrules command nor set-up: {part!r}"
                    )
                    skipped.append(part)
    return commands, skipped


@pytest.mark.slow
def test_every_readme_example_runs_from_the_wheel_in_an_empty_directory(installed, tmp_path):
    _, bin_, _, env = installed
    env = {**env, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    commands, skipped = _readme_commands()
    assert len(commands) >= 14
    # only the cluster example is left out: it needs a scheduler on another machine
    assert [s for s in skipped if s.startswith("fitrules")] == [
        "fitrules simulate main --out main.csv --scheduler tcp://HOST:8786"
    ]
    shell = tmp_path / "sh"
    shell.mkdir()
    outputs = {}
    for argv in commands:
        out = _run([bin_ / "fitrules", *argv[1:]], shell, env).stdout
        outputs.setdefault(shlex.join(argv[1:]), out)
        if argv[1:] == ["compare", "--splits", "300"]:  # the main job: reads, never writes
            assert list(shell.iterdir()) == []
    main = outputs["compare --splits 300"]
    assert "data: data/main.csv" in main and "where lr == 3e-4" in main
    assert "composition" in main and "corrected resampled t" in main
    assert "paired_tuned.csv" in outputs["ci"]
    assert (
        "new.csv: 3 runs"
        in outputs["simulate main --cell H=8,keep=0.25,lr=3e-4 --seeds 0,1,2 --out new.csv"]
    )
    assert (shell / "new.manifest.json").exists()
    assert (shell / "reports" / "mine" / "report.md").exists()
    assert (shell / "new.csv").exists() and (shell / "predictions.jsonl").exists()
    py = tmp_path / "py"
    py.mkdir()
    (tmp_path / "example.py").write_text(from_python())
    _run([bin_ / "python", tmp_path / "example.py"], py, env)
    assert (py / "out.json").exists() and (py / "reports" / "mine" / "report.md").exists()
