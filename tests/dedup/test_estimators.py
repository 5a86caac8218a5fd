"""Theorem 1's estimators: unit tests, then statistical tests over many random permutations.

The statistical tests fix one pair of shingle sets with known measures and, for each of
``SEEDS`` seeds, give every shingle a fresh random 64-bit id (a random injection, standing in
for ``π(f(·))``). For every estimator they assert

* **no bias**: the mean estimate is within 3 standard errors (sample sd / √SEEDS) of the exact
  value (one false alarm in 370 for a correct estimator; the seeds are fixed, so a run is
  reproducible either way);
* **the right spread**: the sample variance S² is within ``4·sqrt((2 + κ)/(SEEDS − 1))`` (relative)
  of the variance the theory predicts. That is 4 standard deviations of S²/σ², whose variance is
  ``2/(N − 1) + κ/N`` for N iid draws of excess kurtosis κ (for normal data this is the
  chi-square law of S²); we use the sample κ, floored at 0. Binomial and hypergeometric counts
  here have κ ≈ 0.

The spread each estimator should have:

* MIN_s, MIN_s∘MOD_m: given ``s' = |MIN_s(M(A) ∪ M(B))| = s``, the first ``s`` ids of the union
  are a uniform ``s``-subset, so matches ~ Hypergeometric(|A ∪ B|, |A ∩ B|, s).
* k permutations: matches ~ Binomial(k, r) if the permutations act independently.
* MOD_m: the sample size ``T = |L(A) ∪ L(B)|`` is itself random, Binomial(|A ∪ B|, 1/m); given
  T the matches are Hypergeometric(|A ∪ B|, |A ∩ B|, T) with mean ``T·r``, so the estimate's
  variance is ``E_T[r(1 − r)(U − T) / (T(U − 1))]``, computed below by summing over T. We
  assert that, and the binomial mean and variance of T itself. Containment likewise with
  ``T = |L(A)|`` ~ Binomial(|A|, 1/m).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup.estimators import (
    Estimate,
    containment_from_resemblance,
    containment_mod,
    estimate,
    exact_containment,
    exact_resemblance,
    matches_min,
    resemblance_min,
    resemblance_mod,
    resemblance_permutation,
)
from dedup.sketches import (
    MinModSketch,
    MinSketch,
    ModSketch,
    PermutationSketch,
    TieredSketch,
    tier_level,
)

U64 = 2**64
SETTINGS = settings(database=None, deadline=None, max_examples=150)


def arr(values):
    return np.array(sorted(values) if isinstance(values, set) else values, dtype=np.uint64)


# =============================================================================================
# Unit tests
# =============================================================================================


def test_exact_measures():
    a, b = {1, 2, 3, 4}, {3, 4, 5}
    assert exact_resemblance(a, b) == 2 / 5
    assert exact_containment(a, b) == 2 / 4
    assert exact_containment(b, a) == 2 / 3
    assert exact_resemblance(set(), set()) == 1.0
    assert exact_resemblance(set(), {1}) == 0.0
    assert exact_containment(set(), {1}) == 1.0
    assert exact_containment({1}, set()) == 0.0
    assert exact_resemblance(frozenset({1}), {1}) == 1.0


id_sets = st.sets(st.integers(0, 60), max_size=40)


@SETTINGS
@given(id_sets, id_sets, st.integers(1, 30))
def test_matches_min_against_set_reference(a, b, s):
    """Theorem 1's first value, computed literally with Python sets."""
    ma, mb = set(sorted(a)[:s]), set(sorted(b)[:s])
    first = set(sorted(ma | mb)[:s])
    got = matches_min(MinSketch.from_ids(arr(a), s), MinSketch.from_ids(arr(b), s))
    assert got == (len(first & ma & mb), len(first))
    # MIN_s(M(A) ∪ M(B)) = MIN_s(A ∪ B): the proof's first step
    assert first == set(sorted(a | b)[:s])


