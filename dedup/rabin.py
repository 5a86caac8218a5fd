"""Table-driven Rabin fingerprints of bytes and of every w-unit window (Broder §4.1, §4.3).

Definition. A byte string b is read as a polynomial b(x) over GF(2), the first byte's most
significant bit being the highest power. Its fingerprint under an irreducible polynomial P of
degree ℓ (64 by default; 40 as in the paper, or any multiple of 8 from 16 to 64) is

    f(b) = (b(x) · x^ℓ) mod P,

the residue after the paper's "append nulls" trick: appending ℓ/8 zero bytes multiplies b(x) by
x^ℓ, so strings that differ only in their last byte differ in all bits of the fingerprint, not just
the low eight. Values are below 2^ℓ and stored as ``uint64``. Two distinct strings of at most
n bits collide with probability at most about n / 2^(ℓ−1) over the random choice of P (§4.1).

Why it can be vectorised. f is GF(2)-linear in the bits of b, and so is multiplication by a fixed
power of x modulo P. A linear map of a 64-bit word is the XOR of one table entry per 16-bit chunk
of the word (four tables of 65,536 entries), so applying it to an array is one numpy gather.
Fingerprints of concatenations combine (§4.3, the "sliding window"): f(u ‖ v) = f(u) · x^(8|v|) +
f(v) mod P. So a window of w <= 4 units is the XOR of w maps of single units (the unit shifted by
the units after it), and one gather fetches all four images of a unit at once. Wider windows
follow from narrower ones, the windows of 8 from those of 4 and so on: about log2(w) more maps
per position instead of w. Where ``dedup/_tokens.c`` was built, windows of up to four units are
computed there in one pass instead, from the same maps as byte tables (eight entries per unit
and map, 64 KiB for all four, which stay in cache); the numpy way defines the result.

>>> rf = RabinFingerprinter((1 << 64) | 0b11011)  # x^64 + x^4 + x^3 + x + 1
>>> hex(rf.fingerprint(b"\\x01"))  # x^64 mod P
'0x1b'
>>> from dedup.units import to_units
>>> fps = rf.shingle_fingerprints(to_units("a rose is a rose is a rose".split()), 4)
>>> occurrence_labels(fps).tolist()  # errata 1: Option A labels
[1, 1, 1, 2, 2]
"""

from __future__ import annotations

import contextlib
import mmap
import sys
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from dedup import gf2
from dedup.units import UNIT_BYTES

try:
    from dedup import _tokens as _c_tokens  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way below
    _c_tokens = None

__all__ = ["ALLOWED_BITS", "RabinFingerprinter", "occurrence_labels"]

#: fingerprint widths accepted: whole bytes, so windows and tables work bytewise
ALLOWED_BITS = tuple(range(16, 65, 8))

U64 = npt.NDArray[np.uint64]
_Map = TypeVar("_Map", "_LinearMap", "_WideMap")

_LITTLE = sys.byteorder == "little"
# Index offsets of the eight 256-entry byte tables inside one flat table.
_OFFSETS = (np.arange(UNIT_BYTES, dtype=np.intp) * 256)[:, None]
# The window path reads words in 16-bit chunks: four per 64-bit word, 65,536 entries per table.
_CHUNK_BITS = 16
# Windows of up to this many units come straight from one gather of the units (see _windows).
_DIRECT = 4
# Words per block of a linear map (and about as many windows per block in shingle_fingerprints):
# a block's indices (128-256 KiB) and gathered entries (up to 512 KiB) stay in the L2 cache.
_BLOCK = 4096
# Labels up to this value get a cached multiplication table in labelled_ids; larger ones (rare:
# only shingles repeated more often than this) use the general bit-serial product.
_TABLED_LABELS = 8


