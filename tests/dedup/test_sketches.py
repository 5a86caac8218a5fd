"""Sketch construction, invariants and the byte form (dedup/sketches.py)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup import sketches
from dedup.sketches import (
    FORMAT_VERSION,
    MinModSketch,
    MinSketch,
    ModSketch,
    PermutationSketch,
    Sketch,
    TieredSketch,
    as_ids,
    sketch_from_bytes,
    tier_level,
)

SETTINGS = settings(database=None, deadline=None, max_examples=150)
U64 = 2**64

# Ids with repeats: a few values near 0 and near 2**64 (high bits matter for MOD and the
# byte form), plus multiples of 4 and 8 so MOD samples are not always empty.
id_values = st.one_of(
    st.integers(0, 50),
    st.integers(U64 - 50, U64 - 1),
    st.integers(0, 2**20).map(lambda x: 8 * x),
    st.integers(0, U64 - 1),
)
id_lists = st.lists(id_values, max_size=60)


def arr(values):
    return np.array(values, dtype=np.uint64)


def build_all(ids, s=5, m=4, k=6, seed=3):
    return [
        MinSketch.from_ids(ids, s),
        ModSketch.from_ids(ids, m),
        MinModSketch.from_ids(ids, s, m),
        TieredSketch.from_ids(ids),
        PermutationSketch.from_ids(ids, k, seed),
    ]


# --- construction against a set-based reference -----------------------------------------------


@SETTINGS
@given(id_lists, st.integers(1, 10), st.integers(1, 9))
def test_from_ids_matches_set_reference(ids, s, m):
    distinct = sorted(set(ids))
    mod = [x for x in distinct if x % m == 0]
    a = arr(ids)
    assert MinSketch.from_ids(a, s).values.tolist() == distinct[:s]
    assert ModSketch.from_ids(a, m).values.tolist() == mod
    assert MinModSketch.from_ids(a, s, m).values.tolist() == mod[:s]
    level = tier_level(len(distinct))
    assert TieredSketch.from_ids(a).values.tolist() == [x for x in distinct if x % 2**level == 0]
    for sk in build_all(a, s, m):
        assert sk.n == len(distinct)
        assert sk.values.dtype == np.uint64
        assert not sk.values.flags.writeable
        if sk.kind != "permutation":
            assert np.all(sk.values[1:] > sk.values[:-1]), "values must be sorted, no repeats"


@SETTINGS
@given(id_lists, st.integers(1, 10))
def test_min_fast_path_when_n_is_known(ids, s):
    a = arr(ids)
    n = len(set(ids))
    assert MinSketch.from_ids(a, s, n=n) == MinSketch.from_ids(a, s)
    assert MinModSketch.from_ids(a, s, 2, n=n) == MinModSketch.from_ids(a, s, 2)


def test_min_fast_path_falls_back_on_heavy_repeats():
    # the 2s smallest elements are all the same id: the partition finds too few distinct
    ids = arr([5] * 100 + list(range(1000, 1100)))
    sk = MinSketch.from_ids(ids, 10, n=101)
    assert sk.values.tolist() == [5] + list(range(1000, 1009))


def test_min_sketch_of_a_large_random_document():
    ids = np.random.default_rng(0).integers(0, U64, size=100_000, dtype=np.uint64)
    ids = np.concatenate((ids, ids[:5000]))  # repeats
    sk = MinSketch.from_ids(ids, 100)
    assert sk.values.tolist() == np.sort(np.unique(ids))[:100].tolist()
    assert sk.n == np.unique(ids).size
    assert sk == MinSketch.from_ids(ids, 100, n=sk.n)


def test_given_n_is_checked():
    with pytest.raises(ValueError, match="hold only 3 distinct"):
        MinSketch.from_ids(arr([1, 2, 3, 3]), 10, n=4)
    with pytest.raises(ValueError, match="between 1 and len"):
        ModSketch.from_ids(arr([1, 2]), 2, n=3)
    with pytest.raises(ValueError, match="empty id array"):
        TieredSketch.from_ids(arr([]), n=1)


@pytest.mark.parametrize("sk", build_all(arr([])), ids=lambda sk: sk.kind)
def test_empty_document(sk):
    assert sk.n == 0
    assert sk.values.size == 0
    assert sketch_from_bytes(sk.to_bytes()) == sk


# --- tiers (§3, errata 3) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "level"),
    [
        (0, 0),
        (1, 0),
        (99, 0),
        (100, 0),
        (199, 0),
        (200, 1),
        (399, 1),
        (400, 2),
        (799, 2),
        (800, 3),
        (100 * 2**20 - 1, 19),
        (100 * 2**20, 20),
    ],
)
def test_tier_level_boundaries(n, level):
    assert tier_level(n) == level
    assert n < 200 or 100 * 2**level <= n < 100 * 2 ** (level + 1)


def test_tier_level_rejects_negative():
    with pytest.raises(ValueError, match="n must be >= 0"):
        tier_level(-1)


def test_small_document_keeps_every_id():
    ids = arr(range(1, 151))
    sk = TieredSketch.from_ids(ids)
    assert (sk.level, sk.m) == (0, 1)
    assert sk.values.tolist() == list(range(1, 151))


def test_tiered_expected_size_is_between_100_and_200():
    rng = np.random.default_rng(5)
    for n in (200, 1000, 5000, 40_000):
        sizes = [
            TieredSketch.from_ids(rng.integers(0, U64, n, dtype=np.uint64)).values.size
            for _ in range(20)
        ]
        assert 100 <= n / 2 ** tier_level(n) < 200
        # 20 binomial draws of mean n / 2^i: their mean is within 5 standard errors of it
        mean, p = n / 2 ** tier_level(n), 2.0 ** -tier_level(n)
        assert abs(np.mean(sizes) - mean) < 5 * np.sqrt(mean * (1 - p) / 20)


@SETTINGS
@given(id_lists, st.integers(0, 6))
def test_at_level_equals_building_at_that_level(ids, extra):
    sk = TieredSketch.from_ids(arr(ids))
    j = sk.level + extra
    coarse = sk.at_level(j)
    assert coarse.level == j and coarse.n == sk.n
    assert coarse.values.tolist() == [x for x in sorted(set(ids)) if x % 2**j == 0]
    assert coarse.at_level(j) == coarse
    assert sketch_from_bytes(coarse.to_bytes()) == coarse


def test_at_level_cannot_refine():
    sk = TieredSketch.from_ids(np.arange(1000, dtype=np.uint64))
    assert sk.level == 3
    with pytest.raises(ValueError, match="level j must be in \\[3, 63\\]"):
        sk.at_level(2)
    with pytest.raises(ValueError, match="level must be in \\[3, 63\\]"):
        TieredSketch(arr([0, 8]), level=2, n=1000)


# --- the permutation sketch ----------------------------------------------------------------------


def _unshift(y, r):
    x = y.copy()
    for _ in range(64 // r + 1):
        x = y ^ (x >> np.uint64(r))
    return x


def _inverse_permute(y, keys):
    """Undo sketches._permute step by step: each step is a bijection (its docstring's claim)."""
    x0, a, c = keys
    out = np.empty_like(y)
    for j in range(y.shape[0]):
        z = y[j] * np.uint64(pow(int(c[j]), -1, U64))
        z = _unshift(z, 29)
        z = z * np.uint64(pow(int(a[j]), -1, U64))
        z = _unshift(z, 32)
        out[j] = z ^ x0[j]
    return out


def test_permutations_are_bijections():
    keys = sketches._permutation_keys(8, 11)
    rng = np.random.default_rng(2)
    x = np.concatenate((rng.integers(0, U64, 1000, dtype=np.uint64), arr([0, 1, U64 - 1])))
    images = sketches._permute(x, keys)
    assert np.array_equal(_inverse_permute(images, keys), np.broadcast_to(x, images.shape))
    # injective on structured inputs: consecutive integers and single bits
    structured = np.concatenate(
        (np.arange(50_000, dtype=np.uint64), np.uint64(1) << arr(range(64)))
    )
    images = sketches._permute(np.unique(structured), keys)
    assert all(np.unique(row).size == row.size for row in images)


def test_permutation_keys_multipliers_are_odd_and_distinct():
    x0, a, c = sketches._permutation_keys(100, 0)
    assert np.all(a & np.uint64(1)) and np.all(c & np.uint64(1))
    assert np.unique(a).size == 100 and np.unique(x0).size == 100


def test_permutation_sketch_is_positional_min():
    ids = np.random.default_rng(3).integers(0, U64, 500, dtype=np.uint64)
    sk = PermutationSketch.from_ids(ids, 20, 9)
    expected = sketches._permute(ids, sketches._permutation_keys(20, 9)).min(axis=1)
    assert np.array_equal(sk.values, expected)
    assert not np.all(sk.values[1:] >= sk.values[:-1]), "positional, so generally unsorted"


def test_permutation_sketch_chunking_does_not_change_it(monkeypatch):
    ids = np.random.default_rng(4).integers(0, U64, 3001, dtype=np.uint64)
    whole = PermutationSketch.from_ids(ids, 7, 1)
    monkeypatch.setattr(sketches, "_CHUNK_ELEMENTS", 7 * 100)
    assert PermutationSketch.from_ids(ids, 7, 1) == whole
    assert PermutationSketch.from_ids(ids, 7, 1, n=3001) == whole


def test_permutation_sketch_golden_values():
    """The permutations must never change: stored cards have to stay comparable."""
    sk = PermutationSketch.from_ids(arr([1, 2, 3, 2**63]), k=3, seed=42)
    assert sk.values.tolist() == [3723976189878090586, 4390829578212324662, 7138316914398034082]
    assert sk.to_bytes()[:4] == b"ND\x01\x05"


def test_permutation_seed_and_k_matter():
    ids = np.arange(1, 300, dtype=np.uint64)
    a = PermutationSketch.from_ids(ids, 10, 1)
    assert a != PermutationSketch.from_ids(ids, 10, 2)
    assert np.array_equal(PermutationSketch.from_ids(ids, 12, 1).values[:10], a.values)


# --- the byte form ---------------------------------------------------------------------------------


@SETTINGS
@given(
    id_lists,
    st.integers(1, 2**32 - 1),
    st.integers(1, U64 - 1),
    st.integers(1, 20),
    st.integers(0, U64 - 1),
)
def test_bytes_round_trip(ids, s, m, k, seed):
    for sk in build_all(arr(ids), s=s, m=m, k=k, seed=seed):
        data = sk.to_bytes()
        assert len(data) == 4 + type(sk)._PARAMS.size + 12 + 8 * sk.values.size
        back = sketch_from_bytes(data)
        assert type(back) is type(sk)
        assert back == sk and hash(back) == hash(sk)
        assert back.params == sk.params and back.n == sk.n
        assert np.array_equal(back.values, sk.values)
        assert type(sk).from_bytes(bytearray(data)) == sk
        assert type(sk).from_bytes(memoryview(data)) == sk
        assert Sketch.from_bytes(data) == sk


def test_byte_layout_is_fixed():
    sk = MinSketch(arr([1, 2**64 - 1]), s=2, n=5)
    assert sk.to_bytes() == (
        b"ND\x01\x01"
        + (2).to_bytes(4, "big")
        + (5).to_bytes(8, "big")
        + (2).to_bytes(4, "big")
        + (1).to_bytes(8, "big")
        + (2**64 - 1).to_bytes(8, "big")
    )
    assert ModSketch(arr([]), m=3, n=0).to_bytes() == b"ND\x01\x02" + (3).to_bytes(
        8, "big"
    ) + bytes(12)


def good_bytes():
    return MinSketch.from_ids(arr([3, 1, 4, 1, 5, 9, 2, 6]), 4).to_bytes()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "shorter than the header"),
        (b"garbage!", "expected magic"),
        (b"ND\x02\x01" + good_bytes()[4:], "format version 2 is not supported"),
        (b"ND\x01\x09" + good_bytes()[4:], "unknown sketch kind byte 9"),
        (good_bytes()[:10], "truncated 'min' sketch"),
        (good_bytes()[:-1], "says 4 values"),
        (good_bytes() + b"\x00", "says 4 values"),
    ],
)
def test_malformed_bytes(data, message):
    with pytest.raises(ValueError, match=message):
        sketch_from_bytes(data)


