"""The C loops of ``dedup/_probes.c`` against their numpy twins, which define them.

Count-min counters, Bloom filter bits and MIN_s merges must come out the same whichever way
ran: a store written where the module was built is read where it was not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup import estimators, frequency
from dedup.estimators import matches_min
from dedup.frequency import FingerprintFrequency
from dedup.sketches import MinSketch
from storage import presence
from storage.presence import PresenceFilter

U64 = st.integers(min_value=0, max_value=2**64 - 1)
KEY_BATCHES = st.lists(st.lists(U64, max_size=60), max_size=12)
built = pytest.mark.skipif(frequency._c_probes is None, reason="dedup._probes was not built")


@contextmanager
def numpy_twins() -> Iterator[None]:
    """The numpy ways, as where the C module is missing."""
    saved = frequency._c_probes, presence._c_probes, estimators._c_probes
    frequency._c_probes = presence._c_probes = estimators._c_probes = None
    try:
        yield
    finally:
        frequency._c_probes, presence._c_probes, estimators._c_probes = saved


def keys(batch: list[int]) -> np.ndarray:
    return np.array(batch, dtype=np.uint64)


@built
@settings(max_examples=200, deadline=None)
@given(KEY_BATCHES, st.lists(U64, max_size=80))
def test_count_min_counts_as_numpy_does(batches: list[list[int]], probe: list[int]) -> None:
    # 16 counters a row: keys of one call share counters often, and each counts once
    c_way, numpy_way = FingerprintFrequency(counters=16), FingerprintFrequency(counters=16)
    for batch in batches:
        c_way.add(keys(batch))
        with numpy_twins():
            numpy_way.add(keys(batch))
    assert np.array_equal(c_way._counts, numpy_way._counts)
    got = c_way.estimate(keys(probe))
    with numpy_twins():
        want = numpy_way.estimate(keys(probe))
        assert c_way.rarest(keys(sorted(set(probe))), 5).tolist() == numpy_way.rarest(
            keys(sorted(set(probe))), 5
        ).tolist()
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


@built
@settings(max_examples=200, deadline=None)
@given(KEY_BATCHES, st.lists(U64, max_size=80))
def test_bloom_filter_sets_and_tests_the_bits_numpy_does(
    batches: list[list[int]], probe: list[int]
) -> None:
    # 256 bits: the two probes of one key, and of different keys, share words
    c_way, numpy_way = PresenceFilter(bits=256), PresenceFilter(bits=256)
    for batch in batches:
        c_way.add(keys(batch))
        with numpy_twins():
            numpy_way.add(keys(batch))
    assert np.array_equal(c_way._words, numpy_way._words)
    assert c_way.added == numpy_way.added
    got = c_way.might_hold(keys(probe))
    with numpy_twins():
        want = numpy_way.might_hold(keys(probe))
    assert got.dtype == want.dtype == np.bool_ and got.tolist() == want.tolist()


id_sets = st.sets(st.integers(0, 200), max_size=80)


@built
@settings(max_examples=300, deadline=None)
@given(id_sets, id_sets, st.integers(1, 60), st.integers(1, 60))
def test_the_min_merge_matches_numpy(a: set[int], b: set[int], s1: int, s2: int) -> None:
    x = MinSketch.from_ids(keys(sorted(a)), s1)
    y = MinSketch.from_ids(keys(sorted(b)), s2)
    got = matches_min(x, y)
    with numpy_twins():
        assert got == matches_min(x, y)
    assert all(type(v) is int for v in got)


def test_wrong_buffers_are_refused() -> None:
    if frequency._c_probes is None:
        pytest.skip("dedup._probes was not built")
    c = frequency._c_probes
    counts = np.zeros(2 * 16, dtype=np.uint32)
    two = np.array([1, 3], dtype=np.uint64)
    with pytest.raises(ValueError, match="smaller than bits and rows"):
        c.count_add(counts, two, keys([1]), 5)  # rows of 32 counters do not fit
    with pytest.raises(ValueError, match="whole number"):
        c.count_add(counts, two, b"\x00" * 7, 4)
    with pytest.raises(ValueError, match="bits"):
        c.bloom_add(np.zeros(4, dtype=np.uint64), two, keys([1]), 0)
    with pytest.raises(ValueError, match="shorter than keys"):
        c.bloom_test(np.zeros(4, dtype=np.uint64), two, keys([1, 2]), 8, np.empty(1, np.bool_))
    with pytest.raises(ValueError, match="read-only"):  # a table that cannot be counted into
        frozen = np.zeros(32, dtype=np.uint32)
        frozen.flags.writeable = False
        c.count_add(frozen, two, keys([1]), 4)


def test_the_c_module_is_built() -> None:
    # CI installs with a compiler: a failed build must not pass unnoticed as the numpy twins
    if os.environ.get("CI"):
        assert frequency._c_probes is not None


@built
def test_tables_too_large_to_address_are_refused_not_wrapped() -> None:
    # two rows of 2^63 (or 2^62) counters are more cells than a 64-bit address holds: the size
    # must not wrap to a small number that a 4-counter table passes, and then be written past
    c = frequency._c_probes
    two = np.array([1, 3], dtype=np.uint64)
    for bits in (62, 63):
        with pytest.raises(OverflowError, match=f"bits={bits} and 2 rows"):
            c.count_add(np.zeros(4, dtype=np.uint32), two, keys([1]), bits)
        with pytest.raises(OverflowError, match="more cells than memory"):
            c.count_min(np.zeros(4, np.uint32), two, keys([1]), bits, np.empty(1, np.uint32))
    with pytest.raises(ValueError, match="4 cells, 4611686018427387904 needed"):
        c.count_add(np.zeros(4, dtype=np.uint32), two, keys([1]), 61)


@built
@pytest.mark.parametrize("bits", [1, 5])
def test_a_bloom_filter_of_less_than_a_word_is_refused(bits: int) -> None:
    # 2^bits < 64 bits once sized to zero words; PresenceFilter refuses it, and so does the C
    c, two = frequency._c_probes, np.array([1, 3], dtype=np.uint64)
    for words in (np.zeros(0, dtype=np.uint64), np.zeros(1, dtype=np.uint64)):
        with pytest.raises(ValueError, match=rf"bits must be in \[6, 63\]; got {bits}"):
            c.bloom_add(words, two, keys([1, 2]), bits)
        with pytest.raises(ValueError, match=rf"bits must be in \[6, 63\]; got {bits}"):
            c.bloom_test(words, two, keys([1]), bits, np.empty(1, np.bool_))
    with pytest.raises(ValueError, match="0 cells, 1 needed"):  # the smallest: one word
        c.bloom_add(np.zeros(0, dtype=np.uint64), two, keys([1]), 6)


def _bad_sizes_and_smallest() -> tuple[list[int], list[int], list[int]]:
    """Refuse the sizes no table can have, then fill the smallest allowed ones (this way)."""
    for bits in (32, 1 << 64, 1 << 70):
        with pytest.raises(ValueError, match=r"power of two from 64 to 2\*\*63"):
            PresenceFilter(bits=bits)
    with pytest.raises(OverflowError, match="more counters than memory can address"):
        FingerprintFrequency(counters=1 << 62)
    # one 64-bit word; two counters a row
    bloom, counts = PresenceFilter(bits=64), FingerprintFrequency(counters=2)
    batch = keys([0, 1, 2**63, 2**64 - 1, 12345])
    bloom.add(batch)
    counts.add(batch)
    assert bloom.might_hold(batch).all()
    return bloom._words.tolist(), counts._counts.tolist(), counts.estimate(batch).tolist()


def test_bad_sizes_are_refused_alike_and_the_smallest_agree() -> None:
    with numpy_twins():
        numpy_way = _bad_sizes_and_smallest()
    if frequency._c_probes is None:
        pytest.skip("dedup._probes was not built: the numpy way alone was checked")
    assert _bad_sizes_and_smallest() == numpy_way
