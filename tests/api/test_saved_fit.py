"""fr.load_fit on saved fits that were edited, cut or written by something else: each is
refused with a SavedFitError in one line naming the file, the key, the value and what is
allowed, or loads; the exact constants are checked, never trusted."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

import fuzzing
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import fitrules as fr
from fitrules.base import errors
from fitrules.base.errors import FitrulesError


def _saved() -> dict:
    """A valid saved fit (the composition form on the main grid at lr 3e-4), as a record."""
    return json.loads(fuzzing.saved_fit_bytes())


def _refused(text: str, tmp_path, match: str) -> str:
    """Assert loading ``text`` from a file raises a SavedFitError whose one line names the
    file and matches ``match``; return the line."""
    path = tmp_path / "fit.json"
    path.write_text(text)
    with pytest.raises(FitrulesError) as info:
        fr.load_fit(path)
    line = str(info.value)
    assert isinstance(info.value, errors.SavedFitError), (type(info.value), line)
    assert "\n" not in line and line.startswith(f"{path}: "), line
    assert re.search(match, line), (match, line)
    return line


def _edited(edit: Callable[[dict], object]) -> str:
    """The saved fit's JSON text after ``edit`` changed its record in place."""
    doc = _saved()
    edit(doc)
    return json.dumps(doc)


def _hex(doc: dict, name: str) -> float:
    return float.fromhex(doc["call"]["constants_exact"][name])


def test_an_edited_exact_constant_is_refused_naming_it_and_both_values(tmp_path):
    """Issue 61: an exact constant (hex) tripled by hand loaded silently and every prediction
    used it; now it is checked against the refit as the decimals are, and the line names the
    constant, the refit's value and the saved one."""
    doc = _saved()
    a = _hex(doc, "a")
    doc["call"]["constants_exact"]["a"] = (3 * a).hex()
    doc.pop("standalone")  # refitted from its data (a fit saved without its cells)
    line = _refused(json.dumps(doc), tmp_path, r"the refit's a = \S+ is not the saved \S+ "
                                               r"\(call\.constants_exact")  # fmt: skip
    now, saved = (float(x) for x in re.findall(r"= (\S+) is not the saved (\S+) ", line)[0])
    assert saved == 3 * a and now == pytest.approx(a, rel=1e-6)


def test_an_edited_exact_constant_is_refused_without_data_too(tmp_path):
    """A fit made from its standalone ingredients (no refit) still refuses an exact constant
    that is not its decimal, naming the constant and both values."""
    doc = _saved()
    a = _hex(doc, "a")
    doc["call"]["constants_exact"]["a"] = (3 * a).hex()
    line = _refused(json.dumps(doc), tmp_path, r"the exact \(call\.constants_exact\) a = \S+ "
                                               r"is not the saved \S+ \(constants")  # fmt: skip
    now, saved = (float(x) for x in re.findall(r"= (\S+) is not the saved (\S+) ", line)[0])
    assert now == 3 * a and saved == pytest.approx(a, rel=1e-6)


def test_an_exact_constant_changed_below_the_refits_tolerance_is_refused(tmp_path):
    """An exact value moved by 1e-7 (within the refit's tolerance) no longer rounds to its
    decimal: one of the two was changed, and the line says which constant and both values."""
    doc = _saved()
    doc["call"]["constants_exact"]["a"] = (_hex(doc, "a") * (1 + 1e-7)).hex()
    _refused(json.dumps(doc), tmp_path,
             r"the saved a = \S+ \(constants\) is not its exact value 0x\S+ = \S+ "
             r"\(call\.constants_exact\) rounded")  # fmt: skip


def test_a_nan_exact_constant_is_refused(tmp_path):
    """Issue 61: 'nan' as an exact constant loaded and made every prediction NaN."""
    doc = _saved()
    doc["call"]["constants_exact"]["a"] = "nan"
    _refused(json.dumps(doc), tmp_path, r"call\.constants_exact\.a is 'nan'; it must be the "
                                        r"hexadecimal text of a finite float")  # fmt: skip


def _drop(*path):
    def edit(doc):
        for k in path[:-1]:
            doc = doc[k]
        del doc[path[-1]]

    return edit


def _set(value, *path):
    def edit(doc):
        for k in path[:-1]:
            doc = doc[k]
        doc[path[-1]] = value

    return edit


