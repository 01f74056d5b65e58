"""Bad values generated from each option's declared check, shared by the suite
(``tests/api/test_declared_checks.py``) and the fuzzers (``tests/fuzzing.py``).

A pool of hostile values (Python values for the functions, texts for the command line) is put
through each option as its face would: the command line's ``type``, ``choices`` and ``parse``,
then the declared ``check``. A value that any of them refuses must be refused by the command
too, in one line, before anything is written. So an option is fuzzed the day it is declared
with a check (scikit-learn draws invalid values from each parameter's constraint the same way).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import fitrules as fr
from fitrules.base.errors import FitrulesError
from fitrules.base.options import Option
from fitrules.jobs import options as declared

HOSTILE = (-1, 0, 1.5, 2.0, -0.0, 10**30, -(10**30), float("nan"), float("inf"), float("-inf"),
           True, False, None, "", " ", "x", "3", "１６", "yes", [], [1, 2], {}, (0.5,), b"1",
           object())  # fmt: skip

# what a user can type: numbers out of range, non-finite, empty, unicode digits, lists
HOSTILE_TEXTS = ("-1", "0", "1.5", "2.0", "-0", "1e30", "-1e30", "nan", "inf", "-inf", "", " ",
                 "x", "１６", "yes", "[]", "1,2", "0x10", "1_000", "\u00a0", "9" * 400, "1/0",
                 "0.5,", ",", "None")  # fmt: skip


# each command's Python function
COMMAND_FUNCTIONS = {
    "compare": fr.compare,
    "design": fr.design,
    "search": fr.search,
    "fit": fr.fit,
    "allocate": fr.allocate,
    "validate": fr.validate,
    "ci": fr.ci,
    "predict": fr.predict,
    "score": fr.score,
    "ledger verify": fr.verify_ledger,
    "forms add": fr.add_form,
    "forms remove": fr.remove_form,
    "simulate": fr.simulate,
    "load_grid": fr.load_grid,
}


ALLOCATE_LAW = "chin(N, D) = E + A/N**alpha + B/D**beta"


def allocate_runs():
    """A small grid of a Chinchilla-shaped law in N and D (one run a cell, 0.5% noise), which
    ``allocate`` can split budgets of 6*N*D on."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n, d = np.meshgrid(np.geomspace(5e7, 5e9, 5), np.geomspace(1e9, 1e11, 5))
    loss = 1.69 + 406.4 / n**0.34 + 410.7 / d**0.28
    return pd.DataFrame({"N": n.ravel(), "D": d.ravel(),
                         "loss": loss.ravel() * np.exp(0.005 * rng.standard_normal(n.size))})


def checked_options(commands=None) -> list[tuple[str, Option]]:
    """``(command, option)`` for every option with a declared check that the Python function
    takes."""
    commands = [*declared.COMMANDS, declared.LOAD_GRID] if commands is None else commands
    return [
        (c.cmd, o)
        for c in commands
        if c.cmd in COMMAND_FUNCTIONS
        for o in c.options
        if o.check is not None and o.python
    ]


def refused_by_check(option: Option) -> tuple[list, list[str]]:
    """The hostile values ``option.check`` refuses, and the problems found on the way: a
    check that raised anything but a one-line FitrulesError."""
    bad, problems = [], []
    for value in HOSTILE:
        try:
            option.check(value, option.name)
        except FitrulesError as err:
            if len(str(err).splitlines()) != 1:
                problems.append(f"{option.name}: check({value!r}) said {str(err)!r}")
            bad.append(value)
        except Exception as err:  # noqa: BLE001 - the defect this exists to find
            problems.append(f"{option.name}: check({value!r}) raised {type(err).__name__}: {err}")
    return bad, problems


