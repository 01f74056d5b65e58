"""fitrules design: cells that tell forms apart, batches under a budget, the loop's commands."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import DATA
from fitrules.base.errors import FitrulesError
from fitrules.cli import main
from fitrules.jobs.design import candidate_cells, design
from fitrules.model.forms import BUILTIN_FORMS, Form
from fitrules.model.grids import default_grid, load_grid
from fitrules.sim.spec import parse_spec

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
    d = design(_grid(), [FLAT, BUMP], "x=1,2,3,4,5;z=1,2,3,4,5", budget=10, splits=30, resamples=30)
    assert d.chosen["runs"].sum() <= 10
    assert d.chosen["candidate"].is_unique
    assert (d.chosen["batch_score"].diff().dropna() > 0).all()


def test_default_candidates_are_levels_and_midpoints_minus_the_grid():
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


def test_cli_writes_the_loop_commands_and_a_runnable_spec(tmp_path, capsys):
    rep = tmp_path / "design"
    code = main(
        [
            "design",
            "--forms",
            "composition,additive",
            "--budget",
            "9",
            "--design-splits",
            "30",
            "--resamples",
            "30",
            "--report",
            str(rep),
            "--ledger",
            str(tmp_path / "l.jsonl"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert {"report.md", "design.png", "design.json", "runs.toml", "commands.sh"} <= {
        p.name for p in rep.iterdir()
    }
    doc = json.loads((rep / "design.json").read_text())
    spec = parse_spec((rep / "runs.toml").read_text(), "runs.toml")
    assert len(spec.runs) == sum(r["seeds"] for r in doc["chosen"])
    assert min(r.seed for r in spec.runs) == 3  # fresh seeds: the grid's are 0, 1, 2
    assert {r.lr for r in spec.runs} == {3e-4} and {r.M for r in spec.runs} == {4}
    commands = (rep / "commands.sh").read_text().splitlines()
    predicts = [c for c in commands if c.startswith("fitrules predict")]
    assert len(predicts) == 2 * len(doc["chosen"])
    assert commands.index(predicts[-1]) < commands.index(
        next(c for c in commands if c.startswith("fitrules simulate"))
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--forms", "composition"], "two or more forms"),
        (["--forms", "composition,additive", "--target", "H=8,omega=3"], "exactly one form"),
        (["--forms", "composition,additive", "--budget", "2"], "--budget 2"),
        (["--forms", "composition,additive", "--candidates", "H=abc"], "not a number"),
    ],
)
def test_bad_design_input_one_line_exit_2(tmp_path, capsys, args, message):
    out = tmp_path / "d.json"
    code = main(["design", *args, "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_spec_blocks_take_their_own_seeds():
    spec = parse_spec(
        'name = "x"\nseeds = [0]\n[fixed]\nwidth = 32\n[[block]]\nseeds = [5, 6]\n'
        "[block.fixed]\nH = 4\n[[block]]\n[block.fixed]\nH = 8\n"
    )
    assert [(r.H, r.seed) for r in spec.runs] == [(4, 5), (4, 6), (8, 0)]


def test_design_on_a_tuned_grid_runs_every_level_and_scores_tuned(tmp_path, capsys):
    spec_out = tmp_path / "runs.toml"
    code = main(
        [
            "design",
            "--data",
            str(DATA / "tuned.csv"),
            "--tune",
            "lr",
            "--forms",
            "free_omega,composition",
            "--budget",
            "12",
            "--design-splits",
            "20",
            "--resamples",
            "20",
            "--spec-out",
            str(spec_out),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    spec = parse_spec(spec_out.read_text(), "runs.toml")
    assert {r.lr for r in spec.runs} == {3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2}
    assert min(r.seed for r in spec.runs) == 6  # the tuned grid's seeds are 0 to 5
    assert "--tune lr" in out.split("fitrules score")[1] and "every level of lr" in out


def test_public_api_design_takes_names_and_a_dataframe():
    import fitrules as fr

    path, where = default_grid()
    frame = pd.read_csv(path).query("lr == 3e-4")
    d = fr.design(frame, ["composition", "log_additive"], budget=6, splits=20, resamples=20)
    assert 0 < d.chosen["runs"].sum() <= 6
    assert json.dumps(d.to_dict(), allow_nan=False)
