"""The behaviour corpus: record what fitrules prints and writes, then check it is unchanged.

    python tools/corpus.py record OUT.json            # at the commit before a change
    python tools/corpus.py check OUT.json             # after each step of it
    python tools/corpus.py check OUT.json --only help,refusals

The safety net of a restructuring (issue 30): for every committed report's command, every
fitrules command and Python block of the README and the docs' pages, every ``--help``, every
command line the tests refuse, and a script printing each result's text, HTML and JSON, it
keeps the exit status, stdout, stderr and every file written, and ``check`` says what
differs. Compare on the machine and in the environment that recorded: figures and the JSON
of fits set aside as degenerate differ between machines. Timestamps (a ledger's, a report's
date) and the tests' temporary paths are masked; nothing else is.

``--repo PATH`` runs another checkout's package and data (default: the one holding this file).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
REPO = HERE  # the checkout run (--repo); its path is masked
KINDS = ("help", "reports", "pages", "python", "refusals")
PREFIX = {"help": "help", "reports": "report", "pages": "page", "python": "python",
          "refusals": "refusals"}  # fmt: skip
# masked before comparing: what changes from run to run by design
MASKS = [
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?"), "<time>"),
    (re.compile(r"/tmp/pytest-of-[^/\s'\"]+/pytest-\d+(/popen-gw\d+)?"), "<tmp>"),
    (re.compile(r"(?<![\w/])/tmp/corpus-[\w]+"), "<work>"),
]
# a report's date line (report/design.py): the day it was made
DATE_LINE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# compared, not recorded, as equal: what depends on the clock or on which process finished
# first. A ledger's hashes chain its records' times; a harness run's wall time and the order
# its runs finish in; durations, estimates and progress counts; the commit a manifest names.
CLOCK = [
    (re.compile(r"\b[0-9a-f]{12,64}\b"), "<hex>"),
    (re.compile(r"\b(\d+ h \d+ min|(\d+ h )?(\d+ min )?\d+(\.\d+)? s)\b"), "<duration>"),
    (re.compile(r"tcp://127\.0\.0\.1:\d+"), "tcp://127.0.0.1:<port>"),  # a cluster's workers
    # pytest numbers a test's temporary folders in the order its cases ran (xdist: any)
    (re.compile(r"(<tmp>/[\w-]+?)\d+/"), r"\1<n>/"),
    (re.compile(r"^.*\d+ of \d+ runs done.*\n?", re.M), ""),
]
CLOCK_KEYS = re.compile(r"git_commit|wall_s|seconds|elapsed")

# every result's text, HTML and JSON, through the public API only (it survives the change)
RESULTS_SCRIPT = r"""
import fitrules as fr
g = fr.load_example("main", where="lr == 3e-4")
results = {
    "compare": fr.compare(g, forms=["composition", "additive"], splits=40),
    "fit": fr.fit(g, "composition", intervals=True),
    "ci": fr.ci(fr.load_example("paired_tuned"), baseline="algo=sync",
                treatment="algo=diloco,H=16", tune="lr"),
    "tune": fr.tune(fr.load_example("tuned"), "lr"),
    "design": fr.design(g, forms=["composition", "additive"], budget=6, splits=10, resamples=20),
    "search": fr.search(g, terms=1, max_constants=3, splits=4, inner_splits=3),
}
for name, r in results.items():
    print(f"== {name}: text"); print(str(r))
    for view in ("_repr_html_", "to_json"):  # what each result has
        print(f"== {name}: {view}"); print(getattr(r, view)() if hasattr(r, view) else "none")
"""


def _mask(text: str) -> str:
    text = text.replace(str(REPO), "<repo>")
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return text


def _env(repo: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(repo), MPLBACKEND="Agg", PYTHONHASHSEED="0", COLUMNS="100")
    env.pop("FITRULES_CORPUS_REFUSALS", None)
    return env


def _workdir(repo: Path) -> Path:
    """A fresh folder laid out like the project: data/ (linked) and ../shared/ beside it."""
    root = Path(tempfile.mkdtemp(prefix="corpus-"))
    work = root / "work"
    work.mkdir()
    (work / "data").symlink_to(repo / "data")
    shared = repo.parent / "shared"
    if shared.exists():
        (root / "shared").symlink_to(shared)
    return work


def _files(work: Path) -> dict[str, dict]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(work):
        dirnames[:] = sorted(d for d in dirnames if not (Path(dirpath) / d).is_symlink())
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            raw = p.read_bytes()
            try:
                text = _mask(raw.decode())
            except UnicodeDecodeError:
                out[str(p.relative_to(work))] = {"sha256": hashlib.sha256(raw).hexdigest()}
                continue
            if p.suffix == ".md":
                text = DATE_LINE.sub("<date>", text)
            out[str(p.relative_to(work))] = {
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "text": text if len(text) < 400_000 else None,
            }
    return out


def _run(steps: list[list[str]], repo: Path, timeout: float = 3600) -> dict:
    """Run ``steps`` (argv lists, run in order in one fresh folder); what each printed, and
    the files the folder holds at the end."""
    work = _workdir(repo)
    printed = []
    for argv in steps:
        res = subprocess.run(argv, cwd=work, env=_env(repo), capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
        shown = [a if a != sys.executable else "python" for a in argv]
        printed.append({"argv": shown, "code": res.returncode,
                        "stdout": _mask(res.stdout), "stderr": _mask(res.stderr)})  # fmt: skip
    return {"steps": printed, "files": _files(work)}


def _fitrules(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "fitrules", *args]


def _printed(code: str, repo: Path, cwd: Path | None = None):
    """What the Python ``code`` prints as JSON, run against ``repo``'s package."""
    res = subprocess.run([sys.executable, "-c", code], env=_env(repo), capture_output=True,
                         text=True, check=True, cwd=cwd)  # fmt: skip
    return json.loads(res.stdout)