class _LinearMap:
    """A GF(2)-linear map from ``nbytes``-byte words to residues, as byte tables.

    ``table[256 k + j]`` is the image of byte value j in byte position k (k = 0 least
    significant), so the image of a word is the XOR of one entry per byte.
    """

    __slots__ = ("nbytes", "scalar", "table")

    def __init__(self, images: list[int]) -> None:
        # images[i] = image of the word with only bit i set
        self.nbytes = len(images) // 8
        basis = np.array(images, dtype=np.uint64).reshape(self.nbytes, 8)
        table = np.zeros((self.nbytes, 256), dtype=np.uint64)
        for bit in range(8):  # entries j with top bit `bit` = entries below ^ that bit's image
            table[:, 1 << bit : 2 << bit] = table[:, : 1 << bit] ^ basis[:, bit : bit + 1]
        self.table = table.ravel()
        self.table.flags.writeable = False
        self.scalar = [int(v) for v in table[0]]  # byte 0 as Python ints, for scalar loops

    def apply(self, words: U64, out: U64) -> None:
        """``out[i] = map(words[i])`` for any length, block by block."""
        if len(words) == 0:
            return
        indexer = _Indexer(min(len(words), _BLOCK))
        for start in range(0, len(words), _BLOCK):
            stop = start + _BLOCK
            indexer.apply(self, words[start:stop], out[start:stop])


_local = threading.local()


class _Indexer:
    """Byte-table indices for words of up to ``width`` elements, one row per byte position.

    Row k holds ``256 k + byte_k(word)``. The ``256 k`` part never changes, so it is written once
    and each use only overwrites the low byte of every index from the words' own bytes: a plain
    byte copy instead of a widening add. The buffer is per thread and reused across calls,
    because a fresh array of a few hundred kilobytes can cost more in page faults than the
    gathers it feeds. Only one indexer per thread may be in use at a time.
    """

    __slots__ = ("low", "rows", "width")

    def __init__(self, width: int) -> None:
        buffer: npt.NDArray[np.intp] | None = getattr(_local, "index_buffer", None)
        if buffer is None or len(buffer) < UNIT_BYTES * width:
            buffer = _local.index_buffer = np.empty(UNIT_BYTES * max(width, _BLOCK), dtype=np.intp)
        self.width = width
        self.rows = buffer[: UNIT_BYTES * width].reshape(UNIT_BYTES, width)
        self.rows[...] = _OFFSETS
        itemsize = self.rows.itemsize
        low = 0 if _LITTLE else itemsize - 1  # the least significant byte of each index
        self.low = self.rows.view(np.uint8).reshape(UNIT_BYTES, width, itemsize)[:, :, low]

    def apply(self, lmap: _LinearMap, words: U64, out: U64) -> None:
        """``out[i] = lmap(words[i])`` for ``len(words) <= width``; ``words`` contiguous."""
        m = len(words)
        nb = lmap.nbytes
        if not _LITTLE:
            words = words.astype("<u8")  # the byte view below wants least significant first
        np.copyto(self.low[:nb, :m], words.view(np.uint8).reshape(m, UNIT_BYTES)[:, :nb].T)
        # Gather whole rows (contiguous indices are fastest; entries past m are stale but in
        # range). mode="clip" skips bounds checks, and take without `out` is numpy's fast path.
        vals = lmap.table.take(self.rows[:nb], mode="clip")
        np.bitwise_xor.reduce(vals[:, :m], axis=0, out=out)


_HUGE_PAGE = 2 << 20


def _huge_pages(nbytes: int) -> npt.NDArray[np.uint8]:
    """Zeroed memory for a lookup table, in transparent huge pages where the system allows.

    Gathers spread over 8 MiB of 4 KiB pages miss the TLB on most lookups; in 2 MiB pages
    they do not (measured: tokens to fingerprints in a fifth less time). The memory is an
    anonymous mapping (zeroed by the kernel), aligned to a huge page inside a slightly larger
    one, and advised as huge; without ``madvise`` it is ordinary memory.
    """
    private = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    try:  # private: shared anonymous memory is shmem, which THP leaves alone by default
        mapping = mmap.mmap(-1, nbytes + _HUGE_PAGE, **({"flags": private} if private else {}))
    except (OSError, ValueError):  # pragma: no cover - no anonymous mappings here
        return np.zeros(nbytes, dtype=np.uint8)
    memory = np.frombuffer(mapping, dtype=np.uint8)
    offset = -memory.ctypes.data % _HUGE_PAGE
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        with contextlib.suppress(OSError):
            mapping.madvise(advice, offset, nbytes)
    return memory[offset : offset + nbytes]


