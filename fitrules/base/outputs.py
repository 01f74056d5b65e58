"""Outputs: taken before the work, written whole after it, never replacing what appeared.

Every file and directory fitrules writes goes through this module:

- A target is checked and *taken* before any work. A report directory is created empty
  (create-or-fail: a second run, or a directory that exists, is refused at once); a file
  (``--json``) gets its staging file beside it, so an unwritable place fails now rather than
  after the fit.
- The content is written to a hidden sibling ``.NAME.XXXXXXXX.partial``, locked (``flock``)
  for as long as its process lives, and moved into place by one rename. A report directory
  is renamed onto its empty placeholder, which fails if anything was put into it during the
  run; with ``--force`` the old directory is swapped with the new one in one step
  (``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere two renames with SIGINT, SIGTERM and
  SIGHUP held back), so the target is never missing.
- Partial siblings whose lock is free were left by killed runs; the next write to the same
  target removes them.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fitrules.base.errors import ReportError, param

PARTIAL = ".partial"


def _show(path: Path) -> str:
    """The path as the user gave it (messages name what was typed)."""
    return str(path) if str(path) else "''"


def _why(err: OSError) -> str:
    return err.strerror or type(err).__name__


# ------------------------------------------------------------------ locks and stale partials
def _lock(path: Path) -> int:
    """Open ``path`` (file or directory) and hold an exclusive flock on it; return the fd."""
    # O_NONBLOCK: a pipe put where a partial was expected must not wait for a writer
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)  # closing the last descriptor releases the flock
        except OSError:
            pass


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clean_stale(target: Path) -> list[Path]:
    """Remove partial siblings of ``target`` left by killed runs (their lock is free).

    A partial still being written by a live process holds its lock and is left alone, as is
    anything named like a partial that fitrules cannot have made (a pipe, a device, a link:
    opening a pipe would wait for a writer forever). A ``.NAME.old`` directory is never
    touched: fitrules no longer makes one, and putting it back at a fresh target would
    replace what the user asked for with something nobody asked for. Returns the paths
    removed.
    """
    target = Path(target)
    parent, name = target.parent, target.name
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(f".{name}.") and entry.name.endswith(PARTIAL)):
            continue
        try:
            mode = entry.lstat().st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            continue
        try:
            fd = _lock(entry)
        except OSError:
            continue  # held by a live run, or already gone
        try:
            _remove(entry)
            removed.append(entry)
        finally:
            _unlock(fd)
    return removed


# ------------------------------------------------------------------ atomic moves
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_EXCHANGE = _renameat2()


@contextmanager
def held_signals() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for a few system calls, then act on them.

    Python runs signal handlers in the main thread only, so the handlers are swapped for
    one that records the signal, and the original handler runs once the block is done (a
    blocked signal mask would not do: the kernel may deliver a process signal to any thread).
    Elsewhere than the main thread nothing can be held and the block runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum, frame):
        pending.append(signum)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, hold)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for num in pending:
            handler = old.get(signal.Signals(num))
            if callable(handler):
                handler(num, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(num)


def exchange(a: Path, b: Path) -> None:
    """Swap the paths ``a`` and ``b`` so that neither is ever missing, as far as possible.

    One ``renameat2(RENAME_EXCHANGE)`` where the system has it; otherwise ``b`` is renamed
    aside and ``a`` into its place with interrupts held back between the two renames, and the
    old ``b`` ends at ``a``.
    """
    if _EXCHANGE is not None:
        if _EXCHANGE(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(b))
    aside = a.with_name(a.name + ".aside" + PARTIAL)
    with held_signals():
        os.rename(b, aside)
        os.rename(a, b)
        os.rename(aside, a)


def link_refusal(path: Path, option: str, what: str = "") -> str | None:
    """Why an output at ``path`` is refused when it is a symbolic link (None when it is
    not): written through, the link would replace the file it points to. ``what`` names the
    path when it is not the option's own (``its manifest PATH``)."""
    if not path.is_symlink():
        return None
    try:
        target = _show(Path(os.readlink(path)))
    except OSError:
        target = "a path that cannot be read"
    return (
        f"{option} {what or _show(path)}: is a symbolic link (to {target}); fitrules writes "
        "no output through a link, which would replace the file it points to: give another "
        "path or remove the link"
    )


def follow_link(path: Path | str, option: str) -> Path:
    """``path``, or the file it links to when it is a symbolic link (a chain is followed to
    its end): a file written through a link lands where the link points, and the link stays.

    A link to nothing is refused: following it would make a new file wherever it points,
    outside what the user named (a dangling link is usually a moved file, not a request).

    Raises
    ------
    ReportError
        For a loop of links, or a link to a file that does not exist.
    """
    path = Path(path)
    if not path.is_symlink():
        return path
    try:
        target = path.resolve()
    except (OSError, RuntimeError, ValueError):
        raise ReportError(f"{option} {_show(path)}: is a loop of symbolic links") from None
    if not target.exists():
        raise ReportError(
            f"{option} {_show(path)}: is a symbolic link to {_show(target)}, which does not "
            "exist; remove the link or create the file it names"
        )
    return target


