"""What every command shares: reading the grid its data options describe, taking its outputs
before any work, and printing or writing what it returns."""

from __future__ import annotations

import copy
import shlex
import sys
from pathlib import Path

from fitrules.base.errors import FitrulesError
from fitrules.jobs.options import LOAD_GRID

ARGV: list[str] = []  # the arguments of the running command, for manifests and reports


def command_text() -> str:
    """The running command line, as a user would type it."""
    return shlex.join(["fitrules", *ARGV])


def say(args, text: str) -> None:
    """Print a text view unless --quiet."""
    if not getattr(args, "quiet", False):
        print(text)


def load(args, path: Path | None = None, forms=()):
    """The grid the data options describe (the default grid without --data), with ``forms``
    bound to it as a check.

    A refusal that knows the option which takes it away (a tracker's export: a run exported
    twice, the metric under another name, a variable under another name) is tried again with
    that option, and again, so that one message lists every option the table needs at once
    (issue 44: a W&B export took five commands, one refusal at a time). Nothing runs on the
    table until the user gives them."""
    try:
        return _load_bound(args, path, forms)
    except FitrulesError as err:
        if not err.fixes:
            raise
        fixes, reasons, trial = [], [], copy.copy(args)
        last: FitrulesError | None = err
        for _ in range(MAX_FIXES):
            if last is None or not last.fixes or any(f in fixes for f in last.fixes):
                break
            fixes += last.fixes
            reasons.append(_reason(str(last)))
            for flag, value in last.fixes:
                _apply_fix(trial, flag, value)
            try:
                _load_bound(trial, path, forms)
                last = None
            except FitrulesError as again:
                last = again
        if len(fixes) < 2:
            raise
        also = "" if last is None else f"; then: {_reason(str(last))}"
        label = f"{Path(path or args.data).name}: " if (path or args.data) else ""
        raise type(err)(
            f"{label}{len(fixes)} options are needed for this table: run again adding "
            + " ".join(flag if value is None else f"{flag} {shlex.quote(value)}"
                       for flag, value in fixes)
            + f" (because: {'; '.join(reasons)}){also}"
        ) from err  # fmt: skip


MAX_FIXES = 8  # refusals with a known fix tried in turn before the message is written


def _load_bound(args, path: Path | None, forms):
    from fitrules.model.examples import resolve_data
    from fitrules.model.grids import default_grid, load_grid

    path = path or args.data
    if path is None:
        path, where = default_grid(args.where)
    else:
        path, where = resolve_data(path), args.where or []
    grid = load_grid(**LOAD_GRID.from_args(args, source=path, where=where))
    for f in forms:
        f.bind(grid.columns, grid.runs)
    return grid


def _reason(text: str) -> str:
    """A refusal without its list of columns (the combined message lists the options)."""
    return text.split("; columns: ")[0]


def _apply_fix(args, flag: str, value: str | None) -> None:
    """Set one option on a copy of the parsed arguments, as if it had been given."""
    name = flag.lstrip("-").replace("-", "_")
    if value is None:
        setattr(args, name, True)
    elif name in ("rename", "derive", "where"):
        setattr(args, name, [*(getattr(args, name, None) or []), value])
    else:
        setattr(args, name, value)


def with_tuning(tuning, text: str, payload: dict) -> tuple[str, dict]:
    if tuning is None:
        return text, payload
    from fitrules.views.text import render_tuning

    return render_tuning(tuning) + "\n\n" + text, payload | {"tuning": tuning.to_dict()}


def progress_enabled(args) -> bool | None:
    return False if getattr(args, "quiet", False) else args.progress


def json_text(payload: dict) -> str:
    import json

    from fitrules.base.util import json_ready

    return json.dumps(json_ready(payload), indent=1, sort_keys=False, allow_nan=False) + "\n"


