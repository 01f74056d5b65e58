"""Options declared once: each command's options, from which its Python function's defaults,
its checks and its command line are made.

An :class:`Option` is one setting of a job: the Python parameter's name and default, the
command line's flag, help and group, and the check of its value. A :class:`Command` is the
ordered options of one job (shared groups are tuples of options, e.g. the data options, put
in several commands). From it:

- the Python function takes its defaults (``train_frac: float = COMPARE.train_frac``), and
  ``COMPARE.check(values)`` checks the values given, in declaration order;
- :func:`add_command` makes the ``argparse`` subcommand, groups and help in declaration order;
- ``tests/api/test_faces.py`` checks that both faces agree.

A default given as text is parsed by the option's own ``type``, as the command line parses
what a user types, so the help's ``%(default)s`` shows it as written (``1/3``, ``1e-3``) and
the Python default is the value the command line would get.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

_SAME = object()  # the command line's default is the Python one
_FLAGS_WITHOUT_VALUE = ("store_true", "store_false", argparse.BooleanOptionalAction)


@dataclass(frozen=True)
class Option:
    """One option of a command.

    Parameters
    ----------
    name : str
        The Python parameter, and the attribute of the parsed command line.
    default : object
        The Python default; text is parsed by ``cli["type"]`` first (see the module).
    help : str
        The command line's help (``%(default)s`` shows ``default`` as written).
    flag : str or None
        ``"--name-with-dashes"`` when empty; a name without dashes is a positional
        argument; None: Python only.
    group : str or None
        Title of the help's group (None: the command's own options).
    check : callable or None
        ``check(value, name)`` raises :class:`~fitrules.base.errors.FitrulesError` for a
        bad value.
    python : bool
        Whether the command's Python function takes it (False: the command line only).
    cli : mapping
        Further ``argparse`` keywords: ``type``, ``metavar``, ``choices``, ``action``,
        ``required``, ``nargs``.
    cli_default : object
        The command line's default where it is not the Python one (e.g. ``[]`` for a
        repeatable flag whose Python parameter defaults to None).
    parse : callable or None
        What the command line hands the Python function: ``parse(value)`` of the parsed
        flag (e.g. ``"0,3.61"`` -> ``(0.0, 3.61)``); None: the value as parsed.
    """

    name: str
    default: Any = None
    help: str | None = None
    flag: str | None = ""
    group: str | None = None
    check: Callable[[Any, str], Any] | None = None
    python: bool = True
    cli: Mapping[str, Any] = field(default_factory=dict)
    cli_default: Any = _SAME
    parse: Callable[[Any], Any] | None = None

    @property
    def value(self) -> Any:
        """The Python default: ``default``, parsed by the option's type when it is text."""
        kind = self.cli.get("type")
        if isinstance(self.default, str) and kind is not None:
            return kind(self.default)
        return self.default

    @property
    def cli_value(self) -> Any:
        """What the parsed command line holds when the flag is not given."""
        if self.cli_default is _SAME:
            return self.value
        return self.cli_default

    @property
    def on_command_line(self) -> bool:
        return self.flag is not None

    @property
    def option_string(self) -> str | None:
        """The flag as typed (``--train-frac``), the positional's name, or None."""
        if self.flag is None:
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    def but(self, **changes: Any) -> Option:
        """This option with some fields changed (a shared option in one command)."""
        return replace(self, **changes)


def as_typed(value: float) -> str:
    """``value`` as a user would type it: ``20``, ``0.95``, ``1e-3``."""
    text = f"{value:g}"
    if "e" not in text and value != 0 and abs(value) < 0.01:
        mantissa, exponent = f"{value:e}".split("e")
        text = f"{float(mantissa):g}e{int(exponent)}"
    return text


