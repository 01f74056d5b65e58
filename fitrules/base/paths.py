"""Where the committed data lives: the checkout's ``data/``, or the copy inside the package.

One source of truth: the grids, specs and corpus are committed once, under ``data/`` of the
checkout. A wheel carries a copy of that folder as the package data ``fitrules/_data`` (see
``[tool.setuptools]`` in pyproject.toml), so an installed fitrules runs its main job from
any directory. A checkout (or an editable install) reads ``data/`` itself.
"""

from __future__ import annotations

import os
from pathlib import Path

FORMS_FILE = "forms.toml"  # the working directory's forms, looked up by name


def project_root() -> Path:
    """The folder that holds this package: the checkout, or site-packages when installed."""
    return Path(__file__).resolve().parents[2]


def packaged_data_dir() -> Path:
    """The copy of ``data/`` a wheel installs inside the package."""
    return Path(__file__).resolve().parents[1] / "_data"


def checkout_data_dir() -> Path | None:
    """``data/`` of the checkout this package is imported from, if it is one."""
    root = project_root()
    here = root / "data"
    if (root / "pyproject.toml").is_file() and (here / "specs").is_dir():
        return here
    return None


def data_dir() -> Path:
    """``$FITRULES_DATA`` if set, else the checkout's ``data/``, else the packaged copy."""
    env = os.environ.get("FITRULES_DATA")
    if env:
        return Path(env)
    return checkout_data_dir() or packaged_data_dir()


def shipped_spec(name: str) -> Path | None:
    """The committed grid spec called ``name`` (``main`` or ``main.toml``), if there is one."""
    stem = name[: -len(".toml")] if name.endswith(".toml") else name
    if not stem or "/" in stem or "\\" in stem:
        return None
    path = data_dir() / "specs" / f"{stem}.toml"
    return path if path.is_file() else None