class _WideMap:
    """Several GF(2)-linear maps of the same words, as 16-bit chunk tables.

    Entry j of table k (``parts[k]``) holds the images of chunk value j in chunk position k
    (k = 0 least significant), one ``uint64`` per map, side by side: the window path needs four
    images of every unit, and one gather of a 32-byte item fetches them from one cache line.
    Four 16-bit lookups instead of eight 8-bit ones halve the gathers, and a chunk is its own
    index. The tables (2 MiB per map) do not fit in L1, but units are text, whose few distinct
    chunks keep the entries in use cached.
    """

    __slots__ = ("byte_entries", "chunks", "maps", "parts", "table")

    def __init__(self, maps: list[_LinearMap]) -> None:
        nbytes = maps[0].nbytes
        self.chunks = (nbytes + 1) // 2  # chunks that can be nonzero in an input word
        self.maps = len(maps)
        # the byte tables side by side, (byte position, byte value, map): 64 KiB for four maps
        # of 8-byte words, which stays in cache, for the C loop (eight lookups beat four that
        # miss; numpy prefers fewer, larger gathers)
        self.byte_entries = np.stack(
            [lmap.table.reshape(nbytes, 256) for lmap in maps], axis=-1
        ).ravel()
        self.byte_entries.flags.writeable = False
        values = np.arange(1 << _CHUNK_BITS)
        low, high = values & 0xFF, values >> 8
        shape = (self.chunks, 1 << _CHUNK_BITS, self.maps)
        table = _huge_pages(8 * int(np.prod(shape))).view(np.uint64).reshape(shape)
        for i, lmap in enumerate(maps):
            byte_tables = lmap.table.reshape(nbytes, 256)
            for k in range(self.chunks):
                table[k, :, i] = byte_tables[2 * k].take(low)
                if 2 * k + 1 < nbytes:
                    table[k, :, i] ^= byte_tables[2 * k + 1].take(high)
        # a void item of 8·maps bytes: take copies it as raw bytes, whatever they are
        self.table = table.reshape(-1).view(np.dtype((np.void, 8 * self.maps)))
        self.table.flags.writeable = False
        size = 1 << _CHUNK_BITS
        self.parts = [self.table[k * size : (k + 1) * size] for k in range(self.chunks)]

    def gather(self, words: U64) -> npt.NDArray[np.uint8]:
        """The table entries of contiguous ``words``, as raw bytes laid out (chunk, word, map)
        with ``uint64`` values; XOR over the chunks gives the images. The result lives in
        per-thread scratch memory, valid until the next gather on this thread."""
        n = len(words)
        source = words if _LITTLE else words.astype("<u8")
        # chunk k of every word, least significant first: the index into table k, as it is
        # (take widens it to a pointer-sized index itself, faster than an add of offsets)
        pieces = np.ndarray((self.chunks, n), dtype="<u2", buffer=source, strides=(2, 8))
        vals = _scratch("gather", self.table.itemsize * self.chunks * n)
        out = vals.view(self.table.dtype).reshape(self.chunks, n)
        for k, part in enumerate(self.parts):
            part.take(pieces[k], mode="clip", out=out[k])
        return vals

    def images(self, words: U64) -> npt.NDArray[np.uint64]:
        """``images[i, j]``: map j of ``words[i]`` (in scratch memory, as :meth:`gather`)."""
        n = len(words)
        vals = self.gather(words).view(np.uint64).reshape(self.chunks, n, self.maps)
        images = _scratch("images", 8 * n * self.maps).view(np.uint64).reshape(n, self.maps)
        if self.chunks == 1:  # 16-bit fingerprints
            np.copyto(images, vals[0])
        else:
            np.bitwise_xor(vals[0], vals[1], out=images)  # (three XORs beat one reduce here)
            for row in vals[2:]:
                images ^= row
        return images


def _scratch(name: str, nbytes: int) -> npt.NDArray[np.uint8]:
    """``nbytes`` of this thread's scratch memory called ``name``, reused from call to call.

    The window path's temporaries reach hundreds of kilobytes per document; allocated afresh,
    memory that size is mapped and unmapped by malloc again and again, and its page faults
    cost more than the gathers that fill it.
    """
    buffers: dict[str, npt.NDArray[np.uint8]] = _local.__dict__.setdefault("scratch", {})
    buffer = buffers.get(name)
    if buffer is None or len(buffer) < nbytes:
        buffer = buffers[name] = np.empty(max(nbytes, 1 << 16), dtype=np.uint8)
    return buffer[:nbytes]