# programs run in the checkout under test, printing JSON: every command's path in the parser
# (for its --help), and the reports tools/rebuild.py makes (older checkouts kept them in the
# package)
HELP_PATHS = """
import argparse, json
from fitrules.cli import build_parser
def walk(p, path):
    yield path
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, q in a.choices.items():
                yield from walk(q, path + [name])
print(json.dumps(list(walk(build_parser(), []))))
"""
REPORT_LIST = """
import json
try:
    from tools.rebuild import REPORTS
except ImportError:
    from fitrules.report.rebuild import REPORTS
print(json.dumps(REPORTS))
"""


def _help_entries(repo: Path) -> dict[str, list[list[str]]]:
    """``--help`` of the program and of every command and action, from its parser."""
    return {"help " + " ".join(p): [_fitrules([*p, "--help"])] for p in _printed(HELP_PATHS, repo)}


def _report_entries(repo: Path) -> dict[str, list[list[str]]]:
    out = {}
    for name, entry in _printed(REPORT_LIST, repo, cwd=repo).items():
        if isinstance(entry, list) and entry[0] == "script":  # a module of tools/ that writes one
            out["report " + name] = [[sys.executable, "-m", entry[1]]]
        elif isinstance(entry, list):  # a design loop: (loop, DIR, FORMS, BUDGET)
            _, target, forms, budget = entry
            loop = (
                "import sys\ntry:\n    from tools.loop import run_loop\nexcept ImportError:\n"
                "    from fitrules.report.loop import run_loop\nfrom pathlib import Path\n"
                f"Path({target!r}).parent.mkdir(parents=True, exist_ok=True)\n"
                f"sys.exit(run_loop(Path({target!r}), {forms!r}, {budget}))\n"
            )
            out["report " + name] = [[sys.executable, "-c", loop]]
        else:
            out["report " + name] = [_fitrules([*shlex.split(entry), "--force"])]
    return out


def _page_entries(repo: Path) -> dict[str, list[list[str]]]:
    """Each page's examples, run in order in one folder (a page's commands build on each
    other: a form added, a ledger written)."""
    sys.path.insert(0, str(repo / "tests"))
    try:
        import readme  # the tests' reader of the pages' examples
    finally:
        sys.path.pop(0)
    out = {}
    for page in [readme.README, *readme.PAGES]:  # the pages whose examples the tests run
        steps = []
        for kind, example in readme.examples(page):
            if kind == "sh":
                steps.append(_fitrules(example[1:]))
            else:
                steps.append([sys.executable, "-c", example])
        if steps:
            out["page " + str(page.relative_to(repo))] = steps
    return out


def _refusal_entries(repo: Path) -> dict[str, list[list[str]]]:
    """The tests that refuse command lines, run with the refusals written down (by
    ``tests/helpers.refused``): each refusal's command line, status and line."""
    files = sorted({str(p) for p in (repo / "tests").rglob("test_*.py")
                    if "refused(" in p.read_text()})  # fmt: skip
    code = (
        "import json, os, pathlib, subprocess, sys, tempfile\n"
        "d = tempfile.mkdtemp(prefix='corpus-refusals-')\n"
        "env = dict(os.environ, FITRULES_CORPUS_REFUSALS=d)\n"
        f"files = {files!r}\n"
        "subprocess.run([sys.executable, '-m', 'pytest', '-q', '-n', '2', '-p', 'no:cacheprovider',"
        f" *files], env=env, stdout=subprocess.DEVNULL, cwd={str(repo)!r})\n"
        "rows = []\n"
        "for p in pathlib.Path(d).glob('*.jsonl'):\n"
        "    rows += [json.loads(x) for x in p.read_text().splitlines()]\n"
        "rows.sort(key=lambda r: (r['test'], r['argv']))\n"
        "for r in rows: print(json.dumps(r))\n"
    )
    return {"refusals": [[sys.executable, "-c", code]]}


def entries(repo: Path, kinds) -> dict[str, list[list[str]]]:
    makers = {"help": _help_entries, "reports": _report_entries, "pages": _page_entries,
              "python": lambda r: {"python results": [[sys.executable, "-c", RESULTS_SCRIPT]]},
              "refusals": _refusal_entries}  # fmt: skip
    out: dict[str, list[list[str]]] = {}
    for kind in kinds:
        out.update(makers[kind](repo))
    return out


