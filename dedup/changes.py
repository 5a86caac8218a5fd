"""Clusters that follow their pages: greedy clustering when a recrawl finds a page changed or gone.

Greedy clustering (§4.4) is defined by an order: each document is decided against the
representatives of the documents before it. A recrawl keeps every unchanged page where it is
in that order, with its decision and its cluster. A page whose content changed is decided
again as a *new* document at the end of the order, against the index as it is then, once its
old document has been taken out (:meth:`~dedup.cluster.GreedyClusterer.withdraw`); a page that
is gone is only taken out. When the old document represented a cluster, the pages dropped as
its duplicates have lost what they duplicated: each is decided again too, right after it, as a
new document made of the sketch it already has (its content did not change). Every document
decided against a representative that left is decided again, and nothing else depends on one,
so the clusters after a recrawl are those that greedy clustering of the current documents, in
their order, gives: ``neardup recluster --store --diff`` finds nothing to change.

Clusters keep their ids where their pages stay together: a kept document whose URL's old
document represented a cluster (its new content is kept), or one of that cluster's orphans
kept first, takes the cluster over (:meth:`~dedup.cluster.GreedyClusterer.apply` with
``take_over``), so that the cluster of a page edited in place, and of the pages that still
resemble it, does not move. A cluster that nobody takes over is gone.

>>> from dedup.cluster import GreedyClusterer
>>> from dedup.memory_index import MemoryIndex
>>> from dedup.params import DedupParams
>>> from dedup.sketches import MinSketch
>>> clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.8))
>>> page, copy = MinSketch(range(0, 100), s=100, n=100), MinSketch(range(5, 105), s=100, n=100)
>>> [clusterer.assign(d, s, h).decision.kind for d, s, h in [(0, page, 1), (1, copy, 2)]]
['kept', 'near_duplicate']
>>> stored = {0: Stored(0, page, 1), 1: Stored(1, copy, 2)}
>>> ids = iter(range(2, 100))
>>> edited = Stored(2, MinSketch(range(500, 600), s=100, n=100), 3)  # the page, rewritten
>>> done = replace(clusterer, stored[0], Stored(next(ids), edited.sketch, 3),
...                load=stored.__getitem__, new_doc_id=lambda: next(ids))
>>> done.assignment.decision.kind, done.assignment.cluster_id   # it keeps its cluster
('kept', 0)
>>> [(r.old_doc, r.new_doc, r.assignment.decision.kind) for r in done.redecided]
[(1, 3, 'kept')]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dedup.cluster import Assignment, GreedyClusterer, Withdrawal
from dedup.sketches import Sketch

__all__ = ["Redecision", "Replacement", "Stored", "replace"]


@dataclass(frozen=True)
class Stored:
    """A document as the caller keeps it: what deciding it again needs."""

    doc_id: int
    sketch: Sketch
    content_hash: int


@dataclass(frozen=True)
class Redecision:
    """An orphan decided again: its old document, the new one, and where the new one went."""

    old_doc: int
    new_doc: int
    assignment: Assignment


@dataclass(frozen=True)
class Replacement:
    """What :func:`replace` did."""

    #: where the new content went (None: the page is gone)
    assignment: Assignment | None
    #: what taking the old document out did (None: it was in no cluster)
    withdrawal: Withdrawal | None
    #: the orphans of the old document, decided again, in order
    redecided: tuple[Redecision, ...]


def replace(
    clusterer: GreedyClusterer,
    old: Stored | None,
    new: Stored | None,
    *,
    load: Callable[[int], Stored],
    new_doc_id: Callable[[], int],
) -> Replacement:
    """Take ``old`` (a URL's current document) out of the index, decide ``new`` (its new
    content; None when the page is gone), then decide every orphan again.

    ``load(doc_id)`` gives an orphan's stored sketch and content hash, ``new_doc_id()`` the id
    of each new document (ids count up: the new documents are the end of the order). ``old``
    None (a document in no cluster, or none) just decides ``new``.
    """
    withdrawal = None if old is None else clusterer.withdraw(old.doc_id, old.content_hash)
    orphaned = withdrawal.cluster_id if withdrawal is not None and withdrawal.representative else None
    orphans = [load(doc_id) for doc_id in withdrawal.orphans] if withdrawal is not None else []
    for orphan in orphans:  # before anything is decided: no hash may lead into the shell
        clusterer.release(orphan.doc_id, orphan.content_hash)
    assignment = None if new is None else _place(clusterer, new, orphaned)
    redecided = []
    for orphan in orphans:
        again = Stored(new_doc_id(), orphan.sketch, orphan.content_hash)
        redecided.append(Redecision(orphan.doc_id, again.doc_id, _place(clusterer, again, orphaned)))
    if orphaned is not None:
        clusterer.discard_orphan(orphaned)
    return Replacement(assignment, withdrawal, tuple(redecided))


def _place(clusterer: GreedyClusterer, doc: Stored, orphaned: int | None) -> Assignment:
    """Decide ``doc`` and apply it; kept, it takes the orphaned cluster over while nobody has."""
    decision = clusterer.decide(doc.sketch, doc.content_hash)
    take_over = None
    if decision.kind == "kept" and orphaned is not None:
        if clusterer.index.cluster(orphaned).orphaned:
            take_over = orphaned
    return clusterer.apply(doc.doc_id, doc.sketch, doc.content_hash, decision, take_over=take_over)
