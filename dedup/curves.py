"""How likely a sketch is to get it right: the binomial curves of §4.2 and lecture §12.3.

With ``s`` sampled entries, each matching with probability ``r`` (the resemblance), the number of
matches is Binomial(s, r) (exactly so for k independent permutations; an approximation of the
hypergeometric count of MIN_s when ``s`` is much smaller than the documents).

* :func:`p_within` — §4.2 (errata 5): the chance that the estimate lands in ``[r − ε, r + ε]``;
* :func:`p_at_least` — lecture §12.3 (errata 6): the chance that at least ``k`` of ``s``
  entries match, i.e. that a pair of resemblance ``r`` is called a near-duplicate;
* :func:`matches_needed` — that ``k`` for a threshold: the fewest matches of ``s`` whose
  estimate ``k / s`` reaches it (the lecture's 90 of 100 at 0.9);
* :func:`curve` — that chance over a list of resemblances, the S-shaped Figure 12.3: every
  drawing of the curve (``neardup curve``, the report's plot) takes its points from here.

>>> round(p_at_least(90, 100, 0.9), 4), f"{p_at_least(90, 100, 0.5):.2g}"
(0.5832, '1.5e-17')

Terms are computed in log space around the exact integer C(s, k) (no overflow, ~1e-15 relative
error) and tails are summed directly with ``math.fsum``, never as ``1 − cdf``, so tiny tails keep
their relative accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["curve", "matches_needed", "p_at_least", "p_within"]

# s·(r ± ε) is computed in floating point: 100·(0.9 − 0.05) is 84.99999999999999, not 85.
# Bounds within this (relative) distance of an integer are taken to be that integer.
_BOUND_TOLERANCE = 1e-9


def _check_s(s: int) -> int:
    if isinstance(s, bool) or not isinstance(s, int) or s < 1:
        raise ValueError(f"sample size s must be an integer >= 1, got {s!r}")
    return s


def _check_probability(r: float) -> float:
    r = float(r)
    if not 0.0 <= r <= 1.0:  # also rejects nan
        raise ValueError(f"resemblance r must be in [0, 1], got {r}")
    return r


def _log_pmf(s: int, j: int, log_r: float, log_q: float) -> float:
    """log of C(s, j) r^j (1 − r)^(s − j), for 0 < r < 1.

    The log of the exact integer C(s, j) is correct to an ulp; a sum of ``lgamma`` values is
    not (it loses ~1e-13 relative for s = 100), and the float C(s, j) overflows past s ≈ 1030.
    """
    return math.log(math.comb(s, j)) + j * log_r + (s - j) * log_q


def _binomial_sum(s: int, r: float, lo: int, hi: int) -> float:
    """P[lo <= Bin(s, r) <= hi], summing the terms; exact for r in {0, 1}."""
    lo, hi = max(lo, 0), min(hi, s)
    if lo > hi:
        return 0.0
    if lo == 0 and hi == s:
        return 1.0
    if r == 0.0:
        return 1.0 if lo == 0 else 0.0
    if r == 1.0:
        return 1.0 if hi == s else 0.0
    log_r, log_q = math.log(r), math.log1p(-r)
    total = math.fsum(math.exp(_log_pmf(s, j, log_r, log_q)) for j in range(lo, hi + 1))
    return min(1.0, total)


def p_within(s: int, r: float, eps: float) -> float:
    """§4.2: ``Σ C(s,k) r^k (1−r)^(s−k)`` over integers ``s(r−ε) <= k <= s(r+ε)`` (errata 5).

    The probability that an ``s``-sample estimate of resemblance ``r`` is within ``ε`` of it
    (binomial approximation). Bounds that are integers up to rounding error are included.

    >>> round(p_within(100, 0.5, 0.1), 4)  # 40 <= k <= 60
    0.9648
    """
    s = _check_s(s)
    r = _check_probability(r)
    if not eps >= 0.0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    low, high = s * (r - eps), s * (r + eps)
    lo = math.ceil(low - _BOUND_TOLERANCE * max(1.0, abs(low)))
    hi = math.floor(high + _BOUND_TOLERANCE * max(1.0, abs(high)))
    return _binomial_sum(s, r, lo, hi)


def p_at_least(k: int, s: int, r: float) -> float:
    """``P[Bin(s, r) >= k]``: the chance that at least ``k`` of ``s`` entries match.

    >>> p_at_least(90, 100, 0.0), p_at_least(90, 100, 1.0), p_at_least(0, 100, 0.3)
    (0.0, 1.0, 1.0)
    """
    s = _check_s(s)
    r = _check_probability(r)
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"threshold k must be an integer, got {k!r}")  # noqa: TRY004
    return _binomial_sum(s, r, k, s)


def matches_needed(threshold: float, s: int) -> int:
    """K: the fewest matching entries of ``s`` whose estimate ``K / s`` reaches ``threshold``.

    This is ⌈threshold·s⌉ (lecture §12.3: 90 of 100 at 0.9, errata 6), decided the way the
    clusterer decides: by the floating-point test ``K / s >= threshold`` that
    :class:`dedup.cluster.GreedyClusterer` applies to an estimate ``matches / s``, so the
    product's rounding (``0.9 * 100`` is ``90.00000000000001``) cannot move K by one.

    >>> matches_needed(0.9, 100), matches_needed(0.5, 7), matches_needed(0.0, 100)
    (90, 4, 0)
    >>> matches_needed(0.57, 100), matches_needed(1.0, 3)
    (57, 3)
    """
    s = _check_s(s)
    threshold = float(threshold)
    if not 0.0 <= threshold <= 1.0:  # also rejects nan
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    k = min(s, math.ceil(threshold * s))  # right, or one off through rounding
    while k > 0 and (k - 1) / s >= threshold:
        k -= 1
    while k / s < threshold:  # ends by k = s: s / s is 1.0
        k += 1
    return k


def curve(
    s: int, k: int, resemblances: Iterable[float] | None = None, *, steps: int = 100
) -> list[tuple[float, float]]:
    """``(r, p_at_least(k, s, r))`` for each ``r``: Figure 12.3 for ``s = 100, k = 90``.

    Without ``resemblances``, ``r`` runs over ``0, 1/steps, ..., 1`` (each exactly
    ``i / steps``).

    >>> [(r, round(p, 4)) for r, p in curve(100, 90, [0.8, 0.95])]
    [(0.8, 0.0057), (0.95, 0.9885)]
    >>> [r for r, _ in curve(100, 90, steps=4)]
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if resemblances is None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
        resemblances = (i / steps for i in range(steps + 1))
    return [(float(r), p_at_least(k, s, r)) for r in resemblances]
