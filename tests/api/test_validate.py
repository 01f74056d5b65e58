"""fr.validate says what the command prints."""

from __future__ import annotations

import json

import fitrules as fr
from helpers import run


def test_validate_says_what_the_command_prints(capsys):
    """fr.validate()'s text is the validate command's output; its facts, JSON and HTML agree."""
    v = fr.validate()
    code, out, _ = run(["validate"], capsys)
    assert code == 0 and str(v) == out.rstrip("\n")
    assert v.facts["cells"] == 20 and v.facts["seed_effect"]["shown"]
    assert json.loads(v.to_json())["cells"] == 20 and "<pre>" in v._repr_html_()


def test_validate_with_tuning_puts_the_tuning_first(capsys):
    """fr.validate with tune='lr' prints what validate --tune lr prints, and holds the tuning."""
    v = fr.validate(fr.load_example("tuned"), tune="lr")
    code, out, _ = run(["validate", "--data", "tuned", "--tune", "lr"], capsys)
    assert code == 0 and str(v) == out.rstrip("\n") and v.tuning is not None
