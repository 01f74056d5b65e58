"""fitrules design: the loop's commands and a runnable spec, candidates it can run, targets,
extreme scales, one run per cell."""

from __future__ import annotations

import json
import os
import warnings

import pandas as pd
import pytest
from tables import chinchilla_like

from conftest import DATA, composition_grid
from fitrules.cli import main
from fitrules.sim.spec import parse_spec
from helpers import refused, run

FAST_DESIGN = ["--design-splits", "10", "--resamples", "20"]


CHIN = ["--derive", "N = `Model Size`", "--derive", "D = `Training FLOP`/(6*N)"]


@pytest.fixture
def chin_csv(tmp_path):
    path = tmp_path / "chin.csv"
    chinchilla_like(40).to_csv(path, index=False)
    return path


def test_cli_writes_the_loop_commands_and_a_runnable_spec(tmp_path, capsys):
    """design --report writes a spec of the chosen runs on fresh seeds and the loop's commands."""
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
    """One form, --target with two forms, too small a budget, bad candidates: one line, exit 2."""
    out = tmp_path / "d.json"
    code = main(["design", *args, "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_design_on_a_tuned_grid_runs_every_level_and_scores_tuned(tmp_path, capsys):
    """On a tuned grid with --tune lr the spec runs every lr level and the score command tunes."""
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


def test_design_ranks_whole_cells_only(tmp_path, capsys):
    """design proposes only whole-number H in cells the grid lacks, and the spec runs those H."""
    d = pd.read_csv(DATA / "main.csv")
    d = d[d["lr"] == 3e-4]
    d = d.assign(H=d["H"].map({1: 1, 4: 2, 16: 4, 64: 8}))
    d.to_csv(tmp_path / "g.csv", index=False)
    code, out, err = run(
        ["design", "--forms", "composition,additive", "--data", tmp_path / "g.csv",
         "--json", "-", "--spec-out", tmp_path / "s.toml", *FAST_DESIGN],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    hs = {c["H"] for c in res["candidates"]}
    assert all(float(h).is_integer() for h in hs), hs
    grid_cells = {(h, o) for h, o in zip(d["H"], d["omega"], strict=True)}
    for c in res["chosen"]:
        assert (c["H"], c["omega"]) not in grid_cells  # not a cell the grid already has
    spec = (tmp_path / "s.toml").read_text()
    for c in res["chosen"]:
        assert f"H = {int(c['H'])}" in spec


@pytest.mark.parametrize(
    "cand, match",
    [
        ("H=0.5,1.5,2.5", "H must be finite and >= 1|not a whole number"),
        ("H=1.5", "not a whole number"),
        ("H=0.5", "H must be finite and >= 1"),
        ("H=-4", "H must be finite and >= 1"),
        ("H=1e308", "beyond"),
        ("H=2e6", "largest H a run takes"),
        ("omega=-1", "omega must be finite and >= 0"),
        ("H=2;H=8", "named twice"),
    ],
)
def test_design_refuses_candidates_it_cannot_run(tmp_path, capsys, cand, match):
    """Candidates no run can take (fractional, tiny, negative or huge H, omega < 0) are refused."""
    refused(["design", "--forms", "composition,additive", "--candidates", cand, *FAST_DESIGN],
            capsys, tmp_path, match)  # fmt: skip


def test_spec_out_on_a_grid_the_harness_did_not_write_is_refused(grid_csv, tmp_path, capsys):
    """--spec-out on a grid fitrules simulate did not write is refused, leaving no partial file."""
    refused(["design", "--data", grid_csv, "--forms", "composition,additive", "--spec-out",
             tmp_path / "s.toml", *FAST_DESIGN], capsys, tmp_path,
            "--spec-out .* not written by fitrules simulate")  # fmt: skip
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_spec_out_on_a_gpt_grid_is_a_gpt_spec(tmp_path, capsys):
    """--spec-out on the committed gpt grid (its DiLoCo runs) writes a spec of gpt runs at the
    grid's settings (the shipped corpus included), rather than calling the grid one fitrules
    simulate did not write."""
    import tomllib

    from fitrules.sim.gpt import GPTConfig

    spec_out = tmp_path / "runs.toml"
    code, out, err = run(["design", "--data", DATA / "gpt.csv", "--where", "algo == 'diloco'",
                          "--forms", "composition,additive", "--budget", "6",
                          "--spec-out", spec_out, *FAST_DESIGN], capsys)  # fmt: skip
    assert code == 0, err
    doc = tomllib.loads(spec_out.read_text())
    grid = pd.read_csv(DATA / "gpt.csv", keep_default_na=False).iloc[0]
    assert doc["fixed"]["model"] == "gpt" and doc["fixed"]["corpus"] == ""
    for block in doc["block"]:
        run_cfg = GPTConfig(**doc["fixed"], **block["fixed"])
        assert run_cfg.validate() == run_cfg
        assert all(getattr(run_cfg, k) == grid[k] for k in ("layers", "width", "steps", "lr"))


def test_design_takes_forms_that_read_fewer_variables(tmp_path, capsys):
    """design takes a form that reads only omega beside one that reads H and omega."""
    code, out, err = run(["design", "--forms", "omega_only,composition", *FAST_DESIGN,
                          "--json", "-"], capsys)  # fmt: skip
    assert code == 0, err
    assert [f["name"] for f in json.loads(out)["forms"]] == ["omega_only", "composition"]


def test_an_inline_form_must_be_named_in_forms(tmp_path, capsys):
    """An inline --form that --forms does not name is refused in one line."""
    refused(["design", "--forms", "composition,additive", "--form", "x = L0 + a*omega",
             *FAST_DESIGN], capsys, tmp_path, "'x' is not named in --forms")  # fmt: skip


def test_design_target_errors_name_target(tmp_path, capsys):
    """A --target naming an unknown variable is refused in one line quoting the --target."""
    refused(["design", "--forms", "composition", "--target", "H=256,bogus=3", *FAST_DESIGN],
            capsys, tmp_path, r"--target 'H=256,bogus=3'")  # fmt: skip


def test_design_with_no_form_named_is_one_line(tmp_path, capsys):
    """design --forms '' is refused in one line asking to name the forms."""
    # found by the fuzzer: --forms '' took the built-in set, then raised ValueError
    refused(["design", "--forms", "", *FAST_DESIGN], capsys, tmp_path, "name the forms")


@pytest.mark.parametrize("scale, ok", [(1e-300, False), (1e90, True)])
def test_design_at_extreme_scales(tmp_path, capsys, scale, ok):
    """design refuses losses at 1e-300 (no measurable spread) and runs cleanly at 1e90."""
    # found by the fuzzer: 'inf' separations (no measurable seed noise at 1e-300) and
    # overflow warnings (squares of 1e90)
    df = composition_grid().assign(loss=lambda d: d["loss"] * scale)
    df.to_csv(tmp_path / "g.csv", index=False)
    argv = ["design", "--data", tmp_path / "g.csv", "--forms", "composition,log_additive"]
    argv += [*FAST_DESIGN, "--budget", "6"]
    if ok:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            code, out, err = run(argv, capsys)
        assert code == 0, err
        assert "inf" not in out and "nan" not in out
    else:
        refused(argv, capsys, tmp_path, "no measurable spread")


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_design_takes_signatures_objective_and_one_run_per_cell(chin_csv, tmp_path, capsys,
                                                                monkeypatch):  # fmt: skip
    """design takes signatures and --objective on one run per cell; its predict lines keep them."""
    monkeypatch.chdir(tmp_path)
    forms = ["--form", "chin(N, D) = E + A/N**alpha + B/D**beta",
             "--form", "noE(N, D) = A/N**alpha + B/D**beta", "--forms", "chin,noE"]  # fmt: skip
    code, out, err = run(["design", "--data", chin_csv, *CHIN, *forms, "--objective",
                          "log_huber", "--budget", 6, "--design-splits", 20, "--resamples", 20,
                          "--candidates", "N=1e8,1e10;D=1e10,1e12"], capsys)  # fmt: skip
    assert code == 0, err
    assert "no cell has two or more runs: the noise of one run" in out
    predicts = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("fitrules predict")]
    assert predicts and all("--objective log_huber" in p for p in predicts)
    assert any("'chin(N, D) = E + A/N**alpha + B/D**beta'" in p for p in predicts)