@SETTINGS
@given(id_sets, id_sets, st.integers(1, 30), st.integers(1, 30))
def test_matches_min_uses_the_smaller_s(a, b, s1, s2):
    x, y = MinSketch.from_ids(arr(a), s1), MinSketch.from_ids(arr(b), s2)
    s = min(s1, s2)
    assert matches_min(x, y) == matches_min(
        MinSketch.from_ids(arr(a), s), MinSketch.from_ids(arr(b), s)
    )
    assert matches_min(x, y) == matches_min(y, x)


@SETTINGS
@given(id_sets, id_sets)
def test_exact_when_the_sample_is_everything(a, b):
    """s >= |A ∪ B| for MIN_s, or m = 1 for MOD_m: the estimates are the exact measures."""
    r, ca, cb = exact_resemblance(a, b), exact_containment(a, b), exact_containment(b, a)
    assert resemblance_min(MinSketch.from_ids(arr(a), 100), MinSketch.from_ids(arr(b), 100)) == r
    assert (
        resemblance_min(
            MinModSketch.from_ids(arr(a), 100, 1), MinModSketch.from_ids(arr(b), 100, 1)
        )
        == r
    )
    ma, mb = ModSketch.from_ids(arr(a), 1), ModSketch.from_ids(arr(b), 1)
    assert (resemblance_mod(ma, mb), containment_mod(ma, mb), containment_mod(mb, ma)) == (
        r,
        ca,
        cb,
    )
    ta, tb = TieredSketch.from_ids(arr(a)), TieredSketch.from_ids(arr(b))  # < 200 ids: level 0
    assert (resemblance_mod(ta, tb), containment_mod(ta, tb)) == (r, ca)
    e = estimate(MinSketch.from_ids(arr(a), 100), MinSketch.from_ids(arr(b), 100))
    assert e.containment_a_in_b == pytest.approx(ca, abs=1e-12)
    assert e.containment_b_in_a == pytest.approx(cb, abs=1e-12)


def test_mod_estimates_on_known_samples():
    a = ModSketch(arr([0, 4, 8, 12]), m=4, n=16)
    b = ModSketch(arr([8, 12, 16]), m=4, n=12)
    assert resemblance_mod(a, b) == 2 / 5
    assert containment_mod(a, b) == 2 / 4
    assert containment_mod(b, a) == 2 / 3
    assert estimate(a, b) == Estimate(2 / 5, 2 / 4, 2 / 3, 2, 5)


def test_tiered_compares_at_the_longer_documents_level():
    short = TieredSketch.from_ids(np.arange(0, 800, dtype=np.uint64))  # level 3
    long = TieredSketch.from_ids(np.arange(400, 4000, dtype=np.uint64))  # level 5
    assert (short.level, long.level) == (3, 5)
    # at level 5 (multiples of 32): short keeps 0..768 (25 ids), long 416..3968 (112 ids),
    # shared 416..768 (12 ids)
    assert containment_mod(short, long) == 12 / 25
    assert resemblance_mod(short, long) == resemblance_mod(long, short) == 12 / (25 + 112 - 12)
    assert containment_mod(long, short) == 12 / 112


def test_permutation_estimate_is_matches_over_k():
    ids = np.arange(1, 2001, dtype=np.uint64)
    a = PermutationSketch.from_ids(ids, 50, 7)
    b = PermutationSketch.from_ids(ids[:1000], 50, 7)
    matches = int(np.count_nonzero(a.values == b.values))
    assert resemblance_permutation(a, b) == matches / 50
    assert resemblance_permutation(a, a) == 1.0
    e = estimate(a, b)
    assert (e.matches, e.sample_size) == (matches, 50)
    assert e.containment_a_in_b == containment_from_resemblance(matches / 50, 2000, 1000)


def test_estimate_dispatches_on_kind():
    ids_a, ids_b = np.arange(0, 3000, dtype=np.uint64), np.arange(1000, 4000, dtype=np.uint64)
    a, b = MinSketch.from_ids(ids_a, 64), MinSketch.from_ids(ids_b, 64)
    m, s_prime = matches_min(a, b)
    r = resemblance_min(a, b)
    assert estimate(a, b) == Estimate(
        r,
        containment_from_resemblance(r, 3000, 3000),
        containment_from_resemblance(r, 3000, 3000),
        m,
        s_prime,
    )
    ta, tb = TieredSketch.from_ids(ids_a), TieredSketch.from_ids(ids_b)
    e = estimate(ta, tb)
    assert (e.resemblance, e.containment_a_in_b, e.containment_b_in_a) == (
        resemblance_mod(ta, tb),
        containment_mod(ta, tb),
        containment_mod(tb, ta),
    )


