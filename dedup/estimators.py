"""Resemblance and containment: exact on shingle sets, estimated from sketches (Theorem 1).

Exact measures (§2), on any two sets:

>>> exact_resemblance({1, 2, 3}, {2, 3, 4}), exact_containment({2, 3}, {1, 2, 3})
(0.5, 1.0)

Estimates from two sketches of the same kind and parameters:

* :func:`resemblance_min` — MIN_s and MIN_s∘MOD_m (Theorem 1, first bullet);
* :func:`resemblance_mod`, :func:`containment_mod` — MOD_m and the size-tiered ``L_i``
  (second and third bullets);
* :func:`resemblance_permutation` — the lecture's k-permutation card;
* :func:`estimate` — any of the above, chosen by sketch kind, with both containments.

Conventions, shared by every function here so that estimates agree with the exact measures:
two empty documents resemble each other fully (1.0) and the empty document is contained in
every document (1.0). A non-empty document whose *sample* is empty (a short document under
MOD_m) gives no evidence at all; its estimates are ``nan``, never a made-up 0 or 1. Compare
with ``>=``, which is False for ``nan``, or check :attr:`Estimate.sample_size`.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup.sketches import (
    MinModSketch,
    MinSketch,
    ModSketch,
    PermutationSketch,
    Sketch,
    TieredSketch,
    UInt64Array,
)

try:
    from dedup import _probes as _c_probes  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way below
    _c_probes = None

__all__ = [
    "Estimate",
    "containment_from_resemblance",
    "containment_mod",
    "estimate",
    "exact_containment",
    "exact_resemblance",
    "matches_min",
    "resemblance_min",
    "resemblance_mod",
    "resemblance_permutation",
]

_NAN = float("nan")


# --- exact measures (§2) --------------------------------------------------------------------


def exact_resemblance(a: AbstractSet[Any], b: AbstractSet[Any]) -> float:
    """``|A ∩ B| / |A ∪ B|``; two empty sets resemble each other fully (1.0)."""
    union = len(a | b)
    return 1.0 if union == 0 else len(a & b) / union


def exact_containment(a: AbstractSet[Any], b: AbstractSet[Any]) -> float:
    """``|A ∩ B| / |A|``, the containment of A in B.

    The empty set is contained in every set, so an empty A gives 1.0 (the limit that keeps
    ``c(A, A) = 1`` and "A ⊆ B implies c(A, B) = 1" true for every A).
    """
    return 1.0 if not a else len(a & b) / len(a)


# --- Theorem 1, first bullet: MIN_s ----------------------------------------------------------


def _min_pair(a: Sketch, b: Sketch) -> tuple[UInt64Array, UInt64Array, int]:
    if isinstance(a, MinModSketch) and isinstance(b, MinModSketch):
        if a.m != b.m:
            raise ValueError(f"MIN_s(MOD_m) sketches need the same m, got {a.m} and {b.m}")
    elif not (type(a) is MinSketch and type(b) is MinSketch):
        raise ValueError(
            f"resemblance_min needs two 'min' or two 'minmod' sketches, got {a.kind!r} and "
            f"{b.kind!r}"
        )
    assert isinstance(a, (MinSketch, MinModSketch)) and isinstance(b, (MinSketch, MinModSketch))
    s = min(a.s, b.s)
    return a.values[:s], b.values[:s], s


def matches_min(a: MinSketch | MinModSketch, b: MinSketch | MinModSketch) -> tuple[int, int]:
    """``(matches, s')``: how many of the first ``s'`` entries of the merged sketches are shared.

    ``s' = |MIN_s(M(A) ∪ M(B))|`` with ``s = min(a.s, b.s)`` (``s' < s`` only when the union is
    that small), and ``matches = |MIN_s(M(A) ∪ M(B)) ∩ M(A) ∩ M(B)|``. As in §4.4: merge the two
    sorted lists, drop duplicates, count the duplicates met within the first ``s`` outputs.

    >>> a = MinSketch([1, 4, 6], s=3, n=10)
    >>> b = MinSketch([1, 2, 4], s=3, n=12)
    >>> matches_min(a, b)  # merged: 1 (dup), 2, 4 (dup) | 6
    (2, 3)
    """
    x, y, s = _min_pair(a, b)
    if _c_probes is not None:  # the same merge, one loop in C (dedup/_probes.c)
        matches, s_prime = _c_probes.matches_min(x, y, s)
        return int(matches), int(s_prime)
    merged = np.concatenate((x, y))
    merged.sort(kind="stable")  # two sorted runs: the stable sort merges them in linear time
    repeat = merged[1:] == merged[:-1]  # each sketch is duplicate-free, so a repeat is shared
    rank = np.cumsum(np.concatenate(([True], ~repeat))) - 1  # rank in the union
    s_prime = min(s, int(rank[-1]) + 1) if merged.size else 0
    matches = int(np.count_nonzero(repeat & (rank[1:] < s)))
    return matches, s_prime


def resemblance_min(a: MinSketch | MinModSketch, b: MinSketch | MinModSketch) -> float:
    """Theorem 1, first bullet: ``matches / s'`` (see :func:`matches_min`), unbiased.

    Given ``s'``, the first ``s'`` ids of ``π(A ∪ B)`` are a uniformly random ``s'``-subset of
    ``A ∪ B``, so the number of matches is hypergeometric with mean ``s'·r``.
    """
    return _min_resemblance(a, b, *matches_min(a, b))


def _min_resemblance(a: Sketch, b: Sketch, matches: int, s_prime: int) -> float:
    special = _empty_resemblance(a, b)
    if special is not None:
        return special
    return matches / s_prime if s_prime else _NAN


# --- Theorem 1, second and third bullets: MOD_m and L_i --------------------------------------


def _mod_pair(a: Sketch, b: Sketch) -> tuple[UInt64Array, UInt64Array]:
    """The two ``L`` sets to compare: same ``m``, or the longer document's tier (§3)."""
    if isinstance(a, TieredSketch) and isinstance(b, TieredSketch):
        level = max(a.level, b.level)  # a.at_level(level).values, without building a sketch
        mask = np.uint64(2**level - 1)
        return a.values[(a.values & mask) == 0], b.values[(b.values & mask) == 0]
    if isinstance(a, ModSketch) and isinstance(b, ModSketch):
        if a.m != b.m:
            raise ValueError(f"MOD_m sketches need the same m, got {a.m} and {b.m}")
        return a.values, b.values
    raise ValueError(
        f"MOD estimates need two 'mod' or two 'tiered' sketches, got {a.kind!r} and {b.kind!r}"
    )


