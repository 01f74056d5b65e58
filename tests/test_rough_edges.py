"""The rough edges a new user hit (issue 13), one test each: forms, inputs silently ignored,
validate on a grid nobody tuned it for, reproducibility, help and messages, README drift,
Parquet, set-aside splits."""

import argparse
import json
import re
import shutil
import tomllib

import numpy as np
import pandas as pd
import pytest

from conftest import DATA, EXTERNAL, ROOT, composition_grid
from fitrules.cli import build_parser, main


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _chinchilla_like(n=40, seed=0) -> pd.DataFrame:
    """One run per cell, columns named as in the Chinchilla table, figure colours as text."""
    rng = np.random.default_rng(seed)
    size = rng.choice(np.round(np.geomspace(3e7, 1e10, 15), -3), n)  # repeated sizes
    flop = 6 * size * 10 ** rng.uniform(9, 11.5, n)
    loss = 1.8 + 480 / size**0.35 + 2000 / (flop / 6 / size) ** 0.37
    return pd.DataFrame(
        {
            "x": rng.uniform(0, 500, n),
            "color": [f"#{i:06x}" for i in rng.integers(0, 2**24, n)],
            "Model Size": size,
            "Training FLOP": flop,
            "loss": loss * np.exp(0.01 * rng.standard_normal(n)),
        }
    )


# ---------------------------------------------------------------- forms
def test_forms_add_keeps_declared_variables_and_show_needs_no_grid(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["forms", "add", "chin2(N, D)", "E + A/N**alpha + B/D**beta"], capsys)
    assert code == 0, err
    doc = tomllib.loads((tmp_path / "forms.toml").read_text())
    assert doc["chin2"]["variables"] == ["N", "D"]
    # the default grid has no N or D: show must not check the form against it
    code, out, err = run(["forms", "show", "chin2"], capsys)
    assert code == 0, err
    assert "variables (declared): N, D" in out and "nonlinear constants" in out


def test_forms_add_refuses_a_misspelt_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["forms", "add", "bad", "L0 + a*omgea"], capsys)
    assert code == 2 and "did you mean 'omega'" in err
    assert not (tmp_path / "forms.toml").exists()


def test_forms_remove(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["forms", "add", "one", "L0 + a*omega"], capsys)[0] == 0
    assert run(["forms", "add", "two(H) = L0 + b*H", ""], capsys)[0] == 2  # bad name
    assert run(["forms", "add", "two(H)", "L0 + b*H"], capsys)[0] == 0
    code, out, _ = run(["forms", "remove", "one"], capsys)
    assert code == 0 and "removed one" in out
    assert list(tomllib.loads((tmp_path / "forms.toml").read_text())) == ["two"]
    assert "no form 'one'" in run(["forms", "remove", "one"], capsys)[2]
    assert "built in" in run(["forms", "remove", "composition"], capsys)[2]


def test_form_option_help_says_what_it_does():
    text = " ".join(_help("compare").split())
    assert "on its own when --forms is not given (the built-in set is then left out)" in text


def test_one_form_prints_no_empty_paired_section(synthetic_csv, capsys):
    code, out, err = run(
        ["compare", "--data", synthetic_csv, "--splits", 10, "--forms", "composition"], capsys
    )
    assert code == 0, err
    assert "Paired" not in out


# ---------------------------------------------------------------- inputs silently ignored
def test_validate_refuses_a_path_and_data_together(synthetic_csv, capsys):
    code, _, err = run(["validate", synthetic_csv, "--data", DATA / "main.csv"], capsys)
    assert code == 2 and "give the grid once" in err


def test_splits_with_a_structured_protocol_is_refused(synthetic_csv, capsys):
    args = ["compare", "--data", synthetic_csv, "--split", "leave-one-level-out:H"]
    code, _, err = run([*args, "--splits", 50], capsys)
    assert code == 2 and "applies to random splits only" in err
    assert run(args, capsys)[0] == 0


def test_extrapolate_has_a_spelling_without_a_shell_redirect(synthetic_csv, capsys):
    from fitrules.model.splits import Extrapolate, parse_protocol

    assert parse_protocol("extrapolate:H:16") == Extrapolate("H", 16.0)
    assert parse_protocol("extrapolate:H>=16") == Extrapolate("H", 16.0)
    # every extrapolate:COL>=VALUE the README and the docs print is quoted
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for line in (line for p in pages for line in p.read_text().splitlines()):
        for m in re.finditer(r"extrapolate:\w+>=", line):
            before = line[: m.start()]
            assert before.count("'") % 2 == 1 or before.count('"') % 2 == 1, line


