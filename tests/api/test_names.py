"""Names are compared as the parser sees them: NFKC look-alikes are matched or refused,
backticked names accepted."""

from __future__ import annotations

import pytest

import fitrules as fr
from conftest import FULL_H, MICRO, MU, composition_grid
from fitrules.base.errors import FormError


def test_fullwidth_column(tmp_path, capsys):
    """A fullwidth column name is read when written so; plain H is refused naming the look-alike."""
    path = tmp_path / "full.csv"
    composition_grid().rename(columns={"H": FULL_H}).to_csv(path, index=False)
    f = fr.fit(str(path), f"m = L0 + a*omega*({FULL_H}/16)**b")
    assert set(f.constants) == {"L0", "a", "b"}
    with pytest.raises(FormError, match="FULLWIDTH LATIN CAPITAL LETTER H"):
        fr.fit(str(path), "m = L0 + a*omega*(H/16)**b")


def test_declared_variable_with_a_look_alike_is_refused(micro_csv):
    """A declared variable (Greek mu) that only looks like the column (micro sign) is refused."""
    with pytest.raises(FormError, match="look alike"):
        fr.fit(str(micro_csv), f"m(omega, {MU}) = L0 + a*omega*({MU}/16)**b")


@pytest.mark.parametrize("name", ["H-1", MICRO])
def test_search_backticks_the_names_it_writes(tmp_path, name):
    """fr.search over a column named H-1 or µ runs, and its forms read that column.

    Audit minor: search over columns named ``H-1`` or ``µ`` was refused with an internal
    "form 'candidate'" message: the grammar did not backtick the names it writes."""
    path = tmp_path / "odd.csv"
    composition_grid().drop(columns="keep").rename(columns={"H": name}).to_csv(path, index=False)
    s = fr.search(str(path), variables=[name, "omega"], terms=1, max_constants=3, splits=2,
                  inner_splits=2, references=[])  # fmt: skip
    assert any(name in f.bound_variables for f in s.forms.values())


def test_backticked_declaration(tmp_path):
    """A declaration m(omega, `H-1`) = ... takes a backticked variable name.

    Audit minor: backticked names were not accepted in ``m(...) =`` declarations."""
    path = tmp_path / "odd.csv"
    composition_grid().rename(columns={"H": "H-1"}).to_csv(path, index=False)
    f = fr.fit(str(path), "m(omega, `H-1`) = L0 + a*omega*(`H-1`/16)**b")
    assert f.form.bound_variables == ("omega", "H-1")