def _mod_counts(a: Sketch, b: Sketch) -> tuple[int, int, int]:
    """``(|L(A) ∩ L(B)|, |L(A)|, |L(B)|)``."""
    x, y = _mod_pair(a, b)
    shared = int(np.intersect1d(x, y, assume_unique=True).size)
    return shared, int(x.size), int(y.size)


def resemblance_mod(a: ModSketch | TieredSketch, b: ModSketch | TieredSketch) -> float:
    """Theorem 1, second bullet: ``|L(A) ∩ L(B)| / |L(A) ∪ L(B)|``.

    Unbiased given that the union sample is not empty (it is then a uniformly random subset of
    ``A ∪ B`` of its size); ``nan`` if it is empty while the documents are not.

    >>> a = ModSketch.from_ids(np.arange(0, 400, dtype=np.uint64), m=4)
    >>> b = ModSketch.from_ids(np.arange(200, 600, dtype=np.uint64), m=4)
    >>> resemblance_mod(a, b), exact_resemblance(set(range(400)), set(range(200, 600)))
    (0.3333333333333333, 0.3333333333333333)
    """
    return _mod_resemblance(a, b, *_mod_counts(a, b))


def containment_mod(a: ModSketch | TieredSketch, b: ModSketch | TieredSketch) -> float:
    """Theorem 1, third bullet: ``|L(A) ∩ L(B)| / |L(A)|``, the containment of A in B.

    Unbiased given ``|L(A)| > 0`` (``L(A)`` is then a random subset of A and an id of A ∩ B is
    in ``L(A)`` exactly when it is in ``L(B)``); ``nan`` if ``L(A)`` is empty while A is not.
    Short documents against long ones are compared at the long one's tier and so have few
    samples: the error the paper warns about at the end of §3.
    """
    shared, size_a, _ = _mod_counts(a, b)
    return _mod_containment(a, b, shared, size_a)


def _mod_resemblance(a: Sketch, b: Sketch, shared: int, size_a: int, size_b: int) -> float:
    special = _empty_resemblance(a, b)
    if special is not None:
        return special
    union = size_a + size_b - shared
    return shared / union if union else _NAN


def _mod_containment(a: Sketch, b: Sketch, shared: int, size_a: int) -> float:
    if a.n == 0:
        return 1.0
    if b.n == 0:
        return 0.0
    return shared / size_a if size_a else _NAN


# --- the lecture's k permutations ------------------------------------------------------------


def _check_permutation_pair(a: PermutationSketch, b: PermutationSketch) -> None:
    if not (isinstance(a, PermutationSketch) and isinstance(b, PermutationSketch)):
        raise ValueError(  # noqa: TRY004 - same error as for every other mismatched pair
            f"resemblance_permutation needs two 'permutation' sketches, got {a.kind!r} and "
            f"{b.kind!r}"
        )
    if (a.k, a.seed) != (b.k, b.seed):
        raise ValueError(
            "permutation sketches need the same k and seed, got "
            f"(k={a.k}, seed={a.seed}) and (k={b.k}, seed={b.seed})"
        )


def _permutation_matches(a: PermutationSketch, b: PermutationSketch) -> int:
    _check_permutation_pair(a, b)
    if a.n == 0 or b.n == 0:
        return 0
    return int(np.count_nonzero(a.values == b.values))


