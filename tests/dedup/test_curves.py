"""The binomial curves of §4.2 (errata 5) and lecture §12.3 (errata 6)."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup.curves import curve, matches_needed, p_at_least, p_within

SETTINGS = settings(database=None, deadline=None, max_examples=100)


def exact_sum(s, r, lo, hi):
    """P[lo <= Bin(s, r) <= hi] in exact rational arithmetic, r given as a decimal string."""
    p = Fraction(r)
    q = 1 - p
    return sum(math.comb(s, k) * p**k * q ** (s - k) for k in range(max(lo, 0), min(hi, s) + 1))


def four_significant(x):
    return float(f"{x:.4g}")


# Errata 6, each value as printed there, with the number of significant digits printed.
ERRATA_6 = [
    ("0.5", 1.5e-17, 2),
    ("0.8", 0.0057, 2),
    ("0.9", 0.5832, 4),
    ("0.95", 0.9885, 4),
    ("0.96", 0.9978, 4),
    ("0.97", 0.99979, 5),
]


@pytest.mark.parametrize(("r", "printed", "digits"), ERRATA_6)
def test_errata_6_values(r, printed, digits):
    got = p_at_least(90, 100, float(r))
    assert float(f"{got:.{digits}g}") == printed
    # and to 4 significant digits against the exact rational sum
    assert four_significant(got) == four_significant(float(exact_sum(100, r, 90, 100)))


@pytest.mark.parametrize(
    ("r", "expected"), [("0.8", 0.005696), ("0.9", 0.5832), ("0.5", 1.532e-17)]
)
def test_errata_6_four_significant_digits(r, expected):
    assert four_significant(p_at_least(90, 100, float(r))) == expected


@pytest.mark.parametrize("r", ["0.5", "0.8", "0.9", "0.95", "0.96", "0.97", "0.3", "0.01"])
@pytest.mark.parametrize("k", [0, 1, 30, 90, 100])
def test_p_at_least_against_exact_sum(r, k):
    exact = exact_sum(100, r, k, 100)
    got = p_at_least(k, 100, float(r))
    if exact == 0:
        assert got == 0.0
    else:
        assert got == pytest.approx(float(exact), rel=1e-12)


def test_tiny_tail_has_relative_accuracy():
    # 1 − cdf would give 0 or rounding noise here; the direct sum keeps ~12 digits
    exact = float(exact_sum(100, "0.5", 90, 100))
    assert exact == pytest.approx(1.5316450877189926e-17, rel=1e-15)
    assert p_at_least(90, 100, 0.5) == pytest.approx(exact, rel=1e-12)
    assert p_at_least(100, 100, 0.1) == pytest.approx(1e-100, rel=1e-12)


def test_against_scipy():
    from scipy import stats
    for r in (0.05, 0.3, 0.5, 0.8, 0.9, 0.99):
        for s, k in ((100, 90), (200, 150), (1000, 600), (2000, 1000)):
            expected = float(stats.binom.sf(k - 1, s, r))
            got = p_at_least(k, s, r)
            if expected < 1e-300:
                assert got < 1e-290
            else:
                assert got == pytest.approx(expected, rel=1e-9)


def test_exact_at_the_ends():
    assert p_at_least(90, 100, 0.0) == 0.0
    assert p_at_least(0, 100, 0.0) == 1.0
    assert p_at_least(90, 100, 1.0) == 1.0
    assert p_at_least(101, 100, 1.0) == 0.0
    assert p_at_least(-5, 100, 0.37) == 1.0
    assert p_at_least(0, 100, 0.37) == 1.0
    assert p_within(100, 0.0, 0.0) == 1.0
    assert p_within(100, 1.0, 0.0) == 1.0
    assert p_within(100, 0.5, 1.0) == 1.0


@SETTINGS
@given(st.integers(1, 150), st.data())
def test_monotone_in_r(s, data):
    k = data.draw(st.integers(0, s))
    r1 = data.draw(st.floats(0.0, 1.0))
    r2 = data.draw(st.floats(r1, 1.0))
    assert p_at_least(k, s, r1) <= p_at_least(k, s, r2) + 1e-12


def test_curve_is_s_shaped():
    rs = [i / 100 for i in range(101)]
    points = curve(100, 90, rs)
    assert [r for r, _ in points] == rs
    ps = [p for _, p in points]
    assert all(a <= b for a, b in pairwise(ps))
    assert ps[0] == 0.0 and ps[-1] == 1.0
    assert ps[80] < 0.006 and ps[90] > 0.5 and ps[97] > 0.9997
    assert curve(100, 90, []) == []
    # without resemblances: the evenly spaced grid, each r exactly i / steps
    assert curve(100, 90) == points
    assert [r for r, _ in curve(100, 90, steps=400)] == [i / 400 for i in range(401)]


# --- matches_needed: K for a threshold ----------------------------------------------------------


@SETTINGS
@given(st.integers(1, 500), st.floats(0.0, 1.0))
def test_matches_needed_is_the_fewest_matches_whose_estimate_reaches_the_threshold(s, t):
    # the clusterer's own test, matches / s >= threshold, tried for every count
    assert matches_needed(t, s) == next(j for j in range(s + 1) if j / s >= t)


@pytest.mark.parametrize(("threshold", "s"), [(i / 100, 100) for i in range(101)]
                         + [(i / 20, 7) for i in range(21)])  # fmt: skip
def test_matches_needed_on_decimal_thresholds(threshold, s):
    # thresholds written as decimals, whose products with s round either way in floating point
    assert matches_needed(threshold, s) == next(j for j in range(s + 1) if j / s >= threshold)
    assert matches_needed(threshold, s) == math.ceil(Fraction(str(threshold)) * s)


# --- p_within (§4.2, errata 5) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("r", "eps", "lo", "hi"),
    [
        ("0.5", "0.1", 40, 60),
        ("0.9", "0.05", 85, 95),  # 100·(0.9 − 0.05) is 84.99999999999999 in floating point
        ("0.6", "0.1", 50, 70),
        ("0.3", "0.05", 25, 35),
        ("0.55", "0.025", 53, 57),  # 52.5 and 57.5: interior bounds, not integers
        ("0.95", "0.1", 85, 100),  # clipped at s
    ],
)
def test_p_within_bounds_include_integer_endpoints(r, eps, lo, hi):
    assert p_within(100, float(r), float(eps)) == pytest.approx(
        float(exact_sum(100, r, lo, hi)), rel=1e-12
    )


def test_p_within_sanity():
    # the paper's remark: for fixed s the estimate is worst near r = 0.5
    assert p_within(100, 0.5, 0.05) < p_within(100, 0.8, 0.05) < p_within(100, 0.95, 0.05)
    # a bigger sample is more accurate
    assert p_within(100, 0.5, 0.05) < p_within(200, 0.5, 0.05) < p_within(400, 0.5, 0.05)
    # eps = 0 is the probability of the single exact value k = s·r
    assert p_within(100, 0.5, 0.0) == pytest.approx(math.comb(100, 50) / 2**100, rel=1e-12)
    # and the normal approximation: ±2 sd is about 95%
    sd = math.sqrt(0.5 * 0.5 / 100)
    assert 0.95 < p_within(100, 0.5, 2 * sd) < 0.97


@SETTINGS
@given(st.integers(1, 120), st.floats(0.0, 1.0), st.floats(0.0, 0.5), st.floats(0.0, 0.5))
def test_p_within_grows_with_eps(s, r, e1, e2):
    lo, hi = sorted((e1, e2))
    assert p_within(s, r, lo) <= p_within(s, r, hi) + 1e-12
    assert 0.0 <= p_within(s, r, lo) <= 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: p_at_least(90, 0, 0.5), "sample size s"),
        (lambda: p_at_least(90, 100, 1.5), "r must be in"),
        (lambda: p_at_least(90, 100, float("nan")), "r must be in"),
        (lambda: p_at_least(90.0, 100, 0.5), "threshold k"),
        (lambda: p_within(100, 0.5, -0.1), "eps must be >= 0"),
        (lambda: p_within(100, -0.1, 0.1), "r must be in"),
        (lambda: curve(100, 90, [0.5, 2.0]), "r must be in"),
        (lambda: curve(100, 90, steps=0), "steps must be"),
        (lambda: matches_needed(1.5, 100), "threshold must be in"),
        (lambda: matches_needed(float("nan"), 100), "threshold must be in"),
        (lambda: matches_needed(0.9, 0), "sample size s"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()
