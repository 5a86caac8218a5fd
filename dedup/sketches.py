"""Document sketches of Broder 1997 (§3, §4.1) and of the lecture's "calling card".

Every sketch is built from the document's shingle ids: a 1-D ``np.uint64`` array of already
fingerprinted shingles (``π(f(shingle))`` in the paper's notation), possibly with repeats. Repeats
do not matter: the paper's sets are sets. A sketch keeps

* ``values``: the sampled ids, **sorted** ascending (``np.uint64``, read-only), so that two
  sketches compare by one linear merge (§4.4). :class:`PermutationSketch` is the one exception:
  its entry ``j`` is the minimum under permutation ``j``, so its order is positional;
* ``n``: the number of distinct ids of the whole document, so that containment can be derived
  from a resemblance estimate (and so that empty documents are told apart from empty samples);
* its parameters (``s``, ``m``, level, ``k``/``seed``).

The five kinds:

================== ========================= ===============================================
class              sample                    estimates (see :mod:`dedup.estimators`)
================== ========================= ===============================================
MinSketch          MIN_s: s smallest ids     resemblance (Theorem 1, first bullet)
ModSketch          MOD_m: ids ≡ 0 (mod m)    resemblance and containment (second, third)
MinModSketch       MIN_s(MOD_m(ids))         resemblance, smaller input (§4.1 end)
TieredSketch       L_i = MOD_{2^i}, i by n   resemblance and containment, bounded size (§3)
PermutationSketch  min π_j(ids), j < k       resemblance as matches / k (lecture §12.2)
================== ========================= ===============================================

>>> ids = np.array([9, 3, 12, 3, 7, 16, 20], dtype=np.uint64)
>>> MinSketch.from_ids(ids, s=3).values.tolist()
[3, 7, 9]
>>> ModSketch.from_ids(ids, m=4).values.tolist()
[12, 16, 20]
>>> MinSketch.from_ids(ids, s=3).n  # distinct ids of the whole document
6

**Byte form** (stable across platforms and numpy versions, so sketches can be stored and
compared across runs and machines)::

    b"ND" | version u1 | kind u1 | parameters | n >u8 | count >u4 | count values, each >u8

(numpy notation: ``>u8`` is an 8-byte big-endian unsigned integer.) Parameters: MIN
``s >u4``; MOD ``m >u8``; MIN∘MOD ``s >u4, m >u8``; tiered ``level u1``; permutation
``k >u4, seed >u8``. :func:`sketch_from_bytes` dispatches on the kind byte.

>>> b = MinSketch.from_ids(ids, s=3).to_bytes()
>>> len(b), b[:4]
(44, b'ND\\x01\\x01')
>>> sketch_from_bytes(b) == MinSketch.from_ids(ids, s=3)
True
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import numpy.typing as npt

try:
    from dedup import _tokens as _c_tokens  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way below
    _c_tokens = None

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "FORMAT_VERSION",
    "MinModSketch",
    "MinSketch",
    "ModSketch",
    "PermutationSketch",
    "Sketch",
    "TieredSketch",
    "as_ids",
    "sketch_from_bytes",
    "tier_level",
]

UInt64Array = npt.NDArray[np.uint64]

#: Version byte of the byte form; bump it whenever the layout or the permutations change.
FORMAT_VERSION = 1

_MAGIC = b"ND"
_HEADER = struct.Struct(">2sBB")  # magic, version, kind
_TAIL = struct.Struct(">QI")  # n, count
_MAX_U32 = 2**32 - 1
_MAX_U64 = 2**64 - 1
_MAX_LEVEL = 63  # 2**63 is the largest power of two below 2**64


def as_ids(ids: Iterable[int] | npt.ArrayLike) -> UInt64Array:
    """``ids`` as a 1-D ``np.uint64`` array, refusing anything that is not a 64-bit id.

    A ``np.uint64`` array is returned as is (no copy). Other integer arrays and sequences of
    Python ints are converted after a range check; floats, booleans, negative numbers and
    nested sequences are a ``ValueError``, because silently casting them would change the ids.

    >>> as_ids([1, 2**64 - 1]).tolist()
    [1, 18446744073709551615]
    >>> as_ids([-1])
    Traceback (most recent call last):
    ...
    ValueError: ids must be in [0, 2**64), got a negative id
    """
    if not isinstance(ids, np.ndarray):
        # Python ints are checked one by one: numpy would turn [1, 2**64 - 1] into float64.
        try:
            items = list(ids)  # type: ignore[arg-type]  # ArrayLike admits scalars
        except TypeError:
            raise ValueError(f"ids must be a 1-D sequence of integers, got {ids!r}") from None
        values: list[int] = []
        for x in items:
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
                raise ValueError("ids must be a 1-D sequence of integers")  # noqa: TRY004
            values.append(int(x))
        if values and min(values) < 0:
            raise ValueError("ids must be in [0, 2**64), got a negative id")
        if values and max(values) > _MAX_U64:
            raise ValueError("ids must be in [0, 2**64), got an id >= 2**64")
        return np.array(values, dtype=np.uint64)
    arr = ids
    if arr.ndim != 1:
        raise ValueError(f"ids must be a 1-D array, got shape {arr.shape}")
    if arr.dtype == np.uint64:
        return arr
    if arr.dtype.kind == "i":
        if arr.size and int(arr.min()) < 0:
            raise ValueError("ids must be in [0, 2**64), got a negative id")
        return arr.astype(np.uint64)
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    raise ValueError(f"ids must be integers, got dtype {arr.dtype}")


def tier_level(n: int) -> int:
    """The size tier ``i`` of a document with ``n`` distinct shingles (§3, errata 3).

    ``100·2^i <= n < 100·2^(i+1)``, so ``L_i`` keeps an expected ``n / 2^i`` ids, between 100
    and 200. Below 200 shingles the level is 0: every id is kept (under 100 shingles the sketch
    is the whole, small, set). Computed with integers, so no rounding at tier boundaries.

    >>> [tier_level(n) for n in (0, 99, 199, 200, 399, 400, 1600)]
    [0, 0, 0, 1, 1, 2, 4]
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return max(0, (n // 100).bit_length() - 1)


def _check_int(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")  # noqa: TRY004
    value = int(value)
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def _n_given(n: int | None, ids: UInt64Array) -> int | None:
    """Validate a caller-supplied distinct count as far as is cheap (no sort)."""
    if n is None:
        return None
    n = _check_int("n", n, 0, _MAX_U64)
    if ids.size == 0 and n != 0:
        raise ValueError(f"n={n} distinct ids given for an empty id array")
    if ids.size and not 1 <= n <= ids.size:
        raise ValueError(f"n must be between 1 and len(ids)={ids.size}, got {n}")
    return n


def _sorted_unique(ids: UInt64Array) -> UInt64Array:
    """The distinct ids, sorted: ``np.unique``, but sort-based (numpy 2.4's ``np.unique`` is
    about 100 times slower on 10^6 uint64 ids than one ``np.sort``)."""
    ordered = np.sort(ids)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _count_distinct(ids: UInt64Array) -> int:
    if ids.size < 2:
        return int(ids.size)
    ordered = np.sort(ids)
    return 1 + int(np.count_nonzero(ordered[1:] != ordered[:-1]))


def _smallest_and_count(ids: UInt64Array, s: int) -> tuple[UInt64Array, int]:
    """The ``s`` smallest distinct ids (a new array, sorted) and the number of distinct ids.

    One sort serves both; the distinct count is a count of the places where the sorted ids
    change, and the smallest ``s`` distinct ids are a short prefix unless the smallest ids
    repeat heavily. No full array of the distinct ids is built.
    """
    ordered = np.sort(ids)
    if ordered.size < 2:
        return ordered, int(ordered.size)
    if _c_tokens is not None:  # the same walk over the sorted ids, in C
        smallest = np.empty(min(s, ordered.size), dtype=np.uint64)
        kept, count = _c_tokens.smallest_distinct(ordered, s, smallest)
        return (smallest if kept == smallest.size else smallest[:kept].copy()), count
    changes = ordered[1:] != ordered[:-1]  # changes[i]: ordered[i + 1] is a new value
    count = 1 + int(np.count_nonzero(changes))
    if count == ordered.size:  # no repeats at all
        return ordered[:s].copy(), count
    for head in (min(2 * s, ordered.size), ordered.size):
        keep = np.empty(head, dtype=np.bool_)
        keep[0] = True
        keep[1:] = changes[: head - 1]
        smallest = ordered[:head][keep]
        if smallest.size >= s or head == ordered.size:
            return smallest[:s].copy(), count
    raise AssertionError("unreachable: the last head is the whole array")  # pragma: no cover


def _smallest_distinct(ids: UInt64Array, s: int) -> UInt64Array:
    """The ``s`` smallest distinct ids (all of them, sorted, if there are fewer).

    Partitions to the ``2s`` smallest elements (O(n)) and sorts only those: if they hold at
    least ``s`` distinct values, those are the ``s`` smallest distinct of all ``ids`` (anything
    outside the partition is >= everything inside it). Only heavy repetition among the smallest
    ids sends us to a full sort.
    """
    if ids.size > 2 * s:
        candidates = _sorted_unique(np.partition(ids, 2 * s - 1)[: 2 * s])
        if candidates.size >= s:
            return candidates[:s]
    return _sorted_unique(ids)[:s]


def _checked_sorted(values: npt.ArrayLike, what: str) -> UInt64Array:
    arr = as_ids(values)
    if arr.size > 1 and not bool(np.all(arr[1:] > arr[:-1])):
        raise ValueError(f"{what} values must be sorted ascending without repeats")
    return arr


def _read_only(arr: UInt64Array) -> UInt64Array:
    arr = np.array(arr, dtype=np.uint64, copy=True)
    arr.flags.writeable = False
    return arr


class Sketch:
    """Common behaviour: parameters, equality, and the versioned byte form."""

    kind: ClassVar[str]
    _KIND_BYTE: ClassVar[int]
    _PARAMS: ClassVar[struct.Struct]
    _PARAM_NAMES: ClassVar[tuple[str, ...]]

    values: UInt64Array
    n: int

    def distinct(self) -> UInt64Array:
        """The sampled values without repeats, ascending: every kind but the permutation card
        stores them so already (its constructor checks), so this is free for them."""
        return self.values

    @property
    def params(self) -> dict[str, int]:
        """The sketch parameters by name, e.g. ``{"s": 100}``."""
        return {name: int(getattr(self, name)) for name in self._PARAM_NAMES}

    def _param_tuple(self) -> tuple[int, ...]:
        return tuple(int(getattr(self, name)) for name in self._PARAM_NAMES)

    def to_bytes(self) -> bytes:
        """The compact byte form described in the module docstring."""
        head = _HEADER.pack(_MAGIC, FORMAT_VERSION, self._KIND_BYTE)
        params = self._PARAMS.pack(*self._param_tuple())
        tail = _TAIL.pack(self.n, self.values.size)
        return head + params + tail + self.values.astype(">u8").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Self:
        """Parse the byte form; ``ValueError`` on anything malformed or of another kind."""
        sketch = sketch_from_bytes(data)
        if not isinstance(sketch, cls):
            raise ValueError(  # noqa: TRY004 - bad data, not a bad argument type
                f"expected a {cls.kind!r} sketch, got a {sketch.kind!r} sketch"
            )
        return sketch

    @classmethod
    def _from_parts(cls, params: tuple[int, ...], n: int, values: UInt64Array) -> Sketch:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Sketch)
        return (
            self._param_tuple() == other._param_tuple()
            and self.n == other.n
            and np.array_equal(self.values, other.values)
        )

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{type(self).__name__}({params}, n={self.n}, count={self.values.size})"


class MinSketch(Sketch):
    """MIN_s: the ``s`` smallest distinct ids (all of them if fewer), sorted.

    Fixed size, so it estimates resemblance only (Theorem 1, first bullet); containment can be
    derived with :func:`dedup.estimators.containment_from_resemblance` and ``n``.
    """

    kind = "min"
    _KIND_BYTE = 1
    _PARAMS = struct.Struct(">I")
    _PARAM_NAMES = ("s",)

    def __init__(self, values: npt.ArrayLike, s: int, n: int) -> None:
        self.s = _check_int("s", s, 1, _MAX_U32)
        self.n = _check_int("n", n, 0, _MAX_U64)
        vals = _checked_sorted(values, "MinSketch")
        if vals.size != min(self.s, self.n):
            raise ValueError(
                f"a MIN_s sketch of n={self.n} distinct ids with s={self.s} holds "
                f"min(s, n)={min(self.s, self.n)} values, got {vals.size}"
            )
        self.values = _read_only(vals)

    @classmethod
    def from_ids(cls, ids: npt.ArrayLike, s: int, *, n: int | None = None) -> MinSketch:
        """Sketch a document from its shingle ids.

        ``n``, the number of distinct ids, is counted with a full sort unless the caller
        already knows it (e.g. the ids of a set of shingles); given ``n``, only about ``2s``
        ids are sorted. A wrong ``n`` is caught only when it is inconsistent with the ids.
        """
        s = _check_int("s", s, 1, _MAX_U32)
        arr = as_ids(ids)
        known = _n_given(n, arr)
        if known is None:
            values, count = _smallest_and_count(arr, s)
            return cls._trusted(values, s, count)
        smallest = _smallest_distinct(arr, s)
        if smallest.size < min(s, known):
            raise ValueError(f"n={known} given, but the ids hold only {smallest.size} distinct")
        return cls(smallest, s, known)

    @classmethod
    def _trusted(cls, values: UInt64Array, s: int, n: int) -> MinSketch:
        """A sketch from values known to be right (sorted, distinct, min(s, n) of them, a fresh
        array): the hot path of :meth:`from_ids` skips re-checking what it just computed."""
        sketch = cls.__new__(cls)
        sketch.s, sketch.n = s, n
        values.flags.writeable = False
        sketch.values = values
        return sketch

    @classmethod
    def _from_parts(cls, params: tuple[int, ...], n: int, values: UInt64Array) -> MinSketch:
        (s,) = params
        return cls(values, s, n)


class ModSketch(Sketch):
    """MOD_m: every distinct id that is 0 mod ``m`` (errata 3: elements of the id set), sorted.

    Its expected size is ``n / m``: it grows with the document, and in exchange estimates both
    resemblance and containment (Theorem 1, second and third bullets).
    """

    kind = "mod"
    _KIND_BYTE = 2
    _PARAMS = struct.Struct(">Q")
    _PARAM_NAMES = ("m",)

    def __init__(self, values: npt.ArrayLike, m: int, n: int) -> None:
        self.m = _check_int("m", m, 1, _MAX_U64)
        self.n = _check_int("n", n, 0, _MAX_U64)
        vals = _checked_sorted(values, "ModSketch")
        _check_multiples(vals, self.m)
        if vals.size > self.n:
            raise ValueError(f"{vals.size} sampled ids exceed n={self.n} distinct ids")
        self.values = _read_only(vals)

    @classmethod
    def from_ids(cls, ids: npt.ArrayLike, m: int, *, n: int | None = None) -> ModSketch:
        """Sketch a document from its shingle ids (``n`` as in :meth:`MinSketch.from_ids`)."""
        m = _check_int("m", m, 1, _MAX_U64)
        arr = as_ids(ids)
        known = _n_given(n, arr)
        count = _count_distinct(arr) if known is None else known
        return cls(_sorted_unique(arr[_multiple_mask(arr, m)]), m, count)

    @classmethod
    def _from_parts(cls, params: tuple[int, ...], n: int, values: UInt64Array) -> ModSketch:
        (m,) = params
        return cls(values, m, n)


class MinModSketch(Sketch):
    """MIN_s(MOD_m(ids)): the ``s`` smallest of the ids that are 0 mod ``m`` (§4.1, end).

    Same estimate as :class:`MinSketch` (the MOD_m sample of a random permutation is a random
    subset, and its ``s`` smallest are a random ``s``-subset of it), but in a streaming
    implementation only one id in ``m`` ever reaches the heap.
    """

    kind = "minmod"
    _KIND_BYTE = 3
    _PARAMS = struct.Struct(">IQ")
    _PARAM_NAMES = ("s", "m")

    def __init__(self, values: npt.ArrayLike, s: int, m: int, n: int) -> None:
        self.s = _check_int("s", s, 1, _MAX_U32)
        self.m = _check_int("m", m, 1, _MAX_U64)
        self.n = _check_int("n", n, 0, _MAX_U64)
        vals = _checked_sorted(values, "MinModSketch")
        _check_multiples(vals, self.m)
        if vals.size > min(self.s, self.n):
            raise ValueError(
                f"a MIN_s(MOD_m) sketch holds at most min(s, n)={min(self.s, self.n)} values, "
                f"got {vals.size}"
            )
        self.values = _read_only(vals)

    @classmethod
    def from_ids(cls, ids: npt.ArrayLike, s: int, m: int, *, n: int | None = None) -> MinModSketch:
        """Sketch a document from its shingle ids (``n`` as in :meth:`MinSketch.from_ids`)."""
        s = _check_int("s", s, 1, _MAX_U32)
        m = _check_int("m", m, 1, _MAX_U64)
        arr = as_ids(ids)
        known = _n_given(n, arr)
        count = _count_distinct(arr) if known is None else known
        return cls(_smallest_distinct(arr[_multiple_mask(arr, m)], s), s, m, count)

    @classmethod
    def _from_parts(cls, params: tuple[int, ...], n: int, values: UInt64Array) -> MinModSketch:
        s, m = params
        return cls(values, s, m, n)


class TieredSketch(Sketch):
    """The size-tiered ``L_i = MOD_{2^i}(ids)`` of §3, ``i = tier_level(n)``.

    A document of ``n`` distinct shingles keeps about ``n / 2^i`` ∈ [100, 200) ids (all of
    them below 200 shingles, where ``i = 0``). Two documents are compared at the level of the
    longer one: :meth:`at_level` derives ``L_j`` for ``j >= i`` by keeping the ids divisible
    by ``2^j``. A sketch coarsened this way keeps its ``n`` and records level ``j``.

    >>> t = TieredSketch.from_ids(np.arange(0, 1000, dtype=np.uint64))
    >>> t.level, t.values.size, t.at_level(5).values.size
    (3, 125, 32)
    """

    kind = "tiered"
    _KIND_BYTE = 4
    _PARAMS = struct.Struct(">B")
    _PARAM_NAMES = ("level",)

    def __init__(self, values: npt.ArrayLike, level: int, n: int) -> None:
        self.n = _check_int("n", n, 0, _MAX_U64)
        self.level = _check_int("level", level, tier_level(self.n), _MAX_LEVEL)
        vals = _checked_sorted(values, "TieredSketch")
        _check_multiples(vals, 2**self.level)
        if vals.size > self.n:
            raise ValueError(f"{vals.size} sampled ids exceed n={self.n} distinct ids")
        self.values = _read_only(vals)

    @property
    def m(self) -> int:
        """The modulus ``2^level``."""
        return int(2**self.level)

    @classmethod
    def from_ids(cls, ids: npt.ArrayLike, *, n: int | None = None) -> TieredSketch:
        """Sketch a document at its own tier (``n`` as in :meth:`MinSketch.from_ids`)."""
        arr = as_ids(ids)
        known = _n_given(n, arr)
        count = _count_distinct(arr) if known is None else known
        level = tier_level(count)
        return cls(_sorted_unique(arr[_multiple_mask(arr, 2**level)]), level, count)

    def at_level(self, j: int) -> TieredSketch:
        """``L_j`` of the same document, for ``level <= j <= 63``."""
        j = _check_int("level j", j, self.level, _MAX_LEVEL)
        return TieredSketch(self.values[_multiple_mask(self.values, 2**j)], j, self.n)

    @classmethod
    def _from_parts(cls, params: tuple[int, ...], n: int, values: UInt64Array) -> TieredSketch:
        (level,) = params
        return cls(values, level, n)


class PermutationSketch(Sketch):
    """The lecture's "calling card": ``(min π_1(ids), ..., min π_k(ids))``.

    ``values[j]`` is the minimum under permutation ``j``: the order is **positional**, not
    sorted, and two cards are compared entry by entry. Each entry matches with probability
    equal to the resemblance (lecture §12.2, errata 7), so matches / k estimates it and the
    number of matches is Binomial(k, r) for independent permutations. The empty document has
    an empty card (``values.size == 0``).

    The permutations (see :func:`_permute`) are seeded from ``seed`` through BLAKE2b, not
    through numpy's generators, whose streams are not promised to stay the same across numpy
    versions: a stored card must stay comparable.
    """

    kind = "permutation"
    _KIND_BYTE = 5
    _PARAMS = struct.Struct(">IQ")
    _PARAM_NAMES = ("k", "seed")

    def distinct(self) -> UInt64Array:
        """The card's values without repeats (two permutations may share a minimum)."""
        return np.unique(self.values)

    def __init__(self, values: npt.ArrayLike, k: int, seed: int, n: int) -> None:
        self.k = _check_int("k", k, 1, _MAX_U32)
        self.seed = _check_int("seed", seed, 0, _MAX_U64)
        self.n = _check_int("n", n, 0, _MAX_U64)
        vals = as_ids(values)
        expected = self.k if self.n else 0
        if vals.size != expected:
            raise ValueError(
                f"a permutation sketch of n={self.n} distinct ids holds {expected} values, "
                f"got {vals.size}"
            )
        self.values = _read_only(vals)

    @classmethod
    def from_ids(
        cls, ids: npt.ArrayLike, k: int, seed: int, *, n: int | None = None
    ) -> PermutationSketch:
        """Sketch a document: a k × n outer operation, chunked to bound memory."""
        k = _check_int("k", k, 1, _MAX_U32)
        seed = _check_int("seed", seed, 0, _MAX_U64)
        arr = as_ids(ids)
        known = _n_given(n, arr)
        if known is None:
            arr = _sorted_unique(arr)
            known = arr.size
        if arr.size == 0:
            return cls(np.empty(0, dtype=np.uint64), k, seed, known)
        keys = _permutation_keys(k, seed)
        chunk = max(1, _CHUNK_ELEMENTS // k)
        minima = np.full(k, _MAX_U64, dtype=np.uint64)
        for start in range(0, arr.size, chunk):
            images = _permute(arr[start : start + chunk], keys)
            np.minimum(minima, images.min(axis=1), out=minima)
        return cls(minima, k, seed, known)

    @classmethod
    def _from_parts(cls, params: tuple[int, ...], n: int, values: UInt64Array) -> PermutationSketch:
        k, seed = params
        return cls(values, k, seed, n)


# k × chunk uint64 elements per temporary array: 512 KiB, whatever the document size. Small
# enough to stay in cache and to be reused by malloc; 16 MiB chunks ran 4 times slower.
_CHUNK_ELEMENTS = 1 << 16

_SHIFTS = (32, 29)


@lru_cache(maxsize=32)
def _permutation_keys(k: int, seed: int) -> tuple[UInt64Array, UInt64Array, UInt64Array]:
    """Per-permutation keys ``(x0, a, c)`` (``a``, ``c`` odd), k × 3 BLAKE2b digests of seed."""
    words = np.empty((3, k), dtype=np.uint64)
    for j in range(k):
        for t in range(3):
            digest = hashlib.blake2b(
                struct.pack(">QIB", seed, j, t), digest_size=8, person=b"neardup-perm"
            ).digest()
            words[t, j] = int.from_bytes(digest, "big")
    words[1:] |= np.uint64(1)  # odd multipliers
    words.flags.writeable = False
    return words[0], words[1], words[2]


def _permute(ids: UInt64Array, keys: tuple[UInt64Array, UInt64Array, UInt64Array]) -> UInt64Array:
    """The k × len(ids) images ``π_j(ids)``; row ``j`` is permutation ``j``.

    ``π_j(x) = h₂₉(h₃₂(x ⊕ x0_j) · a_j) · c_j`` with ``h_r(y) = y ⊕ (y >> r)``, all mod 2^64.

    Each step is a bijection of the 64-bit integers, so π_j is a permutation: xor with a
    constant is its own inverse; ``h_r`` leaves the top ``r`` bits as they are and lets one
    recover the rest from them, ``r`` bits at a time; multiplication by an odd number is
    invertible mod 2^64 (odd numbers are units).

    Why this shape: ``a·x + b`` alone is a permutation too, but an affine one: it maps runs of
    consecutive ids to arithmetic progressions, whose minima are far from those of a random
    permutation. The xor-shifts are not affine mod 2^64; they fold high bits into low ones
    before each multiplication, whose carries then spread every bit up into the top bits that
    decide the minimum. (A final ``h_32`` would leave the top 32 bits alone and so change a
    minimum only by breaking a tie in them: not worth a pass over k × n ids.)
    Keyed multipliers make the k permutations differ in every step, not only in an offset.
    """
    x0, a, c = keys
    y = ids[np.newaxis, :] ^ x0[:, np.newaxis]
    y ^= y >> np.uint64(_SHIFTS[0])
    y *= a[:, np.newaxis]
    y ^= y >> np.uint64(_SHIFTS[1])
    y *= c[:, np.newaxis]
    return y


def _multiple_mask(values: UInt64Array, m: int) -> npt.NDArray[np.bool_]:
    """Which values are 0 mod m (a bit mask when m is a power of two)."""
    if m & (m - 1) == 0:
        return np.asarray((values & np.uint64(m - 1)) == 0, dtype=np.bool_)
    return np.asarray((values % np.uint64(m)) == 0, dtype=np.bool_)


def _check_multiples(values: UInt64Array, m: int) -> None:
    if values.size and not bool(np.all(_multiple_mask(values, m))):
        raise ValueError(f"every sampled id must be 0 mod m={m}")


_KINDS: dict[int, type[Sketch]] = {
    cls._KIND_BYTE: cls
    for cls in (MinSketch, ModSketch, MinModSketch, TieredSketch, PermutationSketch)
}


def sketch_from_bytes(data: bytes | bytearray | memoryview) -> Sketch:
    """Parse any sketch from its byte form, dispatching on the kind byte.

    >>> sketch_from_bytes(b"garbage")
    Traceback (most recent call last):
    ...
    ValueError: not a sketch: expected magic b'ND', got b'ga'
    """
    buf = bytes(data)
    if len(buf) < _HEADER.size:
        raise ValueError(f"not a sketch: {len(buf)} bytes is shorter than the header")
    magic, version, kind_byte = _HEADER.unpack_from(buf)
    if magic != _MAGIC:
        raise ValueError(f"not a sketch: expected magic {_MAGIC!r}, got {magic!r}")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"sketch format version {version} is not supported (this code reads version "
            f"{FORMAT_VERSION}); rebuild the sketches"
        )
    cls = _KINDS.get(kind_byte)
    if cls is None:
        raise ValueError(f"unknown sketch kind byte {kind_byte}")
    offset = _HEADER.size
    fixed = offset + cls._PARAMS.size + _TAIL.size
    if len(buf) < fixed:
        raise ValueError(f"truncated {cls.kind!r} sketch: {len(buf)} bytes, header needs {fixed}")
    params = cls._PARAMS.unpack_from(buf, offset)
    n, count = _TAIL.unpack_from(buf, offset + cls._PARAMS.size)
    if len(buf) != fixed + 8 * count:
        raise ValueError(
            f"{cls.kind!r} sketch says {count} values ({fixed + 8 * count} bytes), "
            f"got {len(buf)} bytes"
        )
    values = np.frombuffer(buf, dtype=">u8", count=count, offset=fixed).astype(np.uint64)
    return cls._from_parts(tuple(int(p) for p in params), int(n), values)
