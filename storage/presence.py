"""A fixed-size Bloom filter of the fingerprints the cluster index holds.

Most fingerprints of a new page are in no representative at all (new text), yet each costs a
B-tree descent in LMDB to find that out — about a microsecond per key, more once the index has
outgrown the CPU caches. A Bloom filter answers "certainly absent" from memory, so the index only
descends for keys that may be there: every key of a near duplicate, hardly any of a new page.

A Bloom filter has no false negatives, so skipping the keys it rules out changes no answer; its
false positives only cost the lookup they would have cost anyway. Its size is fixed, so memory
stays flat however large the index grows; the price of a full filter is more false positives,
never a wrong answer: with the default 2**28 bits and two probes, 1% of absent keys pass at 10
million indexed fingerprints (100,000 MIN_100 pages), 28% at 100 million.

Fingerprints are Rabin fingerprints under a random polynomial, so their bits are already
uniform; each probe position still goes through its own odd multiplier
(:func:`dedup.frequency.multiply_shift`), so two probes of one key are not two views of the
same bits.

>>> f = PresenceFilter(bits=1 << 16)
>>> f.add(np.array([3, 1 << 40], dtype=np.uint64))
>>> f.might_hold(np.array([3, 1 << 40, 12345], dtype=np.uint64)).tolist()
[True, True, False]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dedup.frequency import MULTIPLIERS, multiply_shift

try:
    from dedup import _probes as _c_probes  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way below
    _c_probes = None

__all__ = ["DEFAULT_BITS", "PresenceFilter"]

#: 32 MiB of bits: the filter's whole memory, whatever the index holds
DEFAULT_BITS = 1 << 28
#: one multiplier per probe (see multiply_shift)
_PROBES = np.ascontiguousarray(MULTIPLIERS[:2])


class PresenceFilter:
    """Bloom filter over uint64 keys: :meth:`add` them, then :meth:`might_hold` asks."""

    def __init__(self, bits: int = DEFAULT_BITS) -> None:
        # at least one whole word; at most 2**63, as a multiply-shift position has 63 bits at most
        if not 64 <= bits <= 1 << 63 or bits & (bits - 1):
            raise ValueError(f"bits must be a power of two from 64 to 2**63; got {bits}")
        self._words = np.zeros(bits // 64, dtype=np.uint64)
        self._bits = bits.bit_length() - 1
        #: keys added (with repeats): how full the filter is
        self.added = 0

    @property
    def bits(self) -> int:
        return int(self._words.size) * 64

    def _positions(self, keys: npt.NDArray[np.uint64]) -> tuple[np.ndarray, np.ndarray]:
        """Word index and bit mask of each probe, shaped (2, len(keys))."""
        position = multiply_shift(keys, 2, self._bits)
        return position >> np.uint64(6), np.left_shift(np.uint64(1), position & np.uint64(63))

    def add(self, keys: npt.ArrayLike) -> None:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).ravel()
        if not keys.size:
            return
        if _c_probes is not None:  # dedup/_probes.c: the same bits, set in one loop
            _c_probes.bloom_add(self._words, _PROBES, keys, self._bits)
        else:
            words, masks = self._positions(keys)
            words, masks = words.ravel(), masks.ravel()
            self._words[words] |= masks
            # a fancy |= keeps one of the values written to a repeated index: where two probes
            # share a word, one bit may be lost, so check and set the few missing one by one
            lost = np.flatnonzero((self._words[words] & masks) != masks)
            for i in lost.tolist():
                self._words[words[i]] |= masks[i]
        self.added += int(keys.size)

    def might_hold(self, keys: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """False for a key certainly never added; True for one that may have been."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64).ravel()
        if _c_probes is not None:
            out = np.empty(keys.size, dtype=np.bool_)
            _c_probes.bloom_test(self._words, _PROBES, keys, self._bits, out)
            return out
        words, masks = self._positions(keys)
        hit = (self._words[words] & masks) != 0
        return np.logical_and(hit[0], hit[1])

    def false_positive_rate(self) -> float:
        """The expected rate for an absent key at the current fill, ``(1 - e^(-2n/m))^2``."""
        return float((1.0 - np.exp(-2.0 * self.added / self.bits)) ** 2)
