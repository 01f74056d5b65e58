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


def test_large_integer_levels_print_as_numbers_apart():
    """A parameter count's levels print as the figures' axes do (1.653e+07, not 16527360),
    with as many digits as tell them apart; small integers stay as written (issue 66)."""
    import pandas as pd

    rows = [{"N": n, "D": d, "steps": 12345, "loss": 2 + n**-0.1 + d**-0.1}
            for n in (16527360, 27279360, 50000000) for d in (1e9, 2e9)]  # fmt: skip
    text = str(fr.validate(pd.DataFrame(rows)))
    assert "N (3): 1.653e+07, 2.728e+07, 5e+07" in text, text
    assert "steps=12345" in text
    rows += [dict(rows[0], N=16527361)]
    assert "N (4): 16527360, 16527361, 27279360, 50000000" in str(fr.validate(pd.DataFrame(rows)))
