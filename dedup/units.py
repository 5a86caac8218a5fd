"""Fixed-width units: tokens cut or padded to 8-byte words (Broder §4.3).

Sliding-window fingerprints are cheapest when every token has the same width, so the paper
suggests "a word to have at most 8 bytes. Longer words will be viewed as the catenation of several
words ... pad shorter words to 8 bytes". Here each token is UTF-8 encoded, cut into 8-byte chunks,
and the last chunk right-padded with NUL bytes; each chunk, read big-endian, is one ``uint64``
unit. Shingles are then windows of w consecutive *units*.

Tokens never contain NUL (the canonicaliser guarantees it), so padding cannot make two different
tokens equal, and a word of 8 bytes stays one unit:

>>> [hex(u) for u in to_units(["a", "rosebuds!"])]
['0x6100000000000000', '0x726f736562756473', '0x2100000000000000']
>>> units_to_bytes(to_units(["rose"]))
b'rose\\x00\\x00\\x00\\x00'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn, Union

import numpy as np
import numpy.typing as npt

try:
    from dedup import _tokens as _c_tokens  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way below
    _c_tokens = None

__all__ = ["UNIT_BYTES", "JoinedTokens", "to_units", "units_to_bytes"]

#: width of one unit in bytes: a 64-bit word
UNIT_BYTES = 8

_TAIL = "\x00" * UNIT_BYTES
_TAIL_BYTES = _TAIL.encode("ascii")
_UNIT_SHIFT = UNIT_BYTES.bit_length() - 1
_LITTLE = sys.byteorder == "little"
# the padding trick in to_units
_ONES = np.uint64(0x0101010101010101)
_HIGH_BITS = np.uint64(0x8080808080808080)
_ONE = np.uint64(1)


@dataclass(frozen=True)
class JoinedTokens:
    """A token stream as one string of bytes: its tokens in UTF-8, joined by NUL.

    It is the form that units are read from (:func:`to_units`) and that the exact-duplicate hash
    is taken of, so a stream made in this form, as the canonicaliser's fast path makes word
    streams, reaches its sketch without ever becoming thousands of ``str`` objects. ``len()`` is
    the number of tokens; :meth:`tokens` gives them as a list when a caller wants to read them.

    >>> joined = JoinedTokens.of(["a", "rose"])
    >>> joined.data, len(joined), joined.tokens()
    (b'a\\x00rose', 2, ['a', 'rose'])
    """

    data: bytes
    count: int

    @classmethod
    def of(cls, tokens: Sequence[str]) -> JoinedTokens:
        return cls("\x00".join(tokens).encode("utf-8"), len(tokens))

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        return iter(self.tokens())

    def tokens(self) -> list[str]:
        return self.data.decode("utf-8").split("\x00") if self.count else []


#: what :func:`to_units` and :class:`~dedup.document.Sketcher` take: tokens, as a list or joined
Tokens = Union[Sequence[str], JoinedTokens]


def to_units(tokens: Tokens) -> npt.NDArray[np.uint64]:
    """The units of ``tokens``, in order: ``ceil(len(token.encode()) / 8)`` units per token.

    In one C pass over the joined bytes (``dedup/_tokens.c``) where that module was built, else
    by :func:`_to_units_numpy`; the two give the same units (a property test checks it).

    >>> to_units(["ab", ""])
    Traceback (most recent call last):
    ...
    ValueError: token 1 is empty; tokens must be non-empty
    """
    if _c_tokens is None:
        return _to_units_numpy(tokens)
    n = _count(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if isinstance(tokens, JoinedTokens):
        data = tokens.data
    else:
        data = "\x00".join(tokens).encode("utf-8")
    made = _c_tokens.units(data)
    if made is None or made[1] != n:
        _raise_bad_token(tokens)  # an empty token, or one holding NUL
    return np.frombuffer(made[0], dtype=np.uint64)


def _count(tokens: Tokens) -> int:
    """How many tokens; a bare ``str`` is refused (it would be read as one token a character)."""
    if isinstance(tokens, str):
        raise TypeError("to_units takes a sequence of tokens, not a single str")
    return len(tokens)


def _to_units_numpy(tokens: Tokens) -> npt.NDArray[np.uint64]:
    """:func:`to_units` with numpy, vectorised, with no per-token Python loop: the tokens are
    joined with NUL (and a NUL before the first) and encoded once, the NULs give each token's
    byte range, and every unit is one unaligned 8-byte read at its first byte. Read least
    significant byte first, the token's bytes are the low end of the word and the first NUL
    after them marks where the padding starts, so a branch-free bit trick clears the rest; a
    byte swap gives the big-endian value.
    (A per-token loop in Python would cost more than all of this together.)
    :class:`JoinedTokens` are already joined and encoded.

    >>> _to_units_numpy(["ab", ""])
    Traceback (most recent call last):
    ...
    ValueError: token 1 is empty; tokens must be non-empty
    """
    n = _count(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if isinstance(tokens, JoinedTokens):
        data = b"\x00" + tokens.data + _TAIL_BYTES
    else:
        # the trailing NULs keep every 8-byte read in bounds
        data = ("\x00" + "\x00".join(tokens) + _TAIL).encode("utf-8")
    size = len(data) - (UNIT_BYTES - 1)  # up to and including the NUL after the last token
    nuls = (np.frombuffer(data, dtype=np.uint8, count=size) == 0).nonzero()[0]
    if len(nuls) != n + 1:
        _raise_bad_token(tokens)  # some token contains NUL
    # Positions below count from the byte after data[0]: token t starts at nuls[t].
    first = nuls[:-1]
    gaps = nuls[1:] - first  # each token's length + 1
    if gaps.min() == 1:
        _raise_bad_token(tokens)
    if gaps.max() > UNIT_BYTES + 1:  # some token needs more than one unit
        # unit j of token t starts 8j bytes into it
        chunks = gaps
        chunks += UNIT_BYTES - 2
        chunks >>= _UNIT_SHIFT  # ceil(length / 8)
        before = np.cumsum(chunks)
        total = int(before[-1])
        before -= chunks
        before <<= _UNIT_SHIFT  # 8 × the units of the tokens before token t
        first = np.repeat(first - before, chunks)
        first += _unit_offsets(total)
    # Every unit is the 8 bytes after its position, read least significant byte first (an
    # overlapping, unaligned view; indexing, unlike take, does not copy the whole view first).
    words = np.ndarray(shape=(size - 1,), dtype="<u8", buffer=data, offset=1, strides=(1,))
    units = words[first]
    # Bit 7 of each NUL byte, exact for the lowest one (a borrow may mark others above it):
    nul = units - _ONES
    keep = ~units
    nul &= keep
    nul &= _HIGH_BITS
    # The bytes below the lowest NUL, byte k: the bits below bit 8k + 7, shifted right by 7.
    # With no NUL the bits below are all 64, and an arithmetic shift keeps them all.
    np.subtract(nul, _ONE, out=keep)
    np.invert(nul, out=nul)
    keep &= nul
    signed = keep.view(np.int64)
    signed >>= 7
    units &= keep
    # the bytes in memory are now the unit's, in order: read them big-endian
    if _LITTLE:
        return units.byteswap(inplace=True).view(np.uint64)
    return units.view(">u8").astype(np.uint64)  # pragma: no cover - big-endian machines


_MAX_SHARED_OFFSETS = 1 << 20
_offsets = np.arange(0, UNIT_BYTES << 12, UNIT_BYTES, dtype=np.int64)
_offsets.flags.writeable = False


def _unit_offsets(total: int) -> npt.NDArray[np.int64]:
    """``8 · arange(total)``, from a shared read-only array grown on demand (up to 8 MiB)."""
    global _offsets
    offsets = _offsets
    if len(offsets) < total:
        stop = UNIT_BYTES * max(total, 2 * len(offsets))
        offsets = np.arange(0, stop, UNIT_BYTES, dtype=np.int64)
        if len(offsets) <= _MAX_SHARED_OFFSETS:
            offsets.flags.writeable = False
            _offsets = offsets  # one assignment: other threads see the old array or the new one
    return offsets[:total]


def _raise_bad_token(tokens: Tokens) -> NoReturn:
    # Error path only: a plain loop finds the culprit for a clear message.
    if isinstance(tokens, JoinedTokens):
        listed = tokens.data.decode("utf-8", "surrogatepass").split("\x00")
        if len(listed) != tokens.count:
            raise ValueError(f"the joined tokens are {len(listed)}, not the {tokens.count} counted")
        tokens = listed
    for i, token in enumerate(tokens):
        if token == "":
            raise ValueError(f"token {i} is empty; tokens must be non-empty")
        if "\x00" in token:
            raise ValueError(f"token {i} contains a NUL character; tokens must not")
    raise AssertionError("unreachable: tokens passed validation")  # pragma: no cover


def units_to_bytes(units: npt.ArrayLike) -> bytes:
    """The byte string the units stand for: 8 big-endian bytes per unit, concatenated.

    >>> units_to_bytes(np.array([0x6162000000000000], dtype=np.uint64))
    b'ab\\x00\\x00\\x00\\x00\\x00\\x00'
    """
    return np.asarray(units, dtype=np.uint64).astype(">u8").tobytes()
