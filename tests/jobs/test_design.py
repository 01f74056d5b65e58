"""The design job (fitrules.jobs.design): cells that tell forms apart, batches under a budget."""

import numpy as np
import pandas as pd
import pytest

from fitrules.base.errors import FitrulesError
from fitrules.jobs.design import design
from fitrules.jobs.design.candidates import candidate_cells
from fitrules.model.forms import BUILTIN_FORMS, Form
from fitrules.model.grids import default_grid, load_grid

# Two forms with the same constants; the second adds a fixed bump that is negligible on the
# grid (x, z <= 3) and only appears where x and z are both large.
FLAT = Form("flat", "L0 + a*x + b*z", ("x", "z"))

BUMP = Form("bump", "L0 + a*x + b*z + 0.5*exp(3*(x + z - 10))", ("x", "z"))


def _grid(seed=0):
    rng = np.random.default_rng(seed)
    rows = [
        {"x": x, "z": z, "seed": s, "loss": 2 + 0.05 * x + 0.03 * z + 0.005 * rng.standard_normal()}
        for x in (1, 2, 3)
        for z in (1, 2, 3)
        for s in range(3)
    ]
    return load_grid("synthetic.csv", frame=pd.DataFrame(rows))


def test_top_designed_cell_lies_where_the_forms_disagree():
    """The first cell chosen lies where the two forms disagree; where they agree none separates."""
    d = design(
        _grid(),
        [FLAT, BUMP],
        candidates="x=1,2,3,4,5;z=1,2,3,4,5",
        budget=9,
        splits=40,
        resamples=40,
    )
    top = d.chosen.iloc[0]
    assert top["x"] >= 4 and top["z"] >= 4, d.chosen
    best = d.candidates.sort_values("score", ascending=False).iloc[0]
    assert best["x"] + best["z"] == 10
    # where the bump is negligible the forms cannot be told apart at any number of seeds
    flat_region = d.candidates[(d.candidates["x"] + d.candidates["z"]) <= 6]
    assert (flat_region["separation"] < 0.5).all()


def test_batch_respects_the_budget_and_chooses_each_cell_once():
    """A batch stays within the run budget, picks each cell once, and raises its score each step."""
    d = design(_grid(), [FLAT, BUMP], "x=1,2,3,4,5;z=1,2,3,4,5", budget=10, splits=30, resamples=30)
    assert d.chosen["runs"].sum() <= 10
    assert d.chosen["candidate"].is_unique
    assert (d.chosen["batch_score"].diff().dropna() > 0).all()


def test_default_candidates_are_levels_and_midpoints_minus_the_grid():
    """Default candidates are the levels and midpoints not in the grid; named ones are parsed."""
    path, where = default_grid()
    cells = load_grid(path, where=where).cells(["H", "omega"])
    cand = candidate_cells(cells, ("H", "omega"))
    assert set(cand["H"]) == {1, 2, 4, 8, 16, 32, 64}  # integer levels: midpoints rounded
    assert not cand["in_grid"].any() and len(cand) == 7 * 9 - 20
    named = candidate_cells(cells, ("H", "omega"), "H=2,128;keep=1/32")
    assert set(named["omega"]) == {31.0} and set(named["H"]) == {2.0, 128.0}
    with pytest.raises(FitrulesError, match="not a variable"):
        candidate_cells(cells, ("H", "omega"), "M=4")


def test_one_form_with_a_target_pins_its_prediction_down():
    """For one form and a target, each chosen cell lowers the target's predicted sd."""
    path, where = default_grid()
    grid = load_grid(path, where=where)
    d = design(
        grid,
        [BUILTIN_FORMS["composition"]],
        budget=9,
        splits=30,
        resamples=30,
        target="H=256,omega=63",
    )
    sd = d.chosen["target_sd_after"].to_numpy()
    assert len(sd) == 3 and (np.diff(sd) < 0).all()
    assert sd[0] < d.candidates["target_sd_now"].iloc[0]
    # the cell that helps most is at the largest H and omega on offer
    assert d.chosen.iloc[0]["H"] >= 32
