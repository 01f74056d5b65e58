"""fr.predict, fr.score and fr.verify_ledger do what the commands do."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import fitrules as fr
from fitrules.base.errors import LedgerError
from helpers import run


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_predict_then_score_and_verify_as_the_commands_do(tmp_path, capsys, monkeypatch):
    """fr.predict, fr.simulate, fr.score and fr.verify_ledger give what their commands give."""
    monkeypatch.chdir(tmp_path)
    e = fr.predict(None, "composition", {"H": 8, "keep": 0.25}, ledger="a.jsonl", runs=3)
    code, out, _ = run(["predict", "--form", "composition", "--at", "H=8,keep=0.25",
                        "--ledger", "b.jsonl", "--runs", "3"], capsys)  # fmt: skip
    assert code == 0
    first = lambda text: text.splitlines()[0].split(": ", 1)[1]  # noqa: E731 (the ledger's name aside)
    assert first(str(e)) == first(out)
    cli = json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])
    same = {k for k in e.record if k not in ("time", "sha256", "command")}
    assert {k: e.record[k] for k in same} == {k: cli[k] for k in same}
    assert e.record["command"] == "fr.predict" and e.head.startswith("a.jsonl: head 1:")

    runs = fr.simulate("main", "new.csv", cell="H=8,keep=0.25", seeds="40,41", quiet=True,
                       progress=False)  # fmt: skip
    assert isinstance(runs, pd.DataFrame) and len(runs) == 2 and runs.attrs["spec"]
    s = fr.score("new.csv", "a.jsonl")
    code, out, _ = run(["score", "--ledger", "a.jsonl", "--data", "new.csv"], capsys)
    assert code == 0 and str(s) == out.rstrip("\n") and len(s.scores) == 1

    head = e.record["sha256"]
    c = fr.verify_ledger("a.jsonl", head=f"1:{head}")
    code, out, _ = run(["ledger", "verify", "--ledger", "a.jsonl", "--head", f"1:{head}"], capsys)
    assert code == 0 and str(c) == out.rstrip("\n") and c.records == 1 and c.head_index == 1


def test_a_missing_or_empty_ledger_is_a_ledger_error(tmp_path):
    """fr.verify_ledger of a missing or an empty ledger raises LedgerError."""
    with pytest.raises(LedgerError):
        fr.verify_ledger(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(LedgerError, match="holds no records"):
        fr.verify_ledger(tmp_path / "empty.jsonl")
