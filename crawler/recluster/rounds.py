"""Broder's sequential greedy clustering, decided in rounds: the pure per-document steps.

Sequential greedy (:class:`dedup.cluster.GreedyClusterer`) takes documents in input order; each
joins the best-resembling earlier *representative* at or above the threshold (ties: the oldest),
else, under the containment rule, the representative it is most contained in, else it starts a
cluster. Whether a document is a representative depends on every decision before it, which
looks inherently sequential, but it is not: only a document's *candidates* matter, the earlier
documents whose estimate against it qualifies. Put them in the order the clusterer prefers them
(:func:`preference`) and the document's decision is the first candidate that ends up a
representative ("kept"); candidates that joined a cluster are passed over; if every candidate
joined one, the document is kept. So a document is decided as soon as the status of every
candidate *before the first kept one* in its preference order is known (:func:`decide`).
A document with no candidates is kept at once; the others follow in rounds. Within a round each
partition takes its documents in input order (:func:`decide_in_order`), so only a chain of
documents that crosses partitions, each waiting on the one before, needs a round per crossing.
The Spark engine runs these plain functions in executors (:mod:`crawler.recluster.spark.greedy`).

>>> prefs = preference([(3, 0.95, 0.95), (1, 0.95, 0.96), (2, 0.85, 0.99)], 0.9, None)
>>> [(e, kind) for e, kind, _ in prefs]
[(1, 'near_duplicate'), (3, 'near_duplicate')]
>>> decide(prefs, {1: JOINED})  # 1 joined a cluster: 3 decides, but is still undecided
>>> decide(prefs, {1: JOINED, 3: KEPT})[:2]
('near_duplicate', 3)
>>> decide(prefs, {1: JOINED, 3: JOINED})[:2]
('kept', None)

In one pass, in input order, a decision made earlier in the pass counts: document 7 prefers 5,
which is decided (kept, its only candidate 1 having joined a cluster) just before it.

>>> one = [(1, "near_duplicate", 0.9)]
>>> list(decide_in_order([(5, one, {1: JOINED}), (7, [(5, "near_duplicate", 0.95)], {})]))
[(5, ('kept', None, None)), (7, ('near_duplicate', 5, 0.95))]
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping

__all__ = ["JOINED", "KEPT", "decide", "decide_in_order", "preference"]

#: a decided document's status, as its later candidates need it
KEPT = 1
JOINED = 2

#: one qualifying candidate of a document: (candidate key, decision kind, resemblance)
Preference = tuple[int, str, float]


def preference(
    estimates: Iterable[tuple[int, float, float]],
    threshold: float,
    containment: float | None,
) -> list[Preference]:
    """The candidates of a document that qualify, in the order greedy clustering prefers them.

    ``estimates`` are ``(candidate key, resemblance, containment of the document in the
    candidate)``; keys increase with input order, as cluster ids do in the sequential engine.
    First every candidate at or above ``threshold`` by resemblance, best first, ties by the
    oldest; then, under the containment rule, every candidate at or above ``containment`` by
    containment, likewise (a resemblance candidate listed again there is passed over: if it were
    kept, the document would have joined it already). A ``nan`` estimate qualifies for nothing.
    """
    estimates = list(estimates)
    near = sorted((-r, e, r) for e, r, _ in estimates if r >= threshold)
    prefs = [(e, "near_duplicate", r) for _, e, r in near]
    if containment is not None:
        inside = sorted((-c, e, r) for e, r, c in estimates if c >= containment)
        prefs += [(e, "contained", r) for _, e, r in inside]
    return prefs


def decide(
    prefs: list[Preference], status: Mapping[int, int]
) -> tuple[str, int | None, float | None] | None:
    """The document's decision ``(kind, representative key, resemblance)``, or None while a
    candidate it depends on is undecided (absent from ``status``)."""
    for e, kind, r in prefs:
        known = status.get(e)
        if known is None:
            return None
        if known == KEPT:
            return kind, e, r
    return "kept", None, None


def decide_in_order(
    documents: Iterable[tuple[int, list[Preference], Mapping[int, int]]],
) -> Iterator[tuple[int, tuple[str, int | None, float | None] | None]]:
    """Each document's decision (None: still undecided), taking ``(key, preferences, statuses
    known before the pass)`` in increasing key order; a candidate decided earlier in the same
    pass counts as known.

    >>> list(decide_in_order([(5, [(1, "near_duplicate", 0.9)], {})]))
    [(5, None)]
    """
    here: dict[int, int] = {}
    for d, prefs, known in documents:
        decision = decide(prefs, ChainMap(known, here))
        if decision is not None:
            here[d] = KEPT if decision[0] == "kept" else JOINED
        yield d, decision
