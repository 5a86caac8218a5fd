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

from collections.abc import Sequence
from typing import NoReturn

import numpy as np
import numpy.typing as npt

__all__ = ["UNIT_BYTES", "to_units", "units_to_bytes"]

#: width of one unit in bytes: a 64-bit word
UNIT_BYTES = 8

_TAIL = "\x00" * (UNIT_BYTES - 1)
# _KEEP_TOP[k] keeps the k most significant bytes of a big-endian word and zeroes the rest
_KEEP_TOP = np.array(
    [(1 << 64) - (1 << (8 * (UNIT_BYTES - k))) for k in range(UNIT_BYTES + 1)], dtype=np.uint64
)


def to_units(tokens: Sequence[str]) -> npt.NDArray[np.uint64]:
    """The units of ``tokens``, in order: ``ceil(len(token.encode()) / 8)`` units per token.

    Vectorised, with no per-token Python loop: the tokens are joined with NUL and encoded once,
    the NULs give each token's byte range, every unit is one unaligned 8-byte big-endian read at
    its first byte, and a mask by the unit's length clears whatever follows (the padding).

    >>> to_units(["ab", ""])
    Traceback (most recent call last):
    ...
    ValueError: token 1 is empty; tokens must be non-empty
    """
    if isinstance(tokens, str):
        raise TypeError("to_units takes a sequence of tokens, not a single str")
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    # NUL separators mark token ends; the trailing NULs keep every 8-byte read in bounds
    data = ("\x00".join(tokens) + _TAIL).encode("utf-8")
    size = len(data) - len(_TAIL)
    bounds = np.empty(n + 1, dtype=np.int64)  # the separator before each token, and the end
    bounds[0] = -1
    separators = np.flatnonzero(np.frombuffer(data, dtype=np.uint8, count=size) == 0)
    if len(separators) != n - 1:
        _raise_bad_token(tokens)  # some token contains NUL
    bounds[1:n] = separators
    bounds[n] = size
    starts = bounds[:-1] + 1
    lengths = bounds[1:] - starts
    if lengths.min() == 0:
        _raise_bad_token(tokens)
    chunks = (lengths + (UNIT_BYTES - 1)) // UNIT_BYTES
    chunk_end = np.cumsum(chunks)
    total = int(chunk_end[-1])
    if total == n:  # every token fits in one unit
        first, used = starts, lengths
    else:
        # unit j of token t starts 8j bytes into it; only a token's last unit is partly padded
        first = np.repeat(starts - UNIT_BYTES * (chunk_end - chunks), chunks)
        first += np.arange(0, UNIT_BYTES * total, UNIT_BYTES, dtype=np.int64)
        used = np.full(total, UNIT_BYTES, dtype=np.int64)
        used[chunk_end - 1] = lengths - UNIT_BYTES * (chunks - 1)
    # every byte offset read as a big-endian 64-bit word (an overlapping, unaligned view)
    words = np.ndarray(shape=(size,), dtype=">u8", buffer=data, strides=(1,))
    units = words.take(first).astype(np.uint64)
    units &= _KEEP_TOP[used]  # zero the bytes past the token's end: the NUL padding
    return units


def _raise_bad_token(tokens: Sequence[str]) -> NoReturn:
    # Error path only: a plain loop finds the culprit for a clear message.
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