def valid_call(cmd: str, folder: Path) -> dict:
    """Keyword arguments of a small, valid call of ``cmd`` reading ``folder/g.csv`` (which the
    caller writes)."""
    g = str(folder / "g.csv")
    ledger = str(folder / "p.jsonl")
    small = {"splits": 5}
    return {
        "compare": dict(grid=g, forms=["composition"], **small),
        "design": dict(grid=g, forms=["composition", "additive"], budget=4, splits=10,
                       resamples=20),
        "search": dict(grid=g, terms=1, max_constants=3, splits=3, inner_splits=2,
                       references=[], jobs=1),
        "fit": dict(grid=g, form="composition"),
        "allocate": dict(grid=allocate_runs(), form=ALLOCATE_LAW, budgets="1e20"),
        "validate": dict(grid=g),
        "ci": dict(grid=g, baseline="H=1,keep=1", treatment="H=4,keep=1"),
        "predict": dict(grid=g, form="composition", at="H=8,keep=0.25", ledger=ledger,
                        resamples=20),
        "score": dict(grid=g, ledger=ledger),
        "ledger verify": dict(ledger=ledger),
        "forms add": dict(line="mine(omega) = L0 + a*omega", folder=str(folder)),
        "forms remove": dict(name="mine", folder=str(folder)),
        "simulate": dict(cell="H=1,steps=8", out=str(folder / "o.csv")),
        "load_grid": dict(source=g),
    }[cmd]  # fmt: skip


# a small, valid command line of each command, in a folder holding g.csv (a 4 x 5 x 3 grid)
CLI_BASE = {
    "compare": ["compare", "--data=g.csv", "--forms=composition", "--splits=5"],
    "design": ["design", "--data=g.csv", "--forms=composition,additive", "--budget=4",
               "--design-splits=10", "--resamples=20"],
    "search": ["search", "--data=g.csv", "--terms=1", "--max-constants=3", "--splits=3",
               "--inner-splits=2", "--reference=none", "--jobs=1"],
    "fit": ["fit", "--data=g.csv", "--form=composition"],
    "allocate": ["allocate", "--data=n.csv", f"--form={ALLOCATE_LAW}", "--budgets=1e20"],
    "validate": ["validate", "--data=g.csv"],
    "ci": ["ci", "--data=g.csv", "--baseline=H=1,keep=1", "--treatment=H=4,keep=1"],
    "predict": ["predict", "--data=g.csv", "--form=composition", "--at=H=8,keep=0.25",
                "--ledger=p.jsonl", "--resamples=20"],
    "forms add": ["forms", "add", "mine", "L0 + a*omega"],
    "simulate": ["simulate", "--cell=H=1,steps=8", "--out=o.csv", "--no-progress"],
}  # fmt: skip


def cli_options(cmd: str) -> list[Option]:
    """The options of ``cmd`` that take a value on the command line and are checked there
    (by type, choices, parse or a declared check)."""
    decl = next(c for c in declared.COMMANDS if c.cmd == cmd)
    out = []
    for o in decl.options:
        flag = o.option_string
        if not flag or not flag.startswith("--") or o.cli.get("action") is not None:
            continue
        if o.check is None and o.cli.get("type") is None and o.cli.get("choices") is None:
            continue
        out.append(o)
    return out


def cli_refusal(option: Option, text: str) -> str | None:
    """Why the command line must refuse ``--flag=text``: the option's type, choices, parse
    or check refuses it; None when it may be valid (or its parsing is not single-valued)."""
    if option.cli.get("nargs") is not None:
        return None
    kind = option.cli.get("type")
    try:
        value = kind(text) if kind is not None else text
    except (argparse.ArgumentTypeError, ValueError, TypeError, OverflowError, FitrulesError):
        return f"{option.option_string}={text!r}: its type refuses it"
    choices = option.cli.get("choices")
    if choices is not None and value not in choices:
        return f"{option.option_string}={text!r}: not one of its choices"
    try:
        if option.parse is not None:
            value = option.parse(value)
        if option.check is not None:
            option.check(value, option.option_string)
    except FitrulesError:
        return f"{option.option_string}={text!r}: its declared check refuses it"
    except Exception:  # noqa: BLE001 - not this module's question (test_declared_checks is)
        return None
    return None
