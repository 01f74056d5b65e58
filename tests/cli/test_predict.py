"""fitrules predict: ledgers written and extended, round trips through simulate and score,
tampering detected, bad points refused."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import DATA
from fitrules.base.errors import LedgerError
from fitrules.cli import main
from fitrules.jobs.ledger import read_ledger
from helpers import refused


def _predict(ledger, at, *extra, data=DATA / "smoke.csv", resamples="40"):
    """Exit status of ``fitrules predict`` for composition at ``at`` on the smoke grid."""
    return main(
        [
            "predict",
            "--data",
            str(data),
            "--form",
            "composition",
            "--at",
            at,
            "--ledger",
            str(ledger),
            "--resamples",
            resamples,
            *extra,
        ]
    )


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--at", "H=-2,keep=0.5"], "H must be finite and >= 1"),
        (["--at", "H=8,keep=0.5", "--tolerance", "inf"], "positive, finite percentage"),
    ],
)
def test_predict_at_impossible_points(grid_csv, tmp_path, capsys, extra, match):
    """predict at H < 1 or with an infinite --tolerance is refused in one line."""
    refused(
        [
            "predict",
            "--data",
            grid_csv,
            "--form",
            "composition",
            "--ledger",
            tmp_path / "l.jsonl",
            *extra,
        ],
        capsys,
        tmp_path,
        match,
    )


def test_predict_into_a_place_where_no_ledger_can_be_made(grid_csv, tmp_path, capsys):
    """A --ledger where no file can be created is refused in one line."""
    refused(
        ["predict", "--data", grid_csv, "--form", "composition", "--at", "H=8,keep=0.25"]
        + ["--ledger", "/proc/fuzz.jsonl", "--resamples", "20"],
        capsys,
        tmp_path,
        "--ledger /proc/fuzz.jsonl: cannot create files in /proc",
    )


@pytest.mark.parametrize("runs", [0, -2, 1001])
def test_bad_runs_are_refused_in_one_line(synthetic_csv, tmp_path, capsys, runs):
    """--runs of 0, negative or over 1000 is refused in one line and writes no ledger."""
    code = main(["predict", "--data", str(synthetic_csv), "--form", "composition",
                 "--at", "H=8,keep=0.25", "--ledger", str(tmp_path / "l.jsonl"),
                 f"--runs={runs}"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--runs" in err
    assert not (tmp_path / "l.jsonl").exists()


def test_a_refused_predict_leaves_a_shared_ledgers_folder_untouched(grid_csv, tmp_path, capsys):
    """A predict refused for its table leaves the folder of a symlinked ledger untouched."""
    # found by the fuzzer: the writability probe changed the time of the linked folder
    (tmp_path / "shared").mkdir()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "link.jsonl").symlink_to("../shared/l.jsonl")
    grid_csv.write_bytes(b"\xff\xfe" + grid_csv.read_bytes())
    refused(["predict", "--data", grid_csv, "--form", "composition", "--at", "H=4,keep=1",
             "--ledger", tmp_path / "mine" / "link.jsonl"], capsys, tmp_path,
            "not a readable results table")  # fmt: skip


def test_ledger_round_trip_with_the_harness(tmp_path, capsys):
    """A prediction scores against simulated runs; a repeat is refused, a new cell appended."""
    ledger, new = tmp_path / "predictions.jsonl", tmp_path / "new.csv"
    assert _predict(ledger, "H=8,keep=0.25", "--tolerance", "5") == 0
    spec = str(DATA / "specs" / "smoke.toml")
    assert main(["simulate", spec, "--cell", "H=8,keep=0.25", "--out", str(new)]) == 0
    out = tmp_path / "scores.json"
    assert main(["score", "--ledger", str(ledger), "--data", str(new), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["scores"]
    observed = pd.read_csv(new)["loss"].mean()
    assert row["status"] == "scored" and row["observed"] == pytest.approx(observed)
    assert row["error_pct"] == pytest.approx(100 * (row["prediction"] - observed) / observed)
    before = ledger.read_bytes()
    # the same prediction again is refused, and the ledger is untouched
    assert _predict(ledger, "H=8,keep=0.25") == 2
    assert ledger.read_bytes() == before
    # a second cell is appended; the first record's bytes do not change
    assert _predict(ledger, "H=2,keep=0.5") == 0
    assert ledger.read_bytes().startswith(before)
    assert [r["id"] for r in read_ledger(ledger)] == [1, 2]


def test_tampering_is_detected(tmp_path, capsys):
    """A changed record fails its sha256 and score exits 2; a removed first record is caught too."""
    ledger = tmp_path / "p.jsonl"
    for at in ("H=8,keep=0.25", "H=2,keep=0.5"):
        assert _predict(ledger, at, resamples="30") == 0
    lines = ledger.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["prediction"] += 0.01
    ledger.write_text("\n".join([json.dumps(rec, sort_keys=True), lines[1]]) + "\n")
    with pytest.raises(LedgerError, match="record 1 .* changed after it was written"):
        read_ledger(ledger)
    assert main(["score", "--ledger", str(ledger), "--data", str(DATA / "smoke.csv")]) == 2
    assert "sha256 no longer matches" in capsys.readouterr().err
    ledger.write_text(lines[1] + "\n")  # the first record removed
    with pytest.raises(LedgerError, match="removed or reordered"):
        read_ledger(ledger)


def test_a_prediction_from_a_saved_fit_is_the_fits_own(tmp_path, capsys):
    """Issue 44, item 2: ``predict --fit FILE`` takes the form and its fit from a saved fit
    (``fit --json``) and the data it was made from (checked): its record is the one
    ``--form`` with the same data writes, and ``fr.predict(saved_fit=...)`` agrees."""
    import fitrules as fr

    fit_json = tmp_path / "fit.json"
    smoke = str(DATA / "smoke.csv")
    assert main(["fit", "--data", smoke, "--form", "composition", "--json", str(fit_json)]) == 0
    at = "H=8,keep=0.25"
    saved, direct = tmp_path / "saved.jsonl", tmp_path / "direct.jsonl"
    assert main(["predict", "--fit", str(fit_json), "--at", at, "--ledger", str(saved)]) == 0
    assert _predict(direct, at, resamples="200") == 0
    a, b = read_ledger(saved)[0], read_ledger(direct)[0]
    for key in ("form", "prediction", "interval", "constants"):
        assert a[key] == b[key], key
    api = fr.predict(None, None, at, ledger=tmp_path / "api.jsonl", saved_fit=fit_json)
    assert api.record["interval"] == a["interval"]


def test_a_saved_fit_beside_a_form_or_a_fitting_option_is_refused_in_one_line(tmp_path, capsys):
    """With ``--fit`` the form and the fit's options are the saved fit's: a ``--form`` or a
    fitting option beside it would be ignored, so it is refused; neither is refused too; a
    saved fit of other data is refused, and nothing is written."""
    fit_json = tmp_path / "fit.json"
    smoke = str(DATA / "smoke.csv")
    assert main(["fit", "--data", smoke, "--form", "composition", "--json", str(fit_json)]) == 0
    ledger = tmp_path / "l.jsonl"
    base = ["predict", "--at", "H=8,keep=0.25", "--ledger", str(ledger)]
    refused([*base, "--fit", str(fit_json), "--form", "composition"], capsys, tmp_path,
            "give --form or --fit, not both")  # fmt: skip
    refused([*base, "--fit", str(fit_json), "--objective", "log_huber"], capsys, tmp_path,
            "--objective would be ignored")  # fmt: skip
    refused(base, capsys, tmp_path, "give the form predicted with --form, or a saved fit")
    other = tmp_path / "other.csv"
    pd.read_csv(smoke).assign(loss=lambda d: d["loss"] * 1.01).to_csv(other, index=False)
    refused([*base, "--fit", str(fit_json), "--data", str(other)], capsys, tmp_path,
            "not the data the saved fit was fitted on|not the data")  # fmt: skip
    assert not ledger.exists()
