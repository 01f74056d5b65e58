"""fitrules ledger verify: what the hash chain proves and the head that anchors it, malformed
ledger lines, intervals recorded."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re

import pytest

from conftest import DATA
from fitrules.cli import main
from helpers import refused, run, write_file

SMOKE = DATA / "smoke.csv"


def _predict(ledger, at):
    """Record composition's prediction at ``at`` over the smoke grid in ``ledger``; return
    the head printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["predict", "--data", str(SMOKE), "--form", "composition", "--at", at,
                     "--ledger", str(ledger), "--resamples", "20"])  # fmt: skip
    assert code == 0, err.getvalue()
    m = re.search(r"head (\d+):([0-9a-f]{64})", out.getvalue())
    assert m, out.getvalue()
    return f"{m.group(1)}:{m.group(2)}"


def _rehash(lines: list[str], edit) -> list[str]:
    """The ledger with record 1 edited and every hash and link recomputed: a valid chain."""
    out, prev = [], None
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if i == 0:
            edit(rec)
        rec["prev_sha256"] = prev
        body = {k: v for k, v in rec.items() if k != "sha256"}
        rec["sha256"] = hashlib.sha256(
            json.dumps(body, sort_keys=True, allow_nan=False).encode()
        ).hexdigest()
        prev = rec["sha256"]
        out.append(json.dumps(rec, sort_keys=True))
    return out


@pytest.fixture(scope="module")
def made_ledger(tmp_path_factory):
    """A ledger of two predictions and the head printed after each, made once for the module
    (two predictions for each test took 12 s of the suite)."""
    path = tmp_path_factory.mktemp("ledger") / "p.jsonl"
    heads = [_predict(path, at) for at in ("H=8,keep=0.25", "H=2,keep=0.5")]
    return path, heads


@pytest.fixture
def ledger(made_ledger, tmp_path):
    """A copy of the module's ledger in the test's own folder (tests cut and rewrite it)."""
    made, heads = made_ledger
    path = tmp_path / "p.jsonl"
    path.write_bytes(made.read_bytes())
    return path, heads


def _ledger_with(tmp_path, record: dict | str):
    """A one-line ledger holding ``record`` with a valid sha256 over its content."""
    import hashlib

    if isinstance(record, str):
        return write_file(tmp_path / "l.jsonl", record + "\n")
    body = json.dumps(record, sort_keys=True)
    record = {**record, "sha256": hashlib.sha256(body.encode()).hexdigest()}
    return write_file(tmp_path / "l.jsonl", json.dumps(record, sort_keys=True) + "\n")


GOOD_RECORD = {
    "id": 1,
    "form": "composition",
    "point": {"H": 8.0, "keep": 0.25},
    "prediction": 2.2,
    "interval": [2.1, 2.3],
    "tolerance_pct": 1.0,
    "data": {"sha256": "0" * 64, "where": []},
    "prev_sha256": None,
}


def test_predict_prints_the_head_it_made(ledger, capsys):
    """predict prints the ledger's new head: the record number and the last record's sha256."""
    path, heads = ledger
    last = json.loads(path.read_text().splitlines()[-1])
    assert heads[-1] == f"2:{last['sha256']}"


def test_removed_last_record_is_caught_only_with_the_head(ledger, tmp_path, capsys):
    """A ledger cut short verifies as a valid chain, but is refused against the earlier head."""
    path, heads = ledger
    path.write_text(path.read_text().splitlines()[0] + "\n")
    # without a head the shortened ledger is a valid chain: accepted, and said to be so
    code, out, _ = run(["ledger", "verify", "--ledger", path], capsys)
    assert code == 0 and "cannot be detected" in out
    for argv in (
        ["score", "--ledger", path, "--data", SMOKE, "--head", heads[-1]],
        ["ledger", "verify", "--ledger", path, "--head", heads[-1]],
        ["ledger", "verify", "--ledger", path, "--head", heads[-1].split(":")[1][:16]],
    ):
        refused(argv, capsys, tmp_path, "records were removed|not in the chain")


def test_a_rewritten_chain_is_caught_with_the_head(ledger, tmp_path, capsys):
    """A rewritten and rehashed ledger still scores, but either recorded head refuses it."""
    path, heads = ledger

    def nudge(rec):
        rec["prediction"] += 0.01

    path.write_text("\n".join(_rehash(path.read_text().splitlines(), nudge)) + "\n")
    assert run(["score", "--ledger", path, "--data", SMOKE], capsys)[0] == 0  # the limit
    for head in heads:  # the head at record 1 and the head at record 2 both catch it
        refused(
            ["score", "--ledger", path, "--data", SMOKE, "--head", head],
            capsys,
            tmp_path,
            "the chain was rewritten|not in the chain",
        )


def test_an_old_head_still_verifies_after_later_appends(ledger, capsys):
    """An older head verifies after later appends and says which records came after it."""
    path, heads = ledger
    code, out, err = run(["ledger", "verify", "--ledger", path, "--head", heads[0]], capsys)
    assert code == 0, err
    assert "the recorded head is record 1; records 2 to 2 came after it" in out


@pytest.mark.parametrize("head", ["abc", "1:xyz", "", "12345"])
def test_malformed_heads(ledger, tmp_path, capsys, head):
    """A --head that is not a record number and hash is refused in one line naming --head."""
    path, _ = ledger
    refused(["ledger", "verify", "--ledger", path, "--head", head], capsys, tmp_path, "--head")


@pytest.mark.parametrize(
    "record, match",
    [
        ('{"id": NaN, "sha256": "x"}', "not valid here"),
        ('{"id": 1e999, "sha256": "x"}', "not valid here"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply|not a prediction record"),
        ({k: v for k, v in GOOD_RECORD.items() if k != "prediction"}, "'prediction' is missing"),
        ({**GOOD_RECORD, "point": "H=8"}, "'point' is missing or not a table"),
        ({**GOOD_RECORD, "interval": [1]}, "'interval' is not two finite numbers"),
        ({**GOOD_RECORD, "id": "1"}, "'id' is not an integer"),
        ({**GOOD_RECORD, "data": {"where": [1]}}, "'data.where' is not a list"),
    ],
)
def test_malformed_ledger_lines(grid_csv, tmp_path, capsys, record, match):
    """A ledger line with NaN, deep nesting, or a field missing or mistyped is refused by score."""
    ledger = _ledger_with(tmp_path, record)
    refused(["score", "--ledger", ledger, "--data", grid_csv], capsys, tmp_path, match)


def test_the_good_record_of_these_cases_is_accepted(grid_csv, tmp_path, capsys):
    """The well-formed record the malformed cases start from is scored."""
    ledger = _ledger_with(tmp_path, GOOD_RECORD)
    code, out, err = run(["score", "--ledger", ledger, "--data", grid_csv], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    ("runs", "kind", "key"),
    [
        (None, "held-out misfit: the configuration's mean over new seed ids", "mean"),
        (3, "held-out misfit: the mean of 3 new runs at fresh seed ids", "mean_of_3_runs"),
    ],
)
def test_the_ledger_records_the_interval_and_its_kind(synthetic_csv, tmp_path, runs, kind, key):
    """The ledger records the interval (mean or --runs), its kind, and the constants-only one."""
    ledger = tmp_path / "l.jsonl"
    argv = ["predict", "--data", str(synthetic_csv), "--form", "composition",
            "--at", "H=8,keep=0.25", "--ledger", str(ledger), "--resamples", "20"]  # fmt: skip
    if runs:
        argv += ["--runs", str(runs)]
    assert main(argv) == 0
    (rec,) = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert rec["interval_kind"] == kind
    assert rec["interval"] == rec["intervals"][key]
    assert set(rec["intervals"]) - {"mean_at_grid_seed_ids"} == {"mean", key, "constants_only"}
    lo, hi = rec["interval"]
    clo, chi = rec["intervals"]["constants_only"]
    assert lo < clo < rec["prediction"] < chi < hi


def test_head_zero_says_record_numbers_start_at_one(grid_csv, tmp_path, capsys):
    """--head 0:... is refused saying record numbers start at 1, not that records were removed."""
    ledger = tmp_path / "l.jsonl"
    argv = ["predict", "--data", grid_csv, "--form", "composition", "--at", "H=8,keep=0.25"]
    code, _, err = run([*argv, "--ledger", ledger, "--resamples", "20"], capsys)
    assert code == 0, err
    line = refused(["ledger", "verify", "--ledger", ledger, "--head", "0:" + "a" * 12], capsys,
                   tmp_path, "record numbers start at 1")  # fmt: skip
    assert "removed" not in line


@pytest.mark.parametrize("order", [["ledger", "-q", "verify"], ["ledger", "verify", "-q"]])
def test_quiet_ledger_verify(tmp_path, capsys, order):
    """ledger verify -q prints nothing and exits 0 on an intact chain, wherever -q goes."""
    ledger = tmp_path / "l.jsonl"
    code, _, err = run(["predict", "--form", "composition", "--at", "H=8,keep=0.25",
                        "--ledger", ledger, "--resamples", 20], capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = run([*order, "--ledger", ledger], capsys)
    assert (code, out, err) == (0, "", "")
    code, out, _ = run(["ledger", "verify", "--ledger", ledger], capsys)
    assert code == 0 and "chain intact" in out