# ---------------------------------------------------------------- validate
def test_validate_on_a_grid_of_one_run_per_cell(tmp_path, capsys):
    csv = tmp_path / "chin.csv"
    _chinchilla_like().to_csv(csv, index=False)
    derive = ["--derive", "N = `Model Size`", "--derive", "D = `Training FLOP`/(6*N)"]
    code, out, err = run(["validate", csv, *derive], capsys)
    assert code == 0, err
    assert "seed column: None" not in out and "seed column: none" in out
    # a text column with a different value in every run labels runs: listed once, not as
    # a factor of 40 levels
    (labels,) = [line for line in out.splitlines() if line.startswith("per-run columns")]
    assert labels.endswith(": color") and "#" not in out
    assert re.search(r"Model Size \(1\d levels\): [\d.e+]+ to [\d.e+]+", out)
    # validate counts the same cells as compare
    cells = int(re.search(r"cells: (\d+)", out).group(1))
    j = tmp_path / "c.json"
    form = "chin(N, D) = E + A/N**alpha + B/D**beta"
    assert run(["compare", "--data", csv, *derive, "--form", form, "--splits", 5,
                "--train-frac", "0.5", "--json", j], capsys)[0] == 0  # fmt: skip
    assert cells == json.loads(j.read_text())["data"]["cells"] == 40


# ---------------------------------------------------------------- reproducibility
def test_simulate_leaves_a_finished_grid_untouched(tmp_path, capsys):
    """`make grids` right after a clone reran finished grids and rewrote their manifests."""
    for name in ("smoke.csv", "smoke.manifest.json"):
        shutil.copy2(DATA / name, tmp_path / name)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert run(["simulate", DATA / "specs" / "smoke.toml", "--out", tmp_path / "smoke.csv"],
               capsys)[0] == 0  # fmt: skip
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_json_floats_do_not_change_with_the_last_digit():
    """Another BLAS changes the last of a float's 17 digits; reports must not follow it."""
    from fitrules.base.util import json_ready

    for x in (0.06698664605963957, 2.1397175121455803, 665669.6759764799, 1e-7 / 3):
        assert json_ready(x) == json_ready(float(np.nextafter(x, np.inf)))
        assert json_ready(x) == pytest.approx(x, rel=1e-11)


def test_reports_carry_no_date_and_survive_backticks_in_the_command(tmp_path, capsys):
    csv = tmp_path / "g.csv"
    composition_grid().drop(columns="omega").rename(columns={"keep": "keep frac"}).to_csv(
        csv, index=False
    )
    rep = tmp_path / "rep"
    derive = "omega = 1/`keep frac` - 1"
    code, _, err = run(["compare", "--data", csv, "--derive", derive, "--splits", 10,
                        "--forms", "composition", "--report", rep], capsys)  # fmt: skip
    assert code == 0, err
    md = (rep / "report.md").read_text()
    assert "| date |" not in md
    (row,) = [line for line in md.splitlines() if line.startswith("| command |")]
    assert row.count("``") == 2 and "`keep frac`" in row  # a longer fence around the backticks


# ---------------------------------------------------------------- help and messages
def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, subsub in _subparsers(sub):
                    yield f"{name} {inner}", subsub


def _help(command: str) -> str:
    return dict(_subparsers(build_parser()))[command].format_help()


def test_every_option_of_every_command_has_help():
    missing = []
    for name, sub in _subparsers(build_parser()):
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {action.option_strings or action.dest}")
    assert not missing, missing


def test_ci_help_names_one_default_grid_and_tolerance_states_its_default():
    ci = " ".join(_help("ci").split())
    assert "paired_tuned.csv" in ci and "main grid" not in ci
    assert "default: none" in " ".join(_help("predict").split())


def test_quiet(synthetic_csv, capsys):
    code, out, err = run(["compare", "--data", synthetic_csv, "--splits", 5, "--quiet"], capsys)
    assert code == 0 and out == "" and err == ""


def test_simulate_reports_progress_when_stderr_is_not_a_terminal(tmp_path, capsys):
    spec = DATA / "specs" / "smoke.toml"
    code, out, err = run(["simulate", spec, "--cell", "H=4,keep=0.5", "--out",
                          tmp_path / "x.csv"], capsys)  # fmt: skip
    assert code == 0 and "2 of 2 runs done" in err  # the smoke spec's seeds 0 and 1