def test_containment_from_resemblance():
    # exact r in, exact c out: |A| = 100, |B| = 300, |A ∩ B| = 80 -> r = 80/320
    assert containment_from_resemblance(80 / 320, 100, 300) == pytest.approx(0.8)
    assert containment_from_resemblance(80 / 320, 300, 100) == pytest.approx(80 / 300)
    assert containment_from_resemblance(1.0, 10, 10) == 1.0
    assert containment_from_resemblance(0.0, 10, 10) == 0.0
    assert containment_from_resemblance(0.9, 10, 100) == 1.0  # clipped: impossible r for the sizes
    assert containment_from_resemblance(0.3, 0, 10) == 1.0
    assert math.isnan(containment_from_resemblance(float("nan"), 10, 10))
    with pytest.raises(ValueError, match="resemblance must be in"):
        containment_from_resemblance(1.5, 10, 10)
    with pytest.raises(ValueError, match="set sizes"):
        containment_from_resemblance(0.5, -1, 10)


@SETTINGS
@given(id_sets, id_sets)
def test_containment_from_exact_resemblance_is_exact(a, b):
    r = exact_resemblance(a, b)
    assert containment_from_resemblance(r, len(a), len(b)) == pytest.approx(
        exact_containment(a, b), abs=1e-12
    )


EMPTY = np.empty(0, dtype=np.uint64)
SOME = np.arange(1, 50, dtype=np.uint64)


@pytest.mark.parametrize(
    "build",
    [
        lambda ids: MinSketch.from_ids(ids, 10),
        lambda ids: MinModSketch.from_ids(ids, 10, 2),
        lambda ids: ModSketch.from_ids(ids, 2),
        lambda ids: TieredSketch.from_ids(ids),
        lambda ids: PermutationSketch.from_ids(ids, 10, 0),
    ],
)
def test_empty_documents_follow_the_exact_conventions(build):
    empty, some = build(EMPTY), build(SOME)
    assert estimate(empty, empty) == Estimate(1.0, 1.0, 1.0, 0, 0)
    e = estimate(empty, some)
    assert (e.resemblance, e.containment_a_in_b, e.containment_b_in_a) == (0.0, 1.0, 0.0)


