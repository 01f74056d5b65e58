"""Run one command: errors as one line and an exit status, outputs rolled back on failure,
SIGTERM handled as Ctrl-C, figures drawn headless."""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

from fitrules.base.errors import FitrulesError, FitrulesNote, UsageError, command_line
from fitrules.cli import io
from fitrules.cli.flags import command_flags
from fitrules.cli.parser import build_parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that cleanup runs as for Ctrl-C."""


@contextmanager
def _sigterm_as_interrupt():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def _headless():
    """Figures go to files: the command line draws with Agg and never opens a window.

    The package itself forces no backend (a notebook keeps its inline one); the choice is
    made here, through the environment, only when matplotlib is not yet loaded, and the
    environment is restored afterwards.
    """
    import os

    if "matplotlib" in sys.modules or "MPLBACKEND" in os.environ:
        yield
        return
    os.environ["MPLBACKEND"] = "Agg"
    try:
        yield
    finally:
        os.environ.pop("MPLBACKEND", None)


@contextmanager
def _notes(name: list[str]):
    """A :class:`FitrulesNote` the library warns of is one ``fitrules CMD: note: ...`` line on
    stderr, once however often it is given; other warnings are shown as Python shows them."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("always", FitrulesNote)
        shown, said = warnings.showwarning, set()

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, FitrulesNote):
                if str(message) not in said:
                    said.add(str(message))
                    print(f"{name[0]}: note: {_one_line(message)}", file=sys.stderr)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _one_blas_thread() -> None:
    """One OpenBLAS thread for the command, unless the environment already chose.

    A fit's linear algebra is thousands of tiny products (k x k systems for a handful of
    constants), which threads only spin on: on 2 cores, ``compare --splits 300`` took 35%
    more CPU with two threads and no less wall time (benchmarks/bench_engine.py). Set before
    numpy is first imported, which the command line does only after parsing; ``simulate``
    keeps the library's default (its models are larger).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    """Run one command; every error is one line on stderr and exit status 2.

    Exit status: 0 done, 1 only for ``compare --strict`` with degenerate pairs, 2 bad input
    (nothing written), 130 interrupted, 143 terminated.
    """
    from fitrules.base.outputs import Outputs

    io.ARGV[:] = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not io.ARGV:  # bare `fitrules`: the help, on stdout, exit 0 (as pip and docker do)
        parser.print_help()
        return 0
    outputs = Outputs()
    name = "fitrules"
    shown_as = [name]  # the command's name in a note's line, once it is known
    with _sigterm_as_interrupt(), _headless(), _notes(shown_as), command_line() as flags:
        try:
            args = parser.parse_args(io.ARGV)
            name = shown_as[0] = f"fitrules {args.command}"
            flags.update(command_flags(args.func))  # an error's parameters, as this command's flags
            if args.command != "simulate":
                _one_blas_thread()
            args.outputs = outputs
            from fitrules.cli.commands import HANDLERS  # the library, once the line is parsed

            code = int(HANDLERS[args.func](args) or 0)
            outputs.finish()  # a staged output the command did not write leaves nothing
            return code
        except UsageError as err:
            print(_one_line(err), file=sys.stderr)
            return 2
        except FitrulesError as err:
            outputs.rollback()
            print(f"{name}: error: {_one_line(err)}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # e.g. piped into head: stop quietly
            sys.stderr.close()
            return 0
        except OSError as err:  # the system refused something: a file, a device, a limit
            outputs.rollback()
            where = f"{err.filename}: " if getattr(err, "filename", None) else ""
            print(f"{name}: error: {where}{_one_line(err.strerror or err)}", file=sys.stderr)
            return 2
        except MemoryError:
            outputs.rollback()
            print(
                f"{name}: error: out of memory; ask for less (see fitrules.base.limits)",
                file=sys.stderr,
            )
            return 2
        except _Terminated:
            outputs.rollback()
            print(f"{name}: terminated", file=sys.stderr)
            return 143
        except KeyboardInterrupt:
            outputs.rollback()
            print(f"{name}: interrupted", file=sys.stderr)
            return 130
        except SystemExit as ex:  # --help, --version
            return ex.code if isinstance(ex.code, int) else 0
        except BaseException:
            outputs.rollback()  # a bug: leave nothing behind, then show the traceback
            raise
