"""Where the committed data lives, for an editable install or a checkout."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout that holds this package (its ``data/`` and ``reports/``)."""
    return Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """``$FITRULES_DATA`` if set, else ``data/`` of the checkout, else ``./data``."""
    env = os.environ.get("FITRULES_DATA")
    if env:
        return Path(env)
    here = project_root() / "data"
    return here if here.is_dir() else Path("data")
