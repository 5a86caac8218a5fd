"""How common a fingerprint is, in fixed memory: a count-min sketch over the documents seen.

Greedy clustering indexes only part of each representative (see
:func:`dedup.cluster.indexed_count`): any part of the right size finds every cluster that can
reach the threshold, so the part is free to choose, and the cheapest is the *rarest*. A
fingerprint of boilerplate (a shared navigation bar, a licence footer) is in the sketches of
thousands of pages; indexing it would make each of them a candidate of every later page that
carries it, and each candidate costs an estimate. A fingerprint of the page's own text is in the
sketches of its near duplicates only.

Rarity is estimated with a count-min sketch (two rows of counters, each key counted in one
counter per row, the smaller count kept): it never under-counts a key by more than the
increments lost when two keys of one update share a counter, and over-counts by collisions
only, so boilerplate always looks common and most rare keys look rare. It is only a heuristic
for choosing; no answer of the clustering depends on it.

>>> f = FingerprintFrequency(counters=1 << 12)
>>> for _ in range(5):
...     f.add(np.array([7, 8], dtype=np.uint64))
>>> f.add(np.array([9], dtype=np.uint64))
>>> f.estimate(np.array([7, 9, 10], dtype=np.uint64)).tolist()
[5, 1, 0]
"""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

try:
    from dedup import _probes as _c_probes  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way below
    _c_probes = None

__all__ = ["COUNTERS", "FingerprintFrequency", "counter_cells", "multiply_shift"]

# odd 64-bit multipliers, one per row or probe (the golden ratio's and two of its family)
MULTIPLIERS = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64
)


def multiply_shift(keys: npt.NDArray[np.uint64], rows: int, bits: int) -> npt.NDArray[np.uint64]:
    """``rows`` independent ``bits``-bit positions per key, shaped (rows, len(keys)).

    Multiply-shift hashing: the top ``bits`` bits of ``key * a`` for an odd ``a`` per row
    (products wrap modulo 2**64), so each row sees a different mix of the key's bits.
    """
    return (keys[None, :] * MULTIPLIERS[:rows, None]) >> np.uint64(64 - bits)


#: counters per row of the sketch the clusterer keeps (8 MB in all)
COUNTERS = 1 << 20


def counter_cells(
    keys: npt.NDArray[np.uint64], counters: int = COUNTERS
) -> npt.NDArray[np.uint64]:
    """The flat counter of each key in each row of :class:`FingerprintFrequency` (shape (rows,
    len(keys)), the rows side by side), so that another process can count as it counts: a
    key's estimate after some documents is the least, over its rows, of how many of those
    documents hold a key of the same counter.

    >>> counter_cells(np.array([1, 2], dtype=np.uint64), counters=1 << 8).tolist()
    [[158, 60], [450, 389]]
    """
    bits = counters.bit_length() - 1
    rows = FingerprintFrequency.ROWS
    offsets = (np.arange(rows, dtype=np.uint64) * np.uint64(counters))[:, None]
    return multiply_shift(keys, rows, bits) + offsets


class FingerprintFrequency:
    """Count-min sketch of fingerprint occurrences: :meth:`add` arrays, :meth:`estimate` counts."""

    ROWS = 2

    def __init__(self, counters: int = COUNTERS) -> None:
        if counters < 2 or counters & (counters - 1):
            raise ValueError(f"counters must be a power of two of at least 2; got {counters}")
        if self.ROWS * counters * 4 > sys.maxsize:  # uint32 counters
            raise OverflowError(f"counters={counters}: more counters than memory can address")
        self._bits = counters.bit_length() - 1
        # the rows side by side in one flat array: one gather or scatter serves both
        self._counts = np.zeros(self.ROWS * counters, dtype=np.uint32)
        self._multipliers = np.ascontiguousarray(MULTIPLIERS[: self.ROWS])

    def _cells(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        return counter_cells(keys, 1 << self._bits)

    def add(self, keys: npt.ArrayLike) -> None:
        """Count each key once (pass a document's distinct fingerprints).

        A counter met twice within one call counts once: a harmless under-count, and the
        numpy way's semantics, which the C loop (``dedup/_probes.c``) keeps.
        """
        keys = np.ascontiguousarray(keys, dtype=np.uint64).ravel()
        if not keys.size:
            return
        if _c_probes is not None:
            _c_probes.count_add(self._counts, self._multipliers, keys, self._bits)
        else:
            self._counts[self._cells(keys).ravel()] += np.uint32(1)

    def estimate(self, keys: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).ravel()
        if _c_probes is None:
            return self._counts[self._cells(keys)].min(axis=0)  # type: ignore[no-any-return]
        out = np.empty(keys.size, dtype=np.uint32)
        _c_probes.count_min(self._counts, self._multipliers, keys, self._bits, out)
        return out

    def rarest(self, keys: npt.NDArray[np.uint64], count: int) -> npt.NDArray[np.uint64]:
        """The ``count`` rarest of ``keys`` (distinct), ties by smaller value, sorted by value.

        >>> f = FingerprintFrequency(counters=1 << 8)
        >>> f.add(np.array([1, 2], dtype=np.uint64))
        >>> f.rarest(np.array([1, 2, 3, 4], dtype=np.uint64), 3).tolist()
        [1, 3, 4]
        """
        if count >= keys.size:
            return keys
        order = np.lexsort((keys, self.estimate(keys)))
        return np.sort(keys[order[:count]])
