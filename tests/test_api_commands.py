"""Issue 30: every command is a function: fr.validate, fr.predict, fr.score,
fr.verify_ledger, fr.simulate, fr.add_form and fr.remove_form say what the command prints."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import fitrules as fr
from fitrules.base.errors import FitrulesError, LedgerError
from tests.helpers import run


def test_validate_says_what_the_command_prints(capsys):
    v = fr.validate()
    code, out, _ = run(["validate"], capsys)
    assert code == 0 and str(v) == out.rstrip("\n")
    assert v.facts["cells"] == 20 and v.facts["seed_effect"]["shown"]
    assert json.loads(v.to_json())["cells"] == 20 and "<pre>" in v._repr_html_()


def test_validate_with_tuning_puts_the_tuning_first(capsys):
    v = fr.validate(fr.load_example("tuned"), tune="lr")
    code, out, _ = run(["validate", "--data", "tuned", "--tune", "lr"], capsys)
    assert code == 0 and str(v) == out.rstrip("\n") and v.tuning is not None


def test_predict_then_score_and_verify_as_the_commands_do(tmp_path, capsys, monkeypatch):
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


def test_add_and_remove_a_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = fr.add_form("mine = L0 + a*omega**c")
    assert f.bound_variables == ("omega",) and "mine" in (tmp_path / "forms.toml").read_text()
    assert "mine" in fr.available_forms()
    with pytest.raises(fr.FormError, match="already exists"):
        fr.add_form("mine = L0 + a*H")
    assert fr.remove_form("mine").name == "forms.toml"
    with pytest.raises(fr.FormError):
        fr.remove_form("mine")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: fr.predict(None, "composition", "H=8,keep=0.25", ledger=5), "ledger 5"),
        (lambda: fr.predict(None, "composition", 5, ledger="l.jsonl"), "at 5"),
        (lambda: fr.predict(None, "composition", "H=8", ledger="l.jsonl", runs=0), "runs 0"),
        (lambda: fr.predict(None, "composition", "H=8", ledger="l.jsonl", tolerance=-1),
         "tolerance -1"),
        (lambda: fr.simulate("main", "x.csv", cell=""), "cell ''"),
        (lambda: fr.simulate("main", None), "needs"),
        (lambda: fr.remove_form(5), "name 5"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(call, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FitrulesError, match=match) as err:
        call()
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())


def test_a_missing_or_empty_ledger_is_a_ledger_error(tmp_path):
    with pytest.raises(LedgerError):
        fr.verify_ledger(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(LedgerError, match="holds no records"):
        fr.verify_ledger(tmp_path / "empty.jsonl")
