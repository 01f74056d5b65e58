"""The one-way layers (base -> model -> engine | views -> jobs -> api -> cli), as the import
contract in pyproject.toml states them and import-linter checks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytest.importorskip("importlinter")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``root``, with ``root``'s pyproject.toml."""
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_package_keeps_its_import_contracts():
    """lint-imports keeps all three of the package's import contracts."""
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 kept, 0 broken" in res.stdout


@pytest.mark.parametrize(
    "module, upward",
    [
        ("model/grids.py", "from fitrules.jobs.compare import Comparison"),  # model -> jobs
        ("views/text.py", "from fitrules.engine.stats import holm"),  # views -> engine
        ("base/util.py", "from fitrules.sim.spec import GridSpec"),  # base -> sim
        ("sim/spec.py", "from fitrules.model.grids import Grid"),  # sim -> model
    ],
)
def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path, module, upward):
    """An upward import added inside a function breaks an import contract."""
    shutil.copytree(ROOT / "fitrules", tmp_path / "fitrules",
                    ignore=shutil.ignore_patterns("__pycache__", "_data"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "fitrules" / module
    path.write_text(path.read_text() + f"\n\ndef _upward():\n    {upward}\n")
    res = lint_imports(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "BROKEN" in res.stdout and "0 broken" not in res.stdout
