"""Every result class and every writer: nothing is written over a file the result was made from,
through a link, onto a FIFO or through a link to nothing (issue 43: ``Tuning`` and
``Prediction`` wrote their JSON over the table they came from once results moved to one view
protocol). The classes are found by walking the package, so a new result class without a case
here fails the suite instead of going unchecked."""

from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError
from tools.golden import result_classes  # the same walk finds the classes golden files pin


def _plain(path: Path) -> None:
    composition_grid().to_csv(path, index=False)


def _paired(path: Path) -> None:
    rows = pd.DataFrame({"algo": ["a"] * 4 + ["b"] * 4, "seed": list(range(4)) * 2,
                         "loss": [2.0, 2.1, 2.05, 2.02, 2.2, 2.3, 2.25, 2.21]})  # fmt: skip
    rows.to_csv(path, index=False)


def _tuned(path: Path) -> None:
    a = composition_grid(seeds=4, rng_seed=1).assign(lr=3e-4)
    b = composition_grid(seeds=4, rng_seed=2).assign(lr=1e-3)
    b["loss"] += 0.01
    pd.concat([a, b], ignore_index=True).to_csv(path, index=False)


def _chinchilla(path: Path) -> None:
    from declared import allocate_runs

    allocate_runs().to_csv(path, index=False)


def _ledger(folder: Path, table: Path) -> Path:
    ledger = folder / "p.jsonl"
    fr.predict(str(table), "composition", "H=8,keep=0.25", ledger=str(ledger), resamples=20)
    return ledger


# each case: (result class, table maker, result maker) -> the result and every input it read
CASES = {
    "Comparison": (_plain, lambda t, d: fr.compare(str(t), forms=["composition"],
                                                             splits=5)),
    "Comparison tuned": (_tuned, lambda t, d: fr.compare(str(t), forms=["composition"], splits=5,
                                                         tune="lr")),
    "FittedForm": (_plain, lambda t, d: fr.fit(str(t), "composition")),
    "Prediction": (_plain, lambda t, d: fr.fit(str(t), "composition",
                                                         intervals=True).predict(H=8, keep=0.25)),
    "PairedIntervals": (_paired, lambda t, d: fr.ci(str(t), baseline="algo=a", treatment="algo=b",
                                                    resamples=1000)),
    "Tuning": (_tuned, lambda t, d: fr.tune(str(t), "lr")),
    "Validation": (_plain, lambda t, d: fr.validate(str(t))),
    "Allocation": (_chinchilla, lambda t, d: fr.allocate(
        str(t), "chin(N, D) = E + A/N**alpha + B/D**beta", budgets="1e20")),
    "Design": (_plain, lambda t, d: fr.design(str(t), forms=["composition", "additive"],
                                                        budget=4, splits=10, resamples=20)),
    # a search of linear and log factors only: the writers do not read its candidates (the
    # default factors' nonlinear fits took 7 s of CPU in each test process)
    "Search": (_plain, lambda t, d: fr.search(str(t), terms=1, max_constants=3,
                                              factors="linear,log", splits=3, inner_splits=2,
                                              references=[])),
    "LedgerEntry": (_plain, lambda t, d: fr.predict(
        str(t), "composition", "H=8,keep=0.25", ledger=str(d / "p.jsonl"), resamples=20)),
    "Scores": (_plain, lambda t, d: fr.score(str(t), str(_ledger(d, t)))),
    "LedgerCheck": (_plain, lambda t, d: fr.verify_ledger(str(_ledger(d, t)))),
}  # fmt: skip


def test_every_result_class_has_a_writer_case():
    """A result class added to the package without a case here fails this test."""
    covered = {name.split()[0] for name in CASES}
    assert result_classes() == covered


def _checksums(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p)] = "link to " + os.readlink(p)
        elif p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p)] = "dir" if p.is_dir() else "other"
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Each case's result, made once from a table in its own folder, with every file it read."""
    out = {}
    for name, (table, make) in CASES.items():
        folder = tmp_path_factory.mktemp(name.replace(" ", "_"))
        path = folder / "x.csv"
        table(path)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            result = make(path, folder)
        finally:
            os.chdir(cwd)
        ledgers = [p for p in folder.iterdir() if p.suffix == ".jsonl"]
        inputs = ledgers if name == "LedgerCheck" else [path, *ledgers]  # it reads the ledger only
        out[name] = (result, folder, inputs)
    return out