def _record(repo: Path, kinds, jobs: int) -> dict:
    todo = entries(repo, kinds)
    out = {}
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(_run, steps, repo): name for name, steps in todo.items()}
        for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            name = futures[fut]
            out[name] = fut.result()
            print(f"[{i}/{len(todo)}] {name} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return dict(sorted(out.items()))


def _clockless(text: str, path: str = "") -> str:
    """``text`` with what depends on the clock or on scheduling made equal (see CLOCK)."""
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            doc = {k: v for k, v in doc.items() if not CLOCK_KEYS.search(k)}
            text = json.dumps(doc, indent=1, sort_keys=True)
    lines = text.splitlines()
    if path.endswith(".csv") and lines and "wall_s" in lines[0].split(","):
        at = lines[0].split(",").index("wall_s")
        rows = [",".join(c for i, c in enumerate(x.split(",")) if i != at) for x in lines]
        lines = [rows[0], *sorted(rows[1:])]
        text = "\n".join(lines)
    for pattern, repl in CLOCK:
        text = pattern.sub(repl, text)
    return text


def _diff(name: str, old: dict, new: dict) -> list[str]:
    lines = []
    for i, (a, b) in enumerate(zip(old["steps"], new["steps"], strict=False)):
        for key in ("code", "stdout", "stderr"):
            before, now = (str(a[key]), str(b[key])) if key == "code" else (
                _clockless(a[key]), _clockless(b[key]))  # fmt: skip
            if before != now:
                lines.append(f"{name}: step {i + 1} ({shlex.join(a['argv'])[:80]}): {key} differs")
                d = difflib.unified_diff(before.splitlines(), now.splitlines(), lineterm="")
                lines += ["    " + x for x in list(d)[2:14]]
    if len(old["steps"]) != len(new["steps"]):
        lines.append(f"{name}: {len(old['steps'])} steps before, {len(new['steps'])} now")
    for path in sorted(set(old["files"]) | set(new["files"])):
        a, b = old["files"].get(path), new["files"].get(path)
        if a is None or b is None:
            lines.append(f"{name}: {path} {'written only now' if a is None else 'not written'}")
        elif a["sha256"] != b["sha256"]:
            ta, tb = a.get("text"), b.get("text")
            if ta is not None and tb is not None:
                ta, tb = _clockless(ta, path), _clockless(tb, path)
                if ta == tb:
                    continue
            lines.append(f"{name}: {path} differs")
            if ta is not None and tb is not None:
                d = difflib.unified_diff(ta.splitlines(), tb.splitlines(), lineterm="")
                lines += ["    " + x for x in list(d)[2:14]]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["record", "check", "diff"])
    p.add_argument("file", type=Path, help="the recorded corpus (JSON)")
    p.add_argument("other", type=Path, nargs="?",
                   help="diff: a second recording; check: where to keep this run's")  # fmt: skip
    p.add_argument("--only", default=",".join(KINDS), help=f"kinds, of {', '.join(KINDS)}")
    p.add_argument("--repo", type=Path, default=HERE, help="the checkout to run")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--renamed", action="append", default=[], metavar="OLD=NEW",
                   help="a name the change renamed on purpose (a module's path): the "
                        "recording's OLD is read as NEW; repeatable")  # fmt: skip
    a = p.parse_args(argv)
    kinds = [k.strip() for k in a.only.split(",")]
    if bad := [k for k in kinds if k not in KINDS]:
        p.error(f"--only: unknown kind {bad[0]!r}; kinds are {', '.join(KINDS)}")
    global REPO
    repo = REPO = a.repo.resolve()
    if a.action == "record":
        corpus = _record(repo, kinds, a.jobs)
        a.file.write_text(json.dumps(corpus, indent=1, sort_keys=True))
        n = sum(len(e["steps"]) for e in corpus.values())
        print(f"{a.file}: {len(corpus)} entries, {n} commands recorded")
        return 0
    text = a.file.read_text()
    for pair in a.renamed:
        before, _, after = pair.partition("=")
        text = text.replace(before, after)
    old = json.loads(text)
    prefixes = tuple(PREFIX[k] for k in kinds)
    wanted = {k: v for k, v in old.items() if k.split(" ")[0] in prefixes}
    if a.action == "diff":
        new = {k: v for k, v in json.loads(a.other.read_text()).items() if k in wanted}
    else:
        new = _record(repo, kinds, a.jobs)
        if a.other is not None:
            a.other.write_text(json.dumps(new, indent=1, sort_keys=True))
    problems = []
    for name in sorted(set(wanted) | set(new)):
        if name not in new:
            problems.append(f"{name}: recorded, not run now")
        elif name not in wanted:
            problems.append(f"{name}: not recorded before")
        else:
            problems += _diff(name, wanted[name], new[name])
    print("\n".join(problems) if problems else "")
    print(f"{len(new)} entries checked against {a.file}: "
          f"{'identical' if not problems else f'{len(problems)} differences'}")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
