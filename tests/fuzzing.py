"""A property-based fuzzer of the command line (Hypothesis), shared by the test suite and by
``benchmarks/fuzz_cli.py``.

A case is a command line plus the files it reads (a grid, a forms.toml, a ledger, a spec),
drawn from strategies for hostile and careless input: grids with duplicate and odd headers,
non-finite, extreme, tiny and huge values, cut-off lines and stray bytes, and columns that
mix numbers with other kinds of value (numbers and words as JSON strings, fullwidth digits,
integers beyond 64 bits or beyond any double) in CSV, JSON lines and Parquet; expressions from a
grammar (deep, long, odd literals, forbidden syntax); random options of every command;
random ledgers (valid chains, then records dropped, swapped, edited with or without their
hashes recomputed, or lines that are not records) and heads.

The property, checked by :func:`check`: the command, run in-process through
``fitrules.cli.main`` in a fresh working directory, either exits 0 with finite output (no
NaN or infinity printed, JSON that parses strictly, nothing on stderr but simulate's
progress lines, search's estimates and the note of a form that shadows another), or exits 2 with
exactly one line on stderr and no file created or changed; ``compare --strict`` may exit 1
with its documented line. Never a traceback, never an uncaught exception, never a warning.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import re
import tempfile
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from fitrules.base.limits import BOOTSTRAP_KINDS
from fitrules.cli import main

PROGRESS_LINE = re.compile(
    r"^\S.*: \d+ of \d+ runs done \(\d+ of this invocation diverged\), \d+ s$"
)
NOTE_LINE = re.compile(  # a user's form that takes a built-in's (or forms.toml's) name
    r"^fitrules [a-z-]+( [a-z-]+)?: note: form '.*' = .* shadows the "
    r"(built-in|forms\.toml's) form of that name \(.*\); the one given here is used$"
)
ESTIMATE_LINE = re.compile(  # search, before it starts and before each step of its budget
    r"^fitrules search(, the front still falling: growing to \d+ constants)?: "
    r"[\d,]+ forms proposed( and \d+ reference\(s\))?, [\d,]+ fittable .*; "
    r"estimated .+ on \d+ process(es)?"
    r"(; while the front keeps falling, up to \d+ constants: [\d,]+ more forms, about .+ more)?$"
)
ONE_LINE = re.compile(r"^fitrules( [a-z]+)*: error: \S.*$")
STRICT_LINE = re.compile(r"^fitrules compare: \d+ degenerate \(split, form\) pairs \(--strict\)$")
NONFINITE = re.compile(r"(?:^|[\s(\[=:,])[+-]?(?:nan|inf)(?=$|[\s)\],%;])", re.IGNORECASE)


# --scheduler values refused before any cluster starts (a fuzzer never starts one)
BAD_SCHEDULERS = ["local:0", "local:x", "local:\uff12", "local:100000", "bogus://x", "tcp://h:x",
                  "", " "]  # fmt: skip
FIFO = b"\0fifo\0"  # as a file's content: make a named pipe there instead
LINK = b"\0link\0"  # as a file's content, followed by a path: make a symbolic link to it


@dataclass
class Case:
    """One command line and the files (path -> bytes) and directories it finds in place."""

    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)  # symbolic link -> what it points to
    fifos: list[str] = field(default_factory=list)  # named pipes nobody writes to
    must_refuse: str = ""  # why no correct command can run this line (else "")

    @property
    def inputs(self) -> list[str]:
        """The files the command only reads: ``--data`` and ``--spec`` values and positional
        arguments that name a file of the case."""
        out = []
        for a in self.argv:
            name = a.split("=", 1)[1] if a.startswith(("--data=", "--spec=")) else a
            data = self.files.get(name)
            if data is not None and data != FIFO and not data.startswith(LINK):
                out.append(name)
        return out

    @property
    def command(self) -> str:
        return " ".join(self.argv[:2] if self.argv[0] in ("forms", "ledger") else self.argv[:1])


@dataclass
class Outcome:
    """``kind`` is ok, refused, strict or one of the failures: traceback, exit1, leftover,
    lines, nonfinite, stderr, warning, accepted (a line that must be refused ran), changed
    (an input file was changed), exit<N>."""

    kind: str
    code: int | None
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind not in ("ok", "refused", "strict")

    @property
    def ok(self) -> bool:
        return not self.failed


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st_ = p.lstat()
            out[str(p.relative_to(root))] = (st_.st_mtime_ns, st_.st_size)
    return out


def _links_changed(root: Path, case: Case) -> bool:
    """A link given as an input or output must still be a link afterwards: written through,
    never replaced by a private copy."""
    return any(not (root / name).is_symlink() for name in case.links)


PATH_FLAGS = ("--out", "--report", "--json", "--spec-out", "--forms-out", "--ledger", "--data")


def _paths_masked(stdout: str, argv: list[str]) -> str:
    """``stdout`` with the paths given on the line masked: a file named ``-inf`` is no
    non-finite number ("forms written to -inf")."""
    for a in argv:
        flag, _, value = a.partition("=")
        if flag in PATH_FLAGS and value not in ("", "-"):
            stdout = stdout.replace(value, "PATH")
    return stdout


def _digests(root: Path, names: list[str]) -> dict[str, str]:
    return {n: hashlib.sha256((root / n).read_bytes()).hexdigest() for n in names}


def _strict_json(text: str) -> None:
    def refuse(name):
        raise ValueError(f"non-finite {name} in JSON output")

    json.loads(text, parse_constant=refuse)


@contextlib.contextmanager
def _captured(out: io.StringIO, err: io.StringIO):
    """Stdout and stderr into ``out`` and ``err``; yields the list of warnings raised inside
    (every one but deprecations)."""
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
        yield caught


def check(case: Case) -> Outcome:
    """Run ``case`` in a fresh working directory and classify what happened."""
    home = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="fitrules-fuzz-") as tmp:
        root = Path(tmp)
        for d in case.dirs:
            (root / d).mkdir(parents=True, exist_ok=True)
        links = dict(case.links)
        fifos = list(case.fifos)
        for name, data in case.files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            if data == FIFO:
                fifos.append(name)
            elif data.startswith(LINK):
                links[name] = data[len(LINK) :].decode()
            else:
                (root / name).write_bytes(data)
        case = Case(case.argv, case.files, case.dirs, links, fifos, case.must_refuse)
        for name, target in case.links.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, root / name)
        for name in case.fifos:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            os.mkfifo(root / name)
        before = _snapshot(root)
        read_only = _digests(root, case.inputs)
        out, err = io.StringIO(), io.StringIO()
        os.chdir(root)
        try:
            with _captured(out, err) as caught:
                code = main(list(case.argv))
        except KeyboardInterrupt:  # main turns its own interrupts into exit 130
            raise
        except BaseException as exc:  # noqa: BLE001 - the fuzzer reports every escape
            return Outcome("traceback", None, "".join(traceback.format_exception(exc))[-3000:])
        finally:
            os.chdir(home)
        after = _snapshot(root)
        stdout, stderr = out.getvalue(), err.getvalue()
        lines = stderr.strip().splitlines()
        if caught:
            w = caught[0]
            return Outcome("warning", code, f"{w.category.__name__}: {w.message} ({w.filename})")
        now = _digests(root, [n for n in read_only if (root / n).is_file()])
        if now != read_only:
            changed = sorted(n for n in read_only if now.get(n) != read_only[n])
            return Outcome("changed", code, f"inputs changed or removed: {changed}")
        if code == 2:
            if len(lines) != 1 or not ONE_LINE.match(lines[0]):
                return Outcome("lines", code, stderr[-2000:])
            if after != before or _links_changed(root, case):
                changed = sorted(set(after.items()) ^ set(before.items()))
                return Outcome("leftover", code, f"{lines[0]} | changed: {changed[:6]}")
            return Outcome("refused", code, lines[0])
        if code == 1:
            if "--strict" in case.argv and len(lines) == 1 and STRICT_LINE.match(lines[0]):
                return Outcome("strict", code, lines[0])
            return Outcome("exit1", code, stderr[-2000:])
        if code != 0:
            return Outcome(f"exit{code}", code, stderr[-2000:])
        if case.must_refuse:
            return Outcome("accepted", code, case.must_refuse)
        # what is allowed on stderr at exit 0: simulate's progress lines, which it prints when
        # stderr is not a terminal so that a long grid is never silent in a log file, search's
        # estimates, and the note of a form that shadows another
        noise = [
            ln
            for ln in lines
            if ln.strip()
            and not PROGRESS_LINE.match(ln)
            and not ESTIMATE_LINE.match(ln)
            and not NOTE_LINE.match(ln)
        ]
        if noise:
            return Outcome("stderr", code, stderr[-2000:])
        if _links_changed(root, case):
            return Outcome("leftover", code, f"a link was replaced: {sorted(case.links)}")
        m = NONFINITE.search(_paths_masked(stdout, case.argv))
        if m:
            i = m.start()
            return Outcome("nonfinite", code, stdout[max(0, i - 300) : i + 100])
        try:
            if "--json=-" in case.argv:
                _strict_json(stdout)
            for a in case.argv:
                if a.startswith("--json=") and a != "--json=-":
                    _strict_json((root / a.split("=", 1)[1]).read_text())
        except (ValueError, OSError) as e:
            return Outcome("nonfinite", code, str(e))
        return Outcome("ok", code, "")


# ------------------------------------------------------------------ drawing with a budget
class Draw:
    """``draw`` with a switch: a hostile case may take bad values, a clean one never does.

    A third of the cases are hostile, so most reach the fitting, the reports and the
    ledger, while every kind of bad value still turns up often.
    """

    def __init__(self, draw, hostile: bool | None = None):
        self.draw = draw
        self.hostile = draw(st.sampled_from([False, False, True])) if hostile is None else hostile

    def __call__(self, strategy):
        return self.draw(strategy)

    def chance(self, odds: int) -> bool:
        """True one time in ``odds``."""
        return self.draw(st.sampled_from(range(odds))) == 0

    def pick(self, good, bad=(), odds: int = 4):
        if self.hostile and bad and self.chance(odds):
            return self.draw(st.sampled_from(list(bad)))
        return self.draw(st.sampled_from(list(good)))

    def maybe(self, name: str, good, bad=(), p: int = 3, odds: int = 4) -> list[str]:
        """``[name=value]`` one time in ``p`` (always, for a hostile bad value), else nothing."""
        if not self.chance(p):
            return []
        return [opt(name, self.pick(good, bad, odds))]


def opt(name: str, value) -> str:
    return f"{name}={value}"  # '=' so that values starting with '-' stay values


# ------------------------------------------------------------------ grids
HOSTILE_VALUES = [
    "nan",
    "inf",
    "-inf",
    "1e308",
    "-1e308",
    "1e-320",
    "-1",
    "0",
    "abc",
    "",
    "1e999",
    "True",
    "9" * 400,
    " 3 ",
    '"1,5"',
]
# a cell of a column that otherwise holds numbers (issue 61): a number written as a JSON
# string ('"""4"""' is the CSV cell '"4"', which JSON lines read as the string "4"), a word
# as a JSON string, digits of another script, integers beyond 64 bits (exact as a double or
# not) and beyond any double, a number beyond the doubles, and a blank
MIXED_VALUES = ['"""4"""', '"""0.5"""', '"""sync"""', "１２", "４", "9" * 400, str(2**70),
                str(2**70 + 1), "-" + "9" * 30, "1e400", ""]  # fmt: skip
ODD_NAMES = ["H", "keep", "loss", "seed", " H", "H ", "", "a b", "loss.1", "é", "omega", "lr"]
BASE_HEADER = ["H", "keep", "omega", "seed", "loss", "diverged"]
SCALES = [1.0, 1.0, 1.0, 1e-300, 1e-30, 1e-5, 1e30, 1e90]


@st.composite
def grid_bytes(draw, hostile: bool = False) -> bytes:
    """A results table: a rule plus noise at some scale (tiny and huge scales are valid);
    a hostile one may be a table of anything, or carry odd headers, bad values, a column
    mixing numbers with other kinds of value (:data:`MIXED_VALUES`: numbers and words as
    JSON strings, fullwidth digits, integers beyond 64 bits or beyond any double), a missing
    column, a ragged or cut-off row, or bytes that are not UTF-8."""
    d = Draw(draw, hostile)
    if d.hostile and d.chance(6):
        ncols = d(st.integers(1, 5))
        header = d(st.lists(st.sampled_from(ODD_NAMES), min_size=ncols, max_size=ncols))
        cell = st.sampled_from(HOSTILE_VALUES + MIXED_VALUES + ["1", "2.5", "4"])
        rows = d(st.lists(st.lists(cell, min_size=ncols, max_size=ncols), max_size=5))
        return ("\n".join(",".join(r) for r in [header, *rows]) + "\n").encode()
    hs = d(st.lists(st.sampled_from([1, 2, 4, 8, 16, 64]), min_size=3, max_size=4, unique=True))
    keeps = d(
        st.lists(st.sampled_from([1.0, 0.5, 0.25, 0.125]), min_size=3, max_size=4, unique=True)
    )
    seeds = d(st.integers(1, 3))
    scale = d(st.sampled_from(SCALES + ([-1.0] if d.hostile else [])))
    lrs = d.pick([None, [3e-4]], [[3e-4, 1e-3]], 3)
    noise = d(st.integers(0, 10_000))
    header = list(BASE_HEADER) + (["lr"] if lrs else [])
    rows = []
    i = 0
    for lr in lrs or [None]:
        for H in sorted(hs):
            for keep in keeps:
                omega = 1 / keep - 1
                for s in range(seeds):
                    i += 1
                    jitter = ((noise * 7919 + i * 104729) % 1000 - 500) * 4e-6
                    loss = (2.2 + 0.012 * omega * (H / 16) ** 0.5 + jitter) * scale
                    row = [str(H), repr(keep), repr(omega), str(s), repr(loss), "False"]
                    if lrs:
                        row.append(repr(lr))
                    rows.append(row)
    if d.hostile:
        for _ in range(d(st.integers(1, 3))):
            kind = d(st.sampled_from(["value", "value", "mixed", "mixed", "mixed", "rename",
                                      "drop", "ragged", "bytes"]))  # fmt: skip
            if kind == "value":
                r, c = d(st.integers(0, len(rows) - 1)), d(st.integers(0, len(header) - 1))
                rows[r][c] = d(st.sampled_from(HOSTILE_VALUES))
            elif kind == "mixed":  # one column mixes numbers with other kinds of value
                c = d(st.integers(0, len(header) - 1))
                for r in d(st.lists(st.integers(0, len(rows) - 1), min_size=1, max_size=4)):
                    rows[r][c] = d(st.sampled_from(MIXED_VALUES))
            elif kind == "rename":
                header[d(st.integers(0, len(header) - 1))] = d(st.sampled_from(ODD_NAMES))
            elif kind == "drop" and len(header) > 1:
                c = d(st.integers(0, len(header) - 1))
                header.pop(c)
                for row in rows:
                    row.pop(c)
            elif kind == "ragged":
                rows[-1] = rows[-1] + ["1"]
            elif kind == "bytes":
                header[0] = header[0] + "\udcff"
    text = "\n".join(",".join(r) for r in [header, *rows]) + "\n"
    data = text.encode("utf-8", "surrogateescape")
    if d.hostile and d.chance(8):
        data = data[: max(0, len(data) - d(st.integers(1, 40)))]  # cut off mid-row
    return data


# ------------------------------------------------------------------ expressions
NAMES = ["H", "omega", "keep", "L0", "a", "b", "c", "d", "zz", "loss", "seed", "lr", "`my var`"]
LITERALS = [
    "0",
    "1",
    "16",
    "2.5",
    "1e-3",
    "1e999",
    "9" * 400,
    "1e-320",
    "0x1F",
    "1_000",
    "1j",
    "True",
    "'s'",
    "3.",
    ".5",
    "1e308",
    "None",
]
GOOD_FORMS = [  # each reads H and omega, the two factors the grids vary
    "L0 + a*omega*(H/16)**b",
    "L0 + a*omega + b*H",
    "L0 + a*omega**c + b*(H/16)**d",
    "L0 + a*log(H) + b*omega",
    "a*H**b + c*omega",
    "L0 + a*omega + b*log(H/16)",
    "L0 + a*exp(-H/b) + c*omega",
    "L0 + a/sqrt(H) + b*omega**2",
    "L0 + a*omega**c*(H/16)**b + d*log(H)",
    "L0[H] + a*omega*(H/16)**b",  # one intercept per level of H
    "L0 + a*omega*(Hc/H)**b",  # a scale of H: a default range from H's values (issue 27)
    "L0 + a*omega*H/(H + s)",  # a shift of H, either sign
]
ONE_FACTOR_FORMS = ["L0 + a*omega", "a*H**b", "L0 + a*log(H)"]


def _extend(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "/", "**"]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        children.map(lambda c: f"-{c}"),
        st.tuples(st.sampled_from(["log", "exp", "sqrt", "abs", "__import__"]), children).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
        children.map(lambda c: f"{c}.real"),
        children.map(lambda c: f"{c}[0]"),
        children.map(lambda c: f"(lambda: {c})()"),
        children.map(lambda c: f"{c} if H else 1"),
    )


# expressions the forms' grammar accepts: names, numbers, + - * / **, unary minus, log, exp, sqrt
valid_expressions = st.recursive(
    st.sampled_from(["H", "omega", "keep", "L0", "a", "b", "c", "0", "1", "16", "2.5", "1e-3"]),
    lambda children: st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "/", "**"]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        children.map(lambda c: f"-{c}"),
        st.tuples(st.sampled_from(["log", "exp", "sqrt"]), children).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
    ),
    max_leaves=12,
)

# expressions from a grammar: valid ones and every way to be wrong (deep, long, odd
# literals, calls, attributes, subscripts, lambdas)
grammar = st.recursive(st.sampled_from(NAMES + LITERALS), _extend, max_leaves=10)
odd_expressions = st.one_of(
    grammar,
    st.integers(1, 90).map(lambda n: "L0 + " + " + ".join(f"a{i}*H" for i in range(n))),
    st.integers(1, 3000).map(lambda n: "L0 + a*" + "-" * n + "H"),
    st.integers(1, 300).map(lambda n: "L0 + a*" + "(" * n + "H" + ")" * n),
    st.integers(1, 80).map(lambda n: "L0 + a*" + "exp(" * n + "H" + ")" * n),
    st.integers(1, 12).map(
        lambda q: "L0 + a*omega**c0" + "".join(f"*(H/16)**c{i}" for i in range(1, q))
    ),
    st.text(alphabet="Ha+-*/() 0123456789.e`", max_size=40),
)


@st.composite
def form_lines(draw, hostile: bool = False) -> str:
    d = Draw(draw, hostile)
    if not d.hostile:
        return f"x = {d(st.sampled_from(GOOD_FORMS))}"
    if d.chance(3):
        return f"x = {d(st.sampled_from(ONE_FACTOR_FORMS))}"
    name = d.pick(["x", "mine", "composition"], ["1bad", "a-b", "", "my form"], 3)
    declared = d.pick(["", "(H, omega)"], ["(H)", "(`my var`)", "(H, H)", "(zz)"], 3)
    return f"{name}{declared} = {d(odd_expressions)}"


# ------------------------------------------------------------------ options
BAD_SPLITS = [0, -1, 10**9, 100_001, 2**70]
BAD_SEEDS = [-1, 2**64]
BAD_FRACTIONS = ["0", "1", "2", "nan", "1/0", "abc", "-0.5"]
BAD_LEVELS = ["0", "1", "2", "nan", "-0.5"]
WHERES = ["keep <= 1", "H >= 1", "(H > 0) & (keep > 0)", "loss > 0"]
BAD_WHERES = [
    "keep == 1",
    "H >= 4",
    "lr == 3e-4",
    "nonsense == 1",
    "H = 1",
    "H == 'a'",
    "__import__('os')",
    " or ".join(["H == 1"] * 60),
]
DERIVES = ["omega2 = 1/keep - 1", "v = keep * 2"]
BAD_DERIVES = ["omega = 1/keep", "x", "y = H/0", "z = log(-H)", "w = 'a'"]
JSON_TARGETS = ["out.json", "sub/dir/out.json", "-"]
BAD_JSON = [
    "DIR",
    "/proc/fuzz.json",
    "g.csv",
    "",
    "R/x.json",
    "EXISTING",
    "LINKED",
    "DANGLING",
    "PIPE",
]  # a link to the data, a link to nothing, a FIFO
POINTS = ["H=8,keep=0.25", "H=2,omega=1", "H=4,keep=1", "H=16,keep=0.5", "H=1,keep=0.125"]
BAD_POINTS = [
    "H=8",
    "H=abc",
    "H=-1,omega=3",
    "H=inf,omega=1",
    "H=8,omega=1,zz=1",
    "H=8,keep=0.25,omega=7",
    "",
    ",,,",
    "H=8,H=4,keep=1",
    "H=1e308,keep=0.5",
    "H=8,keep=0",
]


def _form_options(d: Draw, weights: bool = True) -> list[str]:
    """--weights, --fix, --bound, --by, --shared (issue 22), good and bad values."""
    args: list[str] = []
    if weights:
        args += d.maybe("--weights", ["cells", "runs", "inverse-variance"], ["rows", ""], 4, 4)
    args += d.maybe("--fix", ["b=0.5", "L0=2"], ["b", "=1", "b=nan", "zz=1", "b=abc"], 6, 2)
    args += d.maybe(
        "--bound",
        ["b=-2..2", "b=0..1e3"],
        ["b=2..-2", "b=1", "b=a..b", "zz=0..1", "L0=0..1"],
        6,
        2,
    )
    if d.chance(6):
        args.append(opt("--by", d.pick(["keep", "H"], ["nope", "", "loss"], 3)))
        args += d.maybe("--shared", ["b", "b,a"], ["zz", ""], 2, 3)
    elif d.hostile and d.chance(10):
        args.append(opt("--shared", "b"))  # without --by: refused
    return args


# tables as trackers export them (tests/exports.py), each with the options that read it
# (the loader's refusals name them one at a time: a case takes all, some or wrong ones)
EXPORTS = {
    "wandb": ("wandb.csv", ["--drop-duplicates", "--metric=val/loss", "--rename=inner_steps=H",
                            "--derive=omega = 1/`compression.keep` - 1"]),
    "wandb_crashed": ("wandb.csv", ["--drop-duplicates", "--metric=val/loss",
                                    "--rename=inner_steps=H",
                                    "--derive=omega = 1/`compression.keep` - 1"]),
    "mlflow": ("runs.csv", ["--metric=metrics.val_loss", "--seed-col=params.seed",
                            "--rename=params.H=H", "--derive=omega = 1/`params.keep` - 1"]),
    "mlflow_parquet": ("runs.parquet", ["--metric=metrics.val_loss", "--seed-col=params.seed",
                                        "--rename=params.H=H",
                                        "--derive=omega = 1/`params.keep` - 1"]),
    "wide": ("wide.csv", ["--metric=loss_seed0", "--derive=omega = 1/keep - 1"]),
    "jsonl": ("runs.jsonl", ["--metric=summary.loss", "--seed-col=config.seed",
                             "--rename=config.H=H", "--derive=omega = 1/`config.keep` - 1"]),
    "json": ("runs.json", ["--metric=summary.loss", "--seed-col=config.seed",
                           "--rename=config.H=H", "--derive=omega = 1/`config.keep` - 1"]),
    "flat": ("flat.csv", ["--seed-col=config.seed", "--derive=omega = 1/keep - 1"]),
}  # fmt: skip
BAD_EXPORT_OPTIONS = ["--metric=val_loss", "--metric=State", "--rename=inner_steps=omega",
                      "--seed-col=Name", "--rename=params.H=params.keep", "--metric=params.H",
                      "--derive=omega = 1/compression.keep - 1", "--where=State == 'crashed'",
                      "--seed-col=summary.loss"]  # fmt: skip


@functools.cache
def export_bytes(kind: str) -> bytes:
    """The bytes of one tracker export of the committed main grid (built once)."""
    import exports

    buf = io.BytesIO()
    if kind in ("wandb", "wandb_crashed"):
        exports.wandb_runs(crashed_loss=kind == "wandb_crashed").to_csv(buf, index=False)
    elif kind == "mlflow":
        exports.mlflow_runs().to_csv(buf, index=False)
    elif kind == "mlflow_parquet":  # MLflow's params are text: text-typed numbers in Parquet
        exports.mlflow_runs().to_parquet(buf)
    elif kind == "wide":
        exports.wide_table().to_csv(buf, index=False)
    elif kind == "jsonl":
        buf.write("".join(json.dumps(r) + "\n" for r in exports.json_runs()).encode())
    elif kind == "json":
        buf.write(json.dumps(exports.json_runs()).encode())
    else:
        flat = exports.flattened_json().rename(
            columns={"config.H": "H", "config.keep": "keep", "summary.loss": "loss"}
        )
        flat.to_csv(buf, index=False)
    return buf.getvalue()


def _export(d: Draw) -> tuple[list[str], dict[str, bytes]]:
    kind = d(st.sampled_from(sorted(EXPORTS)))
    name, fixes = EXPORTS[kind]
    if d.chance(2):
        args = list(fixes)
    else:
        args = [f for f in fixes if d.chance(2)]
    if d.hostile and d.chance(2):
        args.append(d(st.sampled_from(BAD_EXPORT_OPTIONS)))
    return [opt("--data", name), *args], {name: export_bytes(kind)}


def _data(d: Draw) -> tuple[list[str], dict[str, bytes]]:
    files: dict[str, bytes] = {}
    if d.chance(12):  # a tracker's export (issue 43: no fuzzer had reached them)
        return _export(d)
    if d.chance(6):  # a column of numbers and other kinds of value (issue 61)
        name, data = d(mixed_table())
        files[name] = data
        args: list[str] = [opt("--data", name)]
    elif d.chance(10):
        args = []  # the committed default grid
    elif d.chance(12):  # a shipped grid by name (or a name that is none)
        args = [opt("--data", d.pick(["main", "wide", "smoke"], ["mian", "specs", "main.csv"]))]
    else:
        files["g.csv"] = d(grid_bytes(d.hostile))
        args = [opt("--data", "g.csv")]
        if d.chance(8):  # the same table as Parquet: an index, odd dtypes
            pq = d(parquet_bytes(files["g.csv"], d.hostile))
            if pq is not None:
                files = {"g.parquet": pq}
                args = [opt("--data", "g.parquet")]
        elif d.hostile and d.chance(30):
            files["g.csv"] = FIFO  # a pipe nobody writes to must not block
        elif d.chance(10):  # the same runs as JSON lines (issue 32)
            jsonl = _as_json_lines(files["g.csv"])
            if jsonl is not None:
                files = {"g.jsonl": jsonl}
                args = [opt("--data", "g.jsonl")]
    args += d.maybe("--seed-col", ["seed"], ["nope", "loss", "H", ""], 8, 2)
    args += d.maybe("--rename", RENAMES, BAD_RENAMES, 10, 2)
    if d.chance(10):
        args.append("--drop-duplicates")
    args += d.maybe("--units", ["H=steps", "H=steps,omega=1"], ["Q=x", "H", "=", ""], 8, 2)
    args += d.maybe("--where", WHERES, BAD_WHERES, 4, 2)
    args += d.maybe("--derive", DERIVES, BAD_DERIVES, 6, 2)
    if d.hostile and d.chance(8):
        args.append(opt("--metric", d(st.sampled_from(["H", "seed", "nope", "keep", "loss"]))))
    return args, files


RENAMES = ["H=H", "omega=w", "seed=run_seed", "keep=compression.keep"]
BAD_RENAMES = ["H", "=H", "nope=H", "H=seed", "H=", "a=b=c"]


@st.composite
def mixed_table(draw) -> tuple[str, bytes]:
    """A clean results table with one column mixing numbers with other kinds of value
    (:data:`MIXED_VALUES` in up to four runs), as JSON lines (where numbers and strings
    really mix), CSV or Parquet (the column stored as text): its name and bytes. Before
    issue 61, 1 and "1" in one JSON-lines column crashed validate, and a 400-digit integer
    in a factor passed validate and crashed fit --by."""
    import csv as csvlib

    d = Draw(draw, False)
    rows = list(csvlib.reader(io.StringIO(d(grid_bytes(False)).decode())))
    header, body = rows[0], rows[1:]
    c = d(st.integers(0, len(header) - 1))
    for r in d(st.lists(st.integers(0, len(body) - 1), min_size=1, max_size=4)):
        body[r][c] = d(st.sampled_from(MIXED_VALUES))
    text = ("\n".join(",".join(r) for r in [header, *body]) + "\n").encode()
    kind = d(st.sampled_from(["jsonl", "jsonl", "csv", "parquet"]))
    if kind == "jsonl":
        return "g.jsonl", _as_json_lines(text) or text
    if kind == "parquet":
        try:
            import pandas as pd

            buf = io.BytesIO()
            pd.read_csv(io.BytesIO(text), dtype={header[c]: str}).to_parquet(buf)
            return "g.parquet", buf.getvalue()
        except ImportError:  # no pyarrow: the CSV
            pass
    return "g.csv", text


def _as_json_lines(csv: bytes) -> bytes | None:
    """The CSV table as JSON lines (one object a run), or None if it does not parse."""
    import csv as csvlib
    import io
    import json

    try:
        rows = list(csvlib.reader(io.StringIO(csv.decode())))
    except (UnicodeDecodeError, csvlib.Error):
        return None
    if len(rows) < 2:
        return None
    header = rows[0]
    out = []
    for r in rows[1:]:
        rec = {}
        for k, v in zip(header, r, strict=False):
            try:
                rec[k] = json.loads(v) if v not in ("NaN", "nan", "inf", "-inf") else v
            except ValueError:
                rec[k] = v
        out.append(json.dumps(rec))
    return ("\n".join(out) + "\n").encode()


PARQUET_CHANGES = ["index", "index", "multiindex", "float16", "float32", "list", "plain",
                   "text"]  # fmt: skip
HOSTILE_PARQUET_CHANGES = ["complex", "bool_metric", "index_clash", "text_mixed"]


@st.composite
def parquet_bytes(draw, csv: bytes, hostile: bool = False) -> bytes | None:
    """The table ``csv`` as Parquet with a change: a named index (which holds data), narrow
    floats, a list column, a column of numbers stored as text; hostile: a complex or
    true/false metric, an index named like a column, a text column of numbers with one value
    of another kind (a word, fullwidth digits, a 400-digit integer). None when the table
    cannot be written as Parquet (or pyarrow is missing)."""
    d = Draw(draw, hostile)
    change = d.pick(PARQUET_CHANGES, HOSTILE_PARQUET_CHANGES, 2)
    try:
        import pandas as pd

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = pd.read_csv(io.BytesIO(csv))
            cols = [str(c) for c in df.columns]
            if change == "index" and cols:
                df = df.set_index(d(st.sampled_from(cols)))
            elif change == "multiindex" and len(cols) > 2:
                df = df.set_index(cols[:2])
            elif change in ("float16", "float32"):
                df = df.astype({c: change for c in cols if df[c].dtype.kind == "f"})
            elif change == "list":
                df["tags"] = [[1, 2]] * len(df)
            elif change in ("text", "text_mixed") and cols:  # numbers stored as text (MLflow)
                c = d(st.sampled_from(cols))
                df[c] = df[c].astype(str)
                if change == "text_mixed":  # and one value of another kind among them
                    df.loc[df.index[d(st.integers(0, len(df) - 1))], c] = d(
                        st.sampled_from(MIXED_VALUES)
                    )
            elif change == "complex" and "loss" in cols:
                df["loss"] = df["loss"].astype(complex)
            elif change == "bool_metric" and "loss" in cols:
                df["loss"] = df["loss"] > 0
            elif change == "index_clash" and "H" in cols:
                df.index = pd.Index(range(len(df)), name="H")
            buf = io.BytesIO()
            df.to_parquet(buf)
        return buf.getvalue()
    except Exception:  # noqa: BLE001 - a table Parquet cannot hold is simply not drawn
        return None


def _outputs(d: Draw, report: bool = True) -> tuple[list[str], list[str], dict[str, bytes]]:
    args = d.maybe("--json", JSON_TARGETS, BAD_JSON, 2, 2)
    if report and d.chance(20):
        args.append(opt("--report", d.pick(["R", "sub/R"], ["EXISTING", "."], 2)))
        if d.chance(2):
            args.append("--force")
        args += d.maybe("--figure-format", ["png", "png,svg", "svg"], ["tiff", "", ","], 3, 2)
        args += d.maybe("--labels", ["loss=validation loss", "H=sync interval,loss=L"],
                        ["loss", "=x", "H="], 4, 2)  # fmt: skip
    files = {"EXISTING/notes.txt": b"mine", "LINKED": LINK + b"g.csv",
             "DANGLING": LINK + b"nowhere.json", "PIPE": FIFO}  # fmt: skip
    return args, ["DIR", "EXISTING"], files


def _data_and_outputs(d: Draw):
    """A case's --data options and files, then its output options and the folders and files
    they need (the files in one dict)."""
    data, files = _data(d)
    out, dirs, more = _outputs(d)
    files.update(more)
    return data, files, out, dirs


@st.composite
def compare_cases(draw) -> Case:
    d = Draw(draw)
    data, files, out, dirs = _data_and_outputs(d)
    argv = ["compare", *data, opt("--splits", d.pick([1, 2, 4, 6], BAD_SPLITS, 6))]
    forms = d.pick(
        ["composition", "composition,log_additive", "additive", None],
        ["bogus", "", "omega_only"],
        6,
    )
    if forms is not None:
        argv.append(opt("--forms", forms))
    if forms is None or d.chance(3):
        argv.append(opt("--form", d(form_lines(d.hostile))))
    argv += d.maybe("--train-frac", ["1/3", "0.5", "0.7"], BAD_FRACTIONS, 3, 2)
    argv += d.maybe("--seed", [0, 1, 2**63 - 1], BAD_SEEDS, 4, 2)
    argv += d.maybe("--objective", ["rel_ls", "log_huber", "abs_ls"], ["l1"], 3, 6)
    argv += d.maybe("--delta", ["1e-3", "0.01"], ["0", "-1", "inf", "nan"], 6, 2)
    argv += _form_options(d)
    argv += d.maybe(
        "--split",
        ["random", "leave-one-level-out:H", "extrapolate:H", "extrapolate:H>=4",
         "extrapolate:H,omega"],
        ["extrapolate:H>=abc", "transfer", "bogus:x", "leave-one-level-out:zz",
         "extrapolate:H,H", "extrapolate:H,", "extrapolate:H:1e9,omega"],
        4,
        4,
    )
    argv += d.maybe("--guard-span", ["20", "2"], ["1", "0", "inf", "nan"], 8, 2)
    argv += d.maybe("--guard-se", ["1", "0.5"], ["0", "-1", "nan"], 8, 2)
    argv += d.maybe("--metric-range", ["0,3.61", "0,1e9"], ["3,1", "a,b", "0", ""], 8, 2)
    argv += d.maybe("--guard-excursion", ["10", "2.5"], ["0", "-1", "nan", "inf"], 8, 2)
    argv += d.maybe("--verdict-train-frac", ["0.9", "0.5", "3/4"], BAD_FRACTIONS, 6, 2)
    argv += d.maybe("--seeds", ["cells", "cells-and-seeds"], ["seeds", ""], 6, 2)
    argv += d.maybe("--heldout-weights", ["box", "equal"], ["trapezoid", ""], 6, 2)
    argv += d.maybe("--error-metric", ["relative", "absolute"], ["percent", ""], 6, 2)
    if d.chance(6):
        argv.append(opt("--against", d.pick(["composition", "log_additive"], ["bogus", ""], 3)))
    if d.chance(6):
        argv.append(
            opt(
                "--pairs",
                d.pick(
                    ["composition:log_additive", "log_additive:composition,composition:additive"],
                    ["composition:composition", "a-b", ",", "composition:bogus"],
                    3,
                ),
            )
        )
    if d.hostile and d.chance(6):
        argv.append(opt("--tune", d(st.sampled_from(["lr", "H", "nope"]))))
    if d.chance(10):
        files["t.csv"] = d(grid_bytes(d.hostile))
        if d.chance(3):  # a test grid whose metric has another name
            files["t.csv"] = files["t.csv"].replace(b"loss", b"val_loss", 1)
        files.setdefault("g.csv", d(grid_bytes(False)))
        argv += ["--split=transfer", "--fit-data=g.csv", "--test-data=t.csv"]
    for flag in ("--keep-degenerate", "--strict"):
        if d.chance(5):
            argv.append(flag)
    return Case(argv + out, files, dirs)


BAD_RUNS = [0, -1, 10**5, "2.5", "nan"]


# issue 44: linear constraints between constants (the forms fitted have L0, a, b)
CONSTRAINTS = ["b > 0", "b <= 0.3", "L0 >= 2", "a + b = 1", "L0 >= 100*a", "b < 0.5*L0"]
BAD_CONSTRAINTS = ["b > zz", "a*b > 1", "log(b) = 0", "b", "a > b > 0", "1 > 0", "b > nan",
                   "__import__('os') = 1", "b >= 1e999", "", "H > 1"]


@st.composite
def fit_cases(draw) -> Case:
    d = Draw(draw)
    data, files, out, dirs = _data_and_outputs(d)
    form = d.pick(["composition", "additive", "free_omega"], ["bogus", "omega_only"], 6)
    if d.chance(3):
        form = d(form_lines(d.hostile))
    argv = ["fit", *data, opt("--form", form)]
    if d.chance(5):  # issue 66: a saved fit alone (no --data), or beside what it refuses
        files["fit.json"] = saved_fit_bytes()
        argv = ["fit", opt("--fit", d.pick(["fit.json"], ["none.json", "DIR", "l.jsonl"], 4))]
        argv += d.maybe("--data", ["main"], (), 8)
        argv += d.maybe("--form", ["composition"], (), 8)
    argv += d.maybe("--objective", ["rel_ls", "log_huber", "abs_ls"], (), 4)
    argv += _form_options(d)
    if d.chance(3):
        # issue 44: --intervals [bootstrap|profile]; a bare flag is the bootstrap
        argv += d.pick([["--intervals"], ["--intervals", "profile"], ["--intervals=bootstrap"]],
                       [["--intervals=wald"], ["--intervals="]], 6)  # fmt: skip
    for _ in range(d(st.integers(0, 2))):
        argv.append(opt("--constraint", d.pick(CONSTRAINTS, BAD_CONSTRAINTS, 3)))
    for _ in range(d(st.integers(0, 2))):
        argv.append(opt("--predict", d.pick(POINTS, BAD_POINTS, 2)))
    if any(a.startswith("--intervals") or a.startswith("--predict") for a in argv):
        argv.append(opt("--resamples", d.pick([20, 25], [5, 0, 10**9], 6)))
        argv += d.maybe("--level", ["0.9", "0.95"], BAD_LEVELS, 4, 2)
        argv += d.maybe("--bootstrap-seed", [0, 7], BAD_SEEDS, 4, 2)
        argv += d.maybe("--bootstrap", list(BOOTSTRAP_KINDS), ["bogus", ""], 4, 2)
        argv += d.maybe("--runs", [1, 3], BAD_RUNS, 4, 2)
        # issue 64: a seed sd from outside the grid, or the seed variance pooled over slices
        argv += d.maybe("--seed-sd", ["0.005", "0.02"], ["0", "-0.01", "nan", "x"], 6, 2)
        argv += d.maybe("--seed-pool", ["lr == 1e-3", "lr == 3e-4"], ["lr ==", "", "nope > 1"],
                        6, 2)  # fmt: skip
    return Case(argv + out, files, dirs)


ALLOCATE_FORMS = ["chin(N, D) = E + A/N**alpha + B/D**beta",
                  "p(N, D) = A*N**-alpha + E + B*D**-beta", "q(N, D) = A/N**alpha + B/D**beta",
                  "m(N, D) = E + A/N**alpha + B/D**beta + c*N/D"]  # fmt: skip
BAD_ALLOCATE_FORMS = ["up(N, D) = E + exp(a)*N**0.1 + B/D**beta", "composition", "bogus",
                      "w(N, D, Q) = E + A/N**alpha + B/D**beta + Q",
                      "z(N) = E + A/N**alpha"]  # fmt: skip
COSTS = ["6*N*D", "N*D", "D*N*6", "N**2*D", "6*N*D/1e3"]
BAD_COSTS = ["N+D", "6*N*T", "N", "-6*N*D", "N/D", "", "6*N*D*(1+N)", "6*N*D)", "nan*N*D", "0*N*D"]
BUDGETS = ["1e18:1e24:7", "1e20", "1e19,1e21", "1e30", "1e10:1e12:2"]
BAD_BUDGETS = ["-1", "0", "1e24:1e18:3", "1:2:1", "1:2:1001", "x", "nan", "inf", "1e20,,1e21",
               "", ":", "1e400", "1:2:x"]  # fmt: skip


@st.composite
def allocate_runs_bytes(draw, hostile: bool = False) -> bytes:
    """A grid in N and D of a Chinchilla-shaped law with seeded noise; when hostile, with
    cells cut, values spoiled, or one variable constant."""
    import numpy as np

    d = Draw(draw, hostile)
    seed = d(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    k = d(st.sampled_from([5, 4, 6, 3, 2]))  # 2 x 2 cells: too few for 5 constants
    n, dd = np.meshgrid(np.geomspace(5e7, 5e9, k), np.geomspace(1e9, 1e11, k))
    n, dd = n.ravel(), dd.ravel()
    if d.hostile and d.chance(6):
        dd = np.full_like(dd, 1e10)
    loss = (1.69 + 406.4 / n**0.34 + 410.7 / dd**0.28) * np.exp(0.01 * rng.standard_normal(n.size))
    rows = [f"{float(a)!r},{float(b)!r},{float(c)!r}"
            for a, b, c in zip(n, dd, loss, strict=True)]  # fmt: skip
    if d.hostile and d.chance(3):
        i = d(st.integers(0, len(rows) - 1))
        rows[i] = ",".join(d(st.sampled_from(HOSTILE_VALUES)) if d.chance(2) else v
                           for v in rows[i].split(","))  # fmt: skip
    return ("N,D,loss\n" + "\n".join(rows) + "\n").encode()


@functools.lru_cache(maxsize=1)
def allocate_fit_bytes() -> bytes:
    """A fit of the allocate grid, as ``to_json`` writes it (made once)."""
    import declared

    import fitrules as fr

    return fr.fit(declared.allocate_runs(), ALLOCATE_FORMS[0]).to_json().encode()


@st.composite
def allocate_cases(draw) -> Case:
    d = Draw(draw)
    files = {"n.csv": d(allocate_runs_bytes(d.hostile))}
    out, dirs, more = _outputs(d)
    files.update(more)
    form = d.pick(ALLOCATE_FORMS, BAD_ALLOCATE_FORMS, 4)
    argv = ["allocate", "--data=n.csv", opt("--form", form)]
    if d.chance(5):  # issue 66: a saved fit alone (no --data), or beside what it refuses
        files["fit.json"] = allocate_fit_bytes()
        argv = ["allocate", opt("--fit", d.pick(["fit.json"], ["none.json", "DIR", "n.csv"], 4))]
        argv += d.maybe("--data", ["n.csv"], (), 8)
        argv += d.maybe("--form", [ALLOCATE_FORMS[0]], (), 8)
    argv += d.maybe("--cost", COSTS, BAD_COSTS, 3, 2)
    argv += d.maybe("--budgets", BUDGETS, BAD_BUDGETS, 2, 2)
    argv += d.maybe("--objective", ["rel_ls", "log_huber"], (), 4)
    argv += d.maybe("--fix", ["alpha=0.34"], ["zz=1", "alpha", "alpha=x"], 8, 2)
    argv += d.maybe("--bound", ["alpha=0.05..1"], ["alpha=1..0", "q=1..2"], 8, 2)
    kind = d.pick(["covariance", "bootstrap", "none"], ["jackknife", ""], 4)
    argv.append(opt("--intervals", kind))
    argv += d.maybe("--family", ["none", "default"], ["all", ""], 8, 2)
    argv += d.maybe("--level", ["0.9", "0.95"], BAD_LEVELS, 4, 2)
    if kind == "bootstrap":
        argv.append(opt("--resamples", d.pick([20, 25], [5, 0, 10**9], 6)))
        argv += d.maybe("--bootstrap-seed", [0, 7], BAD_SEEDS, 4, 2)
    return Case(argv + out, files, dirs)


@st.composite
def validate_cases(draw) -> Case:
    d = Draw(draw)
    data, files = _data(d)
    out, dirs, more = _outputs(d, report=False)
    files.update(more)
    if data and data[0].startswith("--data=") and d.chance(2):  # the table as positional
        data = [data[0].split("=", 1)[1], *data[1:]]
    if d.hostile and d.chance(6):
        data = [d(st.sampled_from(["DIR", "missing.csv", "EXISTING/notes.txt"]))]
    return Case(["validate", *data, *out], files, dirs)


SELECTIONS = ["H=1,keep=1", "H=4,keep=1", "H=16,keep=1", "H=4,keep=0.5", "H=1,keep=0.5"]
BAD_SELECTIONS = ["keep=1", "H=abc", "zz=1", "", "H", "algo=sync", "H=1,keep=1,H=4"]


@st.composite
def ci_cases(draw) -> Case:
    d = Draw(draw)
    data, files, out, dirs = _data_and_outputs(d)
    argv = ["ci", *data]
    if data or d.chance(4):
        argv.append(opt("--baseline", d.pick(SELECTIONS, BAD_SELECTIONS, 3)))
        if d.chance(4):
            argv.append(opt("--treatment-sweep", d.pick(["H", "keep"], ["zz"], 3)))
        else:
            argv.append(opt("--treatment", d.pick(SELECTIONS, BAD_SELECTIONS, 3)))
    argv += d.maybe("--level", ["0.9", "0.95"], BAD_LEVELS, 4, 2)
    argv.append(opt("--resamples", d.pick([1000, 1500], [999, 0, 10**9], 6)))
    argv += d.maybe("--seed", [0, 3], BAD_SEEDS, 4, 2)
    return Case(argv + out, files, dirs)


# ------------------------------------------------------------------ ledgers
def _digest(rec: dict) -> str:
    body = {k: v for k, v in rec.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode()).hexdigest()


def _chain(records: list[dict]) -> list[dict]:
    prev = None
    out = []
    for i, r in enumerate(records, start=1):
        r = {**r, "id": i, "prev_sha256": prev}
        r["sha256"] = _digest(r)
        prev = r["sha256"]
        out.append(r)
    return out


LEDGER_MUTATIONS = [
    "drop_last",
    "drop_middle",
    "swap",
    "edit",
    "rehash_all",
    "nan",
    "inf",
    "deep",
    "not_json",
    "bytes",
    "missing_field",
    "wrong_type",
    "blank",
    "no_newline",
]


@st.composite
def ledger_files(draw, hostile: bool = False) -> tuple[bytes, str | None]:
    """A ledger (bytes) and a head to check it against (or None): a valid chain, then, for a
    hostile case, records dropped, swapped or edited (hashes kept or all recomputed), lines
    that are not records, and heads that are stale, wrong or malformed."""
    d = Draw(draw, hostile)
    records = [
        {
            "form": "composition",
            "expression": "L0 + a*omega*(H/16)**b",
            "variables": ["H", "omega"],
            "constants": {"L0": 2.2, "a": 0.012, "b": 0.5},
            "point": {
                "H": float(d(st.sampled_from([1, 4, 16]))),
                "keep": d(st.sampled_from([1.0, 0.5])),
            },
            "prediction": 2.2,
            "interval": [2.1, 2.3],
            "tolerance_pct": d(st.sampled_from([None, 1.0])),
            "data": {
                "sha256": "0" * 64,
                "where": d.pick([[], ["keep == 1"]], [["H ==="], ["zz > 1"]], 3),
                **({"metric": d(st.sampled_from(["loss", "val_loss"]))} if d.chance(2) else {}),
            },
            **({"setup": {"width": 256, "algo": "diloco"}} if d.chance(2) else {}),
            "command": "fitrules predict",
            "time": "2026-01-01T00:00:00+00:00",
        }
        for _ in range(d(st.integers(0, 4)))
    ]
    chain = _chain(records)
    head = f"{len(chain)}:{chain[-1]['sha256']}" if chain else None
    lines = [json.dumps(r, sort_keys=True) for r in chain]
    mutation = d.pick(["none"], LEDGER_MUTATIONS, 1)
    if mutation == "drop_last" and lines:
        lines.pop()
    elif mutation == "drop_middle" and len(lines) > 2:
        lines.pop(1)
    elif mutation == "swap" and len(lines) > 1:
        lines[0], lines[1] = lines[1], lines[0]
    elif mutation == "edit" and lines:
        rec = json.loads(lines[0])
        rec["prediction"] = 2.3
        lines[0] = json.dumps(rec, sort_keys=True)
    elif mutation == "rehash_all" and records:
        records[0]["prediction"] = 2.5
        lines = [json.dumps(r, sort_keys=True) for r in _chain(records)]
    elif mutation == "nan":
        lines.append('{"id": NaN, "sha256": "x"}')
    elif mutation == "inf":
        lines.append('{"id": 1e999, "sha256": "x"}')
    elif mutation == "deep":
        lines.append("[" * 50_000 + "]" * 50_000)
    elif mutation == "not_json":
        lines.append("{not json")
    elif mutation in ("missing_field", "wrong_type") and records:
        bad = dict(records[-1])
        if mutation == "missing_field":
            bad.pop(d(st.sampled_from(["prediction", "point", "interval", "data", "form"])))
        else:
            key = d(st.sampled_from(["prediction", "point", "interval", "id", "tolerance_pct"]))
            bad[key] = d(st.sampled_from(["x", [1], {"H": "8"}, -1, True, None]))
        lines = [json.dumps(r, sort_keys=True) for r in _chain([*records[:-1], bad])]
    elif mutation == "blank":
        lines.insert(0, "")
    raw = ("\n".join(lines) + ("" if mutation == "no_newline" else "\n")).encode()
    if mutation == "bytes":
        raw = b"\xff\xfe" + raw
    which = d.pick(["right", "none"], ["garbage", "prefix", "wrong"], 2)
    if which == "none" or head is None:
        return raw, None
    if which == "garbage":
        return raw, d(st.sampled_from(["abc", "1:xyz", "", "9" * 80, "0:" + "a" * 12]))
    if which == "prefix":
        return raw, head.split(":")[1][:12]
    if which == "wrong":
        return raw, "1:" + "ab" * 32
    return raw, head


@st.composite
def ledger_cases(draw) -> Case:
    d = Draw(draw)
    raw, head = d(ledger_files(d.hostile))
    files = {"l.jsonl": raw}
    command = d(st.sampled_from(["score", "verify", "predict", "predict"]))
    if command == "verify":
        argv = ["ledger", "verify", opt("--ledger", d.pick(["l.jsonl"], ["DIR", "none.jsonl"], 3))]
        if head is not None:
            argv.append(opt("--head", head))
        return Case(argv, files, ["DIR"])
    data, more = _data(d)
    files.update(more)
    if command == "score":
        if d.chance(2):  # new runs from several setups, under one metric name or another
            files["new.csv"] = d(new_runs_bytes(d.hostile))
            data = [opt("--data", "new.csv")]
            data += d.maybe("--metric", ["loss", "val_loss"], ["train_loss", "width"], 4, 2)
        argv = ["score", opt("--ledger", "l.jsonl"), *data]
        if head is not None:
            argv.append(opt("--head", head))
        argv += d.maybe("--json", JSON_TARGETS, BAD_JSON, 3, 2)
        return Case(argv, files, ["DIR"])
    ledger = d.pick(["l.jsonl", "new.jsonl", "sub/new.jsonl", "mine/link.jsonl"], ["DIR"], 4)
    if ledger == "mine/link.jsonl":  # a link to a shared ledger: extended where it points
        files["shared/l.jsonl"] = files.pop("l.jsonl")
        files["mine/link.jsonl"] = LINK + d.pick(["../shared/l.jsonl"], ["link.jsonl"], 2).encode()
        if d.chance(4):
            files["mine/link.jsonl"] = LINK + b"../shared/missing.jsonl"  # a new shared ledger
    elif d.hostile and d.chance(20):
        files["l.jsonl"] = FIFO
    form = [
        opt(
            "--form",
            d.pick(
                ["composition", "log_additive", "composition_per_h"], ["bogus", "omega_only"], 4
            ),
        )
    ]
    saved = d.chance(5)  # issue 44: predict with a saved fit (its data, form and options)
    if saved:
        good = saved_fit_bytes()
        changed = good.replace(b'"sha256": "', b'"sha256": "0', 1)  # not the data's
        mutated = d(saved_fit_texts())  # keys dropped, types swapped, values not finite
        files["fit.json"] = d.pick([good], [b"{}", b"not json", changed, mutated], 3)
        form = [opt("--fit", d.pick(["fit.json"], ["none.json", "DIR", "l.jsonl"], 4))]
        if d.chance(8):
            form.append(opt("--form", "composition"))  # refused: one or the other
        data = [] if d.chance(2) else data
    argv = [
        "predict",
        *data,
        *form,
        opt("--at", d.pick(POINTS, BAD_POINTS, 2)),
        # issue 66: without a ledger the prediction is printed and nothing written
        *([] if d.chance(5) else [opt("--ledger", ledger)]),
        opt("--resamples", d.pick([20], [5, 10**9], 6)),
    ]
    argv += d.maybe("--bootstrap", list(BOOTSTRAP_KINDS), ["bogus"], 4, 2)
    argv += d.maybe("--tolerance", ["1", "5"], ["0", "-1", "inf", "nan"], 3, 2)
    argv += _form_options(d) if not saved or d.chance(8) else []
    argv += d.maybe("--runs", [1, 3], BAD_RUNS, 3, 2)
    # issue 64: predict takes fit's outside information about the seed noise (refused
    # beside --fit, whose saved fit records its own)
    argv += d.maybe("--seed-sd", ["0.005", "0.02"], ["0", "-0.01", "nan", "x"], 6, 2)
    argv += d.maybe("--seed-pool", ["lr == 1e-3", "lr == 3e-4"], ["lr ==", "", "nope > 1"],
                    6, 2)  # fmt: skip
    return Case(argv, files, ["DIR"])


@functools.lru_cache(maxsize=1)
def saved_fit_bytes() -> bytes:
    """A fit of the committed main grid at lr 3e-4, as ``to_json`` writes it (made once)."""
    import fitrules as fr

    return fr.fit(fr.load_example("main", where="lr == 3e-4"), "composition").to_json().encode()


@functools.lru_cache(maxsize=1)
def saved_fits() -> tuple[dict, ...]:
    """Valid saved fits of the committed main grid at lr 3e-4, as records: the plain fit of
    :func:`saved_fit_bytes`, one with a constant fixed and one with a bound open above (which
    ``to_json`` writes as null)."""
    import fitrules as fr

    g = fr.load_example("main", where="lr == 3e-4")
    texts = [
        saved_fit_bytes().decode(),
        fr.fit(g, "composition", fix={"b": 0.5}).to_json(),
        fr.fit(g, "composition", bounds={"b": (0.0, float("inf"))}).to_json(),
    ]
    return tuple(json.loads(t) for t in texts)


# the keys of a saved fit that load_fit reads; the others are made again by the refit
SAVED_FIT_READ = ("form", "constants", "data", "call")
ODD_VALUES = [None, True, False, 0, -1, 1.5, 1e308, 10**30, 10**400, "", "x", " ", "nan", "0x1p+0",
              "\u00b5", "a\nb", [], {}, [1, "a"], {"a": 1}, ["x"], [[]], [None, None]]  # fmt: skip
NONFINITE_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
EXACT_EDITS = [3.0, -1.0, 0.0, 1 + 1e-7, 1 + 1e-3, "nan", "inf", "-inf", "0x", "zz", "", 5, None]


def _key_paths(doc, where: tuple = ()) -> list[tuple]:
    """Every key path of ``doc`` (list items by index), not inside the per-cell table."""
    if not isinstance(doc, dict | list):
        return []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    out = []
    for k, v in items:
        out.append((*where, k))
        if (*where, k) != ("cells",):
            out += _key_paths(v, (*where, k))
    return out


def _at(doc, path: tuple):
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def saved_fit_texts(draw) -> bytes:
    """A saved fit (:func:`saved_fits`) as ``to_json`` wrote it, mutated one to three times: a
    key dropped, a value of another type, a number made NaN or infinite, a value nested 1 to
    100,000 deep, a text made 5,000 characters long, an exact constant or a constant edited."""
    import copy

    doc = copy.deepcopy(draw(st.sampled_from(saved_fits())))
    texts: dict[str, str] = {}  # a marker in the record -> the JSON text it stands for
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop", "swap", "nonfinite", "deepen", "long", "exact",
                                     "constant"]))  # fmt: skip
        exact = doc.get("call", {}).get("constants_exact") if isinstance(doc.get("call"), dict) \
            else None  # fmt: skip
        if kind in ("exact", "constant"):
            table = exact if kind == "exact" else doc.get("constants")
            if isinstance(table, dict) and table:
                name = draw(st.sampled_from(sorted(table)))
                edit = draw(st.sampled_from(EXACT_EDITS))
                try:
                    number = float.fromhex(table[name]) if kind == "exact" else float(table[name])
                except (TypeError, ValueError, OverflowError):
                    number = None
                if isinstance(edit, float) and number is not None:
                    table[name] = (number * edit).hex() if kind == "exact" else number * edit
                else:
                    table[name] = edit
            continue
        paths = _key_paths(doc)
        read = [p for p in paths if p[0] in SAVED_FIT_READ]
        if not paths:
            break
        path = draw(st.sampled_from(read if read and not draw(st.integers(0, 4)) == 0
                                    else paths))  # fmt: skip
        parent, key = _at(doc, path[:-1]), path[-1]
        marker = f"@@{i}@@"
        if kind == "drop":
            del parent[key]
        elif kind == "swap":
            parent[key] = draw(st.sampled_from(ODD_VALUES))
        elif kind == "nonfinite":
            texts[marker], parent[key] = draw(st.sampled_from(NONFINITE_JSON)), marker
        elif kind == "deepen":
            depth = draw(st.sampled_from([1, 2, 70, 2000, 100_000]))
            left, right = draw(st.sampled_from([("[", "]"), ('{"k": ', "}")]))
            texts[marker] = left * depth + json.dumps(parent[key]) + right * depth
            parent[key] = marker
        else:
            old = parent[key]
            parent[key] = (old if isinstance(old, str) and draw(st.booleans()) else "") + "x" * 5000
    text = json.dumps(doc)
    for marker, value in texts.items():
        text = text.replace(json.dumps(marker), value)
    return text.encode()


@st.composite
def saved_fit_cases(draw) -> Case:
    """``fitrules predict --fit`` of a mutated saved fit (:func:`saved_fit_texts`)."""
    files = {"fit.json": draw(saved_fit_texts())}
    argv = ["predict", "--fit=fit.json", "--at=H=8,keep=0.25", "--ledger=l.jsonl"]
    return Case(argv, files)


@st.composite
def new_runs_bytes(draw, hostile: bool = False) -> bytes:
    """New runs at the cells the fuzzed ledgers predict, from one setup or several (widths,
    algorithms), under the metric name loss or val_loss."""
    d = Draw(draw, hostile)
    widths = d.pick([[256]], [[256, 1024]], 2)
    algos = d.pick([["diloco"]], [["diloco", "sync"]], 2)
    metric = d(st.sampled_from(["loss", "loss", "val_loss"]))
    rows = ["H,keep,omega,seed,width,algo,diverged," + metric]
    for H in (1, 4, 16):
        for keep in (1.0, 0.5):
            for w in widths:
                for a in algos:
                    for seed in range(d(st.integers(1, 3))):
                        loss = 2.2 + 0.01 * (1 / keep - 1) + 0.001 * seed + (w == 1024) * 0.1
                        rows.append(f"{H},{keep},{1 / keep - 1},{seed},{w},{a},False,{loss}")
    return ("\n".join(rows) + "\n").encode()


GOOD_CANDIDATES = ["H=2,8,32", "H=2,8;keep=1/32", "keep=0.75", "H=32"]
BAD_CANDIDATES = [
    "H=0.5,1.5,2.5",
    "H=1.5",
    "H=0.5",
    "H=-4",
    "H=1e308",
    "omega=-1",
    "H=2;H=8",
    "zz=1",
    "H=",
    "H=abc",
    "keep=2",
    "H=" + ",".join(str(i) for i in range(2, 200)),
]
TARGETS = ["H=256,omega=63", "H=32,keep=0.25"]
BAD_TARGETS = ["H=abc", "zz=1", "H=0,omega=1", "", "H=256,bogus=3"]


@st.composite
def design_cases(draw) -> Case:
    """design: candidates (good and every way to be wrong), a target, the spec and JSON
    targets, including ones that name an input or each other."""
    d = Draw(draw)
    if d.chance(2):  # the committed grid, which the harness wrote: a spec can be made
        data, files = d.maybe("--where", ["keep <= 1"], [], 3), {}
    else:
        data, files = _data(d)
    out, dirs, more = _outputs(d)
    files.update(more)
    target = d.chance(6)
    if target:
        forms = d.pick(["composition", "log_additive"], ["composition,additive"], 3)
    else:
        forms = d.pick(
            [
                "composition,additive",
                "composition,log_additive",
                "omega_only,composition",
                "composition,composition_per_h",
            ],
            ["composition", "bogus,composition", "", "composition,composition"],
            4,
        )
    argv = ["design", *data, opt("--forms", forms), "--design-splits=10", "--resamples=20"]
    if d.chance(5):
        name = d.pick(["x"], ["y"], 2)  # y is not named in --forms
        argv += [opt("--forms", forms + ",x"), opt("--form", f"{name} = L0 + a*omega + b*H")]
    if target:
        argv.append(opt("--target", d.pick(TARGETS, BAD_TARGETS, 2)))
    argv += d.maybe("--candidates", GOOD_CANDIDATES, BAD_CANDIDATES, 3, 2)
    argv.append(opt("--budget", d.pick([6, 9], [0, -1, 10**6], 6)))
    argv += d.maybe("--seeds", [2, 3], [0, 100], 4, 2)
    argv += _form_options(d, weights=False)
    argv += d.maybe("--objective", ["rel_ls", "log_huber"], (), 3)
    argv += d.maybe("--delta", ["1e-3", "0.05"], ["0", "-1", "nan"], 4, 2)
    argv += d.maybe(
        "--spec-out",
        ["s.toml", "sub/s.toml"],
        ["g.csv", "DIR", "out.json", "EXISTING", "", "forms.toml"],
        3,
        2,
    )
    return Case(argv + out, files, dirs)


GOOD_GRAMMARS = [
    b"terms = 1\n",
    b'terms = 1\nfactors = ["power", "log"]\n',
    # repeats collapse (issue 31: 100,000 of one kind reached 8 GiB)
    b"terms = 1\nfactors = [" + b", ".join([b'"log"'] * 5000) + b"]\n",
]
BAD_GRAMMARS = [b'terms = "x"\n', b"colour = 1\n", b"terms = [\n", b"terms = 0\n", FIFO,
                b'variables = ["zz"]\nterms = 1\n',
                b"variables = " + b"[" * 3000 + b"]" * 3000 + b"\n",  # nested 3,000 deep
                b"terms = 1\nlevels = { H = 1 }\n",  # a table, not a list
                b"terms = 6\nmax_constants = 12\nmax_nonlinear = 3\nfirst_constants = 12\n",
                b"first_constants = 1\n"]  # fmt: skip
# searches past the limits (issue 31, serious 1): refused by the cost model before any fit
# (each refused whatever the options before it: a case that ran would run for hours)
BIG_SEARCHES = [
    ["--variables", "H,omega", "--factors", "power,linear,inverse,sqrt,log,saturating",
     "--terms", "6", "--max-constants", "12", "--max-nonlinear", "3", "--first-constants", "12"],
    # the same grammar growing from 4 constants: every step counts (issue 61); interactions
    # pinned, since with one variable a term the grammar is small enough to run
    ["--variables", "H,omega", "--factors", "power,linear,inverse,sqrt,log,saturating",
     "--terms", "6", "--max-constants", "12", "--max-nonlinear", "3", "--first-constants", "4",
     "--interactions", "2"],
    ["--split", "random", "--splits", "100000", "--inner-splits", "100000", "--yes"],
    ["--inner-splits", "100001"],
]  # fmt: skip


@st.composite
def search_cases(draw) -> Case:
    """search: a small grammar (so that a case stays quick), every option good and bad."""
    d = Draw(draw)
    data, files, out, dirs = _data_and_outputs(d)
    argv = ["search", *data, opt("--terms", d.pick([1], [0, -1, 99, "x"], 6))]
    argv.append(opt("--max-constants", d.pick([2, 3], [0, 1, 99, "x"], 6)))
    argv.append(opt("--splits", d.pick([2, 3], BAD_SPLITS, 6)))
    argv.append(opt("--inner-splits", d.pick([2, 3], [0, 1, -1, "x"], 6)))
    argv.append(opt("--jobs", d.pick([1], [0, -1], 8)))
    argv += d.maybe("--variables", ["H,omega", "H", "omega"], ["zz", "", "H,zz", "loss"], 4, 2)
    argv += d.maybe("--factors", ["power,linear", "log", "saturating,inverse", "hill", "hill,log"],
                    ["cubic", "", ","], 3, 2)  # fmt: skip
    argv += d.maybe("--levels", ["H"], ["zz", "loss"], 6, 2)
    argv += d.maybe("--max-nonlinear", [0, 1], [-1, 9, "x"], 6, 2)
    argv += d.maybe("--first-constants", [2, 3], [0, 1, 13, "x"], 6, 2)
    argv += d.maybe("--interactions", [1, 2], [0, 9], 6, 2)
    if d.chance(6):  # a flag: no bad value of its own (the declared cases draw those)
        argv.append(d(st.sampled_from(["--tie-exponents", "--no-tie-exponents"])))
    argv += d.maybe("--split", ["random", "extrapolate:H", "leave-one-level-out:H",
                                "extrapolate:H,omega"],
                    ["transfer", "bogus:x", "extrapolate:zz", "extrapolate:H,zz",
                     "extrapolate:H:4,H"], 4, 2)  # fmt: skip
    argv += d.maybe("--train-frac", ["0.8", "3/4"], BAD_FRACTIONS, 4, 2)
    argv += d.maybe("--at", ["H=128,omega=3", "H=0.5,omega=0"],
                    ["H=128", "zz=1", "H=nan,omega=1", "H", ""], 5, 2)  # fmt: skip
    argv += d.maybe("--screen", ["auto", "0", "2"], ["-1", "x", "", "2.5"], 5, 2)
    if d.hostile and d.chance(12):  # a cluster is never started here: only bad addresses
        argv.append(opt("--scheduler", d(st.sampled_from(BAD_SCHEDULERS))))
    argv += d.maybe("--inner-train-frac", ["0.75", "2/3"], BAD_FRACTIONS, 4, 2)
    argv += d.maybe("--seed", [0, 5], BAD_SEEDS, 6, 2)
    argv += d.maybe("--rule", ["one-se", "best"], ["worst", ""], 4, 2)
    argv += d.maybe("--heldout-weights", ["box", "equal"], ["trapezoid", ""], 6, 2)
    argv += d.maybe("--reference", ["composition", "none", "log_additive"],
                    ["bogus", "", ","], 4, 2)  # fmt: skip
    argv += d.maybe("--objective", ["rel_ls", "log_huber", "abs_ls"], ["l1"], 4, 6)
    argv += d.maybe("--guard-span", ["20"], ["1", "nan"], 8, 2)
    argv += d.maybe("--metric-range", ["0,1e9"], ["3,1", "a"], 8, 2)
    if d.chance(4):
        files["g.toml"] = d.pick(GOOD_GRAMMARS, BAD_GRAMMARS, 2)
        argv.append(opt("--grammar", d.pick(["g.toml"], ["missing.toml", "DIR", "g.csv"], 4)))
    argv += d.maybe("--forms-out", ["f.toml", "sub/f.toml"],
                    ["g.csv", "DIR", "EXISTING", "", "forms.toml"], 3, 2)  # fmt: skip
    if d.hostile and d.chance(8):  # a search past the limits, after the small options
        argv += d(st.sampled_from(BIG_SEARCHES))
    elif d.chance(6):
        argv.append("--yes")  # confirms a long search; these are small
    if d.hostile and d.chance(12):  # an output through a link to the table (issue 31)
        files["out.json"] = LINK + b"g.csv"
        argv += ["--json", "out.json"]
    return Case(argv + out, files, dirs)


# ------------------------------------------------------------------ forms and simulate
GOOD_TOML = [
    b'mine = "L0 + a*omega*(H/16)**b"\n',
    b'[mine]\nexpr = "L0 + a*H**b"\nvariables = ["H"]\nbounds = { b = [-2, 2] }\n',
    b'[mine]\nexpr = "L0 + a*omega**c"\nstart = { c = [0, 2] }\ndescription = "d"\n',
    b'[mine]\nexpr = "L0 + a*omega*(H/16)**b"\nfixed = { b = 0.5 }\n',
    b'mine = "L0[H] + a*omega"\n',
]
BAD_TOML = [
    b'[mine]\nexpr = "L0 + a*H"\nfixed = { zz = 1 }\n',
    b'[mine]\nexpr = "L0 + a*H"\nfixed = "x"\n',
    b'[mine]\nexpr = "L0 + a*H"\nfixed = { a = "one" }\n',
    b'[mine]\nexpr = "L0 + a*H"\nvariables = 5\n',
    b'[mine]\nexpr = "L0 + a*H"\nbounds = "abc"\n',
    b'[mine]\nexpr = "L0 + a*H**b"\nstart = { b = [20, 30] }\n',
    b'[mine]\nexpr = "L0 + a*H**b"\nbounds = { a = [0, 1] }\n',
    b'composition = "L0 + a*H"\n',
    b"\xff\xfe = 1\n",
    b"[[[\n",
    b'mine = "L0 + a*loss"\n',
    b"mine = 5\n",
    b'[mine]\nexpr = "L0 + a*H**b"\nstart = { b = [-inf, 1] }\n',
]


@st.composite
def forms_cases(draw) -> Case:
    d = Draw(draw)
    files: dict[str, bytes] = {}
    dirs: list[str] = []
    where = d.pick(["file", "file", "none", "link"], ["dir", "loop"], 4)
    if where in ("file", "link"):
        files["forms.toml"] = d.pick(GOOD_TOML, BAD_TOML, 1)
    if where == "link":  # a team's shared file, linked: added to where it points
        files["team/forms.toml"] = files.pop("forms.toml")
        files["forms.toml"] = LINK + b"team/forms.toml"
    elif where == "loop":
        files["forms.toml"] = LINK + b"forms.toml"
    elif where == "dir":
        dirs.append("forms.toml")
    action = d(st.sampled_from(["list", "show", "add", "fit"]))
    if action == "list":
        return Case(["forms", "list"], files, dirs)
    if action == "show":
        return Case(["forms", "show", d.pick(["mine", "composition"], ["bogus"], 3)], files, dirs)
    if action == "add":
        expression = d(st.sampled_from(GOOD_FORMS)) if not d.hostile else d(odd_expressions)
        return Case(
            ["forms", "add", d.pick(["new"], ["mine", "composition", "1bad"], 2), expression],
            files,
            dirs,
        )
    data, more = _data(d)
    files.update(more)
    return Case(["fit", *data, "--form=mine"], files, dirs)


TINY = "steps=2,width=4,embed=2,context=2,batch=2,eval_windows=8,M=1"
GOOD_CELLS = [
    f"{c},{TINY}" for c in ("H=1", "H=2,keep=0.5", "H=1,lr=1e-3", "H=1,compressor=topk,keep=0.5")
]
# the quadratic backend (issue 33); with an MLP spec as base, one line saying so
QTINY = "model=quadratic,dim=8,rounds=6,burn_in=1,M=4"
GOOD_CELLS += [
    f"{QTINY},H=2,keep=0.5",
    f"{QTINY},aggregator=median,attackers=2,attack_mode=coordinated",
    f"{QTINY},compressor=topk,keep=0.5,inner=steps,H=2",
    f"{QTINY},lr=5,init=1",  # diverges: recorded, not an error
]
# the transformer backend (issue 46): without PyTorch, one line asking for the gpt extra
GPT_TINY = dict(model="gpt", layers=1, width=8, heads=2, context=8, batch=2, steps=2,
                eval_windows=4, M=2)  # fmt: skip


def gpt_cell(**settings) -> str:
    """A tiny gpt cell with ``settings`` in place of (or besides) its own."""
    return ",".join(f"{k}={v}" for k, v in {**GPT_TINY, **settings}.items())


GTINY = gpt_cell()
GOOD_CELLS += [
    f"{GTINY},H=2,keep=0.5",
    f"{GTINY},compressor=topk,keep=0.5,aggregator=median,attackers=1,attack_mode=coordinated",
    f"{GTINY},algo=sync,weight_decay=0.1",
    f"{GTINY},lr=1000,outer_lr=10",  # diverges: recorded, not an error
    # the programme's settings (issue 65)
    f"{GTINY},sampling=iid,warmup=1,schedule=cosine,min_lr_fraction=0,H=2,keep=0.5",
    f"{GTINY},decay_on=matrices,weight_decay=0.1,tied=true,device=cpu,compressor=topk,keep=0.5",
    "model=gpt,preset=413k,batch=2,steps=2,eval_windows=4,M=2,H=2",
]
BAD_CELLS = [
    ",,,",
    "",
    "H=abc",
    "width=1000000000",
    "steps=100000000000000000",
    "lr=nan",
    "H=1,H=2",
    "bogus=1",
    "keep=2",
    "M=1024,batch=16384,width=16384",
    "seed=1",
    f"H=0,{TINY}",
    f"nesterov=maybe,{TINY}",
    "model=cnn",
    "model=quadratic,model=quadratic",
    f"{QTINY},lr=0",
    f"{QTINY},width=4",
    f"{QTINY},burn_in=9",
    f"{QTINY},attackers=5",
    f"{QTINY},inner=aggregate,aggregator=trimmed",
    f"{QTINY},spectrum=flat",
    "model=quadratic,dim=10000000,rounds=10000000",
    "model=quadratic,dim=1000000,M=1,rounds=1000000,burn_in=0",  # hours: past the time limit
    f"H=\uff11\uff16,{TINY}",  # fullwidth digits, which int() reads
    "model=gpt,model=gpt",
    gpt_cell(heads=3),
    gpt_cell(layers=0),
    gpt_cell(context=5000),
    gpt_cell(width=8192, layers=64, batch=16384),  # memory
    f"{GTINY},embed=2",
    f"{GTINY},lr=0",
    f"{GTINY},weight_decay=-1",
    f"{GTINY},attackers=3",
    f"{GTINY},attack=noise",
    f"{GTINY},algo=ring",
    f"{GTINY},corpus=none.txt",
    f"{GTINY},corpus=blank.csv",  # one blank line: a corpus too short for context 8
    f"{GTINY},corpus=DIR",
    # corpus file kinds (issue 61): none is opened, waited on or read for ever
    f"{GTINY},corpus=fifo.txt",
    f"{GTINY},corpus=/dev/zero",
    f"{GTINY},corpus=/dev/null",
    f"{GTINY},corpus=empty.txt",
    f"{GTINY},corpus=latin1.txt",
    f"{GTINY},corpus=cut.txt",  # a character cut off at the end
    f"{GTINY},corpus=gone.txt",  # a link to nothing
    f"{GTINY},sampling=random",
    f"{GTINY},warmup=3",  # longer than the run's 2 steps
    f"{GTINY},warmup=-1",
    f"{GTINY},schedule=linear",
    f"{GTINY},min_lr_fraction=1.5",
    f"{GTINY},min_lr_fraction=nan",
    f"{GTINY},decay_on=norms",
    f"{GTINY},tied=maybe",
    f"{GTINY},preset=1m",
    f"{GTINY},preset=915k",  # the tiny cell's width 8 against the preset's 192
    f"{GTINY},device=tpu",
    f"{GTINY},device=cuda",  # refused where PyTorch sees no CUDA device; runs where it does
]
GOOD_SPEC = (
    f"seeds = [0]\n[fixed]\n{TINY.replace(',', chr(10))}\n[[block]]\n[block.factors]\nH = [1, 2]\n"
).encode()
GOOD_QUAD_SPEC = (
    b'model = "quadratic"\nseeds = [0, 1]\n[fixed]\ndim = 8\nrounds = 6\nburn_in = 1\nM = 4\n'
    b'[[block]]\n[block.factors]\nkeep = [1.0, 0.25]\naggregator = ["mean", "median"]\n'
)
GOOD_GPT_SPEC = (
    b'model = "gpt"\nseeds = [0, 1]\n[fixed]\nlayers = 1\nwidth = 8\nheads = 2\ncontext = 8\n'
    b"batch = 2\nsteps = 4\neval_windows = 4\nM = 2\nH = 2\n"
    b'[[block]]\n[block.factors]\nkeep = [1.0, 0.5]\naggregator = ["mean", "trimmed"]\n'
)
BAD_SPECS = [
    b'model = "cnn"\n',
    b'model = "gpt"\n[fixed]\nmodel = "quadratic"\n',
    b'model = "gpt"\n[fixed]\ndim = 4\n',
    b'model = "gpt"\n[fixed]\nwidth = 10\nheads = 4\n',
    b'model = "gpt"\n[fixed]\ncorpus = 5\n',
    b'model = "gpt"\n[fixed]\ncorpus = "none.txt"\n',
    b'model = "gpt"\n[fixed]\npreset = "915k"\nwidth = 64\n',
    b'model = "gpt"\n[fixed]\ntied = "yes"\n',
    b'model = "gpt"\n[fixed]\nsampling = ["iid"]\n',
    b"model = 5\n",
    b'model = "quadratic"\n[fixed]\nmodel = "mlp"\n',
    b'model = "quadratic"\n[[block]]\n[block.factors]\nmodel = ["quadratic"]\n',
    b'model = "quadratic"\n[fixed]\nwidth = 4\n',
    b'model = "quadratic"\n[fixed]\ncondition = 0.5\n',
    b"fixed = 3\n",
    b"block = 3\n",
    b"[block]\nH = 1\n",
    b"seeds = [0, 0]\n",
    b"seeds = []\n",
    b"[fixed]\nlr = nan\n",
    b"[fixed]\nwidth = 1000000000\n",
    b"\xff\xfe\n",
    b"[[block]]\n[block.factors]\nH = ["
    + b", ".join(b"%d" % i for i in range(1, 400))
    + b"]\nM = ["
    + b", ".join(b"%d" % i for i in range(1, 400))
    + b"]\n",
    b"[[block]]\n[block.factors]\nH = []\n",
    b"bogus = 1\n",
]


# corpus files of every kind a gpt cell or spec may name (issue 61)
CORPUS_TEXT = b"to be, or not to be, that is the question;\n" * 40
CORPUS_FILES = {
    "c.txt": CORPUS_TEXT,
    "clink.txt": LINK + b"c.txt",  # a link to a good corpus: read through
    "gone.txt": LINK + b"nowhere.txt",
    "fifo.txt": FIFO,
    "empty.txt": b"",
    "latin1.txt": "caf\u00e9 ".encode("latin-1") * 100,
    "cut.txt": CORPUS_TEXT + "\u00e9".encode()[:1],
}
GOOD_CELLS += [f"{GTINY},corpus=c.txt", f"{GTINY},corpus=clink.txt,H=2"]
CORPUS_SPEC = (
    'name = "c"\nmodel = "gpt"\nseeds = [0, 1]\n[fixed]\nlayers = 1\nwidth = 8\nheads = 2\n'
    'context = 8\nbatch = 2\nsteps = 4\neval_windows = 4\nM = 2\nH = 2\ncorpus = "c.txt"\n'
)


def corpus_table(corpus: bytes, seeds=(0,)) -> bytes:
    """The table a first invocation of :data:`CORPUS_SPEC` left after the runs of ``seeds``,
    its runs having read ``corpus`` (columns as the gpt backend and the runner write them)."""
    import csv
    from dataclasses import asdict

    from fitrules.sim.gpt import GPTConfig

    out = io.StringIO()
    writer = None
    for seed in seeds:
        cfg = GPTConfig(layers=1, width=8, heads=2, context=8, batch=2, steps=4, eval_windows=4,
                        M=2, H=2, corpus="c.txt", seed=seed)  # fmt: skip
        chars = len(corpus.decode())
        row = asdict(cfg) | {
            "omega": 0.0, "n_params": 1, "tokens": cfg.tokens, "loss": 2.5, "train_loss": 2.5,
            "diverged": False, "corpus_sha256": hashlib.sha256(corpus).hexdigest(),
            "train_chars": int(chars * 0.9), "valid_chars": chars - int(chars * 0.9),
            "wall_s": 0.1, "spec": "c",
            "spec_sha256": hashlib.sha256(CORPUS_SPEC.encode()).hexdigest(),
        }  # fmt: skip
        if writer is None:
            writer = csv.DictWriter(out, fieldnames=list(row), lineterminator="\n")
            writer.writeheader()
        writer.writerow(row)
    return out.getvalue().encode()


def _corpus_resume(d: Draw, files: dict[str, bytes]) -> Case:
    """A gpt grid on a corpus file resumed from the table its first invocation left: the file
    as its runs read it (the grid goes on), or edited since (refused, the table untouched:
    one table never mixes two versions of a corpus)."""
    files["c.toml"] = CORPUS_SPEC.encode()
    edited = d.chance(2)
    read = CORPUS_TEXT.replace(b"question", b"problem!") if edited else CORPUS_TEXT
    table = corpus_table(read)
    if d.hostile and d.chance(2):  # the second run cut off mid-write
        table += corpus_table(read, seeds=(1,)).splitlines(keepends=True)[1][:30]
    files["o.csv"] = table
    why = "its corpus file was edited after the runs in o.csv read it" if edited else ""
    return Case(["simulate", "c.toml", "--out=o.csv"], files, ["DIR"], must_refuse=why)


@st.composite
def simulate_cases(draw) -> Case:
    d = Draw(draw)
    # link.csv: a dangling link (runs went through it before the final rewrite refused it)
    files = {"blank.csv": b"\n", "junk.csv": b"a,b\n1,2\n", "link.csv": LINK + b"gone/o.csv",
             **CORPUS_FILES}  # fmt: skip
    if d.chance(5):
        return _corpus_resume(d, files)
    argv = ["simulate"]
    if d.chance(3):
        files["s.toml"] = d.pick([GOOD_SPEC, GOOD_QUAD_SPEC, GOOD_GPT_SPEC], BAD_SPECS, 1)
        argv.append(d.pick(["s.toml"], ["DIR", "none.toml"], 3))
    if len(argv) == 1 or d.chance(2):
        argv.append(opt("--cell", d.pick(GOOD_CELLS, BAD_CELLS, 2)))
        argv += d.maybe("--seeds", ["0", "0,1", "1,2"], ["0,0", "", "-1", "a", "0,1,", "\uff11"],
                        2, 2)  # fmt: skip
    bad_outs = ["DIR", "", "junk.csv", "link.csv"]
    argv.append(opt("--out", d.pick(["o.csv", "sub/o.csv", "blank.csv"], bad_outs, 3)))
    argv += d.maybe("--jobs", [1], [0, -1, 10**5], 4, 1)
    if d.hostile and d.chance(8):  # a cluster is never started here: only bad addresses
        argv.append(opt("--scheduler", d(st.sampled_from(BAD_SCHEDULERS))))
    return Case(argv, files, ["DIR"])


@st.composite
def declared_cases(draw) -> Case:
    """A small valid command line with one option given a hostile text, judged by the
    option's own declaration (type, choices, parse, check; ``tests/declared.py``): when the
    declaration refuses the text the command must too, else the outcome is "accepted". So an
    option is fuzzed the day it is declared."""
    import declared

    d = Draw(draw, hostile=True)
    cmd = d(st.sampled_from(sorted(declared.CLI_BASE)))
    option = d(st.sampled_from(declared.cli_options(cmd)))
    text = d(st.sampled_from(declared.HOSTILE_TEXTS))
    flag = opt(option.option_string, text)
    argv = [*declared.CLI_BASE[cmd], flag, *([flag] if d.chance(6) else [])]  # maybe twice
    files = {"g.csv": _frames()["df"].to_csv(index=False).encode()}
    if cmd == "allocate":
        files["n.csv"] = declared.allocate_runs().to_csv(index=False).encode()
    return Case(argv, files, must_refuse=declared.cli_refusal(option, text) or "")


def cases():
    """Every kind of case."""
    return st.one_of(
        declared_cases(),
        compare_cases(),
        design_cases(),
        fit_cases(),
        allocate_cases(),
        design_cases(),
        validate_cases(),
        ci_cases(),
        ledger_cases(),
        design_cases(),
        forms_cases(),
        simulate_cases(),
        search_cases(),
    )


# ------------------------------------------------------------------ the Python API
# Every public function with arguments of every type. The property, checked by
# :func:`check_api`: a documented :class:`fitrules.base.errors.FitrulesError` whose message is
# one line, or a result of the documented type whose JSON view holds only finite numbers;
# never another exception, never a warning, and never a result when an argument drawn was
# one that must be refused (then the outcome is "accepted").
API_FAILURES = ("raw", "lines", "accepted", "wrong", "warning", "changed")


class Bad:
    """A drawn value that no correct call can accept, with the reason shown on failure."""

    def __init__(self, value, why: str):
        self.value, self.why = value, why

    def __repr__(self) -> str:
        return f"Bad({self.value!r})"


@dataclass
class ApiCase:
    """``call`` (a public name) with ``args`` and ``kwargs``; grids are tokens made fresh
    in the case's working directory (see :func:`_materialise`)."""

    call: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    @property
    def command(self) -> str:
        return self.call

    @property
    def must_refuse(self) -> list[str]:
        vals = [*self.args, *self.kwargs.values()]
        return [v.why for v in vals if isinstance(v, Bad)]

    @property
    def argv(self) -> list[str]:  # for the long run's failure file
        return [self.call, repr(self.args), repr(self.kwargs)]


