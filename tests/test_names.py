"""Names are compared as the parser sees them: NFKC look-alikes are matched or refused.

From the third hostile audit (issue 31, serious 5): a column named ``µ`` (MICRO SIGN, what
macOS Option-m types) in ``--form 'm = L0 + a*omega*(µ/16)**b'`` exited 0 with the column
pooled and a constant ``μ`` (GREEK MU) fitted, because Python's parser folds identifiers by
NFKC; the same with FULLWIDTH H. And search wrote names such as ``H-1`` unquoted.
"""

from __future__ import annotations

import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FormError
from helpers import refused, run

MICRO, MU, FULL_H = "\u00b5", "\u03bc", "\uff28"


@pytest.fixture
def micro_csv(tmp_path):
    df = composition_grid().rename(columns={"H": MICRO})
    path = tmp_path / "micro.csv"
    df.to_csv(path, index=False)
    return path


def test_micro_sign_column_is_read_as_typed(micro_csv, capsys):
    """The audit's command: the column is read, not pooled, and no constant μ appears."""
    code, out, err = run(
        ["fit", "--data", micro_csv, "--form", f"m = L0 + a*omega*({MICRO}/16)**b"], capsys
    )
    assert code == 0, err
    assert "in 20 cells" in out and "pooled" not in out
    f = fr.fit(str(micro_csv), f"m = L0 + a*omega*({MICRO}/16)**b")
    assert set(f.constants) == {"L0", "a", "b"}
    assert f.form.bound_variables == ("omega", MICRO)
    assert abs(f.constants["b"] - 0.5) < 0.05


def test_greek_mu_against_a_micro_sign_column_names_both(micro_csv, tmp_path, capsys):
    line = refused(
        ["fit", "--data", micro_csv, "--form", f"m = L0 + a*omega*({MU}/16)**b"],
        capsys, tmp_path, "look alike",
    )  # fmt: skip
    assert "U+03BC GREEK SMALL LETTER MU" in line and "U+00B5 MICRO SIGN" in line


def test_fullwidth_column(tmp_path, capsys):
    path = tmp_path / "full.csv"
    composition_grid().rename(columns={"H": FULL_H}).to_csv(path, index=False)
    f = fr.fit(str(path), f"m = L0 + a*omega*({FULL_H}/16)**b")
    assert set(f.constants) == {"L0", "a", "b"}
    with pytest.raises(FormError, match="FULLWIDTH LATIN CAPITAL LETTER H"):
        fr.fit(str(path), "m = L0 + a*omega*(H/16)**b")


def test_declared_variable_with_a_look_alike_is_refused(micro_csv):
    with pytest.raises(FormError, match="look alike"):
        fr.fit(str(micro_csv), f"m(omega, {MU}) = L0 + a*omega*({MU}/16)**b")


@pytest.mark.parametrize("name", ["H-1", MICRO])
def test_search_backticks_the_names_it_writes(tmp_path, name):
    """Audit minor: search over columns named ``H-1`` or ``µ`` was refused with an internal
    "form 'candidate'" message: the grammar did not backtick the names it writes."""
    path = tmp_path / "odd.csv"
    composition_grid().drop(columns="keep").rename(columns={"H": name}).to_csv(path, index=False)
    s = fr.search(str(path), variables=[name, "omega"], terms=1, max_constants=3, splits=3,
                  inner_splits=2, references=[])  # fmt: skip
    assert any(name in f.bound_variables for f in s.forms.values())


def test_backticked_declaration(tmp_path):
    """Audit minor: backticked names were not accepted in ``m(...) =`` declarations."""
    path = tmp_path / "odd.csv"
    composition_grid().rename(columns={"H": "H-1"}).to_csv(path, index=False)
    f = fr.fit(str(path), "m(omega, `H-1`) = L0 + a*omega*(`H-1`/16)**b")
    assert f.form.bound_variables == ("omega", "H-1")
