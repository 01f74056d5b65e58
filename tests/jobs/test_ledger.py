"""The ledger job (fitrules.jobs.ledger): appends that race, scores against shared seed offsets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fitrules.jobs.ledger import compare_scored
from helpers import at_once, slowed


def _scores(values, seeds, pa, pb):
    rows = []
    for c, (v, s) in enumerate(zip(values, seeds, strict=True)):
        for form, p in (("a", pa[c]), ("b", pb[c])):
            rows.append({"form": form, "point": {"x": float(c)}, "status": "scored",
                         "prediction": p, "values": list(v), "seeds": s})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.timing
def test_concurrent_appends_take_distinct_ids(tmp_path, monkeypatch):
    """Six appends racing on one ledger all land, with ids 1 to 6."""
    from fitrules.jobs import ledger as lg

    path = tmp_path / "p.jsonl"
    real = lg.read_ledger
    slowed(monkeypatch, lg, "read_ledger")  # between reading the ledger and writing it
    base = {
        "form": "f",
        "prediction": 2.0,
        "interval": [1.9, 2.1],
        "tolerance_pct": None,
        "data": {"sha256": "0" * 64, "where": []},
    }

    def append(i):
        lg.append_prediction(path, {**base, "point": {"H": float(i)}})

    errors = at_once(append, 6)
    assert errors == []
    records = real(path)
    assert [r["id"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert sorted(r["point"]["H"] for r in records) == [0, 1, 2, 3, 4, 5]


def test_score_does_not_take_a_shared_seed_offset_for_evidence():
    """Three seed ids shared by 20 new cells, their effects averaging -0.0063: every cell mean
    moves toward the form below the truth. The old t test over runs (as independent) called
    that a verdict; with the seeds as units, three seeds carry little evidence."""
    rng = np.random.default_rng(3)
    truth = 2.2 + 0.05 * rng.standard_normal(20)
    offset = np.array([-0.021, -0.004, 0.006])
    values = [t + offset + 0.002 * rng.standard_normal(3) for t in truth]
    seeds = [["3", "4", "5"]] * 20
    df = _scores(values, seeds, truth - 0.01, truth + 0.01)  # equally far: a null
    row = compare_scored(df).iloc[0]
    d = np.concatenate([(v - (t - 0.01)) ** 2 - (v - (t + 0.01)) ** 2
                        for v, t in zip(values, truth, strict=True)])  # fmt: skip
    assert stats.ttest_1samp(d, 0).pvalue < 0.01  # the old test
    assert row["p"] > 0.2 and "seed ids shared" in row["units"]
    # with fresh seed ids at each cell, the same values are independent runs
    fresh = [[str(3 + 3 * c + i) for i in range(3)] for c in range(20)]
    row = compare_scored(_scores(values, fresh, truth - 0.01, truth + 0.01)).iloc[0]
    assert "runs independent given cells" in row["units"]


def test_a_seed_id_is_a_number_only_as_the_tables_read_one():
    """3, 3.0 and "3" are one seed; a fullwidth "３" or "1_0", which the tables keep as text,
    is not seed 3 or 10 (Python's float() reads both as numbers)."""
    from fitrules.jobs.ledger import _identity

    assert _identity(3) == _identity(3.0) == _identity("3") == "3"
    assert _identity("３") != _identity(3) and _identity("1_0") != _identity(10)
    assert _identity("s1") == "s1" and _identity(2.5) == "2.5"