def test_empty_sample_of_a_non_empty_document_is_nan():
    odd_a, odd_b = arr([1, 3, 5]), arr([3, 5, 7])
    a, b = ModSketch.from_ids(odd_a, 2), ModSketch.from_ids(odd_b, 2)
    assert math.isnan(resemblance_mod(a, b)) and math.isnan(containment_mod(a, b))
    e = estimate(a, b)
    assert e.sample_size == 0 and math.isnan(e.resemblance)
    mm_a, mm_b = MinModSketch.from_ids(odd_a, 5, 2), MinModSketch.from_ids(odd_b, 5, 2)
    assert math.isnan(resemblance_min(mm_a, mm_b))
    assert math.isnan(estimate(mm_a, mm_b).containment_a_in_b)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: resemblance_min(MinSketch.from_ids(SOME, 5), MinModSketch.from_ids(SOME, 5, 1)),
            "two 'min' or two 'minmod'",
        ),
        (
            lambda: resemblance_min(
                MinModSketch.from_ids(SOME, 5, 2), MinModSketch.from_ids(SOME, 5, 4)
            ),
            "same m, got 2 and 4",
        ),
        (
            lambda: resemblance_mod(ModSketch.from_ids(SOME, 2), ModSketch.from_ids(SOME, 3)),
            "same m, got 2 and 3",
        ),
        (
            lambda: containment_mod(ModSketch.from_ids(SOME, 1), TieredSketch.from_ids(SOME)),
            "two 'mod' or two 'tiered'",
        ),
        (
            lambda: resemblance_permutation(
                PermutationSketch.from_ids(SOME, 5, 1), PermutationSketch.from_ids(SOME, 5, 2)
            ),
            "same k and seed",
        ),
        (
            lambda: resemblance_permutation(
                PermutationSketch.from_ids(SOME, 5, 1), MinSketch.from_ids(SOME, 5)
            ),
            "two 'permutation' sketches",
        ),
        (
            lambda: estimate(MinSketch.from_ids(SOME, 5), ModSketch.from_ids(SOME, 1)),
            "cannot compare a 'min' sketch with a 'mod' sketch",
        ),
    ],
)
def test_mismatched_sketches(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# =============================================================================================
# Statistical tests
# =============================================================================================

SEEDS = 1000
N_A, N_B, N_SHARED = 1500, 2300, 1425
N_UNION = N_A + N_B - N_SHARED  # 2375
R = N_SHARED / N_UNION  # 0.6 exactly
C_AB, C_BA = N_SHARED / N_A, N_SHARED / N_B  # 0.95, 0.6196
S = 100  # MIN_s and MIN_s∘MOD_m
K = 100  # permutations
M_MINMOD = 8  # |MOD_8(A ∪ B)| ≈ 297 > s: s' = s in every trial
M_MOD = 16  # the tier of the longer document: tier_level(2300) = 4


def _trial_ids(seed):
    """A and B as id arrays: a fresh random injection of the union's shingles, with repeats."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, U64, size=N_UNION, dtype=np.uint64)
    ordered = np.sort(ids)
    assert np.all(ordered[1:] != ordered[:-1])  # a collision has probability ~2e-13
    a, b = ids[:N_A], ids[N_A - N_SHARED :]  # shared: positions N_A − N_SHARED .. N_A − 1
    repeats = rng.integers(0, N_A, size=200)  # shingles that occur more than once
    return np.concatenate((a, a[repeats])), b


def _collect(build_a, build_b, statistic):
    rows = []
    for seed in range(SEEDS):
        ids_a, ids_b = _trial_ids(seed)
        rows.append(statistic(build_a(ids_a, seed), build_b(ids_b, seed)))
    return np.array(rows, dtype=np.float64)


def assert_mean(samples, expected, what):
    se = samples.std(ddof=1) / math.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= 3 * se, (
        f"{what}: mean {samples.mean():.5f}, expected {expected:.5f} ± 3·{se:.5f}"
    )


def assert_variance(samples, expected, what):
    n = samples.size
    centred = samples - samples.mean()
    var = samples.var(ddof=1)
    kurtosis = float(np.mean(centred**4) / np.mean(centred**2) ** 2 - 3.0)
    tolerance = 4 * math.sqrt((2 + max(kurtosis, 0.0)) / (n - 1))
    assert abs(var / expected - 1) <= tolerance, (
        f"{what}: variance {var:.5g}, expected {expected:.5g} (relative tolerance {tolerance:.3f})"
    )


def hypergeometric_variance(population, successes, draws):
    p = successes / population
    return draws * p * (1 - p) * (population - draws) / (population - 1)


def binomial_pmf(n, p):
    log_p, log_q = math.log(p), math.log1p(-p)
    return np.array(
        [
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(t + 1)
                - math.lgamma(n - t + 1)
                + t * log_p
                + (n - t) * log_q
            )
            for t in range(n + 1)
        ]
    )


def mod_ratio_variance(population, successes, p):
    """Var(X / T) with T ~ Binomial(population, p) given T >= 1, X | T hypergeometric."""
    weights = binomial_pmf(population, p)[1:]
    t = np.arange(1, population + 1)
    q = successes / population
    conditional = q * (1 - q) * (population - t) / (t * (population - 1))
    return float(np.sum(weights * conditional) / np.sum(weights))


def test_trial_sets_are_as_designed():
    ids_a, ids_b = _trial_ids(0)
    a, b = set(ids_a.tolist()), set(ids_b.tolist())
    assert (len(a), len(b), len(a & b), len(a | b)) == (N_A, N_B, N_SHARED, N_UNION)
    assert exact_resemblance(a, b) == R == 0.6
    assert (exact_containment(a, b), exact_containment(b, a)) == (C_AB, C_BA)
    assert (tier_level(N_A), tier_level(N_B)) == (3, 4)  # different tiers: tests at_level


def test_min_s_is_unbiased_with_hypergeometric_matches():
    def statistic(a, b):
        matches, s_prime = matches_min(a, b)
        return matches, s_prime, resemblance_min(a, b)

    out = _collect(
        lambda ids, _: MinSketch.from_ids(ids, S),
        lambda ids, _: MinSketch.from_ids(ids, S),
        statistic,
    )
    matches, s_prime, r_hat = out.T
    assert np.all(s_prime == S)
    assert np.array_equal(r_hat, matches / S)
    assert_mean(r_hat, R, "MIN_s resemblance")
    assert_variance(matches, hypergeometric_variance(N_UNION, N_SHARED, S), "MIN_s matches")


def test_min_s_of_mod_m_is_unbiased_with_hypergeometric_matches():
    out = _collect(
        lambda ids, _: MinModSketch.from_ids(ids, S, M_MINMOD),
        lambda ids, _: MinModSketch.from_ids(ids, S, M_MINMOD),
        lambda a, b: (*matches_min(a, b), resemblance_min(a, b)),
    )
    matches, s_prime, r_hat = out.T
    assert np.all(s_prime == S)
    assert_mean(r_hat, R, "MIN_s(MOD_m) resemblance")
    assert_variance(matches, hypergeometric_variance(N_UNION, N_SHARED, S), "MIN_s(MOD_m) matches")


def test_min_s_containment_is_consistent_with_its_second_order_bias():
    """containment_from_resemblance(r̂): mean ≈ c − (n_b + n_a)·Var(r̂) / (n_b·(1 + r)³).

    Checked for B in A (c ≈ 0.62, far from the clip at 1).
    """
    c_hat = _collect(
        lambda ids, _: MinSketch.from_ids(ids, S),
        lambda ids, _: MinSketch.from_ids(ids, S),
        lambda a, b: estimate(a, b).containment_b_in_a,
    )
    var_r = hypergeometric_variance(N_UNION, N_SHARED, S) / S**2
    bias = -(N_A + N_B) * var_r / (N_B * (1 + R) ** 3)
    assert_mean(c_hat, C_BA + bias, "MIN_s containment of B in A")


def test_permutations_are_unbiased_with_binomial_matches():
    out = _collect(
        lambda ids, seed: PermutationSketch.from_ids(ids, K, seed),
        lambda ids, seed: PermutationSketch.from_ids(ids, K, seed),
        lambda a, b: resemblance_permutation(a, b),
    )
    assert_mean(out, R, "permutation resemblance")
    assert_variance(out * K, K * R * (1 - R), "permutation matches")


def test_permutations_on_structured_ids():
    """Not random ids this time: runs of consecutive integers, only the permutation seed varies.

    This tests the permutation family itself: its minima must behave like those of random
    permutations even when the input ids do not look random. (Sets a fifth the size, same r.)
    """
    size_a, size_b, shared = N_A // 5, N_B // 5, N_SHARED // 5
    a = np.arange(size_a, dtype=np.uint64)
    b = np.arange(size_a - shared, size_a + size_b - shared, dtype=np.uint64)
    assert exact_resemblance(set(a.tolist()), set(b.tolist())) == R
    matches = np.array(
        [
            np.count_nonzero(
                PermutationSketch.from_ids(a, K, seed, n=size_a).values
                == PermutationSketch.from_ids(b, K, seed, n=size_b).values
            )
            for seed in range(SEEDS)
        ],
        dtype=np.float64,
    )
    assert_mean(matches / K, R, "permutation resemblance, structured ids")
    assert_variance(matches, K * R * (1 - R), "permutation matches, structured ids")


@pytest.fixture(scope="module")
def mod_results():
    """Per trial: r̂, ĉ(A in B), ĉ(B in A), |L(A) ∪ L(B)|, for MOD_16 and for tiered sketches."""

    def statistic(pair_mod, pair_tiered):
        e, t = estimate(*pair_mod), estimate(*pair_tiered)
        return (
            e.resemblance,
            e.containment_a_in_b,
            e.containment_b_in_a,
            e.sample_size,
            t.resemblance,
            t.containment_a_in_b,
            t.containment_b_in_a,
            t.sample_size,
        )

    rows = []
    for seed in range(SEEDS):
        ids_a, ids_b = _trial_ids(seed)
        ta, tb = TieredSketch.from_ids(ids_a), TieredSketch.from_ids(ids_b)
        assert (ta.level, tb.level) == (3, 4)
        pair_mod = (ModSketch.from_ids(ids_a, M_MOD), ModSketch.from_ids(ids_b, M_MOD))
        rows.append(statistic(pair_mod, (ta, tb)))
    return np.array(rows, dtype=np.float64)


def test_mod_m_resemblance_is_unbiased(mod_results):
    r_hat, union = mod_results[:, 0], mod_results[:, 3]
    p = 1 / M_MOD
    assert_mean(r_hat, R, "MOD_m resemblance")
    assert_variance(r_hat, mod_ratio_variance(N_UNION, N_SHARED, p), "MOD_m resemblance")
    # the sample size itself: Binomial(|A ∪ B|, 1/m)
    assert_mean(union, N_UNION * p, "|L(A) ∪ L(B)|")
    assert_variance(union, N_UNION * p * (1 - p), "|L(A) ∪ L(B)|")


def test_mod_m_containment_is_unbiased(mod_results):
    p = 1 / M_MOD
    c_ab, c_ba = mod_results[:, 1], mod_results[:, 2]
    assert_mean(c_ab, C_AB, "MOD_m containment of A in B")
    assert_mean(c_ba, C_BA, "MOD_m containment of B in A")
    assert_variance(c_ab, mod_ratio_variance(N_A, N_SHARED, p), "MOD_m containment A in B")
    assert_variance(c_ba, mod_ratio_variance(N_B, N_SHARED, p), "MOD_m containment B in A")


def test_tiered_equals_mod_at_the_longer_documents_level(mod_results):
    """L_3(A) coarsened to level 4 and L_4(B) give exactly the MOD_16 estimates, trial by trial,
    so the MOD_m statistical tests above hold for the tiered sketch too."""
    assert np.array_equal(mod_results[:, :4], mod_results[:, 4:])
    assert_mean(mod_results[:, 4], R, "tiered resemblance")
    assert_mean(mod_results[:, 5], C_AB, "tiered containment of A in B")
    assert_mean(mod_results[:, 6], C_BA, "tiered containment of B in A")


def test_a_biased_estimator_would_fail():
    """The statistical checks have teeth: MIN_s with half the sample ignored (matches among the
    first s/2 divided by s) is caught, and so is a binomial variance claimed for MIN_s at s
    close to |A ∪ B| (finite-population correction 1 − s/|A ∪ B| = 0.16)."""

    def statistic(a, b):
        return (
            matches_min(
                MinSketch(a.values[: S // 2], S // 2, a.n),
                MinSketch(b.values[: S // 2], S // 2, b.n),
            )[0]
            / S
        )

    halved = _collect(
        lambda ids, _: MinSketch.from_ids(ids, S),
        lambda ids, _: MinSketch.from_ids(ids, S),
        statistic,
    )
    with pytest.raises(AssertionError, match="mean"):
        assert_mean(halved, R, "halved")
    big_s = 2000
    matches = _collect(
        lambda ids, _: MinSketch.from_ids(ids, big_s),
        lambda ids, _: MinSketch.from_ids(ids, big_s),
        lambda a, b: matches_min(a, b)[0],
    )
    assert_variance(matches, hypergeometric_variance(N_UNION, N_SHARED, big_s), "big s")
    with pytest.raises(AssertionError, match="variance"):
        assert_variance(matches, big_s * R * (1 - R), "binomial claimed")
