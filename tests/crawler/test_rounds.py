"""Greedy clustering decided in rounds (crawler.recluster.rounds) gives sequential greedy's
decisions, however the pending documents are cut into ranges each round."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.recluster.rounds import JOINED, KEPT, decide_in_order, preference

THRESHOLD, CONTAINMENT = 0.8, 0.6


def sequential(estimates: dict[int, list[tuple[int, float, float]]], n: int, containment):
    """The oracle: documents in order, each joining the best kept earlier one (resemblance at
    or above the threshold, ties the oldest; then containment), else kept."""
    kept: set[int] = set()
    out = {}
    for d in range(n):
        near = [(r, -e, e) for e, r, _ in estimates.get(d, []) if e in kept and r >= THRESHOLD]
        inside = [(c, -e, e, r) for e, r, c in estimates.get(d, [])
                  if containment is not None and e in kept and c >= containment]
        if near:
            r, _, e = max(near)
            out[d] = ("near_duplicate", e, r)
        elif inside:
            _, _, e, r = max(inside)
            out[d] = ("contained", e, r)
        else:
            kept.add(d)
            out[d] = ("kept", None, None)
    return out


def in_rounds(estimates, n: int, containment, rng: random.Random):
    """Rounds as the Spark engine runs them: each round cuts the pending documents into random
    key ranges, and each range is decided in order, seeing only the statuses known before."""
    prefs = {d: preference(est, THRESHOLD, containment) for d, est in estimates.items()}
    status = {d: KEPT for d in range(n) if not prefs.get(d)}
    out = {d: ("kept", None, None) for d in status}
    pending = sorted(d for d in range(n) if prefs.get(d))
    rounds = 0
    while pending:
        rounds += 1
        cuts = sorted(rng.sample(range(1, len(pending)), min(len(pending) - 1, rng.randint(0, 4))))
        ranges = [pending[a:b] for a, b in zip([0, *cuts], [*cuts, len(pending)])]
        known = dict(status)
        decided = {}
        for part in ranges:
            for d, decision in decide_in_order((d, prefs[d], known) for d in part):
                if decision is not None:
                    decided[d] = decision
        assert decided, "a round decides at least the first pending document"
        for d, decision in decided.items():
            out[d] = decision
            status[d] = KEPT if decision[0] == "kept" else JOINED
        pending = [d for d in pending if d not in decided]
    return out, rounds


@st.composite
def candidate_graphs(draw):
    n = draw(st.integers(1, 40))
    estimates = {}
    for d in range(1, n):
        earlier = draw(st.lists(st.integers(0, d - 1), unique=True, max_size=min(d, 5)))
        scores = st.sampled_from([0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0])
        estimates[d] = [(e, draw(scores), draw(scores)) for e in earlier]
    return n, estimates


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(candidate_graphs(), st.sampled_from([None, CONTAINMENT]), st.integers(0, 2**32))
def test_rounds_decide_as_sequential_greedy(graph, containment, seed):
    n, estimates = graph
    got, rounds = in_rounds(estimates, n, containment, random.Random(seed))
    assert got == sequential(estimates, n, containment)
    assert rounds <= n


def test_one_range_decides_everything_in_one_round():
    # a chain: each document a near duplicate of the one before, best of all its own
    estimates = {d: [(d - 1, 0.9, 0.9)] for d in range(1, 30)}
    prefs = {d: preference(est, THRESHOLD, None) for d, est in estimates.items()}
    decided = dict(decide_in_order((d, prefs[d], {0: KEPT}) for d in range(1, 30)))
    # 0 kept; 1 joins 0; 2's only candidate joined a cluster, so 2 is kept; 3 joins 2; ...
    assert [decided[d][0] for d in range(1, 7)] == ["near_duplicate", "kept"] * 3
    expected = sequential(estimates, 30, None)
    assert decided == {d: expected[d] for d in range(1, 30)}
