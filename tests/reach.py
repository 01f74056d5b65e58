"""Probes of the every-option-reaches-its-result check (``tests/api/test_options_reach.py``).

A probe sets one declared option of one command to a value other than its default; the command
is run at the default and at the probe, with the probe's companions (``also``: options that
make this one count, such as ``objective="log_huber"`` for ``delta``) in both, and the two
results' JSON must differ. An option that by design changes no result (a progress bar, a
worker count) carries a stated reason instead of a value.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from declared import ALLOCATE_LAW, COMMAND_FUNCTIONS, allocate_runs

import fitrules as fr
from fitrules.jobs import options as declared


@dataclass(frozen=True)
class Probe:
    """A value other than the default, with what both calls share (``also``) and what only
    the default call needs (``base``: where the default cannot run as it stands)."""

    value: Any = None  # a Lazy one is made when the probe runs
    also: dict = field(default_factory=dict)
    base: dict = field(default_factory=dict)
    reason: str | None = None  # no value: why the option cannot change a result


@dataclass(frozen=True)
class Lazy:
    """A value made when the probe runs (a grid), not when the probes are listed."""

    make: Callable[[], Any]


def _made(kw: dict) -> dict:
    return {k: v.make() if isinstance(v, Lazy) else v for k, v in kw.items()}


def _main_at(lr: str) -> Lazy:
    return Lazy(lambda: fr.load_example("main", where=f"lr == {lr}"))


HEAD = (
    "the head the chain must hold: its reach needs a ledger cut after it was printed, "
    "tests/cli/test_ledger.py::test_removed_last_record_is_caught_only_with_the_head"
)
DISPLAY = "a display or a way of running: it draws or schedules, and changes no number"

# ---------------------------------------------------------------- the calls at their defaults
MAIN = {"where": "lr == 3e-4"}


def _main():
    return fr.load_example("main", **MAIN)


def _forms3():
    return ["composition", "additive", "composition_per_h"]


def _call_compare(tmp: Path, kw: dict):
    kw = {"forms": ["composition", "additive"], "splits": 4, **kw}
    return fr.compare(kw.pop("grid", _main()), **kw)


def _call_fit(tmp: Path, kw: dict):
    return fr.fit(kw.pop("grid", _main()), kw.pop("form", "composition"), **kw)


def _call_design(tmp: Path, kw: dict):
    kw = {"forms": ["composition", "additive"], "budget": 6, "splits": 10, "resamples": 20, **kw}
    return fr.design(kw.pop("grid", _main()), **kw)


def _call_search(tmp: Path, kw: dict):
    kw = {"terms": 1, "max_constants": 3, "splits": 4, "inner_splits": 3, "yes": True, **kw}
    return fr.search(kw.pop("grid", _main()), **kw)


def _call_allocate(tmp: Path, kw: dict):
    kw = {"budgets": "1e20", **kw}
    return fr.allocate(kw.pop("grid", allocate_runs()), kw.pop("form", ALLOCATE_LAW), **kw)


def _call_validate(tmp: Path, kw: dict):
    return fr.validate(kw.pop("grid", fr.load_example("main")), **kw)


def _call_ci(tmp: Path, kw: dict):
    kw = {"baseline": "algo=sync", "treatment": "algo=diloco,H=16", "tune": "lr",
          "resamples": 2000, **kw}  # fmt: skip
    return fr.ci(kw.pop("grid", fr.load_example("paired_tuned")), **kw)


def _ledger(tmp: Path, name: str = "ledger.jsonl") -> str:
    path = tmp / name
    if not path.exists():
        fr.predict(_main(), "composition", "H=64,keep=0.25", ledger=str(path))
    return str(path)


def _call_predict(tmp: Path, kw: dict):
    kw = {"ledger": str(tmp / "new.jsonl"), **kw}
    return fr.predict(kw.pop("grid", _main()), kw.pop("form", "composition"),
                      kw.pop("at", "H=64,keep=0.25"), **kw)  # fmt: skip


def _call_score(tmp: Path, kw: dict):
    return fr.score(kw.pop("grid", _main()), kw.pop("ledger", _ledger(tmp)), **kw)


def _call_verify(tmp: Path, kw: dict):
    return fr.verify_ledger(kw.pop("ledger", _ledger(tmp)), **kw)


def _call_add_form(tmp: Path, kw: dict):
    return fr.add_form(kw.pop("line", "mine = L0 + a*omega"), **{"folder": str(tmp / "f"), **kw})


def _call_remove_form(tmp: Path, kw: dict):
    folder = kw.pop("folder", str(tmp / "f"))
    for line in ("mine = L0 + a*omega", "other = L0 + a*H"):
        fr.add_form(line, folder=folder)
    registry = fr.remove_form(kw.pop("name", "mine"), folder=folder)
    return Path(registry).read_text()  # the forms left


def _call_simulate(tmp: Path, kw: dict):
    """The table without its run times, and the manifest without its clock: a simulation's
    result is both (``command`` reaches only the manifest), and equal run times were once all
    that told two calls apart."""
    kw = {"spec": "quadratic", "cell": "H=4", "seeds": "0", "out": str(tmp / "sim.csv"), **kw}
    table = fr.simulate(kw.pop("spec"), (out := Path(kw.pop("out"))), **kw)
    manifest = json.loads(out.with_suffix(".manifest.json").read_text())
    clock = ("date", "wall_s_this_invocation", "wall_s_per_run")
    return json.dumps([table.drop(columns="wall_s").to_json(),
                       {k: v for k, v in manifest.items() if k not in clock}])  # fmt: skip


def _call_load_grid(tmp: Path, kw: dict):
    return fr.load_grid(kw.pop("source", fr.example_path("main")), **kw)


CALLS: dict[str, Callable[[Path, dict], Any]] = {
    "compare": _call_compare,
    "fit": _call_fit,
    "design": _call_design,
    "search": _call_search,
    "allocate": _call_allocate,
    "validate": _call_validate,
    "ci": _call_ci,
    "predict": _call_predict,
    "score": _call_score,
    "ledger verify": _call_verify,
    "forms add": _call_add_form,
    "forms remove": _call_remove_form,
    "simulate": _call_simulate,
    "load_grid": _call_load_grid,
}

# ---------------------------------------------------------------- the probes
LOG_HUBER = {"objective": "log_huber"}
SHARED = {
    "objective": Probe("log_huber"),
    "delta": Probe(0.05, also=LOG_HUBER),
    "weights": Probe("runs"),
    "fix": Probe({"b": 0.5}),
    "bounds": Probe({"b": (0.5, 0.6)}),
    "level": Probe(0.8),
    "seed": Probe(1),
    "progress": Probe(reason=DISPLAY),
    "on_progress": Probe(reason=DISPLAY),
    "on_plan": Probe(reason=DISPLAY),
    "jobs": Probe(reason=DISPLAY),
    "scheduler": Probe(reason=DISPLAY),
}


def _tuned(extra: dict | None = None) -> dict[str, Probe]:
    """The tuning options of a command whose grid is the main grid at every lr."""
    whole = Lazy(lambda: fr.load_example("main"))
    return {
        "tune": Probe("lr", also={"grid": whole, **(extra or {})}),
        "tune_seeds": Probe("0", also={"grid": whole, "tune": "lr", **(extra or {})}),
    }


def _compare_probes() -> dict[str, Probe]:
    return {
        **_tuned(),
        "forms": Probe(["composition", "composition_per_h"]),
        "splits": Probe(5),
        "train_frac": Probe(0.5),
        "verdict_train_frac": Probe(0.8),
        "split": Probe(
            "extrapolate:H", also={"splits": None}, base={"split": "leave-one-level-out:H"}
        ),  # fmt: skip
        "seeds": Probe("cells-and-seeds"),
        "heldout_weights": Probe("equal"),
        "error_metric": Probe("absolute"),
        "test_grid": Probe(
            _main_at("1e-3"),
            also={"split": "transfer", "splits": None},
            base={"test_grid": _main_at("3e-4")},
        ),  # fmt: skip
        "against": Probe("additive", also={"forms": _forms3()}),
        "pairs": Probe("composition:additive", also={"forms": _forms3()}),
        "bounds": Probe({"b": (0.5, 0.6)}, also={"forms": ["composition", "free_omega"]}),
        "by": Probe("keep", also={"forms": ["composition"], "train_frac": 0.8}),
        "shared": Probe("L0", also={"forms": ["composition"], "train_frac": 0.8, "by": "keep"}),
        "guard_span": Probe(1.01),
        "guard_se": Probe(1e-4),
        "guard_excursion": Probe(1e-3),
        "metric_range": Probe((0.0, 1.0)),
        "keep_degenerate": Probe(True),
    }


def _fit_probes() -> dict[str, Probe]:
    boot = {"intervals": True, "predict": "H=64,keep=0.25"}
    return {
        **_tuned(),
        "form": Probe("additive"),
        "by": Probe("keep"),
        "shared": Probe("L0", also={"by": "keep"}),
        "intervals": Probe(True),
        "predict": Probe(
            "H=64,keep=0.25", also={"intervals": True}, base={"predict": "H=32,keep=0.25"}
        ),  # fmt: skip
        "runs": Probe(3, also=boot),
        "resamples": Probe(30, also={**boot, "bootstrap": "residuals"}),
        "level": Probe(0.8, also={"intervals": True}),
        "seed": Probe(1, also={**boot, "bootstrap": "residuals", "resamples": 30}),
        "bootstrap": Probe("residuals", also={**boot, "resamples": 30}),
        "constraints": Probe("a >= 0.05", also={"intervals": "profile"}),
        "seed_sd": Probe(0.005, also=boot),
        "seed_pool": Probe("slice == 1", also={**boot, "grid": Lazy(_twin_slices)}),
    }


def _twin_slices():
    """The main grid's lr == 3e-4 runs as slice 0 of a file whose slice 1 is a copy with
    0.1% more noise (seed noise alike, so that fit's seed_pool pools them), read at slice 0."""
    import tempfile

    import numpy as np

    runs = fr.load_example("main", **MAIN).runs
    other = runs.assign(loss=runs["loss"] * (1 + 0.001 * np.random.default_rng(0).standard_normal(
        len(runs))))  # fmt: skip
    both = __import__("pandas").concat([runs.assign(slice=0), other.assign(slice=1)])
    path = Path(tempfile.mkdtemp()) / "twins.csv"
    both.to_csv(path, index=False)
    return fr.load_grid(path, where="slice == 0")


def _design_probes() -> dict[str, Probe]:
    return {
        **_tuned(),
        "forms": Probe(["composition", "composition_per_h"]),
        "candidates": Probe("H=32,128;keep=1/32"),
        "target": Probe(
            "H=128,keep=0.25", also={"forms": ["composition"]}, base={"target": "H=32,keep=0.25"}
        ),  # fmt: skip
        "budget": Probe(4),
        "seeds": Probe(2),
        "max_seeds": Probe(6),
        "power": Probe(0.9),
        "alpha": Probe(0.1),
        "splits": Probe(12),
        "resamples": Probe(25),
        "bounds": Probe({"b": (0.5, 0.6)}, also={"forms": ["composition", "free_omega"]}),
        "by": Probe("lr", also={"grid": Lazy(lambda: fr.load_example("main"))}),
        "shared": Probe("L0", also={"grid": Lazy(lambda: fr.load_example("main")), "by": "lr"}),
    }


def _search_probes() -> dict[str, Probe]:
    return {
        **_tuned(),
        "grammar": Probe(Lazy(lambda: fr.Grammar(terms=1, max_constants=3, factors=("power",)))),
        "variables": Probe("omega", also={"seeds": "cells"}),
        "terms": Probe(2, also={"max_constants": 3}),
        "max_constants": Probe(2),
        "first_constants": Probe(2),
        "max_nonlinear": Probe(0),
        "interactions": Probe(1, also={"terms": 2, "max_constants": 4, "factors": "power"}),
        "factors": Probe("power"),
        "levels": Probe("H", also={"max_constants": 5}),
        "tie_exponents": Probe(True),
        "split": Probe("extrapolate:H", base={"split": "leave-one-level-out:H"}),
        "splits": Probe(5),
        "train_frac": Probe(0.7),
        "inner_splits": Probe(4),
        "inner_train_frac": Probe(0.6),
        "rule": Probe("best"),
        "references": Probe("composition"),
        "screen": Probe(5),
        "at": Probe("H=64,omega=3"),
        "yes": Probe(
            reason="confirms a search above the size that asks first; a small one runs either way"
        ),  # fmt: skip
        "heldout_weights": Probe("equal"),
        "guard_span": Probe(1.01),
        "guard_se": Probe(1e-4),
        "guard_excursion": Probe(1e-3),
        "metric_range": Probe((0.0, 1.0)),
        "seeds": Probe("cells"),
    }


def _allocate_seeded():
    """The allocate grid with a second seed's runs in half of its cells."""
    import pandas as pd

    first, second = allocate_runs().assign(seed=0), allocate_runs().assign(seed=1)
    second["loss"] *= 1.003
    return fr.load_grid(pd.concat([first, second.iloc[::2]], ignore_index=True))


def _allocate_probes() -> dict[str, Probe]:
    seeded = {"grid": Lazy(_allocate_seeded)}
    boot = {"intervals": "bootstrap", "resamples": 30, **seeded}
    return {
        "form": Probe("chin(N, D) = E + A/N**alpha + B/D**beta + c*N/D"),
        "cost": Probe("2*N*D**1.1"),
        "weights": Probe("runs", also=seeded),
        "budgets": Probe("1e21"),
        "intervals": Probe("none"),
        "family": Probe("default"),
        "fix": Probe({"alpha": 0.3}),
        "bounds": Probe({"alpha": (0.3, 0.32)}),
        "resamples": Probe(40, also={"intervals": "bootstrap"}),
        "seed": Probe(1, also=boot),
        "bootstrap": Probe("seeds", also=boot),
    }


def _ci_probes() -> dict[str, Probe]:
    return {
        "tune": Probe(
            "lr",
            base={
                "tune": None,
                "baseline": "algo=sync,lr=0.001",
                "treatment": "algo=diloco,H=16,lr=0.001",
            },
        ),  # fmt: skip
        "tune_seeds": Probe("0,1,2"),
        "baseline": Probe(
            "algo=diloco,H=16",
            also={"treatment": "algo=sync"},
            base={"treatment": "algo=diloco,H=16"},
        ),  # fmt: skip
        "treatment": Probe("algo=diloco", base={"treatment": "algo=diloco,H=16"}),
        "sweep": Probe("algo", also={"treatment": None}, base={"treatment": "algo=diloco,H=16"}),
        "resamples": Probe(3000),
    }


def _predict_probes() -> dict[str, Probe]:
    return {
        **_tuned(),
        "form": Probe("additive"),
        "saved_fit": Probe(
            None,
            reason="a saved fit replaces form and grid: "
            "tests/api/test_fit.py checks that it is used",
        ),  # fmt: skip
        "at": Probe("H=128,keep=0.25"),
        "tolerance": Probe(0.5),
        "ledger": Probe(
            reason="the file the prediction is written to (its path is the result's "
            "record, checked by tests/api/test_ledger.py)"
        ),  # fmt: skip
        "weights": Probe("inverse-variance"),
        "by": Probe("keep"),
        "shared": Probe("L0", also={"by": "keep"}),
        "runs": Probe(3),
        "resamples": Probe(30, also={"bootstrap": "residuals"}),
        "bootstrap": Probe("residuals", also={"resamples": 30}),
        "seed": Probe(1, also={"bootstrap": "residuals", "resamples": 30}),
        "command": Probe("fitrules predict --form composition --at H=64,keep=0.25"),
        "seed_sd": Probe(0.005),
        "seed_pool": Probe("slice == 1", also={"grid": Lazy(_twin_slices)}),
    }


def _score_probes() -> dict[str, Probe]:
    return {
        "ledger": Probe(reason="the predictions scored: a different file is different input"),
        "head": Probe(reason=HEAD),
        **_tuned(),
    }


def _simulate_probes() -> dict[str, Probe]:
    return {
        "spec": Probe("quadratic_attack"),
        "out": Probe(reason="where the table is written"),
        "cell": Probe("H=8"),
        "seeds": Probe("1"),
        "quiet": Probe(reason=DISPLAY),
        "command": Probe("fitrules simulate quadratic --cell H=4"),
    }


def _load_grid_probes() -> dict[str, Probe]:
    return {
        "source": Probe(Lazy(lambda: fr.example_path("wide"))),
        "frame": Probe(
            reason="a frame or a path: the same table either way (tests/api/test_grids.py)"
        ),  # fmt: skip
        "metric": Probe("train_loss"),
        "seed_col": Probe("M"),
        "where": Probe("lr == 3e-4"),
        "derive": Probe("x = 2*H"),
        "rename": Probe("width=w"),
        "drop_duplicates": Probe(
            reason="on a table with an exact copy the default refuses it; "
            "tests/model/test_grids.py::test_exact_copy_of_a_run checks both"
        ),
        "unit": Probe("bits"),
        "units": Probe("H=steps"),
    }


PROBES: dict[str, Callable[[], dict[str, Probe]]] = {
    "compare": _compare_probes,
    "fit": _fit_probes,
    "design": _design_probes,
    "search": _search_probes,
    "allocate": _allocate_probes,
    "validate": _tuned,
    "ci": _ci_probes,
    "predict": _predict_probes,
    "score": _score_probes,
    "ledger verify": lambda: {
        "ledger": Probe(reason="the file verified"),
        "head": Probe(reason=HEAD),
    },  # fmt: skip
    "forms add": lambda: {
        "line": Probe("mine = L0 + b*H"),
        "folder": Probe(reason="where the registry is written"),
    },  # fmt: skip
    "forms remove": lambda: {
        "name": Probe("other"),
        "folder": Probe(reason="where the registry is read"),
    },  # fmt: skip
    "simulate": _simulate_probes,
    "load_grid": _load_grid_probes,
}


@functools.cache
def _probes(command: str) -> dict[str, Probe]:
    return PROBES[command]() if command in PROBES else {}


def declared_options() -> list[tuple[str, str]]:
    """``(command, option)`` for every option a command's Python function takes."""
    commands = [*declared.COMMANDS, declared.LOAD_GRID]
    return [(c.cmd, o.name) for c in commands if c.cmd in COMMAND_FUNCTIONS
            for o in c.options if o.python]  # fmt: skip


def probe(command: str, option: str) -> Probe:
    """The probe of ``option`` of ``command`` (its own, else the shared one)."""
    own = _probes(command)
    return own.get(option) or SHARED[option]


def unprobed() -> list[tuple[str, str]]:
    """Declared options with neither a probe nor a reason."""
    out = []
    for command, option in declared_options():
        try:
            probe(command, option)
        except KeyError:
            out.append((command, option))
    return out


def cases() -> list[tuple[str, str]]:
    """The (command, option) pairs that have a value to probe."""
    out = []
    for command, option in declared_options():
        try:
            if probe(command, option).reason is None:
                out.append((command, option))
        except KeyError:
            continue
    return out


# a quick sample for the default suite: one option of each cheap command
FAST = [("compare", "heldout_weights"), ("fit", "objective"), ("ci", "level"),
        ("allocate", "cost"), ("load_grid", "where")]  # fmt: skip


def _json(result: Any) -> str:
    if hasattr(result, "to_json"):
        return result.to_json()
    if isinstance(result, str | Path):
        return str(result)
    if hasattr(result, "to_frame"):
        return result.to_frame().to_json()
    if hasattr(result, "runs"):  # a grid
        return json.dumps([result.runs.to_json(), result.metric, result.seed, result.unit,
                           str(result.units) if hasattr(result, "units") else ""])  # fmt: skip
    return repr(result)


# what differs between two runs of one call by design: the folder it ran in, the clock, and
# the hashes a ledger chains through the clock
TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:?\d{2}|Z)?"
MASKS = [(re.compile(TIME), "<time>"), (re.compile(r"\b[0-9a-f]{12,64}\b"), "<hex>")]


