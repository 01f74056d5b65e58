"""Forms and their registry (fitrules.model.forms): built-in forms, linear constants, one-line
forms and declared variables, forms.toml, fixed and bounded constants, per-level constants,
default ranges."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fitrules.base.errors import FormError
from fitrules.model import expr as ex
from fitrules.model.forms import (
    BUILTIN_FORMS,
    Form,
    add_form_to_file,
    available_forms,
    parse_bounds,
    parse_fix,
    parse_form_line,
    select_forms,
)
from fitrules.model.ranges import default_ranges

COLUMNS = ["H", "keep", "omega", "lr", "loss", "seed"]


def test_builtins_include_the_two_rules_with_their_constant_counts():
    """composition has L0, a and b, additive five constants, among at least four built-in forms."""
    assert BUILTIN_FORMS["composition"].constants == ("L0", "a", "b")
    assert len(BUILTIN_FORMS["additive"].constants) == 5
    assert len(BUILTIN_FORMS) >= 4


@pytest.mark.parametrize(
    "name, linear, nonlinear",
    [
        ("composition", ("L0", "a"), ("b",)),
        ("additive", ("L0", "a", "b"), ("c", "d")),
        ("free_omega", ("L0", "a"), ("c", "b")),
        ("log_additive", ("L0", "a", "b"), ()),
    ],
)
def test_linear_constants_are_detected(name, linear, nonlinear):
    """Each built-in form's constants are split into linear and nonlinear ones."""
    s = BUILTIN_FORMS[name].structure
    assert (s.linear, s.nonlinear) == (linear, nonlinear)


def test_a_constant_appearing_twice_is_not_linear():
    """A constant that appears twice in an expression is not linear."""
    f = Form("twice", "a*x + a**2*y", ("x", "y"))
    assert f.structure.linear == ()


def test_one_line_form_resolves_variables_against_columns():
    """A one-line form's names that are grid columns are variables; the rest are constants."""
    f = parse_form_line("mine = L0 + a*omega**c*(H/16)**b").bind(COLUMNS)
    assert f.variables == ("omega", "H")
    assert f.constants == ("L0", "a", "c", "b")


def test_declared_variables():
    """Variables declared in brackets after the name are the form's variables."""
    f = parse_form_line("mine(H) = L0 + a*(H/16)**b")
    assert f.variables == ("H",)


@pytest.mark.parametrize(
    "line, columns, match",
    [
        ("mine = L0 + a*omgea", COLUMNS, "did you mean 'omega'"),
        ("mine = L0 + a*q", COLUMNS, "reads no column"),
        ("mine = L0 + (", COLUMNS, "cannot parse"),
        ("mine = L0 + a.b", COLUMNS, "not allowed"),
        ("no equals sign", COLUMNS, "NAME = EXPRESSION"),
        ("mine(width) = L0 + a*width", COLUMNS, "reads variable 'width', which the grid lacks"),
        ("mine(zzz) = L0 + a*omega", COLUMNS, "do not appear"),
    ],
)
def test_bad_forms_name_the_problem(line, columns, match):
    """A misspelt column, unknown name, bad syntax or undeclared variable is refused in words."""
    with pytest.raises(FormError, match=match):
        parse_form_line(line).bind(columns)


def test_builtin_on_grid_without_omega_suggests_derive():
    """A built-in form on a grid without omega suggests deriving it from keep."""
    with pytest.raises(FormError, match="derive 'omega = 1/keep - 1'"):
        BUILTIN_FORMS["composition"].bind(["H", "keep", "loss"])


def test_bounds_for_unknown_constant_rejected():
    """Bounds on a name that is not a constant are refused."""
    with pytest.raises(FormError, match="not a constant"):
        Form("f", "L0 + a*x**b", ("x",), bounds={"zz": (0, 1)})


def test_unknown_form_name():
    """Selecting a form name that does not exist is refused naming it."""
    with pytest.raises(FormError, match="unknown form 'nope'"):
        select_forms(["nope"])


def test_forms_toml_is_loaded_and_add_appends(tmp_path):
    """forms.toml's forms and bounds are read; add appends one but not a taken name."""
    (tmp_path / "forms.toml").write_text(
        'mine = "L0 + a*omega**c"\n[bounded]\nexpr = "L0 + a*(H/16)**b"\nbounds = { b = [-1, 1] }\n'
    )
    forms = available_forms(tmp_path)
    assert forms["mine"].expression == "L0 + a*omega**c"
    assert forms["bounded"].bounds == {"b": [-1, 1]}
    add_form_to_file("third", "L0 + a*omega*(H/4)**b", tmp_path)
    assert available_forms(tmp_path)["third"].expression == "L0 + a*omega*(H/4)**b"
    with pytest.raises(FormError, match="already exists"):
        add_form_to_file("third", "L0", tmp_path)
    with pytest.raises(FormError, match="built-in"):
        add_form_to_file("composition", "L0", tmp_path)


def test_forms_toml_cannot_shadow_builtin(tmp_path):
    """A forms.toml entry with a built-in form's name is refused."""
    (tmp_path / "forms.toml").write_text('composition = "L0 + a*omega"\n')
    with pytest.raises(FormError, match="built-in"):
        available_forms(tmp_path)


def test_per_level_constants_stay_linear_in_the_variable_projection():
    """Per-level intercepts stay linear constants, leaving b the only nonlinear one."""
    f = BUILTIN_FORMS["composition_per_h"].bind(
        ["H", "omega"], pd.DataFrame({"H": [1, 4, 16, 64], "omega": [0, 1, 3, 7]})
    )
    assert f.structure.nonlinear == ("b",)
    assert len(f.structure.linear) == 5


@pytest.mark.parametrize(
    "fn, value, match",
    [
        (parse_fix, ["b"], "NAME=VALUE"),
        (parse_fix, ["b=nan"], "finite"),
        (parse_fix, ["=1"], "NAME=VALUE"),
        (parse_bounds, ["Nc=1e16..1e10"], "LOW < HIGH"),
        (parse_bounds, ["Nc=1"], "NAME=LOW..HIGH"),
        (parse_bounds, ["Nc=a..b"], "NAME=LOW..HIGH"),
    ],
)
def test_bad_fix_and_bound_options(fn, value, match):
    """Malformed --fix and --bounds values are refused with the expected syntax."""
    with pytest.raises(FormError, match=match):
        fn(value)


def test_a_constant_beside_a_linear_constant_gets_no_range_from_it():
    """Only Hc, a scale of H, gets a default range; constants beside the linear a get none."""
    tree = ex.parse("L0 + a*omega*(Hc/H)**b")
    ranges = default_ranges(tree, ("omega", "Hc", "b"), {"H": np.array([1.0, 4, 16, 64])})
    assert set(ranges) == {"Hc"} and ranges["Hc"].role == "scale of H"