@functools.lru_cache(maxsize=1)
def _frames():
    """The tables the API cases draw from (built once; each use takes a copy)."""
    import numpy as np
    import pandas as pd

    rows = []
    for H in (1, 4, 16, 64):
        for keep in (1.0, 0.5, 0.25, 0.125, 0.0625):
            for s in range(3):
                omega = 1 / keep - 1
                loss = 2.2 + 0.012 * omega * (H / 16) ** 0.5 + 0.001 * ((s * 37 + H) % 7 - 3)
                rows.append({"H": H, "keep": keep, "omega": omega, "seed": s, "loss": loss})
    good = pd.DataFrame(rows)
    tuned = pd.concat(
        [good.assign(lr=3e-4), good.assign(lr=1e-3, loss=good["loss"] + 0.01)],
        ignore_index=True,
    )
    return {
        "df": good,
        "df_tuned": tuned,
        "df_index": good.set_index("seed"),
        "df_complex": good.assign(loss=good["loss"].astype(complex)),
        "df_bool": good.assign(loss=good["loss"] > 2.2),
        "df_text": good.assign(loss=good["loss"].astype(str).where(good["H"] > 1, "oops")),
        "df_list": good.assign(tags=[[1, 2]] * len(good)),
        "df_empty": good.iloc[0:0],
        "df_nan_H": good.assign(H=good["H"].where(good["H"] > 1, np.nan)),
        "df_float16": good.astype({"H": "float16", "keep": "float16", "omega": "float16"}),
        "df_two_lrs_indexed": tuned.set_index("lr"),
        # a column of 1 and "1" (JSON lines, a DataFrame): numbers (issue 61)
        "df_mixed_numbers": good.astype({"H": object}).assign(
            H=[str(h) if i % 2 else h for i, h in enumerate(good["H"])]
        ),
        # fullwidth digits in a column no form reads: a text factor
        "df_fullwidth": good.assign(opt=["１２" if s else "４" for s in good["seed"]]),
        # an integer beyond 64 bits that a double holds exactly: read as that double
        "df_exact_int": good.assign(opt=pd.Series([2**70] * len(good), dtype=object)),
        # refused: numbers and a word in one column, integers no double holds
        "df_mixed_text": good.astype({"H": object}).assign(
            H=["sync" if i == 7 else h for i, h in enumerate(good["H"])]
        ),
        "df_huge_int": good.assign(opt=pd.Series([1, 10**400] * (len(good) // 2), dtype=object)),
        "df_inexact_int": good.assign(opt=pd.Series([2**70 + 1] * len(good), dtype=object)),
    }


# two learning rates behind a named index: a column, pooled and reported (issue 21)
GOOD_GRID_TOKENS = [
    "df", "df", "grid", "path", None, "df_index", "df_float16", "df_two_lrs_indexed",
    "df_mixed_numbers", "df_fullwidth", "df_exact_int",
]  # fmt: skip
BAD_GRID_TOKENS = [
    "df_complex",
    "df_bool",
    "df_text",
    "df_list",
    "df_empty",
    "df_mixed_text",
    "df_huge_int",
    "df_inexact_int",
    "missing.csv",
    5,
    [1, 2],
    b"bytes",
]


_GRIDS_WRITTEN: set[Path] = set()  # the case folders where g.csv was written to be read


def _write_grid(root: Path) -> None:
    (root / "g.csv").write_text(_frames()["df"].to_csv(index=False))
    _GRIDS_WRITTEN.add(root)


def _materialise(value, root: Path):
    """Grid tokens to objects: a DataFrame, a Grid, a CSV path (written in ``root``)."""
    import fitrules as fr

    if isinstance(value, Bad):
        return _materialise(value.value, root)
    if isinstance(value, str) and value.startswith("df"):
        return _frames()[value].copy()
    if value == "grid":
        return fr.load_grid(_frames()["df"])
    if value == "tuned_grid":
        return fr.load_grid(_frames()["df_tuned"])
    if value == "path":
        _write_grid(root)
        return str(root / "g.csv")
    return value


def _grid_arg(d: Draw, bad_ok: bool = True):
    if d.hostile and bad_ok and d.chance(3):
        tok = d(st.sampled_from(BAD_GRID_TOKENS))
        return Bad(tok, f"grid {tok!r}")
    return d(st.sampled_from(GOOD_GRID_TOKENS))


def _arg(d: Draw, good, bad, why: str, odds: int = 3):
    """A value for one argument: good, or (hostile, one time in ``odds``) a Bad one."""
    if d.hostile and bad and d.chance(odds):
        v = d(st.sampled_from(list(bad)))
        return Bad(v, f"{why} {v!r}")
    return d(st.sampled_from(list(good)))


def _np_int(v: int):
    import numpy as np

    return np.int64(v)


NAN = float("nan")
BAD_INTS = [0, -1, 2.5, "4", True, NAN, [4]]
BAD_SEEDS_API = [-1, 2**70, 1.5, "0", True, NAN, [0]]
BAD_LEVELS_API = [0, 1, 1.5, -0.5, NAN, "0.9", None, True]
BAD_BOOLS = ["no", 2, None, [True]]


def _kw(d: Draw, out: dict, name: str, good, bad, p: int = 3, odds: int = 3) -> None:
    """Maybe set ``out[name]``: one time in ``p``."""
    if d.chance(p):
        out[name] = _arg(d, good, bad, name, odds)


@st.composite
def api_cases(draw) -> ApiCase:
    """Every public function of fitrules with arguments of every type."""
    d = Draw(draw)
    call = d(
        st.sampled_from(
            [
                "load_grid",
                "compare",
                "compare",
                "fit",
                "fit",
                "allocate",
                "load_fit",
                "predict",
                "ci",
                "tune",
                "design",
                "search",
                "Form",
                "stationary_loss",
                "exact_loss",
                "Grammar",
                "write",
                "plot",
                "validate",
                "record",
                "score",
                "verify_ledger",
                "simulate",
                "add_form",
                "remove_form",
                "declared",
                "declared",
            ]  # fmt: skip
        )
    )
    kw: dict = {}
    if call == "declared":
        return _declared_case(d)
    if call in NEW_JOBS:
        return _job_case(d, call)
    if call == "load_grid":
        args = (_grid_arg(d),) if d.chance(8) else (_arg(d, ["df", "path"], [None], "source"),)
        if isinstance(args[0], Bad) and args[0].value == "df_two_lrs_indexed":
            # a valid table (its index becomes a column); it is refused only once cells are
            # formed, which load_grid does not do
            args = ("df_two_lrs_indexed",)
        _kw(d, kw, "metric", [None, "loss"], [5, "zz", "seed"])
        _kw(d, kw, "where", [(), "H >= 1", ["H >= 1", "keep <= 1"]], [5, "H = 1", ["zz > 1"]])
        _kw(d, kw, "derive", [(), "v = keep*2"], [5, "x", ["y = H/0"], [5]])
        _kw(d, kw, "unit", [None, "nats"], [5, ["a"]])
        _kw(d, kw, "rename", [None, "H=H", {"omega": "w"}, ["keep=k"]],
            ["H", 5, "nope=x", {"H": 5}, ["H=a", "H=b"]], 6)  # fmt: skip
        _kw(d, kw, "drop_duplicates", [False, True], ["yes", 1.5, None], 6)
        return ApiCase(call, args, kw)
    if call == "load_fit":  # issue 44: a saved fit, or what is not one
        source = _arg(d, ["saved", "saved_text"],
                      ["nope.json", 5, None, "{}", "{not json", "compare_json", "changed"],
                      "source")  # fmt: skip
        if d.chance(3):
            kw["data"] = _arg(d, [None, "path"], [5, "nope.csv"], "data")
        return ApiCase(call, (source,), kw)
    if call == "stationary_loss":  # fitrules.sim.theory (issue 33)
        args = (_arg(d, [1.0, [1.0, 0.5], (0.25, 2)], [0, -1.0, "a", [], NAN, None, [[1.0]],
                                                     1j, [1.0, -1.0], True], "s"),)  # fmt: skip
        kw["lr"] = _arg(d, [0.1, 0.05, 3.0, 1e308], [0, -1, NAN, "a", None, True], "lr")
        _kw(d, kw, "noise", [1.0, 0, 2], [-1, NAN, "a", None])
        _kw(d, kw, "H", [1, 4, _np_int(2)], BAD_INTS)
        _kw(d, kw, "M", [1, 16, _np_int(4)], BAD_INTS)
        _kw(d, kw, "omega", [0, 3.0, 99], [-1, NAN, "a", None, float("inf")])
        _kw(d, kw, "outer_lr", [1.0, 0.5], [0, -1, NAN, "a"])
        _kw(d, kw, "outer_momentum", [0.0, 0.5], [1, -0.1, NAN, "a"])
        _kw(d, kw, "nesterov", [True, False], BAD_BOOLS)
        _kw(d, kw, "masks", ["independent", "shared"], ["x", 5, None])
        return ApiCase(call, args, kw)
    if call == "exact_loss":
        from dataclasses import asdict

        from fitrules.sim.quadratic import QuadConfig

        good = asdict(QuadConfig(dim=10))
        run = _arg(d, [good, {**good, "H": 4, "keep": 0.25}, {**good, "nesterov": "False"}],
                   [{**good, "aggregator": "median"}, {**good, "lr": "a"}, {"dim": 3}, [1, 2],
                    {**good, "compressor": "Topk"}, {**good, "aggregator": "Mean"},
                    {**good, "keep": 0}, {**good, "nesterov": "maybe"}, None], "run")  # fmt: skip
        if d.chance(3):
            kw["rounds"] = _arg(d, [(10, 50), None], [(50, 10), (0, 0), "a", (1,)], "rounds")
        return ApiCase(call, (run,), kw)
    if call == "compare":
        args = (_grid_arg(d),)
        kw["forms"] = _arg(
            d,
            [
                None,
                "composition",
                ["composition", "log_additive"],
                ("composition", "omega_only"),
                "x = L0 + a*omega + b*H",
            ],  # fmt: skip
            [5, [], ["bogus"], [None], "composition,additive", ["composition", "composition"]],
            "forms",
        )
        kw["splits"] = _arg(d, [4, _np_int(4), 4.0], BAD_INTS + [10**9], "splits")
        _kw(d, kw, "split",
            ["random", "leave-one-level-out:H", "extrapolate:H", "extrapolate:H,omega"],
            ["bogus", 5, None, "extrapolate:H,H"])  # fmt: skip
        if kw.get("split", "random") != "random" and not isinstance(kw.get("split"), Bad):
            kw.pop("splits")
        _kw(d, kw, "train_frac", [1 / 3, 0.5], [0, 1, NAN, "a", None, -1])
        _kw(d, kw, "seed", [0, _np_int(3)], BAD_SEEDS_API)
        _kw(d, kw, "objective", ["rel_ls", "abs_ls", "log_huber"], ["x", 5, None])
        _kw(d, kw, "delta", [1e-3, 0.01], [0, -1, NAN, "a"])
        _kw(d, kw, "keep_degenerate", [True, False], BAD_BOOLS)
        _kw(d, kw, "guard_span", [20.0, 5], [0, -1, NAN, "a", None])
        _kw(d, kw, "guard_se", [1.0], [0, -1, NAN, "a", None])
        _kw(d, kw, "metric_range", [None, (0, 10)], [(3, 1), "0,3", (0,), (NAN, 1), 5])
        _kw(d, kw, "level", [0.95, 0.9], BAD_LEVELS_API)
        _kw(d, kw, "seeds", ["cells", "cells-and-seeds"], ["bogus", 5, None])
        _kw(d, kw, "heldout_weights", ["box", "equal"], ["trapezoid", 5, None])
        _kw(d, kw, "error_metric", ["relative", "absolute"], ["percent", 5, None, ["relative"]])
        _kw(d, kw, "progress", [None, False, True], ["yes", 2, 0.5], 6)
        return ApiCase(call, args, kw)
    if call == "allocate":
        form = _arg(d, ALLOCATE_FORMS, [5, None, "bogus", *BAD_ALLOCATE_FORMS[:1]], "form")
        _kw(d, kw, "cost", ["6*N*D", "N*D"], [5, None, "N+D", "6*N*T"])
        _kw(d, kw, "budgets", ["1e20", [1e19, 1e21], 1e20, "1e18:1e24:3", _np_int(10**18)],
            [-1, 0, NAN, "x", [], [1e20, -1], True, "1:2:1", None, {}], 3)  # fmt: skip
        _kw(d, kw, "intervals", ["covariance", "none"], ["x", 5, None])
        _kw(d, kw, "family", ["none", "default"], ["all", 5, None, ["default"]], 8)
        _kw(d, kw, "level", [0.9, 0.95], BAD_LEVELS_API)
        return ApiCase(call, (form,), kw)
    if call in ("fit", "predict"):
        args = (_grid_arg(d, call == "fit"),)
        form = _arg(
            d,
            ["composition", "log_additive", "x = L0 + a*omega + b*H"],
            [5, None, ["composition", "additive"], "bogus", ""],
            "form",
        )
        args = (*args, form)
        if call == "predict":
            point = _arg(
                d,
                ["H=8,keep=0.25", {"H": 8, "keep": 0.25}, {"H": _np_int(8), "omega": 3.0}],
                [
                    "H=abc",
                    {"H": "a", "keep": 0.5},
                    5,
                    {"H": NAN, "keep": 0.5},
                    {"H": 8},
                    {"H": -1, "keep": 0.5},
                    {"H": 8, "keep": 0.5, "zz": 1},
                    None,
                ],  # fmt: skip
                "point",
            )
            return ApiCase(call, args, {"point": point})
        _kw(d, kw, "objective", ["rel_ls", "abs_ls"], ["x", 5])
        _kw(d, kw, "intervals", [True, False, "profile", "bootstrap"], [*BAD_BOOLS, "wald"], 4)
        _kw(d, kw, "constraints", [None, *CONSTRAINTS, CONSTRAINTS[:2], "b > 0; L0 >= 2"],
            [5, [5], *BAD_CONSTRAINTS], 4)  # fmt: skip
        _kw(d, kw, "predict", [(), "H=8,keep=0.25", {"H": 8, "keep": 0.25}, ["H=8,keep=0.25"]],
            ["H=abc", {"H": "a"}, 5, {"H": NAN, "keep": 0.5}, [5]], 4)  # fmt: skip
        _kw(d, kw, "fix", [None, {"L0": 2.0}, ["L0=2"]],
            [5, {"L0": "x"}, {"L0": NAN}, ["L0"], {"zz": 1.0}], 4)  # fmt: skip
        _kw(d, kw, "bounds", [None, {"b": (0, 1)}, ["b=-inf..inf"]],
            [5, {"b": 5}, {"b": ("a", "b")}, {"b": None}, {"b": (0, 1, 2)}, {"b": (1, 0)}],
            4)  # fmt: skip
        if d.chance(5):
            kw["by"] = _arg(d, ["H"], [5, "zz"], "by")
            _kw(d, kw, "shared", [None, "b", ["b"]], [5, [5], "zz"], 2)
        _kw(d, kw, "weights", ["cells", "runs"], ["x", 5, None], 4)
        if kw.get("intervals") in (True, "bootstrap", "profile") or kw.get("predict"):
            kw["resamples"] = _arg(d, [20, _np_int(20)], [5, -1, 20.5, "20", 10**9], "resamples")
            _kw(d, kw, "bootstrap", list(BOOTSTRAP_KINDS), ["x", 5])
            _kw(d, kw, "seed", [0, _np_int(2)], BAD_SEEDS_API)
            _kw(d, kw, "level", [0.95, 0.9], BAD_LEVELS_API)
        return ApiCase(call, args, kw)
    if call == "ci":
        args = (_grid_arg(d),)
        kw["baseline"] = _arg(d, ["H=1,keep=1"], [5, "", "zz=1", "H=abc"], "baseline")
        kw["treatment"] = _arg(
            d, ["H=4,keep=1", ["H=4,keep=1", "H=16,keep=1"]], [5, [5], "H=abc", []], "treatment"
        )
        _kw(d, kw, "level", [0.95, 0.9], BAD_LEVELS_API)
        kw["resamples"] = _arg(d, [1000, _np_int(1000)], [5, -1, "a", 10**9, 1000.5], "resamples")
        _kw(d, kw, "seed", [0, _np_int(1)], BAD_SEEDS_API)
        _kw(d, kw, "sweep", [None], [5, "zz"])
        return ApiCase(call, args, kw)
    if call == "tune":
        args = (_arg(d, ["tuned_grid"], ["grid", 5, None], "grid"),)
        args = (*args, _arg(d, ["lr", ["lr"]], [5, [], "zz", "loss", "seed", [5]], "factors"))
        _kw(d, kw, "tune_seeds", [None, [0], (0, 1), [_np_int(1)]],
            [[0, 0], [-1], [99], 5.5, "a", [None], [0, 1, 2], "0,", "\uff10"], 2)  # fmt: skip
        return ApiCase(call, args, kw)
    if call == "design":
        args = (d(st.sampled_from([None, "grid", "df"])),)
        kw["forms"] = _arg(d, [["composition", "additive"], ["omega_only", "composition"]],
                           [["composition"], 5, ["bogus", "additive"]], "forms")  # fmt: skip
        kw["budget"] = _arg(d, [6, _np_int(6)], [0, -1, 6.5, "6", True, None], "budget")
        kw["splits"], kw["resamples"] = 10, 20
        _kw(d, kw, "candidates", [None, *GOOD_CANDIDATES], [*BAD_CANDIDATES, 5])
        _kw(d, kw, "seeds", [2, 3], [0, 2.5, "3", None])
        _kw(d, kw, "seed", [0], BAD_SEEDS_API)
        _kw(d, kw, "max_seeds", [6, 12], [0, 2.5, "12"])
        _kw(d, kw, "power", [0.8], [0, 1, NAN, "a"])
        _kw(d, kw, "alpha", [0.05, 0.1], [0, 1, NAN, "a"])
        _kw(d, kw, "target", [None], [5, ""])
        _kw(d, kw, "objective", ["rel_ls", "log_huber"], ["x", 5])
        _kw(d, kw, "delta", [1e-3], [0, -1, NAN, "a"])
        return ApiCase(call, args, kw)
    if call == "search":
        args = (_grid_arg(d),)
        kw.update(terms=1, splits=3, inner_splits=2)
        kw["max_constants"] = _arg(
            d, [2, 3, _np_int(3)], [0, 1, 99, 2.5, "3", True], "max_constants"
        )
        _kw(d, kw, "variables", [None, "H,omega", ["H"], ("omega",)], [5, [], ["zz"], "zz"])
        _kw(d, kw, "factors", [None, "power,linear", ["log"], "hill"], [5, "cubic", [], [5]])
        _kw(d, kw, "levels", [None, "H"], ["zz", 5])
        _kw(d, kw, "grammar", [None], [5, "missing.toml", [1]])
        _kw(d, kw, "split", ["random", "extrapolate:H", "extrapolate:H,omega"],
            ["transfer", 5, None, "bogus", "extrapolate:H,"])
        _kw(d, kw, "train_frac", [0.8, 0.75], [0, 1, NAN, "a", None])
        _kw(d, kw, "inner_train_frac", [0.75], [0, 1, NAN, "a"])
        _kw(d, kw, "seed", [0, _np_int(2)], BAD_SEEDS_API)
        _kw(d, kw, "rule", ["one-se", "best"], ["worst", 5, None])
        _kw(d, kw, "references", [None, [], "composition", ["log_additive"]],
            [5, ["bogus"], "bogus"])  # fmt: skip
        _kw(d, kw, "objective", ["rel_ls", "log_huber"], ["x", 5])
        _kw(d, kw, "delta", [1e-3, 0.01], [None, 0, -1, NAN, "a"])
        _kw(d, kw, "guard_span", [20.0, 5], [0, -1, NAN, "x", None])
        _kw(d, kw, "guard_se", [1.0], [0, NAN, "x", None])
        _kw(d, kw, "guard_excursion", [10.0], [0, NAN, "x", None])
        _kw(d, kw, "metric_range", [None, (0, 1e9)], [(3, 1), "0,3", (0,), 5])
        _kw(d, kw, "on_plan", [None, _ignore], ["x", 5])
        _kw(d, kw, "on_progress", [None, _ignore], [5, "x"])
        _kw(d, kw, "progress", [None, False], ["yes", 2, 0.5], 6)
        _kw(d, kw, "yes", [False, True], BAD_BOOLS)
        _kw(d, kw, "jobs", [1], [0, 2.5, "2", True])
        _kw(d, kw, "max_nonlinear", [0, 1], [-1, 9, 1.5, "1"])
        _kw(d, kw, "interactions", [1, 2], [0, 9, "2"])
        _kw(d, kw, "tie_exponents", [None, True, False], [1, "yes", 0.0])
        _kw(d, kw, "first_constants", [None, 2, 3], [1, 13, 2.5, "2", True])
        _kw(d, kw, "jobs", [1], [0, -1, 1.5, 2.0, "2", True])
        _kw(d, kw, "seeds", ["cells", "cells-and-seeds"], ["bogus", 5, None])
        _kw(d, kw, "heldout_weights", ["box", "equal"], ["trapezoid", 5, None])
        _kw(d, kw, "screen", ["auto", 0, 2, _np_int(1)], [-1, 2.5, "3", True, None])
        _kw(d, kw, "scheduler", [None], ["local:0", 5, "", "local:x", "local:100000", "bogus://x"])
        _kw(d, kw, "at", [None, "H=128,omega=3", [{"H": 0.5, "omega": 0.0}]],
            [5, "H=128", [{"H": "x", "omega": 1}], ["zz=1"], [{}], "H=inf,omega=1"])  # fmt: skip
        if d.hostile and d.chance(10):  # past the limits (issue 31): refused before any fit
            big = d(st.sampled_from([  # each refused whatever the other arguments
                dict(terms=6, max_constants=12, max_nonlinear=3, variables=["H", "omega"],
                     factors=None, grammar=None, first_constants=12),
                # the same grammar growing from 4 constants: every step counts (issue 61)
                dict(terms=6, max_constants=12, max_nonlinear=3, variables=["H", "omega"],
                     factors=None, grammar=None, first_constants=4, interactions=2),
                dict(split="random", splits=100_000, inner_splits=100_000, yes=True),
                dict(inner_splits=100_001),
            ]))  # fmt: skip
            for k, v in big.items():
                kw[k] = Bad(v, f"{k} {v!r} (past the search's limits)")
        return ApiCase(call, args, kw)
    if call == "Grammar":
        _kw(d, kw, "variables", [None, ["H"], ("H", "omega"), ["H", "H"]],
            [5, "H", [], [5], {"H": 1}])  # fmt: skip
        _kw(d, kw, "factors", [["log"], ("power", "log"), ["log"] * 1000, ["hill", "log"]],
            [None, 5, "log", [], ["cubic"], {"log": 1}])  # fmt: skip
        _kw(d, kw, "levels", [(), ["H"]], [None, 5, {"H": 1}, [""]])
        _kw(d, kw, "terms", [1, 3], [0, 7, 1.5, "2", True])
        _kw(d, kw, "max_constants", [2, 12], [1, 13, None])
        _kw(d, kw, "max_nonlinear", [0, 3], [-1, 4])
        _kw(d, kw, "interactions", [1, 3, None], [0, 4, "2", True])
        _kw(d, kw, "tie_exponents", [False, True], [None, 1, "true"])
        _kw(d, kw, "first_constants", [2, 12], [1, 13, None, 2.5])
        return ApiCase(call, (), kw)
    if call == "plot":  # a result's figures, with labels and units (issue 44)
        args = ("path", d(st.sampled_from(["fit", "compare", "allocate"])))
        methods = ["plot_fit", "plot_residuals", "plot_curves"]
        methods += ["plot_heldout", "plot_paired"] if args[1] == "compare" else []
        methods = ["plot_frontier"] if args[1] == "allocate" else methods
        kw["method"] = d(st.sampled_from(methods))
        labels = [None, "loss=validation loss", {"H": "sync interval"}, "zz=not a column"]
        units = [None, "loss=nats", {"H": "steps", "omega": "ratio"}]
        _kw(d, kw, "labels", labels, ["loss", 5, {"H": 5}, "=x", ["H=a"]], 2)
        _kw(d, kw, "units", units, ["H", 5.0, {"": "x"}, "H="], 2)
        return ApiCase(call, args, kw)
    if call == "write":  # a result's writers (issue 31, serious 4)
        # every result class's writers (issue 43: Tuning and Prediction wrote over their table)
        args = ("path", d(st.sampled_from(["fit", "compare", "prediction", "validate",
                                           "allocate"])))  # fmt: skip
        kinds = ["to_json", "report"] if args[1] in ("fit", "compare") else ["to_json"]
        kw["method"] = d(st.sampled_from(kinds))
        good = ["out.json"] if kw["method"] == "to_json" else ["R"]
        bad = ["g.csv", "link", "hard", "fifo", "dangling", "."]
        kw["target"] = _arg(d, good, bad, "target", 2)
        if kw["method"] == "report":
            _kw(d, kw, "labels", [None, "loss=validation loss", {"H": "sync interval"}],
                ["loss", 5, {"H": 5}], 4)  # fmt: skip
        return ApiCase(call, args, kw)
    # Form, bound to the grid's columns so that every check runs
    args = (
        _arg(d, ["mine"], [5, "", "1x", None, "my form"], "name"),
        _arg(d, ["L0 + a*omega**c", "L0 + a*H"], [5, "", "__import__('os')", None], "expression"),
    )
    _kw(d, kw, "variables", [None, ("omega",), ["omega"]], [[], "omega", [5], ("zz",), 5])
    _kw(d, kw, "bounds", [{}, {"c": (-2, 2)}],
        [{"c": (2, -2)}, {"zz": (0, 1)}, 5, {"c": "ab"}, {"c": (0, 1, 2)}])  # fmt: skip
    _kw(d, kw, "start", [{}, {"c": (0, 1)}], [{"c": (1, 0)}, 5, {"c": (NAN, 1)}])
    _kw(d, kw, "description", ["", "d"], [5, None, [1]])
    return ApiCase(call, args, kw)


NEW_JOBS = ("validate", "record", "score", "verify_ledger", "simulate", "add_form", "remove_form")
BAD_HEADS = ["zz", "1:abc", 5, "0:" + "0" * 12, "99:" + "f" * 12]


def _job_case(d: Draw, call: str) -> ApiCase:
    """fr.validate, fr.predict (a ledger record), fr.score, fr.verify_ledger, fr.simulate,
    fr.add_form and fr.remove_form (issue 30: every command a function)."""
    kw: dict = {}
    if call == "validate":
        _kw(d, kw, "tune", [None], [5, "nope"])
        return ApiCase(call, (_grid_arg(d),), kw)
    if call == "record":
        point = _arg(d, ["H=8,keep=0.25", {"H": 8, "keep": 0.25}],
                     ["H=abc", {"H": 8}, 5, None], "point")  # fmt: skip
        kw["ledger"] = _arg(d, ["l.jsonl"], [5, ""], "ledger")
        _kw(d, kw, "runs", [None, 3], [0, -1, 10**6])
        _kw(d, kw, "tolerance", [None, 5.0], [0, -1, NAN])
        return ApiCase(call, (_grid_arg(d), "composition", point), kw)
    if call in ("score", "verify_ledger"):
        _kw(d, kw, "head", [None], BAD_HEADS)
        return ApiCase(call, (_grid_arg(d, False),) if call == "score" else (), kw)
    if call == "simulate":
        cell = _arg(d, ["H=4,keep=0.5"], ["H=abc", "nope=1", ""], "cell")
        _kw(d, kw, "seeds", ["0", "0,1"], ["a", "-1", "0,1,", "0,,1"])
        _kw(d, kw, "jobs", [1, _np_int(1)], [0, -1, 2.0, True, "1", 10**5])
        _kw(d, kw, "progress", [False], ["yes", 1])
        _kw(d, kw, "scheduler", [None], [2, "local:0", "local:100000", "bogus://x", ""])
        return ApiCase(call, (_arg(d, ["quadratic"], ["nope", 5, ""], "spec"), "runs.csv"),
                       {"cell": cell, **kw})  # fmt: skip
    if call == "add_form":
        line = _arg(d, ["mine = L0 + a*omega**c", "m2(H) = L0 + a*H"],
                    ["", "x", 5, "composition = L0 + a*H", "= L0", "z = L0 + a*omgea"],
                    "line")  # fmt: skip
        return ApiCase(call, (line,), kw)
    name = _arg(d, ["mine"], ["nope", 5, "", "composition"], "name")
    return ApiCase(call, (name,), kw)


@functools.lru_cache(maxsize=1)
def _declared_bad_values() -> list[tuple[str, str, list]]:
    """``(command, option, values its declared check refuses)`` for every checked option."""
    import declared

    out = []
    for cmd, option in declared.checked_options():
        bad, _ = declared.refused_by_check(option)  # a bad check: test_declared_checks says
        if bad:
            out.append((cmd, option.name, bad))
    return out


def _declared_case(d: Draw) -> ApiCase:
    """A small valid call of a command's function with one argument a value that its
    option's declared check refuses (``tests/declared.py``): the function must refuse it."""
    cmd, name, bad = d(st.sampled_from(_declared_bad_values()))
    i = d(st.integers(0, len(bad) - 1))
    return ApiCase("declared", (cmd, name, i), {name: Bad(bad[i], f"{cmd} {name}={bad[i]!r}")})


def _call_declared(case: ApiCase, root: Path):
    import declared

    import fitrules as fr

    cmd, name, _ = case.args
    _write_grid(root)
    if cmd in ("score", "ledger verify"):
        fr.predict(**declared.valid_call("predict", root))
    if cmd == "forms remove":
        fr.add_form(**declared.valid_call("forms add", root))
    call = {**declared.valid_call(cmd, root), name: case.kwargs[name].value}
    return declared.COMMAND_FUNCTIONS[cmd](**call)


def _call_job(case: ApiCase, args, kw, root: Path):
    import fitrules as fr

    if case.call == "validate":
        return fr.validate(*args, **kw)
    if case.call == "record":
        return fr.predict(*args, **kw)
    if case.call in ("score", "verify_ledger"):
        smoke = fr.load_example("smoke")
        fr.predict(smoke, "composition", "H=8,keep=0.25", ledger=root / "l.jsonl")
        if case.call == "score":
            return fr.score(*args, root / "l.jsonl", **kw)
        return fr.verify_ledger(root / "l.jsonl", **kw)
    if case.call == "simulate":
        return fr.simulate(*args, **{"progress": False, **kw}, quiet=True)
    if case.call == "add_form":
        return fr.add_form(*args, **kw)
    fr.add_form("mine = L0 + a*omega**c")
    return fr.remove_form(*args, **kw)


_FITTED: dict = {}


def _call_api(case: ApiCase, root: Path):
    import fitrules as fr

    if case.call == "declared":
        return _call_declared(case, root)
    args = tuple(_materialise(a, root) for a in case.args)
    kw = {k: _plain_arg(v) for k, v in case.kwargs.items()}
    if case.call == "load_grid":
        return fr.load_grid(*args, **kw)
    if case.call == "load_fit":
        source = _saved_fit(case.args[0], root)
        if "data" in kw:
            kw["data"] = _materialise(kw["data"], root)
        return fr.load_fit(source, **kw)
    if case.call in NEW_JOBS:
        return _call_job(case, args, kw, root)
    if case.call in ("stationary_loss", "exact_loss"):
        from fitrules.sim import theory

        return getattr(theory, case.call)(*args, **kw)
    if case.call == "compare":
        return fr.compare(*args, **kw)
    if case.call == "allocate":
        import declared

        return fr.allocate(declared.allocate_runs(), *args, **kw)
    if case.call == "fit":
        return fr.fit(*args, **kw)
    if case.call == "predict":
        grid, form = args
        return fr.fit(grid, form).predict(kw["point"])
    if case.call == "ci":
        return fr.ci(*args, **kw)
    if case.call == "tune":
        return fr.tune(*args, **kw)
    if case.call == "design":
        return fr.design(*args, **kw)
    if case.call == "search":
        return fr.search(*args, **kw)
    if case.call == "Grammar":
        return fr.Grammar(**kw)
    if case.call == "plot":
        import matplotlib.pyplot as plt

        grid, kind = args
        kw = dict(kw)
        method = kw.pop("method")
        if kind == "fit":
            result, first = fr.fit(grid, "composition"), ()
        elif kind == "allocate":
            result, first = fr.allocate(
                fr.load_grid(grid, derive=["N = 1/H", "D = keep"]),
                "chin(N, D) = E + A/N**alpha + B/D**beta", cost="N*D", budgets="0.1",
            ), ()  # fmt: skip
        else:
            result = fr.compare(grid, forms="composition,additive", splits=4)
            first = {"plot_heldout": (), "plot_paired": ("composition", "additive")}.get(
                method, ("composition",)
            )
        try:
            getattr(result, method)(*first, **kw)
        finally:
            plt.close("all")
        return "plotted"
    if case.call == "write":
        grid, kind = args
        result = {
            "fit": lambda: fr.fit(grid, "composition"),
            "compare": lambda: fr.compare(grid, forms="composition", splits=4),
            "prediction": lambda: fr.fit(grid, "composition").predict(H=8, keep=0.25),
            "validate": lambda: fr.validate(grid),
            # the grid read with N and D derived so that the loss falls in both
            "allocate": lambda: fr.allocate(
                fr.load_grid(grid, derive=["N = 1/H", "D = keep"]),
                "chin(N, D) = E + A/N**alpha + B/D**beta", cost="N*D", budgets="0.1",
            ),
        }[kind]()
        target = kw["target"]
        if target == "link":
            os.symlink(grid, root / "link")
        elif target == "hard":
            os.link(grid, root / "hard")
        elif target == "fifo":
            os.mkfifo(root / "fifo")
        elif target == "dangling":
            os.symlink(root / "nowhere.json", root / "dangling")
        more = {"labels": kw["labels"]} if "labels" in kw else {}
        written = getattr(result, kw["method"])(str(root / target), **more)
        return str(written)
    form = fr.Form(*args, **kw)
    return form.bind(["H", "omega", "keep", "seed", "loss"])


def _saved_fit(token, root: Path):
    """A saved fit of the CSV grid in ``root`` (``saved``: its path, ``saved_text``: its
    JSON), one of another result, one whose data changed since, or the token itself."""
    import fitrules as fr

    token = token.value if isinstance(token, Bad) else token
    if token in ("saved", "saved_text", "changed"):
        _write_grid(root)
        table = root / ("g.csv" if token != "changed" else "h.csv")
        if token == "changed":  # a copy, so that the grid the checker watches stays
            table.write_bytes((root / "g.csv").read_bytes())
        f = fr.fit(str(table), "composition")
        text = f.to_json()
        f.to_json(root / "fit.json")
        if token == "changed":
            with open(table, "a") as fh:  # other bytes: another sha256
                fh.write("\n")
        return text if token == "saved_text" else str(root / "fit.json")
    if token == "compare_json":
        _write_grid(root)
        (root / "c.json").write_text(
            fr.compare(str(root / "g.csv"), forms="composition", splits=3).to_json()
        )
        return str(root / "c.json")
    return token


def _plain_arg(v):
    return v.value if isinstance(v, Bad) else v


def _json_view(result):
    """The result's JSON view (every result type has one), checked for finite numbers."""
    from fitrules.base.util import json_ready

    if hasattr(result, "to_dict"):
        body = result.to_dict()
    elif isinstance(result, dict):
        body = result
    else:
        return
    json.dumps(json_ready(body), allow_nan=False)


EXPECTED_TYPES = {
    "load_grid": "Grid",
    "compare": "Comparison",
    "fit": "FittedForm",
    "allocate": "Allocation",
    "load_fit": "FittedForm",
    "predict": "Prediction",
    "ci": "PairedIntervals",
    "tune": "Tuning",
    "design": "Design",
    "search": "Search",
    "Form": "Form",
    "stationary_loss": "float",
    "exact_loss": "float",
    "Grammar": "Grammar",
    "write": "str",
    "plot": "str",
    "validate": "Validation",
    "record": "LedgerEntry",
    "score": "Scores",
    "verify_ledger": "LedgerCheck",
    "simulate": "DataFrame",
    "add_form": "Form",
    "remove_form": "PosixPath",
    "declared": "",  # always a bad value: refused, or "accepted"
}


def _ignore(*args) -> None:
    """A callback that does nothing (on_plan, on_progress)."""


def _input_changed(root: Path) -> bool:
    """The grid a case wrote as ``g.csv`` for the call to read is no longer what was written
    (every case that reads a path reads this one)."""
    path = root / "g.csv"
    if root not in _GRIDS_WRITTEN:
        return False  # no path given
    try:
        return path.read_text() != _frames()["df"].to_csv(index=False)
    except (OSError, UnicodeDecodeError):
        return True


def check_api(case: ApiCase) -> Outcome:
    """Call ``case`` in a fresh working directory and classify what happened."""
    from fitrules.base.errors import FitrulesError

    home = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="fitrules-api-fuzz-") as tmp:
        root = Path(tmp)
        _GRIDS_WRITTEN.discard(root)
        os.chdir(root)
        out, err = io.StringIO(), io.StringIO()
        try:
            with _captured(out, err) as caught:
                try:
                    result = _call_api(case, root)
                    _json_view(result)
                except FitrulesError as exc:
                    if _input_changed(root):
                        return Outcome("changed", None, f"g.csv changed; refused: {exc}")
                    text = str(exc)
                    if not text.strip() or "\n" in text.strip():
                        return Outcome("lines", None, text[-2000:])
                    if caught:
                        w = caught[0]
                        return Outcome("warning", None, f"{w.category.__name__}: {w.message}")
                    return Outcome("refused", None, text)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - every other escape is a failure
            return Outcome("raw", None, "".join(traceback.format_exception(exc))[-3000:])
        finally:
            os.chdir(home)
        if caught:
            w = caught[0]
            return Outcome("warning", None, f"{w.category.__name__}: {w.message} ({w.filename})")
        if _input_changed(root):
            return Outcome("changed", None, "g.csv, the grid read, changed or removed")
        if case.must_refuse:
            return Outcome("accepted", None, "; ".join(case.must_refuse))
        if type(result).__name__ != EXPECTED_TYPES[case.call]:
            return Outcome("wrong", None, f"returned a {type(result).__name__}")
        return Outcome("ok", None, "")
