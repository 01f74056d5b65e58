"""The commands: each parses its options, hands them to its job's ``check`` (in
:mod:`fitrules.jobs.public`) before any output is taken, takes its outputs, reads its grid,
calls one function of :mod:`fitrules.api` with the options its declaration
(:mod:`fitrules.jobs.options`) hands over, and prints or writes what it returns."""

from __future__ import annotations

import sys

from fitrules import api
from fitrules.base.errors import FitrulesError
from fitrules.cli.io import (
    command_text,
    emit,
    load,
    progress_enabled,
    say,
    take_outputs,
    with_tuning,
    write_report,
)
from fitrules.jobs import options as declared
from fitrules.jobs.public import allocate as allocating
from fitrules.jobs.public import ci as intervals
from fitrules.jobs.public import compare as comparing
from fitrules.jobs.public import design as designing
from fitrules.jobs.public import fit as fitting
from fitrules.jobs.public import forms as adding
from fitrules.jobs.public import ledger as predicting
from fitrules.jobs.public import search as searching
from fitrules.jobs.public import tune as validating


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def simulate(args) -> int:
    table = api.simulate(**declared.SIMULATE.from_args(args, progress=progress_enabled(args),
                         command=command_text(), quiet=getattr(args, "quiet", False)))  # fmt: skip
    n_div = int(table["diverged"].astype(str).str.lower().eq("true").sum())
    say(args, f"{args.out}: {len(table)} runs of {table.attrs['spec']!r} ({n_div} diverged)")
    return 0


def validate(args) -> int:
    validating.check_validate({"path": args.path, "data": args.data})
    options = declared.VALIDATE.from_args(args)
    take_outputs(args)
    result = api.validate(load(args, args.path), **options)
    emit(args, result.text(), result.to_dict())
    return 0


def compare(args) -> int:
    from fitrules.base.util import split_progress
    from fitrules.model.forms import select_forms
    from fitrules.views.text import render_comparison, render_tuning

    forms = select_forms(_names(args.forms) or None, args.form)
    protocols = args.split or ["random"]
    options = declared.COMPARE.from_args(args, forms=forms)
    comparing.check(options | {"split": protocols, "fit_data": args.fit_data})
    take_outputs(args)
    grid = load(args, forms=forms)
    n = comparing.random_splits(args.splits)
    # random splits are fitted twice: the descriptive splits and the verdict's (unless the
    # descriptive train fraction is already the verdict's); structured protocols' split
    # counts depend on the grid: no total, just a count
    fits_per_split = 2 if args.train_frac < args.verdict_train_frac else 1
    total = n * len(protocols) if all(p.strip() == "random" for p in protocols) else None
    desc = f"fitting {len(forms)} form{'s' if len(forms) != 1 else ''}"
    results = []
    with split_progress(total, len(forms) * fits_per_split, desc, progress_enabled(args)) as step:
        for proto in protocols:
            options = declared.COMPARE.from_args(
                args, forms=forms, split=proto, progress=None, on_progress=step, test_grid=None,
                splits=n if proto.strip() == "random" else None,
            )  # fmt: skip
            if proto.strip() == "transfer":
                options |= dict(test_grid=load(args, args.test_grid), tune=None, tune_seeds=None)
                results.append(api.compare(load(args, args.fit_data), **options))
            else:
                results.append(api.compare(grid, **options))
    text = "\n\n".join(render_comparison(r) for r in results)
    if results[0].tuning is not None:
        text = render_tuning(results[0].tuning) + "\n\n" + text

    made: list[dict] = []

    def payloads() -> list[dict]:  # built once, and only for an output that asks for it
        if not made:
            made.extend(r.to_dict() for r in results)
        return made

    def payload() -> dict:
        return payloads()[0] if len(results) == 1 else {"protocols": payloads()}

    if args.report is not None:
        from fitrules.views.markdown import comparison_report, protocols_report

        if len(results) == 1:
            write_report(args, comparison_report, results[0], payloads()[0], args.report,
                         command_text(), args.force, results[0].tuning)  # fmt: skip
        else:
            write_report(args, protocols_report, results, payloads(), args.report, command_text(),
                         args.force)  # fmt: skip
        text += f"\n\nreport written to {args.report}/report.md"
    emit(args, text, payload)
    n_degenerate = sum(int(r.results["degenerate"].sum()) for r in results)
    if args.strict and n_degenerate:
        print(
            f"fitrules compare: {n_degenerate} degenerate (split, form) pairs (--strict)",
            file=sys.stderr,
        )
        return 1
    return 0