def resemblance_permutation(a: PermutationSketch, b: PermutationSketch) -> float:
    """matches / k: each entry matches with probability r, so this is unbiased (lecture §12.2)."""
    _check_permutation_pair(a, b)
    special = _empty_resemblance(a, b)
    if special is not None:
        return special
    return _permutation_matches(a, b) / a.k


# --- containment from a resemblance ----------------------------------------------------------


def containment_from_resemblance(r: float, n_a: int, n_b: int) -> float:
    """The containment of A in B implied by resemblance ``r`` and the set sizes.

    ``|A ∩ B| = r·|A ∪ B| = r·(|A| + |B| − |A ∩ B|)``, so ``|A ∩ B| = r(n_a + n_b)/(1 + r)``
    and ``c = r(n_a + n_b) / ((1 + r)·n_a)``, clipped to [0, 1]. Exact for the exact ``r``.
    Fed an *estimate* of r it is consistent (it converges as the sketch grows) but not
    unbiased: ``r ↦ r/(1 + r)`` is concave, so it errs low by about
    ``(n_a + n_b)·Var(r̂) / (n_a·(1 + r)³)``. Theorem 1 gives no containment for MIN_s; this is
    how we get one anyway. ``nan`` in, ``nan`` out; an empty A gives 1.0.

    >>> containment_from_resemblance(0.5, 100, 200)  # |A ∩ B| = 100: A inside B
    1.0
    >>> containment_from_resemblance(0.25, 100, 100)  # |A ∩ B| = 40
    0.4
    """
    if isinstance(n_a, bool) or isinstance(n_b, bool) or n_a < 0 or n_b < 0:
        raise ValueError(f"set sizes must be integers >= 0, got n_a={n_a!r}, n_b={n_b!r}")
    if n_a == 0:
        return 1.0
    if math.isnan(r):
        return _NAN
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"resemblance must be in [0, 1], got {r}")
    return min(1.0, max(0.0, r * (n_a + n_b) / ((1.0 + r) * n_a)))


# --- one entry point for every kind ----------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """What two sketches tell about their documents.

    ``matches`` is the number of shared sampled ids (MIN_s: among the first ``s'``; MOD:
    ``|L(A) ∩ L(B)|``; permutations: equal entries) and ``sample_size`` what it is out of
    (``s'``, ``|L(A) ∪ L(B)|`` or ``k``). For MIN_s and permutation sketches the containments
    come from :func:`containment_from_resemblance`; for MOD and tiered sketches they are
    Theorem 1's own estimates.
    """

    resemblance: float
    containment_a_in_b: float
    containment_b_in_a: float
    matches: int
    sample_size: int


def estimate(a: Sketch, b: Sketch) -> Estimate:
    """Estimate resemblance and both containments, whatever the (common) sketch kind.

    >>> ids = np.arange(1000, dtype=np.uint64)
    >>> e = estimate(ModSketch.from_ids(ids[:600], m=1), ModSketch.from_ids(ids[300:], m=1))
    >>> e.resemblance, e.containment_a_in_b, e.matches, e.sample_size
    (0.3, 0.5, 300, 1000)
    """
    if isinstance(a, (ModSketch, TieredSketch)) and isinstance(b, (ModSketch, TieredSketch)):
        shared, size_a, size_b = _mod_counts(a, b)
        return Estimate(
            _mod_resemblance(a, b, shared, size_a, size_b),
            _mod_containment(a, b, shared, size_a),
            _mod_containment(b, a, shared, size_b),
            shared,
            size_a + size_b - shared,
        )
    if isinstance(a, PermutationSketch) and isinstance(b, PermutationSketch):
        r = resemblance_permutation(a, b)
        compared = a.k if a.n and b.n else 0  # an empty document has an empty card
        return _from_resemblance(r, a, b, _permutation_matches(a, b), compared)
    if isinstance(a, (MinSketch, MinModSketch)) and isinstance(b, (MinSketch, MinModSketch)):
        matches, s_prime = matches_min(a, b)  # one merge for the estimate and its counts
        return _from_resemblance(_min_resemblance(a, b, matches, s_prime), a, b, matches, s_prime)
    raise ValueError(f"cannot compare a {a.kind!r} sketch with a {b.kind!r} sketch")


def _from_resemblance(r: float, a: Sketch, b: Sketch, matches: int, size: int) -> Estimate:
    return Estimate(
        r,
        containment_from_resemblance(r, a.n, b.n),
        containment_from_resemblance(r, b.n, a.n),
        matches,
        size,
    )


def _empty_resemblance(a: Sketch, b: Sketch) -> float | None:
    """The exact resemblance when a document is empty, else None."""
    if a.n == 0 and b.n == 0:
        return 1.0
    if a.n == 0 or b.n == 0:
        return 0.0
    return None
