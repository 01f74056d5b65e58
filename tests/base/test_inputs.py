"""Input files are checked for what they are before they are read (fitrules.base.inputs):
nesting depth counted outside strings and comments, directories refused."""

from __future__ import annotations

import pytest

from fitrules.base.errors import FormError
from fitrules.base.inputs import load_toml, nesting_depth, read_text


def test_nesting_depth_ignores_strings_and_comments():
    """nesting_depth counts brackets outside TOML strings and comments only."""
    assert nesting_depth('a = "[[[[" # {{{{\nb = [[1], {c = 2}]\n') == 2
    assert nesting_depth("x = '''[[[\n[[['''\n") == 0


def test_read_text_refuses_a_directory(tmp_path):
    """read_text refuses a directory and load_toml a missing file, each saying why."""
    with pytest.raises(FormError, match="is a directory"):
        read_text(tmp_path, str(tmp_path), FormError)
    with pytest.raises(FormError, match=r"cannot be read \(no such file\)"):
        load_toml(tmp_path / "none.toml", "none.toml", FormError)