@contextmanager
def update_lock(path: Path | str, option: str) -> Iterator[Path]:
    """Hold an exclusive lock for one read-modify-write of ``path`` (a ledger, forms.toml);
    yield the file to read and write (through a link, the file it points to).

    The lock is an flock on the file's directory, which exists before the file does and
    survives the atomic rename that replaces it: two processes that add a form or a record
    at once wait for each other, so neither update is lost.

    Raises
    ------
    ReportError
        As :func:`follow_link` does.
    """
    path = follow_link(Path(path), option)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)


# ------------------------------------------------------------------ outputs are never inputs
def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once links are followed, or (for
    files that exist) the same device and inode, which also catches hard links."""
    a, b = Path(a), Path(b)
    try:
        if a.resolve() == b.resolve():
            return True
    except (OSError, RuntimeError):  # a loop of links: compare as given
        if os.path.abspath(a) == os.path.abspath(b):
            return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def inputs_of(result: object) -> list[Path]:
    """The files a result was made from, which none of its writers may replace: the table
    (and test table) its grid was read from, a grammar, a ledger, and ``forms.toml`` of the
    working directory when there is one (forms are looked up there by name)."""
    from fitrules.base.paths import FORMS_FILE

    paths = [Path(p) for p in getattr(result, "inputs", ()) or () if p is not None]
    if Path(FORMS_FILE).exists():
        paths.append(Path(FORMS_FILE))
    return paths


def check_result_output(path: Path | str, inputs: list[Path], option: str, kind: str) -> None:
    """Refuse, before anything is written, an output of a result's writer (``to_json``,
    ``report``) that is, or (for a directory) holds, a file the result was made from.

    Raises
    ------
    ReportError
        Naming the parameter, the path and the input it would replace.
    """
    path = Path(path)
    if kind == "file":
        check_distinct([(option, path)], inputs, "of this result")
        return
    for src in inputs:
        if not src.exists():
            continue
        if same_file(path, src) or _inside(src, path):
            raise ReportError(
                f"{option} {_show(path)}: holds {_show(src)}, a file this result was made from; "
                "choose another directory (it would be replaced)"
            )


def _inside(path: Path, folder: Path) -> bool:
    try:
        p, f = path.resolve(), folder.resolve()
    except (OSError, RuntimeError):
        return False
    return f in p.parents


def check_distinct(
    outputs: list[tuple[str, Path]], inputs: list[Path], whose: str = "of this command"
) -> None:
    """Refuse, before any work, an output that is an input or another output.

    ``outputs`` are (option, path) pairs; the check is by resolved path and by inode, so a
    symbolic or hard link to an input is caught too.

    Raises
    ------
    ReportError
        Naming the option, the path and what it would replace.
    """
    outputs = [(o, p) for o, p in outputs if str(p).strip()]  # empty: refused when taken
    for i, (option, path) in enumerate(outputs):
        for src in inputs:
            if same_file(path, src):
                also = f" ({_show(src)})" if str(src) != str(path) else ""
                raise ReportError(
                    f"{option} {_show(path)}: is an input {whose}{also}; choose "
                    "another path (it would be replaced)"
                )
        for other, opath in outputs[:i]:
            if same_file(path, opath):
                raise ReportError(
                    f"{option} {_show(path)}: is also the path of {other}; give each output "
                    "its own path"
                )


# ------------------------------------------------------------------ files
def _check_file_target(path: Path, option: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise ReportError(f"{option} {_show(path)}: cannot use it ({_why(err)})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ReportError(f"{option} {_show(path)}: is a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ReportError(
            f"{option} {_show(path)}: exists and is not a regular file (a device, pipe or "
            "socket); it would be replaced, so choose another path"
        )
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise ReportError(f"{option} {_show(path)}: {_show(parent)} is not a directory")


def _make_parents(parent: Path) -> list[Path]:
    """Create ``parent`` and missing ancestors; return the ones created, deepest last."""
    missing = []
    p = parent
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        os.mkdir(p)
    return list(reversed(missing))


def _remove_parents(created: list[Path]) -> None:
    """Remove the directories :func:`_make_parents` created, deepest first, while empty."""
    for p in reversed(created):
        try:
            os.rmdir(p)
        except OSError:
            break


class StagedFile:
    """A file target taken now (its staging file created and locked) and written later.

    Parameters
    ----------
    path : the file to write.
    option : how to name it in messages (e.g. ``--json``).

    Raises
    ------
    ReportError
        For an empty path, a directory, a device, a parent that is not a directory, or a
        place where no file can be created (read-only, ``/proc``, missing permissions).
    """

    def __init__(self, path: Path | str, option: str = param("json"), update: bool = False):
        if not str(path).strip():
            raise ReportError(f"{option} {str(path)!r}: empty path; give a file name")
        self.path, self.option = Path(path), option
        if not update:
            # an output replaces what is at its path: through a link that is another file
            # (perhaps outside the folder the user meant), so a link is refused, and kept
            refusal = link_refusal(Path(path), option)
            if refusal is not None:
                raise ReportError(refusal)
        # a file updated in place (a ledger, forms.toml) is followed, so that the file it
        # points to is replaced and the link stays
        path = follow_link(path, option)
        self.real = path
        _check_file_target(path, option)
        self.created_parents: list[Path] = []
        self.tmp: Path | None = None
        self.fd: int | None = None
        try:
            self.created_parents = _make_parents(path.parent)
            clean_stale(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PARTIAL)
            self.fd, self.tmp = fd, Path(tmp)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            self.discard()
            raise ReportError(
                f"{option} {_show(path)}: cannot create a file in "
                f"{_show(path.parent) if str(path.parent) != '.' else 'the working directory'}"
                f" ({_why(err)})"
            ) from None

    def commit(self, text: str) -> None:
        """Write ``text`` and move it into place in one rename."""
        if self.tmp is None or self.fd is None:
            raise ReportError(f"{self.option} {_show(self.path)}: already written or discarded")
        try:
            data = text.encode()
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
            os.fsync(self.fd)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(self.fd, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode
            _check_file_target(self.real, self.option)  # a directory may have appeared
            os.replace(self.tmp, self.real)
        except OSError as err:
            self.discard()
            raise ReportError(
                f"{self.option} {_show(self.path)}: cannot write it ({_why(err)})"
            ) from None
        except BaseException:
            self.discard()
            raise
        _unlock(self.fd)
        self.fd = self.tmp = None
        self.created_parents = []

    def discard(self) -> None:
        """Remove the staging file (and any directory created for it); never the target."""
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
        _unlock(self.fd)
        self.fd = self.tmp = None
        _remove_parents(self.created_parents)
        self.created_parents = []


def write_text(
    path: Path | str,
    text: str,
    option: str = "output",
    update: bool = False,
    inputs: list[Path] | None = None,
) -> None:
    """Write ``text`` to ``path`` atomically: a complete new file or the old one, never half.

    ``update``: the file is updated in place (a ledger, forms.toml), so a symbolic link is
    followed and stays a link; otherwise a link is refused. ``inputs``: files this output
    may not replace (see :func:`check_result_output`).

    Raises
    ------
    ReportError
        If ``path`` is a directory, a link (unless ``update``), an input, not a regular
        file, or cannot be written.
    """
    if inputs:
        check_result_output(path, inputs, option, "file")
    StagedFile(path, option, update).commit(text)


# ------------------------------------------------------------------ directories
def check_dir_target(target: Path, force: bool, option: str = param("report")) -> None:
    """Refuse, before any work, a target that exists (without ``force``) or is not a directory."""
    target = Path(target)
    if not str(target) or str(target) == ".":
        raise ReportError(f"{option} {str(target)!r}: give a directory name")
    if target.exists() or target.is_symlink():
        if target.is_symlink() or not target.is_dir():
            raise ReportError(f"{option} {_show(target)}: exists and is not a directory")
        if not force and any(target.iterdir()):
            raise ReportError(
                f"{option} {_show(target)}: exists; pass {param('force')} to replace it"
            )
        if not force:
            # empty: nothing to lose, unless a live run holds it as its placeholder (locked);
            # one left by a killed run (its lock free) is taken, and its partials removed
            try:
                _unlock(_lock(target))
            except OSError:
                raise ReportError(
                    f"{option} {_show(target)}: exists, being written by another fitrules run now; "
                    "wait for it, or choose another directory"
                ) from None
    cwd = Path.cwd().resolve()
    resolved = target.resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ReportError(
            f"{option} {_show(target)}: holds the working directory; refusing to replace it"
        )
    if target.parent.exists() and not target.parent.is_dir():
        raise ReportError(f"{option} {_show(target)}: {_show(target.parent)} is not a directory")


class ReservedDir:
    """A report directory taken before the work: an empty placeholder made by create-or-fail.

    Without ``force`` the target must not exist; it is created empty now, so a concurrent run
    is refused at once, and the finished report replaces only that empty placeholder. With
    ``force`` an existing directory is left in place until the new one is swapped in.
    """

    def __init__(self, target: Path | str, force: bool, option: str = param("report")):
        self.target, self.force, self.option = Path(target), force, option
        check_dir_target(self.target, force, option)
        self.created_parents: list[Path] = []
        self.placeholder = False
        self.written = False
        self.fd: int | None = None
        try:
            self.created_parents = _make_parents(self.target.parent)
            clean_stale(self.target)
            if not self.target.exists():
                os.mkdir(self.target)
                self.placeholder = True
            if self.placeholder or not any(self.target.iterdir()):
                # held while this run lives: a rerun tells a live placeholder from a dead one
                self.fd = _lock(self.target)
        except FileExistsError:
            self.release()
            raise ReportError(
                f"{option} {_show(self.target)}: was created just now by something else; "
                f"pass {param('force')} to replace it"
            ) from None
        except OSError as err:
            self.release()
            raise ReportError(
                f"{option} {_show(self.target)}: cannot create it ({_why(err)})"
            ) from None

    def close(self) -> None:
        """Let go of the placeholder's lock (the run is over)."""
        _unlock(self.fd)
        self.fd = None

    def release(self) -> None:
        """Undo the reservation after a failure: remove what this run created, nothing else.

        The placeholder is removed only while empty; a report this run already moved into
        place (a later output failed) is removed only if the target did not exist before.
        """
        self.close()
        if self.written and self.placeholder:
            shutil.rmtree(self.target, ignore_errors=True)
        elif self.placeholder:
            try:
                os.rmdir(self.target)
            except OSError:
                pass  # something was put in it: not ours to remove
        self.placeholder = False
        _remove_parents(self.created_parents)
        self.created_parents = []