def _references(args) -> list | None:
    """--reference and --form: the reference forms (None: the search's default ones)."""
    from fitrules.model.forms import select_forms

    if args.references is not None and args.references.strip() == "none":
        return [] if not args.form else select_forms([], args.form)
    if args.references is not None or args.form:
        names = _names(args.references)
        return select_forms(names, args.form) if names or args.form else []
    return None


def search(args) -> int:
    from fitrules.views.search import plan_sentence

    refs = _references(args)
    options = declared.SEARCH.from_args(args, references=refs)
    options.pop("progress", None)
    searching.check(options)
    jobs = api.search_jobs(args.jobs, args.scheduler)  # the plan's line names them
    take_outputs(args)
    grid = load(args)

    def on_plan(plan, seconds) -> None:
        if not getattr(args, "quiet", False):
            print(plan_sentence(plan, seconds, jobs), file=sys.stderr)

    with api.search_progress(bool(progress_enabled(args)), on_plan, None) as (plan, step):
        result = api.search(grid, **options | dict(jobs=jobs, on_plan=plan, on_progress=step))
    text = str(result)
    if args.forms_out is not None:
        args.forms_file.commit(result.forms_toml())
        text += f"\n\nforms written to {args.forms_out}"
    if args.report is not None:
        write_report(args, result.report, args.report, command_text(), args.force)
        text += f"\n\nreport written to {args.report}/report.md"
    emit(args, text, result.to_dict)
    return 0


def _form_or_saved_fit(args) -> None:
    """Refuse both or neither of --form and --fit, and --data beside --fit."""
    if (args.saved_fit is None) == (args.form is None):
        raise FitrulesError("give --form (fitted here on --data) or --fit FILE (a saved fit)")
    if args.saved_fit is not None and args.data is not None:
        raise FitrulesError(
            "--fit FILE brings its fit and its grid's ranges: leave --data out, or fit here "
            "with --form"
        )


def fit(args) -> int:
    from fitrules.model.forms import resolve_form

    options = declared.FIT.from_args(args)
    _form_or_saved_fit(args)
    if args.saved_fit is not None:  # a saved fit: its text and predictions, nothing refitted
        fitting.check_saved(options)
        take_outputs(args)
        fitted = api.load_fit(args.saved_fit)
        fitting.with_predictions(fitted, options["predict"], options["runs"])
        if args.report is not None:  # only once everything above has succeeded
            write_report(args, fitted.report, args.report, args.force, command_text(),
                         args.cells)  # fmt: skip
        emit(args, str(fitted), lambda: fitted.to_dict(args.cells))
        return 0
    fitting.check(options)
    form = resolve_form(args.form)
    take_outputs(args)
    grid = load(args, forms=[form] if hasattr(form, "bind") else ())
    fitted = api.fit(grid, **declared.FIT.from_args(args, form=form))
    if args.report is not None:  # only once everything above has succeeded
        write_report(args, fitted.report, args.report, args.force, command_text(), args.cells)
    emit(args, str(fitted), lambda: fitted.to_dict(args.cells))
    return 0


def allocate(args) -> int:
    from fitrules.model.forms import resolve_form

    allocating.check(declared.ALLOCATE.from_args(args))
    _form_or_saved_fit(args)
    form = api.load_fit(args.saved_fit) if args.saved_fit else resolve_form(args.form)
    take_outputs(args)
    grid = None if args.saved_fit else load(args)
    result = api.allocate(grid, **declared.ALLOCATE.from_args(args, form=form))
    if args.report is not None:  # only once everything above has succeeded
        write_report(args, result.report, args.report, args.force, command_text())
    emit(args, result.text(), result.to_dict)
    return 0


def forms_list(args) -> int:
    from fitrules.model.forms import available_forms
    from fitrules.views.text import render_forms

    say(args, render_forms(available_forms()))
    return 0


def forms_show(args) -> int:
    from fitrules.model.forms import select_forms
    from fitrules.views.text import render_form

    f = select_forms([args.name])[0]
    resolved_by = None
    if f.variables is None:
        grid = load(args)
        f = f.bind(grid.columns, grid.runs)
        resolved_by = grid.label
    say(args, render_form(f, resolved_by))
    return 0