DEEP = '{"form": ' + "[" * 100_000 + "]" * 100_000 + ', "constants": {}, "data": {}, "call": {}}'
LONG = "x" * 5000

def _long_data_path(doc):
    doc["data"]["path"] = doc["call"]["grid"]["path"] = LONG
    doc.pop("standalone")  # read from its data, as a fit saved without its cells is


def _unparsed_where(doc):
    doc["call"]["grid"]["where"] = ["lr =="]
    doc.pop("standalone")


MALFORMED = [  # a name, an edit of the saved record or a text, and what the line must say
    ("no call.grid", _drop("call", "grid"),
     r"call\.grid is missing; it must be a table of how the grid was read"),
    ("constants a list", lambda d: d.__setitem__("constants", list(d["constants"])),
     r"constants is a list of 3 item\(s\); it must be a table of constant names to finite"),
    ("100,000 nested brackets", DEEP, r"not JSON a fit can be \(nested too deeply\)"),
    ("a 5,000-character data path", _long_data_path,
     r"the data it was fitted on is not at 'x{27}\.\.\.x{27}'; give it with data="),
    ("a 5,000-character constant name", _set(1.0, "constants", LONG),
     r"constants names 'x{27}\.\.\.x{27}', which is not a constant of form 'composition'"),
    ("data null", _set(None, "data"),
     r"data is null; it must be a table of the data's path and sha256"),
    ("form a name", _set("composition", "form"),
     r"form is 'composition'; it must be a table of the form's name, expression"),
    ("no form.expression", _drop("form", "expression"),
     r"form\.expression is missing; it must be text"),
    ("no variables", _set([], "form", "variables"),
     r"form\.variables is a list of 0 item\(s\); it must be a list of one or more"),
    ("an unknown objective", _set("least_squares", "call", "objective"),
     r"call\.objective is 'least_squares'; it must be one of 'rel_ls', 'log_huber'"),
    ("delta NaN", _set(math.nan, "call", "delta"), r"call\.delta is nan; it must be a finite"),
    ("a constant infinite", _set(math.inf, "constants", "a"),
     r"constants\.a is inf; it must be a finite number"),
    ("a constant null", _set(None, "constants", "a"),
     r"constants\.a is null; it must be a finite number"),
    ("a constant of 401 digits", _set(10**400, "constants", "a"),
     r"constants\.a is 1000\S*\.\.\.0000\S*; it must be a finite number"),
    ("resamples text", _set("many", "call", "resamples"),
     r"call\.resamples is 'many'; it must be a whole number"),
    ("where a number", _set(5, "call", "grid", "where"),
     r"call\.grid\.where is 5; it must be a list of text"),
    ("a fixed value text", _set({"b": "half"}, "form", "fixed"),
     r"form\.fixed\.b is 'half'; it must be a finite number"),
    ("a constant missing", _drop("constants", "a"),
     r"constants lacks 'a', a constant of form 'composition' \(L0, a, b\)"),
    ("an expression that does not parse", _set("L0 + a*", "form", "expression"),
     r"form 'composition': cannot parse 'L0 \+ a\*'"),
    ("a where that does not parse", _unparsed_where,
     r"where 'lr ==': cannot parse"),
    ("a level out of range", _set(1.5, "call", "level"), r": as saved, level 1\.5: must be"),
    ("a covariance value not a float's text", _set(["x"] * 9, "standalone", "uncertainty",
                                                   "covariance", "values"),
     r"standalone\.uncertainty\.covariance\.values\[0\] is 'x'; it must be the hexadecimal"),
    ("held-out draws of another shape", _set([2, 3], "standalone", "heldout", "draws", "shape"),
     r"standalone does not fit together \(ValueError: .*\); load it with data="),
    ("no standalone.cells", _drop("standalone", "cells"),
     r"standalone\.cells is missing; it must be a table of the fitted cells"),
    ("an edge not a table", _set([1, None], "standalone", "heldout", "edges", "H"),
     r"standalone\.heldout\.edges\.H\[0\] is 1; it must be an edge or null"),
    ("not a table", "[1, 2]",
     r"not a fit saved by FittedForm\.to_json \(no form, constants, data, call\)"),
    ("an integer of 5,000 digits", '{"form": ' + "9" * 5000 + "}", r"not JSON a fit can be"),
]  # fmt: skip


