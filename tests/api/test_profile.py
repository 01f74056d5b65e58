"""fr.fit(intervals="profile") and fr.fit(constraints=...): the method named in every view,
constraints enforced and reported, and refused where a part of the fit cannot keep them."""

from __future__ import annotations

import json

import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError


@pytest.fixture(scope="module")
def grid():
    return composition_grid(seeds=1)


def test_profile_intervals_name_their_method_in_every_view(grid):
    """Text, JSON and the table carry the profile intervals, named as such."""
    f = fr.fit(grid, "composition", intervals="profile")
    assert f.profile is not None and f.bootstrap is None
    text = str(f)
    assert "95% profile likelihood" in text and "bootstrap" not in text
    doc = json.loads(f.to_json())
    assert doc["constant_intervals"]["kind"] == "profile likelihood"
    assert doc["profile"]["dof"] == len(f.cells) - 3
    for c, (lo, hi) in f.intervals.items():
        assert lo < f.constants[c] < hi
        row = f.table.set_index("constant").loc[c]
        assert (row["low"], row["high"]) == (lo, hi)
    assert doc["call"]["intervals"] == "profile"


def test_profile_intervals_widen_with_the_level(grid):
    """A 99% profile interval holds the 90% one."""
    lo90 = fr.fit(grid, "composition", intervals="profile", level=0.9).intervals
    lo99 = fr.fit(grid, "composition", intervals="profile", level=0.99).intervals
    for c in lo90:
        assert lo99[c][0] < lo90[c][0] and lo90[c][1] < lo99[c][1]


def test_a_constraint_is_enforced_and_reported(grid):
    """b <= 0.3 (the data say about 0.5): the fit has b = 0.3, says the constraint is
    active, and the saved fit loads with it."""
    free = fr.fit(grid, "composition")
    assert free.constants["b"] > 0.35
    f = fr.fit(grid, "composition", constraints="b <= 0.3", intervals="profile")
    assert f.constants["b"] == pytest.approx(0.3, abs=1e-6)
    assert "constraints: b <= 0.3 (active at the fit: b <= 0.3)" in str(f)
    assert f.result.objective > free.result.objective
    doc = json.loads(f.to_json())
    assert doc["constraints"] == {"given": ["b <= 0.3"], "active": ["b <= 0.3"]}
    assert f.intervals["b"][1] == pytest.approx(0.3, abs=1e-6)
    assert f.uncertainty.dof == len(f.cells) - 2


def test_an_equality_constraint_ties_two_constants(grid):
    """'L0 = 100*a + 1' holds at the fit."""
    f = fr.fit(grid, "composition", constraints=["L0 = 100*a + 1"])
    assert f.constants["L0"] == pytest.approx(100 * f.constants["a"] + 1, abs=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(constraints="b > zz"), "'zz' is not a free constant"),
        (dict(constraints="a*b > 1"), "not linear"),
        (dict(constraints="b > 0", intervals=True), "intervals bootstrap with constraints: "),
        (dict(constraints="b > 0", predict="H=8,keep=0.25"), "predict with constraints: "),
        (dict(constraints=3), "give a text such as 'b > a'"),
        (dict(intervals="wald"), "one of bootstrap, profile"),
        (dict(constraints="L0 > 0", fix={"L0": 2.0}), "'L0' is not a free constant"),
    ],
)
def test_bad_constraints_and_methods_are_refused(grid, kwargs, match):
    """One line naming what is wrong and what is allowed."""
    with pytest.raises(FitrulesError, match=match) as err:
        fr.fit(grid, "composition", **kwargs)
    assert "\n" not in str(err.value)


def test_load_fit_remakes_a_profile_fit_with_its_constraints(grid, tmp_path):
    """The saved call records the method and the constraints."""
    path = tmp_path / "g.csv"
    grid.to_csv(path, index=False)
    f = fr.fit(str(path), "composition", intervals="profile", constraints="b <= 0.3")
    f.to_json(tmp_path / "fit.json")
    g = fr.load_fit(tmp_path / "fit.json")
    assert g.profile is not None and g.constraints is not None
    assert g.intervals == f.intervals
