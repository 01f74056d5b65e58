"""An error names a parameter once (fitrules.base.errors.param): its name in Python, the
running command's flag for it on the command line (fitrules.cli.flags)."""

from __future__ import annotations

import pytest

import fitrules.jobs.design
from fitrules.base.errors import SplitError, param
from fitrules.cli.flags import command_flags
from helpers import refused


def _refuse_splits(*args, **kwargs):
    raise SplitError(f"{param('splits')} 7: refused here, with {param('seed')} and {param('grid')}")


def test_design_names_its_flags(grid_csv, tmp_path, capsys, monkeypatch):
    """Under fitrules design, splits is --design-splits; seed and grid are --seed and --data."""
    monkeypatch.setattr(fitrules.jobs.design, "check_design_options", _refuse_splits)
    line = "fitrules design: error: --design-splits 7: refused here, with --seed and --data"
    refused(["design", "--data", grid_csv, "--forms", "composition"], capsys, tmp_path, f"^{line}$")


def test_python_names_the_parameters():
    """The same message raised to a Python caller names splits, seed and grid."""
    with pytest.raises(SplitError, match="^splits 7: refused here, with seed and grid$"):
        _refuse_splits()


def test_flags_from_the_declarations():
    """Each command's map comes from its declarations: fit's seed is --bootstrap-seed, compare's
    --seed; ci's sweep is --treatment-sweep."""
    assert command_flags("design")["splits"] == "--design-splits"
    assert command_flags("compare")["splits"] == "--splits"
    assert command_flags("fit")["seed"] == "--bootstrap-seed"
    assert command_flags("compare")["seed"] == "--seed"
    assert command_flags("ci")["sweep"] == "--treatment-sweep"
    assert command_flags("compare")["grid"] == "--data"
