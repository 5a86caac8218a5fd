"""The index's Bloom filter: never a false negative, false positives at the rate theory gives."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dedup.params import SketchParams
from dedup.sketches import MinSketch
from storage.presence import PresenceFilter
from storage.store import Store

U64 = st.integers(min_value=0, max_value=2**64 - 1)


@given(st.lists(st.lists(U64, max_size=40), max_size=30))
def test_every_added_key_is_held(batches: list[list[int]]) -> None:
    # a tiny filter, so words collide and the OR-combining of one batch's probes is exercised
    presence = PresenceFilter(bits=256)
    for batch in batches:
        presence.add(np.array(batch, dtype=np.uint64))
    everything = np.array([k for batch in batches for k in batch], dtype=np.uint64)
    assert presence.might_hold(everything).all()


def test_false_positive_rate_matches_the_formula() -> None:
    """At n keys in m bits with 2 probes, an absent key passes with p = (1 - e^(-2n/m))^2.

    Over 200,000 absent keys the count is binomial: its standard deviation is
    sqrt(p(1-p)/N), so 5 of them bound the observed rate with room to spare.
    """
    rng = np.random.default_rng(7)
    bits, n, trials = 1 << 20, 200_000, 200_000
    presence = PresenceFilter(bits=bits)
    presence.add(rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True))
    expected = (1 - math.exp(-2 * n / bits)) ** 2
    assert presence.false_positive_rate() == pytest.approx(expected)
    absent = rng.integers(0, 2**64 - 1, size=trials, dtype=np.uint64, endpoint=True)
    observed = float(presence.might_hold(absent).mean())
    assert abs(observed - expected) < 5 * math.sqrt(expected * (1 - expected) / trials)


@pytest.mark.parametrize("bits", [0, 63, 100, 3 << 10])
def test_size_must_be_a_power_of_two(bits: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        PresenceFilter(bits=bits)


def test_a_reopened_store_finds_what_an_earlier_process_indexed(tmp_path) -> None:
    """The writer builds its filter by scanning the index: clusters from before it are found."""
    params = SketchParams()
    first = MinSketch(range(1000, 1100), s=100, n=500)
    with Store.open(tmp_path, params) as store, store.batch():
        store.index.new_cluster(0, first)
    near = MinSketch(list(range(1000, 1095)) + list(range(5000, 5005)), s=100, n=500)
    with Store.open(tmp_path, params) as store, store.batch():
        found = store.index.candidates(near.values, cap=64)
        assert found.shared == {0: 95}
        # a cluster started in this batch is found too: the filter learns it as it is written
        store.index.new_cluster(1, MinSketch(range(7000, 7100), s=100, n=500))
        assert store.index.candidates(np.arange(7000, 7010, dtype=np.uint64), 64).shared == {
            1: 10
        }
