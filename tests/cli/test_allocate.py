"""fitrules allocate: Epoch's Chinchilla fit gives its published allocation, a range of
budgets is printed with intervals, and bad input is one line."""

from __future__ import annotations

import json

import pytest
from tables import chinchilla_runs

from conftest import EXTERNAL
from fuzzing import NONFINITE
from helpers import refused, run

CHINCHILLA = EXTERNAL / "chinchilla_epoch_svg_extracted.csv"
EPOCH = ["--data", CHINCHILLA, "--derive", "N = `Model Size`",
         "--derive", "D = `Training FLOP`/(6*N)", "--where", "loss < 3.42",
         "--form", "chinchilla(N, D) = E + A/N**alpha + B/D**beta",
         "--objective", "log_huber"]  # fmt: skip


@pytest.mark.skipif(not CHINCHILLA.exists(), reason="shared/external data not present")
def test_epochs_chinchilla_fit_gives_their_published_allocation_exponents(capsys):
    """Besiroglu et al. 2024 ("Chinchilla Scaling: A replication attempt", arXiv 2404.10102):
    the notebook the paper links for its analysis (data_analysis.ipynb of
    github.com/epoch-research/analyzing-chinchilla), section "Confirm with bootstrap", cell
    output "Parameter estimates and their standard errors", prints for their fit on 240 runs
    a = beta/(alpha+beta): 0.513 (0.020), so N_opt ~ C^0.513 and D_opt ~ C^(1 - 0.513) = 0.487.
    fitrules allocate on the same fit (log-Huber delta 1e-3, the 5 highest losses dropped)
    gives both within 2%, and N* and D* with intervals at every budget of 1e18:1e24:7."""
    code, out, err = run(["allocate", *EPOCH, "--budgets", "1e18:1e24:7", "--json", "-"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["data"]["runs"] == 240 and doc["method"] == "closed form"
    assert doc["exponents"]["N"]["value"] == pytest.approx(0.513, rel=0.02)
    assert doc["exponents"]["D"]["value"] == pytest.approx(0.487, rel=0.02)
    rows = doc["allocation"]
    assert [r["budget"] for r in rows] == pytest.approx([10.0**k for k in range(18, 25)])
    for r in rows:
        assert r["N_low"] < r["N"] < r["N_high"] and r["D_low"] < r["D"] < r["D_high"]
        assert 6 * r["N"] * r["D"] == pytest.approx(r["budget"], rel=1e-9)


def test_the_text_prints_each_budget_with_intervals(tmp_path, capsys):
    """The table has one line per budget with N*, D*, their intervals and the ratio, and
    nothing is printed as nan or inf."""
    chinchilla_runs(0).to_csv(tmp_path / "runs.csv", index=False)
    code, out, err = run(["allocate", "--data", tmp_path / "runs.csv", "--form",
                          "chin(N, D) = E + A/N**alpha + B/D**beta",
                          "--budgets", "1e19,1e21,1e23"], capsys)  # fmt: skip
    assert code == 0, err
    assert NONFINITE.search(out) is None, out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("budget C"))
    assert "N*" in lines[head] and "D*" in lines[head] and "D/N" in lines[head]
    body = lines[head + 1 : head + 4]
    assert [line.split()[0] for line in body] == ["1e+19", "1e+21", "1e+23"]
    assert all(line.count("[") == 3 for line in body)
    assert "exponents: N* ~ C^" in out



def test_the_default_family_prints_each_forms_answer_and_the_interval_over_them(
    tmp_path, capsys
):
    """--family default: each candidate form's N* and exponent, which the grid keeps, the
    interval over the kept forms, nothing printed as nan or inf; the JSON holds the forms."""
    chinchilla_runs(0).to_csv(tmp_path / "runs.csv", index=False)
    argv = ["allocate", "--data", tmp_path / "runs.csv", "--form",
            "chin(N, D) = E + A/N**alpha + B/D**beta", "--budgets", "1e20,1e22",
            "--family", "default"]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert NONFINITE.search(out) is None, out
    assert "candidate forms" in out and "interval of N* over the kept forms" in out
    for name in ("chin (given)", "interaction", "two_power_D", "two_power_N", "broken_D"):
        assert f"  {name} (" in out
    code, out, err = run([*argv, "--json", "-"], capsys)
    doc = json.loads(out)
    assert {r["form"] for r in doc["forms"]} >= {"chin (given)", "broken_D"}
    assert all(r["N_forms_low"] <= r["N"] <= r["N_forms_high"] for r in doc["allocation"])

@pytest.mark.parametrize(
    "extra, match",
    [
        (["--budgets", "0"], "budgets '0': each budget must be a positive finite number"),
        (["--budgets", "1e20:1e18:4"], "needs LOW < HIGH"),
        (["--cost", "6*N*T"], "cost '6\\*N\\*T' names T, which form 'chin' does not read"),
        (["--cost", "N+D"], "is not a product"),
        (["--intervals", "jackknife"], "invalid choice"),
        (["--family", "all"], "invalid choice"),
        # issue 61: options allocate would not use were accepted and ignored
        (["--resamples", "50"], "--resamples would be ignored"),
        (["--bootstrap-seed", "3"], "--bootstrap-seed would be ignored"),
        (["--intervals", "none", "--level", "0.9"], "--level 0.9 would be ignored"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, extra, match):
    """A bad budget, cost or interval method, or an option allocate would ignore: exit 2, one
    line naming it, no file written."""
    chinchilla_runs(0).to_csv(tmp_path / "runs.csv", index=False)
    argv = ["allocate", "--data", tmp_path / "runs.csv", "--form",
            "chin(N, D) = E + A/N**alpha + B/D**beta", "--json", tmp_path / "a.json", *extra]
    refused(argv, capsys, tmp_path, match)  # fmt: skip


def _saved_law(tmp_path):
    """A fit of the allocate grid saved to fit.json, the grid's file then removed."""
    import fitrules as fr
    from declared import ALLOCATE_LAW, allocate_runs

    table = tmp_path / "runs.csv"
    allocate_runs().to_csv(table, index=False)
    f = fr.fit(table, ALLOCATE_LAW)
    assert f.to_json(tmp_path / "fit.json") is None
    table.unlink()
    return f, tmp_path / "fit.json"


def test_allocate_from_a_saved_fit_writes_a_report_with_the_frontier(tmp_path, capsys):
    """Issue 66: allocate had no --fit and no --report; now a saved fit alone (its table gone)
    allocates, and the report holds the text, results.json and the frontier figure."""
    import fitrules as fr

    f, saved = _saved_law(tmp_path)
    code, out, _ = run(["allocate", "--fit", saved, "--budgets", "1e21", "--report",
                        tmp_path / "rep"], capsys)  # fmt: skip
    assert code == 0
    expected = fr.allocate(None, f, budgets=1e21)
    assert expected.text() in out
    rep = tmp_path / "rep"
    assert "](frontier.png)" in (rep / "report.md").read_text()
    assert (rep / "frontier.png").exists()
    got = json.loads((rep / "results.json").read_text())["allocation"][0]
    assert got["N"] == pytest.approx(expected.table["N"][0], rel=1e-9)


@pytest.mark.parametrize("extra, match", [
    ([], r"give --form \(fitted here on --data\) or --fit FILE"),
    (["--form", "chin(N, D) = E + A/N**alpha + B/D**beta"],
     r"give --form \(fitted here on --data\) or --fit FILE"),
    (["--data", "runs.csv"], r"--fit FILE brings its fit and its grid's ranges: leave --data"),
    (["--objective", "log_huber"], r"objective would be ignored: a fitted form brings its fit"),
])  # fmt: skip
def test_allocate_with_a_saved_fit_refuses_what_it_would_ignore(extra, match, tmp_path, capsys):
    """--fit with --form or --data, or a fitting option, would be ignored: one line."""
    _, saved = _saved_law(tmp_path)
    argv = ["allocate", *(["--fit", saved] if extra != [] else []), *extra]
    refused(argv, capsys, tmp_path, match)