def test_fit_says_which_data_and_filter_and_predict_prints_a_point(tmp_path, capsys):
    code, out, err = run(["fit", "--form", "composition"], capsys)
    assert code == 0 and out.startswith("data: data/main.csv") and "where lr == 3e-4" in out
    ledger = tmp_path / "p.jsonl"
    code, out, err = run(["predict", "--data", DATA / "smoke.csv", "--form", "composition",
                          "--at", "H=8,keep=0.25", "--ledger", ledger, "--resamples", 30],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert "at H=8, keep=0.25 (" in out and "{" not in out


def test_units_come_from_the_grid_or_unit_and_are_never_invented(tmp_path, capsys):
    from fitrules.model.grids import load_grid

    assert load_grid(DATA / "smoke.csv").unit == "nats"  # written by fitrules simulate
    assert load_grid(DATA / "smoke.csv", metric="wall_s").unit == "s"
    assert load_grid("t.csv", frame=composition_grid()).unit is None
    assert load_grid("t.csv", frame=composition_grid(), unit="bits").unit == "bits"
    rep = tmp_path / "rep"
    code, _, err = run(["fit", "--data", DATA / "smoke.csv", "--metric", "wall_s",
                        "--form", "composition", "--report", rep], capsys)  # fmt: skip
    assert code == 0, err
    md = (rep / "report.md").read_text()
    assert "nats" not in md
    # the axis says seconds, the unit of wall_s in a harness table, not nats
    from fitrules import api
    from fitrules.views import figures

    f = api.fit(api.as_grid(DATA / "smoke.csv", metric="wall_s"), "composition")
    ax = f.plot_fit()
    assert ax.get_ylabel() == "observed wall_s (s)"
    figures.plt.close("all")


def test_figure_labels_are_true_to_the_data():
    from fitrules import api
    from fitrules.views import figures

    g = api.as_grid(composition_grid(seeds=1))
    f = api.fit(g, "composition")
    ax = figures.observed_vs_predicted(f.cells, f.form, f.constants, None)
    assert ax.get_ylabel() == "observed loss"  # no unit invented
    assert "one run each" in [t.get_text() for t in ax.get_legend().get_texts()][-1]
    ax = figures.curves_vs(f.cells, f.form, f.constants, "H", "nats")
    assert ax.get_ylabel() == "loss (nats); one run per cell"
    figures.plt.close("all")


# ---------------------------------------------------------------- set-aside splits
def test_a_verdict_resting_on_few_splits_warns_and_says_why():
    from fitrules.jobs.compare import set_aside_warnings
    from fitrules.views.text import verdict_sentence

    summary = pd.DataFrame([{"form": "noE", "splits_used": 39}])
    (w,) = set_aside_warnings(summary, {"noE": {"optimiser did not converge": 261}}, 300)
    assert "261 of 300 splits set aside (261 x optimiser did not converge)" in w
    row = {"a": "chin", "b": "noE", "n": 39, "splits": 300, "a_better": 39, "b_better": 0,
           "ties": 0, "median_diff_pct": -0.7, "p": None}  # fmt: skip
    assert "Warning: 261 of 300 splits were set aside" in verdict_sentence(row)


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_set_aside_section_covers_failed_fits(synthetic_csv, tmp_path, capsys):
    rep = tmp_path / "rep"
    assert run(["compare", "--data", synthetic_csv, "--splits", 10, "--report", rep],
               capsys)[0] == 0  # fmt: skip
    md = (rep / "report.md").read_text()
    assert "## Splits set aside" in md and "the optimiser did not converge" in md


# ---------------------------------------------------------------- README and packaging
def test_readme_counts_match_the_committed_default_report():
    doc = json.loads((ROOT / "reports" / "default" / "results.json").read_text())
    (row,) = [r for r in doc["paired"] if (r["a"], r["b"]) == ("composition", "additive")]
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = 0
    for page in pages:  # the README's and the docs pages' (the verdict page) quotes
        text = page.read_text().replace("\n", " ")
        for won, of in re.findall(r"(\d+)\s+of\s+(\d+)\s+splits", text):
            assert (int(won), int(of)) == (row["a_better"], row["n"]), page
            found += 1
    assert found >= 2


def test_parquet_needs_an_extra_that_exists(tmp_path, monkeypatch):
    from fitrules.base.errors import GridError
    from fitrules.model.grids import load_grid

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(d.startswith("pyarrow") for d in extras["parquet"])

    def no_engine(*a, **k):
        raise ImportError("Unable to find a usable engine")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    (tmp_path / "g.parquet").write_bytes(b"PAR1")
    with pytest.raises(GridError, match=r"fitrules\[parquet\]"):
        load_grid(tmp_path / "g.parquet")


@pytest.mark.skipif(
    not (EXTERNAL / "chinchilla_epoch_svg_extracted.csv").exists(),
    reason="shared/external data not present",
)
def test_chinchilla_fit_has_jacobian_errors_like_lmfit_and_residuals_against_n_and_d(tmp_path):
    import fitrules as fr

    g = fr.load_grid(
        EXTERNAL / "chinchilla_epoch_svg_extracted.csv",
        derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"],
        where="loss < 3.42",  # Epoch's 240 runs: the 5 highest losses dropped
    )
    f = fr.fit(g, "chinchilla(N, D) = E + A/N**alpha + B/D**beta", objective="log_huber",
               intervals=True, resamples=50)  # fmt: skip
    assert f.correlation.loc["B", "beta"] == pytest.approx(0.9993, abs=5e-4)  # lmfit's value
    assert all(hi > lo for lo, hi in f.intervals.values())
    names = {p.name for p in f.report(tmp_path / "rep").iterdir()}
    assert {"residuals_vs_N.png", "residuals_vs_D.png"} <= names