def fraction(text: str) -> float:
    """A number or a fraction as typed: ``0.25`` or ``1/3``."""
    try:
        if "/" in text:
            num, den = text.split("/", 1)
            return float(num) / float(den)
        return float(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or fraction") from None


def options(*items: Option | Iterable[Option]) -> tuple[Option, ...]:
    """Options and groups of options, flattened in order."""
    out: list[Option] = []
    for item in items:
        out.extend([item] if isinstance(item, Option) else item)
    return tuple(out)


def in_group(title: str | None, *items: Option | Iterable[Option]) -> tuple[Option, ...]:
    """The options, all in the help group ``title``."""
    return tuple(o.but(group=title) for o in options(*items))


@dataclass(frozen=True)
class Command:
    """One command's options in order, with its help; ``COMMAND.name`` is a default."""

    cmd: str
    summary: str
    options: tuple[Option, ...] = ()
    description: str | None = None
    examples: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [o.name for o in self.options]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{self.cmd}: options declared twice: {', '.join(twice)}")
        hidden = sorted(set(names) & {"cmd", "summary", "options", "description", "examples"})
        if hidden:  # COMMAND.name would give the field, not the option's default
            raise ValueError(f"{self.cmd}: options named as fields: {', '.join(hidden)}")

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not fields: an option's Python default
        for o in self.__dict__.get("options", ()):
            if o.name == name:
                return o.value
        raise AttributeError(f"command {self.__dict__.get('cmd')!r} has no option {name!r}")

    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    def __getitem__(self, name: str) -> Option:
        for o in self.options:
            if o.name == name:
                return o
        raise KeyError(name)

    @property
    def python(self) -> tuple[Option, ...]:
        """The options the Python function takes."""
        return tuple(o for o in self.options if o.python)

    def from_args(self, args: argparse.Namespace, **given: Any) -> dict[str, Any]:
        """The keyword arguments of the Python function from a parsed command line: every
        option of both faces (parsed by its ``parse``), then ``given`` (which win)."""
        out = {}
        for o in self.options:
            if o.python and o.on_command_line and o.name not in given:
                value = getattr(args, o.name)
                out[o.name] = o.parse(value) if o.parse is not None else value
        return out | given

    def flags_given(self, args: argparse.Namespace, names: Iterable[str | tuple[str, ...]]):
        """The flags of ``names`` given other values than their defaults, as typed, for a
        command that names them again; a tuple of names is given whole or not at all."""
        out: list[str] = []
        for name in names:
            group = [self[n] for n in ((name,) if isinstance(name, str) else name)]
            if all(getattr(args, o.name) == o.cli_value for o in group):
                continue
            for o in group:
                value, flag = getattr(args, o.name), o.option_string or o.name
                for v in value if isinstance(value, list) else [value]:
                    out += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
        return out

    def check(self, values: Mapping[str, Any]) -> None:
        """Check every option given in ``values`` that has a check, in declaration order.

        A check names the option by its flag (``--jobs``), as every error does; the Python
        functions' :func:`~fitrules.base.errors.api_terms` says ``jobs`` instead."""
        for o in self.options:
            if o.check is not None and o.name in values:
                flag = o.option_string
                o.check(values[o.name], flag if flag and flag.startswith("--") else o.name)


def add_command(sub, decl: Command, parents: list, func: Any, **parser: Any):
    """The ``argparse`` subcommand of ``decl``: its options in order, in their groups, and
    ``func`` as the parsed line's ``func`` (unless None)."""
    p = sub.add_parser(
        decl.cmd.split()[-1],
        parents=parents,
        help=decl.summary,
        description=decl.description,
        **parser,
    )
    groups: dict[str, Any] = {}
    for o in decl.options:
        if not o.on_command_line:
            continue
        if o.group is None:
            target = p
        else:
            if o.group not in groups:
                groups[o.group] = p.add_argument_group(o.group)
            target = groups[o.group]
        target.add_argument(o.option_string, **_keywords(o))
    if func is not None:
        p.set_defaults(func=func)
    return p


def _keywords(o: Option) -> dict[str, Any]:
    kw = dict(o.cli)
    kw["help"] = o.help
    flag = o.option_string or ""
    if not flag.startswith("-"):  # a positional: its dest is its name
        if o.default is not None:
            kw["default"] = o.default
        return kw
    kw["default"] = o.default if o.cli_default is _SAME else o.cli_default
    implied = flag.lstrip("-").replace("-", "_")
    if implied != o.name:
        kw["dest"] = o.name
        if "metavar" not in kw and kw.get("action") not in _FLAGS_WITHOUT_VALUE:
            kw["metavar"] = implied.upper()  # the help shows the flag's name, not the dest's
    if kw.get("action") in ("store_true", "store_false") and kw["default"] is None:
        del kw["default"]
    return kw
