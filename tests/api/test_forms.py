"""Forms through the Python functions: fr.add_form and fr.remove_form, names, files."""

from __future__ import annotations

import pytest

import fitrules as fr


def test_add_and_remove_a_form(tmp_path, monkeypatch):
    """fr.add_form writes a form to forms.toml and refuses it twice; fr.remove_form removes it."""
    monkeypatch.chdir(tmp_path)
    f = fr.add_form("mine = L0 + a*omega**c")
    assert f.bound_variables == ("omega",) and "mine" in (tmp_path / "forms.toml").read_text()
    assert "mine" in fr.available_forms()
    with pytest.raises(fr.FormError, match="already exists"):
        fr.add_form("mine = L0 + a*H")
    assert fr.remove_form("mine").name == "forms.toml"
    with pytest.raises(fr.FormError):
        fr.remove_form("mine")


def test_caret_is_diagnosed_as_a_power():
    """A form written with ^ is refused with a hint to write ** for a power."""
    with pytest.raises(fr.FormError, match=r"\^ is not a power: use \*\*"):
        fr.Form("p", "L0 + a*H^b", variables=("H",))


def test_a_users_form_named_like_a_builtin_is_used_with_a_note():
    """fr.fit and fr.compare take a Form or a 'NAME = EXPR' line named like a built-in form,
    use it, and warn (fitrules.base.errors.FitrulesNote) that it shadows the built-in."""
    from fitrules.base.errors import FitrulesNote

    g = fr.load_example("main", where="lr == 3e-4")
    mine = fr.Form("additive", "L0 + a*omega", variables=("omega",))
    with pytest.warns(FitrulesNote, match="'additive' = L0 \\+ a\\*omega shadows the built-in"):
        f = fr.fit(g, mine)
    assert f.form.expression == "L0 + a*omega"
    with pytest.warns(FitrulesNote, match="shadows the built-in"):
        c = fr.compare(g, forms=["composition", "additive = L0 + a*omega"], splits=5)
    assert [f.expression for f in c.forms][1] == "L0 + a*omega"
