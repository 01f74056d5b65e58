"""The loop after a design: its batch as a ``fitrules simulate`` spec, and the commands
predict -> simulate -> score."""

from __future__ import annotations

from fitrules.jobs.design.candidates import _run_fields
from fitrules.jobs.design.result import Design
from fitrules.model.forms import Form
from fitrules.model.grids import Grid


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    return repr(v)


def run_cells(d: Design, grid: Grid | None = None) -> list[dict] | None:
    """The chosen cells as harness settings (``omega`` becomes ``keep``), or None when a
    variable is not a setting of ``fitrules simulate`` (of the model ``grid``'s runs name)."""
    fields = _run_fields(grid)
    out = []
    for r in d.chosen.to_dict("records"):
        cell = {}
        for v in d.variables:
            if v in fields:
                cell[v] = int(round(r[v])) if str(fields[v]) == "int" else float(r[v])
            elif v == "omega":
                cell["keep"] = 1 / (1 + r[v])
            else:
                return None
        out.append(cell)
    return out


def no_spec_reason(d: Design, grid: Grid, tuned: dict[str, list] | None = None) -> str | None:
    """Why :func:`batch_spec` gives no spec for this batch, or None when it gives one."""
    fields = _run_fields(grid)
    if not len(d.chosen):
        return "no cell was chosen"
    if run_cells(d, grid) is None:
        other = [v for v in d.variables if v not in fields and v != "omega"]
        verb = "is" if len(other) == 1 else "are"
        return f"{', '.join(other)} {verb} not a setting of the harness"
    needed = set(fields) - {"seed"} - set(tuned or {})
    lacking = sorted(needed - set(grid.runs.columns))
    if lacking:
        return (
            f"the grid was not written by fitrules simulate (it has no column "
            f"{', '.join(map(repr, lacking[:3]))}{', ...' if len(lacking) > 3 else ''})"
        )
    varying = set(d.variables) | {"keep"} | set(tuned or {})
    for c in fields:
        if c != "seed" and c not in varying and _setting(grid, c, fields).nunique() != 1:
            return f"the setting {c!r} varies in the grid and no form reads it"
    return None


def _setting(grid: Grid, name: str, fields: dict):
    """The grid's column of a setting; a text setting's empty cells are the empty text
    (``corpus = ""``, the shipped slice), not missing values."""
    column = grid.runs[name]
    return column.astype(object).fillna("") if str(fields[name]) == "str" else column


def batch_spec(d: Design, grid: Grid, tuned: dict[str, list] | None = None) -> str | None:
    """A ``fitrules simulate`` spec for the chosen cells: the grid's fixed settings, one block
    per cell with its own fresh seeds (above every seed in the grid), and for a tuned grid
    every level of the tuned factors. None when the grid was not made by the harness (see
    :func:`no_spec_reason`)."""
    cells = run_cells(d, grid)
    if cells is None or no_spec_reason(d, grid, tuned) is not None:
        return None
    fields = _run_fields(grid)
    varying = set(d.variables) | {"keep"} | set(tuned or {})
    fixed = {}
    for c in fields:
        if c == "seed" or c in varying:
            continue
        v = _setting(grid, c, fields).unique()[0]
        fixed[c] = v.item() if hasattr(v, "item") else v
    first = int(d.data["seed_max"] or -1) + 1
    forms = ", ".join(f.name for f in d.forms)
    lines = [
        'name = "design"',
        f'description = "cells chosen by fitrules design for {forms}"',
        "",
        "[fixed]",
        *[f"{k} = {_toml_value(v)}" for k, v in fixed.items()],
    ]
    if not tuned:
        # A seed id carries an effect into every cell it runs at (the default grid: F(2, 38)
        # = 49 for seed across cells). Fresh ids at each cell make that effect noise that
        # averages over cells; shared ids move every new cell mean together, and score's
        # test then has little power (benchmarks/bench_calibration.py). Tuning chooses on
        # named seeds within each cell, so a tuned spec keeps one set of ids.
        lines[1:1] = ["# fresh seed ids at every cell: a seed's effect averages out over them"]
    for cell, r in zip(cells, d.chosen.to_dict("records"), strict=True):
        seeds = list(range(first, first + int(r["seeds"])))
        if not tuned:
            first += int(r["seeds"])
        lines += ["", "[[block]]", f"seeds = {seeds}", "[block.fixed]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in cell.items()]
        if tuned:
            lines.append("[block.factors]")
            lines += [f"{k} = {[float(x) for x in vs]!r}" for k, vs in tuned.items()]
    return "\n".join(lines) + "\n"


def _constant_options(f: Form) -> list[str]:
    """The --fix, --bound, --by and --shared options that remake ``f``'s constants."""
    # flag words: a command line to run
    out = [f"--fix={k}={float(v)!r}" for k, v in f.fixed.items()]
    # flag words: a command line to run
    out += [f"--bound={k}={float(lo)!r}..{float(hi)!r}" for k, (lo, hi) in f.bounds.items()]
    if f.by is not None:
        # flag words: a command line to run
        out += [f"--by={f.by}", f"--shared={','.join(f.shared or ())}"]
    return out


def loop_commands(
    d: Design,
    data_args: list[str],
    ledger: str,
    spec_path: str | None,
    runs_path: str,
) -> list[str]:
    """predict (each form, each chosen cell) -> simulate -> score, as command lines."""
    import shlex

    cells = run_cells(d)
    out = []
    for i, r in enumerate(d.chosen.to_dict("records")):
        if cells is not None:
            at = ",".join(f"{k}={v!r}" for k, v in cells[i].items())
        else:
            at = ",".join(f"{v}={r[v]!r}" for v in d.variables)
        for f in d.forms:
            head = f"{f.name}({', '.join(f.variables)})" if f.variables else f.name
            form = f.name if f.source == "built-in" else f"{head} = {f.expression}"
            out.append(
                shlex.join(
                    [
                        "fitrules",
                        "predict",
                        *data_args,
                        # flag words: a command line to run
                        "--form",
                        form,
                        *_constant_options(f),
                        # flag words: a command line to run
                        "--at",
                        at,
                        # flag words: a command line to run
                        "--runs",
                        str(int(r["seeds"])),
                        # flag words: a command line to run
                        "--ledger",
                        ledger,
                    ]
                )
            )
    if spec_path is not None:
        out.append(
            # flag words: a command line to run
            shlex.join(["fitrules", "simulate", spec_path, "--out", runs_path, "--jobs", "2"])
        )
    else:
        out.append(
            f"# run the chosen cells with {d.settings.get('seeds')} or more seeds each "
            f"and collect the results in {runs_path}"
        )
    tune = []
    for i, a in enumerate(data_args):
        # flag words: a command line to run
        if a in ("--tune", "--tune-seeds"):
            tune += [a, data_args[i + 1]]
    # flag words: a command line to run
    out.append(shlex.join(["fitrules", "score", "--ledger", ledger, "--data", runs_path, *tune]))
    return out
