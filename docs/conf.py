"""Sphinx configuration of the fitrules docs.

Build with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (the ``test``
and ``dev`` extras bring Sphinx and its extensions; ``tests/project/test_docs.py`` builds it
so, as a slow test). Pages are Markdown (myst-parser); the API reference is autodoc over the public
names of ``fitrules/__init__.py`` with numpydoc docstrings, and the CLI reference is the
``--help`` of every command, rendered from the real parser (``docs/_ext/fitrules_docs.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's fitrules, not another installed one
sys.path.insert(0, str(HERE / "_ext"))

import fitrules  # noqa: E402

project = "fitrules"
author = "the fitrules authors"
copyright = "the fitrules authors"  # no year: a rebuild is the same site
release = fitrules.__version__
version = release

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "fitrules_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters say the types in words
add_module_names = False
autosummary_generate = False  # one page, no stub files: fitrules_docs lists the names
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# Parameters not documented (PR01) or documented but not in the signature (PR02) fail the
# build. The result classes are made by fitrules, not by users: their fields are documented
# as Attributes, which tests/project/test_docstrings.py matches against the fields instead.
numpydoc_validation_checks = {"PR01", "PR02"}
numpydoc_validation_exclude = {
    r"^fitrules\.(Grid|Comparison|FittedForm|PairedIntervals|Tuning|Search|Allocation)$",
}

html_theme = "pydata_sphinx_theme"
html_title = "fitrules"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []
