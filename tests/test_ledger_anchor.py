"""Issue 12, item 4: what the ledger's hash chain proves, and the head that anchors it.

Without a head kept elsewhere, a removed last record or a chain whose hashes were all
recomputed cannot be detected (and is accepted: that is the documented limit). With the head
that ``predict`` prints, ``score --head`` and ``ledger verify --head`` refuse both. Appends
are locked, so concurrent predictions get consecutive ids.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time

import pytest

from conftest import DATA, ROOT
from helpers import refused, run

SMOKE = DATA / "smoke.csv"


def _predict(ledger, at, capsys):
    code, out, err = run(
        [
            "predict",
            "--data",
            SMOKE,
            "--form",
            "composition",
            "--at",
            at,
            "--ledger",
            ledger,
            "--resamples",
            "20",
        ],
        capsys,
    )
    assert code == 0, err
    m = re.search(r"head (\d+):([0-9a-f]{64})", out)
    assert m, out
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


@pytest.fixture
def ledger(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    heads = [_predict(path, at, capsys) for at in ("H=8,keep=0.25", "H=2,keep=0.5")]
    return path, heads


def test_predict_prints_the_head_it_made(ledger, capsys):
    path, heads = ledger
    last = json.loads(path.read_text().splitlines()[-1])
    assert heads[-1] == f"2:{last['sha256']}"


def test_removed_last_record_is_caught_only_with_the_head(ledger, tmp_path, capsys):
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
    path, heads = ledger
    code, out, err = run(["ledger", "verify", "--ledger", path, "--head", heads[0]], capsys)
    assert code == 0, err
    assert "the recorded head is record 1; records 2 to 2 came after it" in out


@pytest.mark.parametrize("head", ["abc", "1:xyz", "", "12345"])
def test_malformed_heads(ledger, tmp_path, capsys, head):
    path, _ = ledger
    refused(["ledger", "verify", "--ledger", path, "--head", head], capsys, tmp_path, "--head")


def test_concurrent_appends_take_distinct_ids(tmp_path, monkeypatch):
    from fitrules.jobs import ledger as lg

    path = tmp_path / "p.jsonl"
    real = lg.read_ledger

    def slow_read(*a, **k):  # widen the window between reading the ledger and writing it
        out = real(*a, **k)
        time.sleep(0.05)
        return out

    monkeypatch.setattr(lg, "read_ledger", slow_read)
    base = {
        "form": "f",
        "prediction": 2.0,
        "interval": [1.9, 2.1],
        "tolerance_pct": None,
        "data": {"sha256": "0" * 64, "where": []},
    }
    errors = []

    def append(i):
        try:
            lg.append_prediction(path, {**base, "point": {"H": float(i)}})
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    records = real(path)
    assert [r["id"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert sorted(r["point"]["H"] for r in records) == [0, 1, 2, 3, 4, 5]


def test_docs_say_what_is_detected_with_and_without_a_head():
    """The section moved from the README to the design and ledger tutorial (issue 30)."""
    text = (ROOT / "docs" / "tutorials" / "design-and-ledger.md").read_text()
    section = text[text.index("Predictions written before the run") :]
    section = section.split("\n## ", 1)[0]
    assert "Without a recorded head" in section and "With the head" in section
    assert "--head" in section and "ledger verify" in section
    assert "a changed, removed or reordered record is refused" not in section