def _inputs(args) -> list[Path]:
    """The files a command reads, which no output may replace."""
    from fitrules.model.forms import FORMS_FILE
    from fitrules.model.grids import DEFAULT_PAIRED, default_grid

    paths = [
        getattr(args, a, None)
        for a in ("data", "fit_data", "test_grid", "ledger", "path", "grammar")
    ]
    if getattr(args, "data", None) is None:
        paths += [default_grid()[0], DEFAULT_PAIRED]
    # every command that reads forms reads it; search reads it only when it exists (its
    # --reference names), so its --forms-out may create it
    if getattr(args, "command", None) != "search" or Path(FORMS_FILE).exists():
        paths.append(Path(FORMS_FILE))
    from fitrules.model.examples import resolve_data

    return [resolve_data(p) for p in paths if p is not None]


def _within(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _file_outputs(args) -> list[tuple[str, Path]]:
    """The files a command writes: (option, path)."""
    out = []
    json_out = getattr(args, "json_out", None)
    if json_out not in (None, "-"):
        out.append(("--json", Path(json_out) if str(json_out).strip() else json_out))
    spec_out = getattr(args, "spec_out", None)
    if spec_out is not None and getattr(args, "report", None) is None:
        out.append(("--spec-out", Path(spec_out)))
    forms_out = getattr(args, "forms_out", None)
    if forms_out is not None:
        out.append(("--forms-out", Path(forms_out)))
    return out


def take_outputs(args) -> None:
    """Check and take every output before any work: ``--report DIR``, ``--json PATH`` and
    ``--spec-out PATH``.

    No output may be an input or another output (by resolved path and inode). The report
    directory is created empty now (create-or-fail) and each file's staging file beside it,
    so a place that cannot be written, or a report that exists, is refused before the fit;
    :func:`main` removes them if the command then fails.
    """
    from fitrules.base.outputs import check_distinct

    report = getattr(args, "report", None)
    inputs = _inputs(args)
    files = _file_outputs(args)
    args.report_slot = None
    check_distinct(files, inputs)
    for option, target in files:
        if report is not None and str(target).strip() and _within(Path(target), report):
            raise FitrulesError(
                f"{option} {target}: is inside --report {report}, which is written whole; "
                "choose a path outside it"
            )
    if report is not None:
        from fitrules.views.figures import parse_formats

        parse_formats(args.figure_format)  # a bad format is refused before any work
        from fitrules.views.figures import parse_labels

        parse_labels(getattr(args, "labels", None))
        for p in inputs:
            if p.exists() and _within(p, report):
                raise FitrulesError(
                    f"--report {report}: holds {p.name}, an input of this command; refusing "
                    "to replace it"
                )
        args.report_slot = args.outputs.reserve_dir(report, args.force)
    staged = {option: args.outputs.stage_file(target, option) for option, target in files}
    args.json_file, args.spec_file, args.forms_file = (
        staged.get(option) for option in ("--json", "--spec-out", "--forms-out")
    )


def write_report(args, write, *a, **k) -> None:
    """Write the report (into its taken directory) and remember it was written."""
    from fitrules.views.figures import axis_labels, figure_formats

    shown = getattr(args, "progress", None)  # as the progress bar: --progress, or a terminal
    if (sys.stderr.isatty() if shown is None else shown) and not getattr(args, "quiet", False):
        print(f"writing the report (tables and figures) to {args.report} ...", file=sys.stderr)
    with figure_formats(args.figure_format), axis_labels(getattr(args, "labels", None)):
        write(*a, **k)
    if args.report_slot is not None:
        args.report_slot.written = True


def emit(args, text: str, payload) -> None:
    """Write the JSON if asked (atomically, into the file taken before the work), then print
    the text view (unless the JSON goes to stdout or --quiet). ``payload`` is the JSON's
    dict, or a function that makes it: nothing is built for an output not asked for (the
    per-cell payload of a 200,000-cell fit took longer than the fit)."""
    wanted = getattr(args, "json_file", None) is not None or args.json_out == "-"
    if wanted and callable(payload):
        payload = payload()
    if getattr(args, "json_file", None) is not None:
        args.json_file.commit(json_text(payload))
    if args.json_out == "-":
        sys.stdout.write(json_text(payload))
    else:
        say(args, text)
