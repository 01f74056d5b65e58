"""One vocabulary across commands: inline forms named in --forms, declared signatures,
--objective and one-run-per-cell grids in design as in compare and fit; -q where the
README says."""

from __future__ import annotations

import pytest
from test_rough_edges import _chinchilla_like

from helpers import run

CHIN = ["--derive", "N = `Model Size`", "--derive", "D = `Training FLOP`/(6*N)"]


@pytest.fixture
def chin_csv(tmp_path):
    path = tmp_path / "chin.csv"
    _chinchilla_like(40).to_csv(path, index=False)
    return path


def test_forms_may_name_an_inline_form(capsys):
    code, out, err = run(["compare", "--splits", 10, "--form", "x = L0 + a*omega*(H/16)**b",
                          "--forms", "composition,x"], capsys)  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    dashes = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    rows = [ln.split()[0] for ln in lines[dashes + 1 : dashes + 3]]
    assert set(rows) == {"composition", "x"}  # the table ranks them by held-out error
    assert "  composition vs x: " in out  # the pairs follow the order --forms gives


def test_design_takes_signatures_objective_and_one_run_per_cell(chin_csv, tmp_path, capsys,
                                                                monkeypatch):  # fmt: skip
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


@pytest.mark.parametrize("order", [["ledger", "-q", "verify"], ["ledger", "verify", "-q"]])
def test_quiet_ledger_verify(tmp_path, capsys, order):
    ledger = tmp_path / "l.jsonl"
    code, _, err = run(["predict", "--form", "composition", "--at", "H=8,keep=0.25",
                        "--ledger", ledger, "--resamples", 20], capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = run([*order, "--ledger", ledger], capsys)
    assert (code, out, err) == (0, "", "")
    code, out, _ = run(["ledger", "verify", "--ledger", ledger], capsys)
    assert code == 0 and "chain intact" in out