class _Tables:
    """Everything derived from one polynomial; built once and shared by equal fingerprinters."""

    def __init__(self, polynomial: int) -> None:
        self.polynomial = polynomial
        self.bits = gf2.degree(polynomial)
        self.mask = (1 << self.bits) - 1
        # f(u) for a 64-bit unit u, and in particular the scalar byte-at-a-time step table
        self.unit_map = self.times_x_power(self.bits, 64)
        self.byte_step = self.unit_map.scalar
        self._maps: dict[tuple[str, int], _LinearMap | _WideMap] = {}
        self._lock = threading.RLock()  # a wide map is built from a cached narrow one

    def _basis(self, start: int, count: int) -> list[int]:
        """``start · x^i mod P`` for i in range(count), by repeated multiplication by x."""
        images = []
        h = start
        top = 1 << self.bits
        for _ in range(count):
            images.append(h)
            h <<= 1
            if h & top:
                h ^= self.polynomial
        return images

    def times_x_power(self, exponent: int, in_bits: int) -> _LinearMap:
        """The map ``v ↦ v · x^exponent mod P`` on ``in_bits``-bit words."""
        return _LinearMap(self._basis(gf2.powmod_x(exponent, self.polynomial), in_bits))

    def window_shift(self, units: int) -> _LinearMap:
        """``r ↦ r · x^(64 · units) mod P`` on residues: prefixing to a window of ``units``."""
        return self._cached(("shift", units), lambda: self.times_x_power(64 * units, self.bits))

    def times_constant(self, constant: int) -> _LinearMap:
        """``r ↦ r · constant mod P`` on residues."""
        return self._cached(
            ("const", constant), lambda: _LinearMap(self._basis(constant, self.bits))
        )

    def unit_windows(self) -> _WideMap:
        """f(u ‖ 0^(64 j)) = f(u)·x^(64 j) for a unit u and j < :data:`_DIRECT`: the unit as the
        j-th last of a window. The windows of up to four units are then XORs of gathered values:
        f(u_i ‖ … ‖ u_i+w−1) is the XOR over j of image w−1−j of u_i+j."""
        return self._cached(
            ("wide-units", _DIRECT),
            lambda: _WideMap([self.times_x_power(self.bits + 64 * j, 64) for j in range(_DIRECT)]),
        )

    def wide_shift(self, units: int) -> _WideMap:
        """:meth:`window_shift` as 16-bit tables."""
        return self._cached(("wide-shift", units), lambda: _WideMap([self.window_shift(units)]))

    def _cached(self, key: tuple[str, int], build: Callable[[], _Map]) -> _Map:
        found = self._maps.get(key)
        if found is None:
            with self._lock:
                found = self._maps.get(key)
                if found is None:
                    found = self._maps[key] = build()
        return found  # type: ignore[return-value]


# About 8 MiB of 16-bit tables per polynomial in use: a small cache (a crawl uses one).
@lru_cache(maxsize=8)
def _tables_for(polynomial: int) -> _Tables:
    return _Tables(polynomial)


@lru_cache(maxsize=256)
def _check_polynomial(polynomial: int) -> None:
    bits = gf2.degree(polynomial)
    if bits not in ALLOWED_BITS:
        raise ValueError(
            f"polynomial must have degree 40 or 64 (any multiple of 8 from 16 to 64); "
            f"got degree {bits}"
        )
    if not gf2.is_irreducible(polynomial):
        raise ValueError(
            f"polynomial {polynomial:#x} is reducible over GF(2); Rabin needs it irreducible"
        )