def forms_add(args) -> int:
    from fitrules.base.paths import FORMS_FILE

    line = f"{args.name} = {args.expression}"
    unbound = adding.check_add(line).variables is None
    grid = load(args) if unbound or args.data is not None else None
    form = api.add_form(line, grid)
    checked = (
        f" (variables resolved against {grid.label}: {', '.join(form.bound_variables)})"
        if grid is not None and unbound
        else ""
    )
    say(args, f"added {form.describe()} to {FORMS_FILE}{checked}")
    return 0


def forms_remove(args) -> int:
    path = api.remove_form(args.name)
    say(args, f"removed {args.name} from {path}")
    return 0


PAIRED = ("baseline", "treatment", "sweep", "tune", "tune_seeds")  # ci's arms and tuning


def ci(args) -> int:
    from fitrules.views.text import render_ci

    options = declared.CI.from_args(args)
    intervals.check(options | {"grid": args.data})
    take_outputs(args)
    if args.data is None:  # the committed paired grid, read with the data options given
        from fitrules.model.grids import DEFAULT_PAIRED

        options |= intervals.paired_defaults(None, **{k: options[k] for k in PAIRED})
        grid = load(args, DEFAULT_PAIRED)
    else:
        grid = load(args)
    res = api.ci(grid, **options)
    payload = res.to_dict()
    payload["command"] = command_text()
    if args.report is not None:  # only once everything above has succeeded
        write_report(args, res.report, args.report, args.force, command_text())
    emit(args, *with_tuning(res.tuning, render_ci(res.results, payload), payload))
    return 0


# the options a design's loop commands repeat, so that predict and score read and fit as
# design did (a tuple: all of it, or none)
LOOP_FLAGS = ("data", "metric", "seed_col", "unit", "where", "derive", ("objective", "delta"),
              "tune", "tune_seeds")  # fmt: skip


def design(args) -> int:
    import shlex

    from fitrules.jobs.design import design_forms, loop_commands
    from fitrules.views.design import design_report, render_design

    forms = design_forms(args.forms, args.form)
    options = declared.DESIGN.from_args(args, forms=forms)
    designing.check(options)
    take_outputs(args)
    d = api.design(load(args), **options)
    if args.spec_file is not None and d.spec is None:
        raise FitrulesError(
            f"--spec-out {args.spec_out}: no simulate spec for this batch: "
            f"{d.no_spec_reason}; leave out --spec-out"
        )
    spec_path = None
    if d.spec is not None and (args.report or args.spec_out) is not None:
        spec_path = str(args.report / "runs.toml" if args.report is not None else args.spec_out)
    loop_args = declared.DESIGN.flags_given(args, LOOP_FLAGS)
    d.commands = loop_commands(d, loop_args, args.ledger_name, spec_path, args.runs_out)
    if args.report is not None:
        write_report(args, design_report, d, args.report, command_text(), d.spec, args.force)
    elif args.spec_file is not None:
        args.spec_file.commit(d.spec)
    text = render_design(d)
    if args.report is not None:
        text += f"\n\nreport written to {shlex.quote(str(args.report))}/report.md"
    emit(args, *with_tuning(d.tuning, text, d.to_dict() | {"spec": d.spec}))
    return 0


def predict(args) -> int:
    from fitrules.model.forms import resolve_form

    options = declared.PREDICT.from_args(args, command=command_text())
    predicting.check(options)
    if args.form is not None:
        resolve_form(args.form)
    # the ledger (never the table itself, and not a tampered one) is checked by api.predict
    # before any fit; a saved fit reads the data it recorded unless --data names it
    grid = load(args) if args.saved_fit is None or args.data is not None else None
    entry = api.predict(grid, **options)
    if args.ledger is None:  # nothing written: the prediction is the output
        print(entry)
        return 0
    say(args, entry.sentence)
    for note in entry.notes:
        say(args, note)
    print(entry.head)
    return 0


def score(args) -> int:
    options = declared.SCORE.from_args(args)
    predicting.check_score(options | {"grid": args.data})
    take_outputs(args)
    result = api.score(load(args), **options)
    emit(args, result.text(), result.to_dict())
    return 0


def ledger_verify(args) -> int:
    check = api.verify_ledger(**declared.LEDGER_VERIFY.from_args(args))
    say(args, check.sentence)
    say(args, check.head)
    return 0


HANDLERS = {
    "compare": compare,
    "design": design,
    "search": search,
    "fit": fit,
    "allocate": allocate,
    "validate": validate,
    "ci": ci,
    "predict": predict,
    "score": score,
    "ledger verify": ledger_verify,
    "forms list": forms_list,
    "forms show": forms_show,
    "forms add": forms_add,
    "forms remove": forms_remove,
    "simulate": simulate,
}
