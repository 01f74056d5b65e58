"""fitrules predict --fit on saved fits that were edited, cut or written by something else:
exit 2 with one line naming the file and the key, no traceback, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import fuzzing
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from conftest import ROOT
from helpers import refused


def _saved() -> dict:
    """A valid saved fit (the composition form on the main grid at lr 3e-4), as a record."""
    return json.loads(fuzzing.saved_fit_bytes())


def _tripled_a(doc):
    exact = doc["call"]["constants_exact"]
    exact["a"] = (3 * float.fromhex(exact["a"])).hex()


def _nan_a(doc):
    doc["call"]["constants_exact"]["a"] = "nan"


def _no_grid(doc):
    del doc["call"]["grid"]


def _constants_listed(doc):
    doc["constants"] = list(doc["constants"].values())


def _long_data_path(doc):
    doc["data"]["path"] = doc["call"]["grid"]["path"] = "x" * 5000


def _unknown_weights(doc):
    doc["call"]["weights"] = "by-eye"


def _seed_text(doc):
    doc["call"]["seed"] = "0"


DEEP = '{"form": ' + "[" * 100_000 + "]" * 100_000 + ', "constants": {}, "data": {}, "call": {}}'

CASES = [  # a name, an edit of the saved record or a text, and what the line must say
    ("an edited exact constant", _tripled_a,
     r"fit\.json: the refit's a = \S+ is not the saved \S+ \(call\.constants_exact"),
    ("a nan exact constant", _nan_a, r"call\.constants_exact\.a is 'nan'"),
    ("no call.grid", _no_grid, r"fit\.json: call\.grid is missing"),
    ("constants a list", _constants_listed, r"fit\.json: constants is a list of 3 item"),
    ("100,000 nested brackets", DEEP, r"fit\.json: not JSON a fit can be \(nested too deeply\)"),
    ("a 5,000-character data path", _long_data_path,
     r"the data it was fitted on is not at 'x{27}\.\.\.x{27}'"),
    ("an unknown weighting", _unknown_weights,
     r"call\.weights is 'by-eye'; it must be one of 'cells', 'runs', 'inverse-variance'"),
    ("a seed as text", _seed_text, r"call\.seed is '0'; it must be a whole number"),
]  # fmt: skip


def _predict(fit) -> list[str]:
    """``fitrules predict`` with the saved fit ``fit``, its ledger beside it."""
    return ["predict", "--fit", str(fit), "--at", "H=8,keep=0.25", "--ledger",
            str(fit.parent / "l.jsonl")]  # fmt: skip


@pytest.mark.parametrize("case, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_saved_fit_is_one_line_and_exit_2(case, match, tmp_path, capsys):
    """Issue 61: a malformed saved fit gave a traceback and exit 1 (KeyError, TypeError,
    RecursionError) or was used; now exit 2, one line naming the file and the key, and no
    ledger written."""
    if isinstance(case, str):
        text = case
    else:
        doc = _saved()
        case(doc)
        text = json.dumps(doc)
    (tmp_path / "fit.json").write_text(text)
    refused(_predict(tmp_path / "fit.json"), capsys, tmp_path, match)
    assert not (tmp_path / "l.jsonl").exists()


def test_a_5000_character_fit_name_is_one_line(tmp_path, capsys):
    """A --fit path too long for the system is refused in one line that stays short."""
    line = refused(_predict(tmp_path / ("x" * 5000 + ".json")), capsys, tmp_path,
                   r"cannot be read \(File name too long\)")  # fmt: skip
    assert len(line) < 300


def test_the_installed_command_prints_no_traceback(tmp_path):
    """Through ``python -m fitrules`` (not the in-process main): 100,000 nested brackets in the
    saved fit are exit 2 and one line on stderr, where they were a RecursionError's traceback
    and exit 1."""
    (tmp_path / "fit.json").write_text(DEEP)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "fitrules", *_predict(tmp_path / "fit.json")]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "nested too deeply" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.json"]


def test_predict_with_a_mutated_saved_fit_exits_0_or_2_with_one_line():
    """The property (tests/fuzzing.py, saved_fit_cases): ``predict --fit`` of a valid saved
    fit with keys dropped, types swapped, numbers made non-finite, values nested deeper, texts
    made long or exact constants edited exits 0, or 2 with one line and nothing written."""
    kinds: dict[str, int] = {}

    @settings(
        max_examples=25,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=fuzzing.saved_fit_cases())
    def run(case):
        outcome = fuzzing.check(case)
        assert outcome.kind in ("ok", "refused"), f"{outcome.kind}:\n{outcome.detail}"
        kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1

    run()
    assert kinds.get("refused", 0) > 0, kinds  # the strategy reaches the refusals