class RabinFingerprinter:
    """Rabin fingerprints modulo one irreducible polynomial; see the module docstring.

    Instances are cheap: the tables are built once per polynomial and shared.

    >>> RabinFingerprinter.from_seed(1).bits
    64
    >>> RabinFingerprinter((1 << 64) | 0b11)  # x^64 + x + 1 = (x^2 + x + 1)(...)
    Traceback (most recent call last):
    ...
    ValueError: polynomial 0x10000000000000003 is reducible over GF(2); Rabin needs it irreducible
    """

    def __init__(self, polynomial: int) -> None:
        if not isinstance(polynomial, int) or isinstance(polynomial, bool):
            raise TypeError(f"polynomial must be an int; got {type(polynomial).__name__}")
        _check_polynomial(polynomial)
        self._t = _tables_for(polynomial)
        #: P, with bit i the coefficient of x^i (bit ℓ set)
        self.polynomial = polynomial
        #: ℓ, the degree of P and the width of a fingerprint in bits
        self.bits = self._t.bits

    @classmethod
    def from_seed(cls, seed: int, bits: int = 64) -> RabinFingerprinter:
        """The fingerprinter of the random irreducible polynomial of degree ``bits`` for ``seed``."""
        if bits not in ALLOWED_BITS:
            raise ValueError(
                f"bits must be 40 or 64 (any multiple of 8 from 16 to 64); got {bits!r}"
            )
        return cls(gf2.random_irreducible(bits, seed))

    def __repr__(self) -> str:
        return f"RabinFingerprinter({self.polynomial:#x})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RabinFingerprinter):
            return NotImplemented
        return self.polynomial == other.polynomial

    def __hash__(self) -> int:
        return hash(("RabinFingerprinter", self.polynomial))

    def __reduce__(self) -> tuple[Any, ...]:
        return (RabinFingerprinter, (self.polynomial,))  # pickle the polynomial, not the tables

    # -- scalar ---------------------------------------------------------------------------------

    def fingerprint(self, data: bytes) -> int:
        """``f(data)``, one byte at a time with a 256-entry table.

        Appending a byte c to b gives f(b‖c) = f(b)·x^8 + c·x^ℓ; the bits of f(b) pushed past
        x^ℓ by the shift fold back through the same table as c, hence one lookup per byte.

        >>> rf = RabinFingerprinter.from_seed(3, bits=40)
        >>> f = rf.fingerprint(b"rose")
        >>> f < 2**40 and f != rf.fingerprint(b"rosf")
        True
        """
        step = self._t.byte_step
        mask = self._t.mask
        high = self.bits - 8
        r = 0
        for c in bytes(data):
            r = ((r << 8) & mask) ^ step[(r >> high) ^ c]
        return r

    # -- windows --------------------------------------------------------------------------------

    def unit_fingerprints(self, units: npt.ArrayLike) -> U64:
        """``f`` of each unit's 8-byte string: the windows of width 1."""
        return self.shingle_fingerprints(units, 1)

    def shingle_fingerprints(self, units: npt.ArrayLike, w: int | np.integer[Any]) -> U64:
        """The fingerprint of every window of ``w`` consecutive units.

        Element i equals ``fingerprint(units_to_bytes(units[i:i + w]))``; there are n − w + 1.
        A document shorter than one shingle (0 < n < w) still gets one id, the fingerprint of all
        its units, so short pages can be compared; an empty one gets none.

        >>> rf = RabinFingerprinter.from_seed(1)
        >>> u = np.array([1, 2, 3], dtype=np.uint64)
        >>> fps = rf.shingle_fingerprints(u, 2)
        >>> int(fps[1]) == rf.fingerprint(bytes(7) + b"\\x02" + bytes(7) + b"\\x03")
        True
        >>> len(rf.shingle_fingerprints(u, 5)), len(rf.shingle_fingerprints(u[:0], 5))
        (1, 0)
        """
        if not isinstance(w, (int, np.integer)) or isinstance(w, bool) or w < 1:
            raise ValueError(f"shingle width w must be a positive integer; got {w!r}")
        w = int(w)
        words = np.ascontiguousarray(units, dtype=np.uint64)
        if words.ndim != 1:
            raise ValueError(f"units must be a 1-d array; got shape {words.shape}")
        n = len(words)
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        w = min(w, n)  # a short document is one window of all its units
        out = np.empty(n - w + 1, dtype=np.uint64)
        if w <= _DIRECT and _c_tokens is not None:  # one pass in C, the same XORs as _windows
            units = self._t.unit_windows()
            _c_tokens.windows(units.byte_entries, units.maps, words, w, out)
            return out
        # Blocks of windows keep each level of the doubling in cache; a block needs w − 1 more
        # units than it has windows.
        block = max(_BLOCK - (w - 1), _BLOCK // 2)
        if len(out) <= block:
            self._windows(words, w, out)
            return out
        for start in range(0, len(out), block):
            stop = min(start + block, len(out))
            self._windows(words[start : stop + w - 1], w, out[start:stop])
        return out

    def _windows(self, words: U64, w: int, out: U64) -> None:
        """Fingerprints of the len(words) − w + 1 windows of ``words``, written into ``out``.

        One gather fetches, for every unit u, its images f(u)·x^(64 j) for j < 4 (the unit as
        the j-th last of a window). A window of w <= 4 units is then the XOR of w of them, read
        diagonally: the unit tables see only text, whose few distinct chunks stay in cache.
        Wider windows follow :func:`_join_schedule` from the windows of one and two units:
        every join f(a‖b) = shift_|b|(f(a)) ^ f(b) is one linear map and one XOR per block.
        """
        t = self._t
        n = len(words)
        units = t.unit_windows()
        m = n - w + 1
        if w <= _DIRECT:
            # images[i, j] = f(u_i)·x^(64 j); window i is the XOR of images[i + j, w − 1 − j]
            images = units.images(words)
            if w == 1:
                np.copyto(out, images[:, 0])
                return
            np.bitwise_xor(images[:m, w - 1], images[1 : m + 1, w - 2], out=out)
            for j in range(2, w):
                out ^= images[j : j + m, w - 1 - j]
            return
        images = units.images(words).copy()  # f(u_i)·x^(64 j), out of the reused scratch
        levels = [images[:, 0]]
        widths = [1]
        schedule = _join_schedule(w)
        for step, (head, tail) in enumerate(schedule):
            width = widths[head] + widths[tail]
            m = n - width + 1
            joined = out if step == len(schedule) - 1 else np.empty(m, dtype=np.uint64)
            if step == 0:  # (0, 0): f(u_i ‖ u_i+1) = f(u_i)·x^64 ^ f(u_i+1)
                np.bitwise_xor(images[:m, 1], images[1 : m + 1, 0], out=joined)
            else:
                shift = t.wide_shift(widths[tail])
                np.copyto(joined, shift.images(np.ascontiguousarray(levels[head][:m]))[:, 0])
                joined ^= levels[tail][widths[head] : widths[head] + m]
            levels.append(joined)
            widths.append(width)

    # -- Option A -------------------------------------------------------------------------------

    def labelled_ids(self, fps: npt.ArrayLike, labels: npt.ArrayLike) -> U64:
        """Ids of labelled shingles (shingle, label): ``f(shingle) ⊗ f(label)`` in GF(2)[x]/P.

        ``f(label)`` is the fingerprint of the label as an 8-byte big-endian string, and ⊗ the
        product in the field GF(2)[x]/P. Why a product and not the fingerprint of
        "shingle ‖ label": a Rabin fingerprint is linear, so f(s ‖ k) = f(s)·x^64 + f(k), and the
        ids of the copies of one shingle would differ by the constant XOR f(k) ^ f(k'), the same
        for every shingle. That is the dependence among the fingerprints of one shingle with
        different labels the paper warns about (§4.3): a sketch would keep or drop a shingle's
        copies together. Multiplying by f(label), a nonzero element of a field, is a bijection for
        each label and mixes every bit of f(shingle) with every bit of f(label), so no fixed XOR
        pattern links the copies.

        >>> rf = RabinFingerprinter.from_seed(1)
        >>> fps = np.array([5, 5, 9], dtype=np.uint64)
        >>> ids = rf.labelled_ids(fps, occurrence_labels(fps))
        >>> bool(ids[0] != ids[1])
        True
        """
        values = np.ascontiguousarray(fps, dtype=np.uint64)
        labs = np.asarray(labels)
        if values.shape != labs.shape or values.ndim != 1:
            raise ValueError(
                f"fps and labels must be 1-d of equal length; got {values.shape} and {labs.shape}"
            )
        out = np.empty(len(values), dtype=np.uint64)
        if len(values) == 0:
            return out
        if labs.dtype.kind not in "ui":
            raise ValueError(f"labels must be integers; got dtype {labs.dtype}")
        if int(labs.min()) < 1 or int(labs.max()) > self._t.mask:
            raise ValueError(f"labels must lie in 1 .. 2^{self.bits} - 1")
        if int(values.max()) > self._t.mask:
            raise ValueError(f"fingerprints must be below 2^{self.bits}")
        labs = labs.astype(np.uint64, copy=False)
        top = int(labs.max())
        # Most shingles occur once: map everything as label 1, then redo the others.
        self._times_label(1).apply(values, out)
        for label in range(2, min(top, _TABLED_LABELS) + 1):
            where = np.flatnonzero(labs == label)
            if len(where):
                part = np.empty(len(where), dtype=np.uint64)
                self._times_label(label).apply(np.ascontiguousarray(values[where]), part)
                out[where] = part
        if top > _TABLED_LABELS:
            rest = np.flatnonzero(labs > _TABLED_LABELS)
            out[rest] = self._multiply(values[rest], self.unit_fingerprints(labs[rest]))
        return out

    def _times_label(self, label: int) -> _LinearMap:
        return self._t.times_constant(self.fingerprint(label.to_bytes(8, "big")))

    def _multiply(self, a: U64, b: U64) -> U64:
        """Elementwise product in GF(2)[x]/P, bit-serial over b (Horner, highest bit first)."""
        p_low = np.uint64(self.polynomial & self._t.mask)
        high = np.uint64(self.bits - 1)
        keep = np.uint64(self._t.mask)
        one = np.uint64(1)
        acc = np.zeros(len(a), dtype=np.uint64)
        for bit in range(self.bits - 1, -1, -1):
            carry = (acc >> high) & one  # acc · x overflows into x^ℓ: reduce by P
            acc = (acc << one) & keep
            acc ^= p_low * carry
            acc ^= a * ((b >> np.uint64(bit)) & one)
        return acc


@lru_cache(maxsize=128)
def _join_schedule(w: int) -> tuple[tuple[int, int], ...]:
    """How to build windows of width w from windows of width 1, as a binary method.

    Arrays are numbered in creation order, 0 being the single units; step (head, tail) makes the
    next array by joining each window of ``head`` with the window of ``tail`` that follows it.
    Doubling gives widths 2, 4, 8, ...; the set bits of w are joined in as they are passed, so a
    width costs floor(log2 w) + popcount(w) − 1 joins and the last step yields width w.

    >>> _join_schedule(1), _join_schedule(4), _join_schedule(5)
    ((), ((0, 0), (1, 1)), ((0, 0), (1, 1), (0, 2)))
    """
    steps: list[tuple[int, int]] = []
    count = 1  # arrays made so far
    level = 0  # the array holding windows of the current power of two
    acc: int | None = None  # the array holding the low bits of w joined so far
    remaining = w
    while True:
        if remaining & 1:
            if acc is None:
                acc = level
            else:
                steps.append((acc, level))
                acc, count = count, count + 1
        remaining >>= 1
        if not remaining:
            return tuple(steps)
        steps.append((level, level))
        level, count = count, count + 1


def occurrence_labels(fps: npt.ArrayLike) -> U64:
    """Each shingle's occurrence number 1, 2, 3, ... in order of appearance (Option A, §2).

    Shingles are identified by their fingerprints. A stable sort groups equal values while
    keeping their original order, so the rank inside a group is the occurrence number.

    >>> occurrence_labels([7, 3, 7, 7, 3]).tolist()
    [1, 1, 2, 3, 2]
    """
    values = np.asarray(fps, dtype=np.uint64)
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    plain = np.sort(values)  # an unstable sort is several times cheaper than a stable argsort
    if not (plain[1:] == plain[:-1]).any():
        return np.ones(n, dtype=np.uint64)  # no repeats: every shingle is its first occurrence
    labels = np.empty(n, dtype=np.uint64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    positions = np.arange(n, dtype=np.int64)
    group_start = np.where(np.r_[True, ordered[1:] != ordered[:-1]], positions, 0)
    np.maximum.accumulate(group_start, out=group_start)
    labels[order] = (positions - group_start + 1).astype(np.uint64)
    return labels