def _with_values(data, values):
    head = data[: len(data) - 8 * len(values)]
    return head + b"".join(struct.pack(">Q", v) for v in values)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_with_values(good_bytes(), [1, 3, 2, 4]), "sorted ascending without repeats"),
        (_with_values(good_bytes(), [1, 1, 2, 4]), "sorted ascending without repeats"),
        (_with_values(ModSketch.from_ids(arr([4, 8]), 4).to_bytes(), [4, 9]), "0 mod m=4"),
    ],
)
def test_bytes_with_bad_values(data, message):
    with pytest.raises(ValueError, match=message):
        sketch_from_bytes(data)


def test_from_bytes_of_another_kind():
    data = ModSketch.from_ids(arr([4, 8]), 4).to_bytes()
    with pytest.raises(ValueError, match="expected a 'min' sketch, got a 'mod' sketch"):
        MinSketch.from_bytes(data)


def test_format_version_constant():
    assert FORMAT_VERSION == 1
    assert all(sk.to_bytes()[2] == FORMAT_VERSION for sk in build_all(arr([1, 2, 3])))


# --- argument checks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: MinSketch.from_ids(arr([1]), 0), "s must be in"),
        (lambda: MinSketch.from_ids(arr([1]), True), "s must be an integer"),
        (lambda: MinSketch.from_ids(arr([1]), 2.0), "s must be an integer"),
        (lambda: ModSketch.from_ids(arr([1]), 0), "m must be in"),
        (lambda: MinModSketch.from_ids(arr([1]), 1, U64), "m must be in"),
        (lambda: PermutationSketch.from_ids(arr([1]), 0, 1), "k must be in"),
        (lambda: PermutationSketch.from_ids(arr([1]), 1, -1), "seed must be in"),
        (lambda: MinSketch(arr([1, 2]), s=1, n=5), "holds min\\(s, n\\)=1 values, got 2"),
        (lambda: MinSketch(arr([1, 2]), s=5, n=5), "holds min\\(s, n\\)=5 values, got 2"),
        (lambda: MinModSketch(arr([2, 4, 6]), s=2, m=2, n=9), "at most min\\(s, n\\)=2"),
        (lambda: ModSketch(arr([2, 4, 6]), m=2, n=2), "exceed n=2"),
        (lambda: PermutationSketch(arr([1, 2]), k=3, seed=0, n=4), "holds 3 values, got 2"),
        (lambda: PermutationSketch(arr([1, 2, 3]), k=3, seed=0, n=0), "holds 0 values, got 3"),
    ],
)
def test_construction_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([-1, 2], "negative id"),
        (np.array([-1, 2]), "negative id"),
        ([2**64], "id >= 2\\*\\*64"),
        ([1.0, 2.0], "sequence of integers"),
        (np.array([1.0, 2.0]), "got dtype float64"),
        ([True, False], "sequence of integers"),
        (np.array([True]), "got dtype bool"),
        (np.zeros((2, 2), dtype=np.uint64), "1-D array"),
        ([[1, 2], [3, 4]], "sequence of integers"),
        (7, "sequence of integers, got 7"),
    ],
)
def test_bad_ids(ids, message):
    with pytest.raises(ValueError, match=message):
        MinSketch.from_ids(ids, 3)


