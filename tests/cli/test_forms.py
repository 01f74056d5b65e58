"""Forms on the command line: forms add, show, list and remove, inline forms, forms.toml,
expressions that used to crash, forms that read the metric."""

from __future__ import annotations

import tomllib

import pytest

from conftest import composition_grid
from helpers import refused, run, write_file

SPLITS = ["--splits", "5"]

# forms.toml's form "mine": the composition rule
MINE = '[mine]\nexpr = "L0 + a*omega*(H/16)**b"\nvariables = ["H", "omega"]\n'


def _in_folder_with_forms_toml(tmp_path, monkeypatch, toml: str) -> None:
    """Work in a new folder tmp_path/w whose forms.toml is ``toml``."""
    (tmp_path / "w").mkdir()
    write_file(tmp_path / "w" / "forms.toml", toml)
    monkeypatch.chdir(tmp_path / "w")


def test_forms_commands(tmp_path, monkeypatch, capsys):
    """forms add writes forms.toml; list shows it with the built-ins; show names the constants."""
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["forms", "add", "mine", "L0 + a*omega**c"], capsys)
    assert code == 0 and (tmp_path / "forms.toml").exists()
    code, out, _ = run(["forms", "list"], capsys)
    assert "mine" in out and "composition" in out
    code, out, _ = run(["forms", "show", "additive"], capsys)
    assert "nonlinear constants" in out and "c, d" in out


def test_a_form_may_not_read_the_metric(grid_csv, tmp_path, capsys):
    """A form that reads the metric column is refused by fit and by compare."""
    for argv in (
        ["fit", "--data", grid_csv, "--form", "x = L0 + a*loss"],
        ["compare", "--data", grid_csv, *SPLITS, "--form", "x(H, loss) = a*loss + b*H"],
    ):
        refused(argv, capsys, tmp_path, "'loss' is the metric")


def test_metric_that_the_forms_read_is_refused(grid_csv, tmp_path, capsys):
    """A --metric that the form reads as a variable (H) is refused in one line."""
    refused(
        ["fit", "--data", grid_csv, "--form", "composition", "--metric", "H"],
        capsys,
        tmp_path,
        "'H' is the metric",
    )


@pytest.mark.parametrize("column", ["seed", "diverged"])
def test_seed_and_outcome_columns_are_not_variables(grid_csv, tmp_path, capsys, column):
    """A form reading the seed column or an outcome column as a variable is refused."""
    refused(
        ["fit", "--data", grid_csv, "--form", f"x(H, {column}) = L0 + a*H + b*{column}"],
        capsys,
        tmp_path,
        f"{column!r} (names a run's seed|is an outcome)",
    )


@pytest.mark.parametrize(
    "expression, match",
    [
        (" + ".join(f"a{i}*H" for i in range(900)), "characters; an expression may have at most"),
        ("-" * 4000 + "H", "nested too deeply"),
        ("H", "no constants to fit"),
        ("9" * 400 + "*H + L0", "beyond double precision"),
        ("1e999*H + L0", "beyond double precision"),
        (" + ".join(f"a{i}*H" for i in range(60)), "nested more than 50 levels"),
    ],
)
def test_expressions_that_used_to_crash(grid_csv, tmp_path, capsys, expression, match):
    """Too long, too deep, constant-free or overflowing expressions are refused in one line."""
    refused(
        ["fit", "--data", grid_csv, "--where", "keep == 1", "--form", f"x = {expression}"],
        capsys,
        tmp_path,
        match,
    )


