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


CHINCHILLA = ROOT.parent / "shared" / "external" / "chinchilla_epoch_svg_extracted.csv"


@pytest.mark.skipif(not CHINCHILLA.exists(), reason="shared/external data not present")
@pytest.mark.slow  # builds and installs the wheel (shared with the README's test), fits 240 cells
def test_a_new_users_saved_fit_travels_without_its_table(installed):
    """Issue 66, the new user's path: fit Epoch's Chinchilla table from the installed command,
    save the fit, delete the table; a new process loads the fit and predicts at (7e10, 1.4e12)
    with its interval and "N 4.3x beyond", and allocate --fit at 5.76e23 writes a report whose
    frontier figure marks N* and D*."""
    import shutil

    from readme import run_ok

    _, bin_, work, env = installed
    here = work / "travel"
    here.mkdir()
    shutil.copy(CHINCHILLA, here / "chinchilla.csv")
    run_ok([bin_ / "fitrules", "fit", "--data", "chinchilla.csv", "--derive", "N = `Model Size`",
            "--derive", "D = `Training FLOP`/(6*N)", "--where", "loss < 3.42",
            "--form", "chinchilla(N, D) = E + A/N**alpha + B/D**beta",
            "--objective", "log_huber", "--json", "fit.json"], here, env)  # fmt: skip
    (here / "chinchilla.csv").unlink()
    script = ("import fitrules as fr\n"
              "print(fr.load_fit('fit.json').predict(N=7e10, D=1.4e12))\n")  # fmt: skip
    said = run_ok([bin_ / "python", "-c", script], here, env).stdout
    assert "1.9734" in said and "95% interval for the configuration's mean" in said, said
    assert "1.5525 to 2.2425" in said and "N 4.33x beyond, D 4.41x beyond" in said, said
    printed = run_ok([bin_ / "fitrules", "predict", "--fit", "fit.json", "--at",
                      "N=7e10,D=1.4e12"], here, env).stdout  # fmt: skip
    assert printed.strip() == said.strip()
    run_ok([bin_ / "fitrules", "allocate", "--fit", "fit.json", "--budgets", "5.76e23",
            "--report", "rep"], here, env)  # fmt: skip
    assert "![the loss-optimal frontier of chinchilla](frontier.png)" in (
        here / "rep" / "report.md").read_text()
    assert (here / "rep" / "frontier.png").stat().st_size > 10_000
    (row,) = json.loads((here / "rep" / "results.json").read_text())["allocation"]
    assert row["N"] == pytest.approx(7.32e10, rel=1e-3) and row["N_low"] < row["N"] < row["N_high"]
    assert not (here / "chinchilla.csv").exists()


def test_predict_from_a_saved_fit_prints_without_a_ledger(tmp_path, capsys):
    """Issue 66: predict --fit needed --ledger; now it prints the prediction (interval and
    extrapolation words, as f.predict gives them) and writes nothing."""
    import fitrules as fr
    from helpers import run

    g = fr.load_example("main", where="lr == 3e-4")
    f = fr.fit(g, "composition")
    f.to_json(tmp_path / "fit.json")
    code, out, _ = run(["predict", "--fit", tmp_path / "fit.json", "--at", "H=256,keep=0.5"],
                       capsys)  # fmt: skip
    assert code == 0
    assert out.strip() == str(f.predict(H=256, keep=0.5))
    assert "95% interval" in out and "H 4x beyond" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.json"]