def test_ids_of_other_integer_types():
    assert as_ids([1, 2**64 - 1]).tolist() == [1, 2**64 - 1]
    assert as_ids(np.array([3, 1], dtype=np.int32)).tolist() == [3, 1]
    assert as_ids(np.array([3, 1], dtype=np.uint8)).dtype == np.uint64
    assert as_ids(x * 4 for x in range(3)).tolist() == [0, 4, 8]
    assert as_ids([]).dtype == np.uint64 and as_ids(np.array([])).size == 0
    u = np.arange(3, dtype=np.uint64)
    assert as_ids(u) is u


# --- equality and repr ---------------------------------------------------------------------------


def test_equality_and_repr():
    a = MinSketch.from_ids(arr([5, 1, 3]), 2)
    assert a == MinSketch.from_ids(arr([3, 1, 5, 1]), 2)
    assert a != MinSketch.from_ids(arr([5, 1, 3]), 3)
    assert a != MinSketch.from_ids(arr([5, 1, 4]), 2)
    assert a != MinModSketch.from_ids(arr([5, 1, 3]), 2, 1)
    assert len({a, MinSketch.from_ids(arr([1, 3, 5]), 2)}) == 1
    assert repr(a) == "MinSketch(s=2, n=3, count=2)"
    assert a.params == {"s": 2}
    assert MinModSketch.from_ids(arr([4]), 3, 2).params == {"s": 3, "m": 2}
    assert PermutationSketch.from_ids(arr([4]), 3, 2).params == {"k": 3, "seed": 2}
    assert TieredSketch.from_ids(arr([4])).params == {"level": 0}