@pytest.mark.parametrize(
    "toml, match",
    [
        ('[mine]\nexpr = "L0 + a*H"\nvariables = 5\n', "variables must be a list"),
        ('[mine]\nexpr = "L0 + a*H"\nbounds = "abc"\n', "bounds must be a table"),
        ("[mine]\nexpr = 5\n", "expr must be a string"),
        ('[mine]\nexpr = "L0 + a*H**b"\nstart = { b = [1] }\n', "must be two numbers"),
        ('[mine]\nexpr = "L0 + a*H**b"\nbounds = { b = ["x", 1] }\n', "must be two numbers"),
    ],
)
def test_forms_toml_with_wrong_types(grid_csv, tmp_path, capsys, monkeypatch, toml, match):
    """forms.toml entries of the wrong type (variables, bounds, expr, start) are refused."""
    _in_folder_with_forms_toml(tmp_path, monkeypatch, toml)
    refused(["fit", "--data", grid_csv, "--form", "mine"], capsys, tmp_path, match)


def test_start_outside_the_bounds_is_refused(grid_csv, tmp_path, capsys, monkeypatch):
    """A starting range outside a constant's bounds is refused, naming both ranges."""
    _in_folder_with_forms_toml(tmp_path, monkeypatch, MINE + "start = { b = [20, 30] }\n")
    refused(
        ["compare", "--data", grid_csv, *SPLITS, "--forms", "mine"],
        capsys,
        tmp_path,
        r"starting range \[20, 30\] of 'b' is not inside its bounds \[-10, 10\]",
    )


def test_bounds_on_a_linear_constant_are_refused(grid_csv, tmp_path, capsys, monkeypatch):
    """Bounds on a constant that enters linearly are refused in one line."""
    _in_folder_with_forms_toml(tmp_path, monkeypatch, MINE + "bounds = { a = [0, 0.001] }\n")
    argv = ["fit", "--data", grid_csv, "--form", "mine"]
    refused(argv, capsys, tmp_path, "bounds given for 'a', which enters linearly")


def test_an_inline_form_may_shadow_a_builtin_with_a_note(grid_csv, tmp_path, capsys, monkeypatch):
    """An inline form named like a built-in form (or one of forms.toml) is the one compare and
    fit use, with one note line on stderr naming the form it shadows."""
    _in_folder_with_forms_toml(tmp_path, monkeypatch, MINE)
    for argv, shadowed in (
        (["compare", *SPLITS, "--form", "composition = L0 + a*omega*H"], "built-in"),
        (["fit", "--form", "additive(H, omega) = L0 + a*omega*H"], "built-in"),
        (["fit", "--form", "mine = L0 + a*omega"], "forms.toml's"),
    ):
        code, out, err = run([*argv, "--data", grid_csv], capsys)
        assert code == 0, err
        (note,) = err.strip().splitlines()
        assert note.startswith(f"fitrules {argv[0]}: note: form ") and shadowed in note
        assert "the one given here is used" in note
        if argv[0] == "fit":  # the user's expression is the one fitted
            assert argv[-1].split("= ")[1] in out


def test_variables_declared_in_backticks(tmp_path, capsys):
    """A form declaring a column with a space in backticks fits it and finds b = 0.5."""
    df = composition_grid().rename(columns={"H": "my H"})
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    code, out, err = run(
        ["fit", "--data", path, "--form", "m(`my H`, omega) = L0 + a*omega*(`my H`/16)**b"],
        capsys,
    )
    assert code == 0, err
    assert "b  = 0.5" in out


def test_a_form_with_no_finite_prediction_is_refused(grid_csv, tmp_path, capsys):
    """A form that predicts no finite loss for any constants is refused in one line."""
    refused(
        ["fit", "--data", grid_csv, "--form", "x = L0 + a*omega*sqrt(-H)"],
        capsys,
        tmp_path,
        "no values of its constants give a finite prediction",
    )