def _targets(folder: Path, inputs: list[Path]):
    """(label, path) of every target that must be refused: each input itself, a symbolic and
    a hard link to it, a FIFO and a link to nothing."""
    for src in inputs:
        yield f"input {src.name}", src
        link = folder / f"link-{src.name}"
        if not link.exists():
            link.symlink_to(src)
        yield f"link to {src.name}", link
        hard = folder / f"hard-{src.name}"
        if not hard.exists():
            os.link(src, hard)
        yield f"hard link to {src.name}", hard
    fifo = folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    yield "fifo", fifo
    dangling = folder / "dangling.json"
    if not dangling.is_symlink():
        dangling.symlink_to(folder / "nowhere.json")
    yield "link to nothing", dangling


@pytest.mark.parametrize("case", sorted(CASES))
def test_to_json_refuses_every_input_link_and_fifo(made, case):
    """``to_json`` onto an input, a link to one, a FIFO or a dangling link: a documented
    exception with one line, and every file of the folder byte for byte as it was."""
    result, folder, inputs = made[case]
    for label, target in list(_targets(folder, inputs)):
        before = _checksums(folder)
        with pytest.raises(FitrulesError) as info:
            result.to_json(str(target))
        assert len(str(info.value).splitlines()) == 1, (label, str(info.value))
        assert _checksums(folder) == before, f"{case}: to_json onto {label} changed a file"


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_refuses_a_folder_holding_an_input(made, case):
    """``report`` into the folder that holds the table (with ``force``): refused, nothing
    changed. Results without a report directory are skipped by name."""
    result, folder, _ = made[case]
    if not hasattr(result, "report"):
        pytest.skip(f"{case} writes no report directory")
    before = _checksums(folder)
    kwargs = {"force": True} if "force" in inspect.signature(result.report).parameters else {}
    with pytest.raises(FitrulesError):
        result.report(str(folder), **kwargs)
    assert _checksums(folder) == before


def test_a_new_file_is_still_written(made, tmp_path):
    """The refusals above are not a writer that refuses everything; written to a file,
    to_json returns None (issue 66: a notebook cell printed 874,678 characters), the same
    text as it returns without a path."""
    for case, (result, _, _) in made.items():
        out = tmp_path / f"{case.replace(' ', '_')}.json"
        assert result.to_json(str(out)) is None, case
        assert out.read_text() == result.to_json().rstrip("\n") + "\n", case


def test_a_result_refuses_its_own_table_outside_the_working_directory(tmp_path):
    """A grid read from outside the working directory is labelled by its file name alone;
    made_from recorded that label made absolute (the working directory's g.csv), so
    ``f.to_json(table)`` overwrote the table it was fitted on. It records the file read."""
    import fitrules as fr
    from conftest import composition_grid
    from fitrules.base.errors import FitrulesError

    csv = tmp_path / "g.csv"
    composition_grid().to_csv(csv, index=False)
    before = csv.read_bytes()
    f = fr.fit(str(csv), "composition")
    assert csv.resolve() in [p.resolve() for p in f.inputs]
    with pytest.raises(FitrulesError):
        f.to_json(csv)
    assert csv.read_bytes() == before


def test_a_ledger_is_never_the_table_it_predicts_from_outside_the_working_directory(tmp_path):
    """fr.predict compared the ledger with the grid's display label, only the file's name for
    a table outside the working directory, so a JSON-lines table given as its own ledger was
    refused only later, as "line 1 is not a prediction record". The file read is compared
    now, and the refusal says what is wrong."""
    import json

    import fitrules as fr
    from conftest import composition_grid
    from fitrules.base.errors import FitrulesError

    table = tmp_path / "runs.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in composition_grid().to_dict("records")))
    before = table.read_bytes()
    with pytest.raises(FitrulesError, match="is an input of this command"):
        fr.predict(str(table), "composition", "H=8,keep=0.25", ledger=table, resamples=20)
    assert table.read_bytes() == before