@pytest.mark.parametrize("case, match", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_a_malformed_saved_fit_is_refused_in_one_line(case, match, tmp_path):
    """Issue 61: each malformed saved fit gave a raw KeyError, TypeError, RecursionError or
    OSError, or loaded; now a SavedFitError in one line naming the file, the key, the value
    and what is allowed."""
    _refused(case if isinstance(case, str) else _edited(case), tmp_path, match)


def test_a_saved_fit_with_a_5000_character_file_name_is_refused_in_one_line():
    """Issue 61: a path too long for the system raised OSError through fr.load_fit."""
    with pytest.raises(errors.SavedFitError) as info:
        fr.load_fit("x" * 5000 + ".json")
    line = str(info.value)
    assert "\n" not in line and len(line) < 200
    assert "cannot be read (File name too long)" in line


def test_a_fit_with_a_bound_open_on_one_side_loads(tmp_path):
    """Nothing lost: a bound open above is written as null (JSON has no infinity), and the
    loader reads it back as no bound on that side, where it used to refuse the file."""
    g = fr.load_example("main", where="lr == 3e-4")
    f = fr.fit(g, "composition", bounds={"b": (0.0, math.inf)})
    f.to_json(tmp_path / "fit.json")
    assert json.loads((tmp_path / "fit.json").read_text())["form"]["bounds"] == {"b": [0.0, None]}
    h = fr.load_fit(tmp_path / "fit.json")
    assert h.constants == f.constants and h.form.bounds == {"b": (0.0, math.inf)}


def test_unread_keys_are_not_checked_and_the_saved_fit_still_loads(tmp_path):
    """Keys the loader does not read (the per-cell table, the intervals) may be anything: the
    refit makes them again, so a fit with them spoiled still loads with its constants."""
    doc = _saved()
    doc["cells"], doc["train_error"] = "spoiled", [None]
    (tmp_path / "fit.json").write_text(json.dumps(doc))
    assert fr.load_fit(tmp_path / "fit.json").constants == pytest.approx(doc["constants"])


def test_load_fit_loads_or_raises_the_documented_exception(tmp_path):
    """The property (tests/fuzzing.py, saved_fit_texts): a valid saved fit with keys dropped,
    types swapped, numbers made non-finite, values nested deeper, texts made long or exact
    constants edited either loads or raises SavedFitError in one line naming the file; never
    another exception."""
    path = tmp_path / "fit.json"
    seen = {"loaded": 0, "refused": 0}

    @settings(
        max_examples=30,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(text=fuzzing.saved_fit_texts())
    def run(text):
        path.write_bytes(text)
        try:
            loaded = fr.load_fit(path)
        except errors.SavedFitError as err:
            line = str(err)
            assert "\n" not in line and line.startswith(f"{path}: "), line
            seen["refused"] += 1
        else:
            assert type(loaded).__name__ == "FittedForm"
            seen["loaded"] += 1

    run()
    assert seen["refused"] > 0, seen  # a strategy that made only valid fits would pass vacuously


@pytest.mark.parametrize("intervals", [False, True, "profile"])
def test_a_saved_fit_travels_without_its_data(intervals, tmp_path):
    """Issue 66: a fit of a table in memory could be loaded only with data= and a refit; now
    its saved file alone gives the same constants, table, predictions (interval and
    extrapolation words) and text, exactly, with no data and no refit."""
    import pandas as pd

    g = fr.load_example("main", where="lr == 3e-4")
    frame = pd.read_csv(g.source)
    frame = frame[frame["lr"] == 3e-4]
    f = fr.fit(frame, "composition", intervals=intervals, resamples=30)
    path = tmp_path / "fit.json"
    f.to_json(path)
    loaded = fr.load_fit(path)
    assert loaded.constants == f.constants
    pd.testing.assert_frame_equal(loaded.table, f.table)
    for at in ({"H": 8, "keep": 0.25}, {"H": 256, "keep": 0.5}):
        assert dict(loaded.predict(at, runs=2)) == dict(f.predict(at, runs=2))
    far = str(loaded.predict(H=256, keep=0.5))
    assert "95% interval" in far and "H 4x beyond" in far, far
    assert loaded.text() == f.text()
    assert loaded.to_dict() == f.to_dict()