def test_forms_add_keeps_declared_variables_and_show_needs_no_grid(tmp_path, monkeypatch, capsys):
    """forms add keeps a signature's variables, and show works though the grid lacks them."""
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
    """forms add of a misspelt variable is refused with a suggestion and writes no file."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["forms", "add", "bad", "L0 + a*omgea"], capsys)
    assert code == 2 and "did you mean 'omega'" in err
    assert not (tmp_path / "forms.toml").exists()


def test_forms_remove(tmp_path, monkeypatch, capsys):
    """forms remove takes out the form named; an unknown or built-in form is refused."""
    monkeypatch.chdir(tmp_path)
    assert run(["forms", "add", "one", "L0 + a*omega"], capsys)[0] == 0
    assert run(["forms", "add", "two(H) = L0 + b*H", ""], capsys)[0] == 2  # bad name
    assert run(["forms", "add", "two(H)", "L0 + b*H"], capsys)[0] == 0
    code, out, _ = run(["forms", "remove", "one"], capsys)
    assert code == 0 and "removed one" in out
    assert list(tomllib.loads((tmp_path / "forms.toml").read_text())) == ["two"]
    assert "no form 'one'" in run(["forms", "remove", "one"], capsys)[2]
    assert "built in" in run(["forms", "remove", "composition"], capsys)[2]


@pytest.mark.parametrize(
    "derive, form",
    [
        ("loss2 = loss*2", "x = L0 + a*loss2"),
        ("t2 = train_loss + 0", "x = L0 + a*t2"),
        ("s2 = seed + 1", "x = L0 + a*s2"),
        ("z = loss*2", "x(H, w) = L0 + a*w*H"),  # a chain: w reads z, which reads loss
    ],
)
def test_a_form_may_not_read_the_metric_through_a_derivation(tmp_path, capsys, derive, form):
    """A form reading the metric, another loss or the seed through --derive is refused."""
    data = tmp_path / "g.csv"
    composition_grid().assign(train_loss=2.0).to_csv(data, index=False)
    argv = ["compare", "--data", data, "--splits", "5", "--derive", derive, "--form", form]
    if derive.startswith("z"):
        argv += ["--derive", "w = z/2"]
    refused(argv, capsys, tmp_path, "is derived from '(loss|train_loss|seed)'")


def test_a_symlinked_forms_file_stays_a_link(tmp_path, capsys, monkeypatch):
    """forms add through a symlinked forms.toml writes the target and keeps the link."""
    monkeypatch.chdir(tmp_path)
    shared = tmp_path / "team.toml"
    shared.write_text('mine = "L0 + a*omega"\n')
    (tmp_path / "forms.toml").symlink_to(shared)
    code, _, err = run(["forms", "add", "other", "L0 + b*H"], capsys)
    assert code == 0, err
    assert (tmp_path / "forms.toml").is_symlink()
    assert "other" in shared.read_text()


def test_declaring_no_variables_is_refused(tmp_path, capsys, monkeypatch):
    """A form in forms.toml declaring an empty variable list is refused by forms list and fit."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text('x = { expr = "L0 + a*H", variables = [] }\n')
    refused(["forms", "list"], capsys, tmp_path, "declares no variables")
    refused(["fit", "--form", "x"], capsys, tmp_path, "declares no variables")


def test_the_readme_bounds_example_is_accepted(tmp_path, capsys, monkeypatch):
    """The README's bounds example is accepted and forms show starts its grid over the bounds."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text(
        '[mine]\nexpr = "L0 + a*omega**b"\nbounds = { b = [-2, 2] }\n'
    )
    code, out, err = run(["forms", "show", "mine"], capsys)
    assert code == 0, err
    assert "starting grid over [-2, 2]" in out


def test_a_start_outside_the_bounds_is_refused_by_list_and_show(tmp_path, capsys, monkeypatch):
    """A start outside a constant's bounds in forms.toml is refused by forms list and show."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text(
        '[mine]\nexpr = "L0 + a*omega**b"\nbounds = { b = [0, 4] }\nstart = { b = [5, 6] }\n'
    )
    refused(["forms", "list"], capsys, tmp_path, "start of 'b' .* not a range inside")
    refused(["forms", "show", "mine"], capsys, tmp_path, "start of 'b' .* not a range inside")