def write_dir(target: Path | str, build: Callable[[Path], None], force: bool = False) -> Path:
    """Run ``build(tmpdir)`` in a locked partial sibling and move the result to ``target``.

    ``target`` may be missing or an empty directory (a placeholder from
    :class:`ReservedDir`); a non-empty directory is replaced only with ``force``, by an
    atomic swap. A failure inside ``build``, or a target that filled up during the build,
    leaves the target as it was and no partial behind.

    Raises
    ------
    ReportError
        If the target holds anything (without ``force``) or is not a directory, now or when
        the report is complete.
    """
    target = Path(target)
    if target.exists() and not force and (not target.is_dir() or any(target.iterdir())):
        check_dir_target(target, force)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ReportError(f"{param('report')} {_show(target)}: exists and is not a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=PARTIAL, dir=target.parent))
    fd = None
    try:
        fd = _lock(tmp)
        build(tmp)
        tmp.chmod(0o755)
        _move_into_place(tmp, target, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _unlock(fd)
    return target


def _move_into_place(tmp: Path, target: Path, force: bool) -> None:
    try:
        os.rename(tmp, target)  # target missing, or an empty directory: replaced atomically
        return
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise ReportError(
                f"{param('report')} {_show(target)}: cannot write it ({_why(err)})"
            ) from None
    if target.is_symlink() or not target.is_dir():
        raise ReportError(
            f"{param('report')} {_show(target)}: a file appeared there during the run; the "
            "report was "
            "not written"
        )
    if not force:
        raise ReportError(
            f"{param('report')} {_show(target)}: files were put into it during the run; they are "
            "kept "
            f"and the report was not written (pass {param('force')} to replace them)"
        )
    exchange(tmp, target)  # the new report at target, the old one at tmp
    shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ one command's outputs
class Outputs:
    """The outputs of one command: taken before the work, committed after, undone on failure."""

    def __init__(self) -> None:
        self.dirs: list[ReservedDir] = []
        self.files: list[StagedFile] = []
        self.taken: list[ReservedDir | StagedFile] = []  # in order: undone last first

    def reserve_dir(
        self, target: Path | str, force: bool, option: str = param("report")
    ) -> ReservedDir:
        d = ReservedDir(target, force, option)
        self.dirs.append(d)
        self.taken.append(d)
        return d

    def stage_file(self, path: Path | str, option: str = param("json")) -> StagedFile:
        f = StagedFile(path, option)
        self.files.append(f)
        self.taken.append(f)
        return f

    def finish(self) -> None:
        """After a command succeeded: remove what was taken but not written (nothing else),
        last taken first (a folder made for one output may hold another's staging file)."""
        for t in reversed(self.taken):
            if isinstance(t, StagedFile):
                t.discard()  # a committed file has nothing left to discard
            elif not t.written:
                t.release()
            else:
                t.close()
        self.files, self.dirs, self.taken = [], [], []

    def rollback(self) -> None:
        """After a failure: undo every output taken, last taken first."""
        for t in reversed(self.taken):
            if isinstance(t, StagedFile):
                t.discard()
            else:
                t.release()
        self.files, self.dirs, self.taken = [], [], []