def _masked(text: str, folder: Path) -> str:
    text = text.replace(str(folder), "<tmp>")
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return text


def outputs(command: str, option: str, tmp: Path) -> tuple[str, str]:
    """The JSON of ``command`` at its default and with ``option`` probed, each run in a
    folder of its own, folders, times and hashes masked."""
    p = probe(command, option)
    base = {**p.also, **p.base}
    key = (command, tuple((k, id(v) if isinstance(v, Lazy) else repr(v)) for k, v in base.items()))
    if key not in _DEFAULTS:  # many probes share their default call
        _DEFAULTS[key] = _run(command, base, tmp / "base")
    return _DEFAULTS[key], _run(command, {**p.also, option: p.value}, tmp / "probe")


_DEFAULTS: dict = {}


def _run(command: str, kw: dict, folder: Path) -> str:
    """The masked JSON of ``command`` called with ``kw`` in ``folder`` (made here)."""
    folder.mkdir()
    os.chdir(folder)
    return _masked(_json(CALLS[command](folder, _made(kw))), folder)


def dropped_option_fails(tmp: Path) -> bool:
    """Copy the package, make compare forget ``heldout_weights``, and run the reach check of
    that option on the copy: True when the check fails there (and passes on the original)."""
    src = Path(fr.__file__).parent
    copy = tmp / "pkg"
    shutil.copytree(src, copy / "fitrules", ignore=shutil.ignore_patterns("__pycache__"))
    api = copy / "fitrules" / "jobs" / "public" / "compare.py"
    text = api.read_text()
    forwarded = "heldout_weights=heldout_weights,"
    assert text.count(forwarded) >= 1, "compare no longer forwards heldout_weights this way"
    api.write_text(text.replace(forwarded, "", 1))
    root = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
            str(root / "tests" / "api" / "test_options_reach.py"),
            "-k", "test_a_few_options_change_their_result and compare-heldout_weights"]  # fmt: skip

    def run(path: Path) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(root)]),
               "FITRULES_DATA": str(root / "data")}  # fmt: skip
        return subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)

    dropped, kept = run(copy), run(src.parent)
    said = "compare: heldout_weights='equal' left the result unchanged" in dropped.stdout
    return dropped.returncode == 1 and said and kept.returncode == 0
