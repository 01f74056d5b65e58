"""Input files, checked for what they are before they are read.

A path that names a named pipe with no writer would make a read wait forever, a device
(``/dev/zero``) never ends, a file of a few kilobytes can hold TOML nested thousands deep
(the parser recurses once per level) and a gzip table of a few megabytes can decompress to
gigabytes. Every file fitrules reads whole (a grammar, forms.toml, a spec, a harness
manifest) goes through :func:`read_text`, every TOML through :func:`load_toml`, and every
compressed table through :func:`check_table_size`, so each of these is refused with one line
before it is read.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

from fitrules.base.errors import FitrulesError
from fitrules.base.limits import MAX_INPUT_BYTES, MAX_INPUT_DEPTH, MAX_TABLE_BYTES, check_memory

# compressions pandas infers from a table's suffix, and how to stream each
COMPRESSED = (".gz", ".bz2", ".xz", ".zip", ".zst", ".tar")


def _size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.3g} GiB"
    return f"{n / 2**20:.3g} MiB" if n >= 2**20 else f"{n:,} bytes"


def check_file(
    path: Path | str, label: str, error: type[FitrulesError], what: str = "a file"
) -> os.stat_result:
    """The stat of ``path`` if it is a regular file; else ``error`` naming ``label``, what
    the path is instead and ``what`` to give.

    Nothing is opened: a named pipe with no writer would make a read wait for ever, and a
    device such as ``/dev/zero`` never ends.

    Raises
    ------
    FitrulesError
        (of the class given) for a missing path, a directory, a named pipe, a socket or a
        device, each in its own words.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{label}: cannot be read (no such file)") from None
    except OSError as err:
        raise error(f"{label}: cannot be read ({err.strerror or type(err).__name__})") from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise error(f"{label}: is a directory; give {what}")
    if stat.S_ISFIFO(mode):
        raise error(
            f"{label}: is not a regular file but a named pipe (FIFO), which a read would wait "
            f"on for ever; give {what}"
        )
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise error(
            f"{label}: is not a regular file but a device, which a read may never finish; "
            f"give {what}"
        )
    if not stat.S_ISREG(mode):
        raise error(f"{label}: is not a regular file but a socket; give {what}")
    return st


def read_text(
    path: Path | str,
    label: str,
    error: type[FitrulesError],
    max_bytes: int = MAX_INPUT_BYTES,
    what: str = "a file",
) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` long (``what``:
    the file expected, for the refusal of anything else).

    Raises
    ------
    FitrulesError
        (of the class given) for anything :func:`check_file` refuses, a file longer than
        ``max_bytes`` (also one that grows while it is read) or text that is not UTF-8.
    """
    st = check_file(path, label, error, what)
    too_big = error(
        f"{label}: {_size(st.st_size)}, more than the {_size(max_bytes)} such a file may have"
    )
    if st.st_size > max_bytes:
        raise too_big
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise error(f"{label}: cannot be read ({err.strerror or type(err).__name__})") from None
    if len(data) > max_bytes:
        raise too_big
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{label}: is not UTF-8 text (byte {err.start})") from None


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in TOML or JSON text, outside strings and
    comments (table headers count one)."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            triple = text.startswith(ch * 3, i)
            close = ch * 3 if triple else ch
            j = i + len(close)
            while j < n:
                if ch == '"' and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(close, j):
                    break
                if not triple and text[j] == "\n":
                    break
                j += 1
            i = j + len(close)
            continue
        if ch == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return deepest


def load_toml(
    path: Path | str, label: str, error: type[FitrulesError], text: str | None = None
) -> dict:
    """The TOML document of ``path`` (or of ``text`` read from it), with the checks of
    :func:`read_text` and a nesting depth of at most
    :data:`~fitrules.base.limits.MAX_INPUT_DEPTH`.

    Raises
    ------
    FitrulesError
        (of the class given) for a file refused by :func:`read_text`, nesting too deep, or
        text that is not valid TOML.
    """
    if text is None:
        text = read_text(path, label, error)
    return parse_toml(text, label, error)


def parse_toml(text: str, label: str, error: type[FitrulesError]) -> dict:
    """``tomllib.loads(text)`` with its nesting checked first and its errors as ``error``."""
    depth = nesting_depth(text)
    if depth > MAX_INPUT_DEPTH:
        raise error(
            f"{label}: arrays or tables nested {depth:,} deep; at most {MAX_INPUT_DEPTH} allowed"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise error(f"{label}: not valid TOML ({' '.join(str(err).split())})") from None
    except RecursionError:
        raise error(f"{label}: not valid TOML (nested too deeply)") from None


def _stream(path: Path):
    """A binary file object of the decompressed content of ``path`` (None: not one pandas
    decompresses the same way, e.g. a zip of several members)."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        import gzip

        return gzip.open(path, "rb")
    if suffix == ".bz2":
        import bz2

        return bz2.open(path, "rb")
    if suffix == ".xz":
        import lzma

        return lzma.open(path, "rb")
    if suffix == ".zip":
        import zipfile

        zf = zipfile.ZipFile(path)
        names = zf.namelist()
        return zf.open(names[0]) if len(names) == 1 else None
    return None


def check_table_size(path: Path, label: str, error: type[FitrulesError]) -> int:
    """Bytes of text in the table ``path`` once decompressed, counted while streaming (a
    compressed table is decompressed in blocks and never held whole); refused beyond
    :data:`~fitrules.base.limits.MAX_TABLE_BYTES`, or when reading it would exceed the memory
    budget.

    Raises
    ------
    FitrulesError
        (of the class given) naming the table, its size and the limit.
    """
    path = Path(path)
    st = check_file(path, label, error)
    size = st.st_size
    if path.suffix.lower() in COMPRESSED:
        total = 0
        try:
            fh = _stream(path)
            if fh is not None:
                with fh:
                    while block := fh.read(1 << 20):
                        total += len(block)
                        if total > MAX_TABLE_BYTES:
                            break
                size = total
        except (OSError, EOFError, ValueError, RuntimeError) as err:
            raise error(f"{label}: cannot be decompressed ({err})") from None
        except Exception as err:  # zipfile.BadZipFile, lzma.LZMAError: not a valid archive
            raise error(f"{label}: cannot be decompressed ({type(err).__name__})") from None
    if size > MAX_TABLE_BYTES:
        if path.suffix.lower() in COMPRESSED:
            shown = f"decompresses to more than {_size(MAX_TABLE_BYTES)} of text"
        else:
            shown = f"{_size(size)} of text"
        raise error(f"{label}: {shown}; a results table may have at most {_size(MAX_TABLE_BYTES)}")
    # pandas holds the text's values several times over while it parses
    check_memory(4.0 * size, f"reading {label}", "filter or split the table first")
    return size