def test_values_are_read_only():
    sk = MinSketch.from_ids(arr([1, 2, 3]), 2)
    with pytest.raises(ValueError, match="read-only"):
        sk.values[0] = 7


@pytest.mark.parametrize("s", [1, 3, 8])
def test_min_sketch_when_the_smallest_ids_repeat(s):
    """The s smallest distinct ids are searched in a short sorted prefix first; heavy repeats
    among the smallest send the search past it, and the result must not change."""
    ids = arr([1] * 50 + [2] * 40 + [3] * 30 + list(range(100, 140)) + [5, 4, 4])
    distinct = sorted(set(ids.tolist()))
    sketch = MinSketch.from_ids(ids, s)
    assert sketch.values.tolist() == distinct[:s]
    assert sketch.n == len(distinct)
    assert not sketch.values.flags.writeable
    assert sketch.values.base is None  # its own memory, not a view of the sorted ids
    assert MinSketch.from_ids(arr(list(range(s + 5))), s).values.base is None
    assert sketch == MinSketch(distinct[:s], s, len(distinct))  # as the checked constructor


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=120), st.integers(1, 50))
def test_smallest_and_count_in_c_as_in_numpy(values: list[int], s: int) -> None:
    # small values repeat heavily: the walk over the sorted ids must skip repeats as numpy does
    ids = arr(values)
    got_values, got_count = sketches._smallest_and_count(ids, s)
    saved, sketches._c_tokens = sketches._c_tokens, None
    try:
        want_values, want_count = sketches._smallest_and_count(ids, s)
    finally:
        sketches._c_tokens = saved
    assert got_values.tolist() == want_values.tolist() == sorted(set(values))[:s]
    assert got_count == want_count == len(set(values))
    assert got_values.base is None  # its own memory: a sketch keeps it


def test_smallest_distinct_refuses_unsorted_ids() -> None:
    if sketches._c_tokens is None:
        pytest.skip("dedup._tokens was not built")
    with pytest.raises(ValueError, match="sorted"):
        sketches._c_tokens.smallest_distinct(arr([3, 1, 2]), 2, np.empty(2, dtype=np.uint64))
