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


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--budgets", "0"], "budgets '0': each budget must be a positive finite number"),
        (["--budgets", "1e20:1e18:4"], "needs LOW < HIGH"),
        (["--cost", "6*N*T"], "cost '6\\*N\\*T' names T, which form 'chin' does not read"),
        (["--cost", "N+D"], "is not a product"),
        (["--intervals", "jackknife"], "invalid choice"),
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
