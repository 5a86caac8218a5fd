"""The index that greedy clustering (paper §4.4) runs over, as an interface.

Clustering is pure computation and lives in ``dedup.cluster``; where the index lives is not its
business. ``dedup.memory_index.MemoryIndex`` keeps it in dicts (tests, small corpora);
``storage.lmdb_index.LmdbIndex`` keeps it in LMDB (crawls, corpora larger than memory). Both
implement :class:`ClusterIndex`, and the same clustering code drives either.

What the index maps (§4.4: "for each fingerprint we encounter we remember to which clusters it
belongs"):

* fingerprint → the clusters whose *representative* sketch holds it;
* cluster → its representative sketch, size, first member, and whether all members are identical;
* content hash → the first document with that canonical stream (exact duplicates, lecture §12.1);
* document → its cluster.

A recrawl also takes documents *out* (a page whose content changed, or that is gone): a member
leaves its cluster (:meth:`ClusterIndex.remove_member`); a representative takes every member
with it and leaves the cluster an empty *orphaned* shell, its postings gone and its members
handed back to be decided again (:meth:`ClusterIndex.remove_representative`), which a kept
document may take over, keeping the cluster's id (:meth:`ClusterIndex.take_over`), or which is
discarded (:meth:`ClusterIndex.discard_orphan`).

Ids are non-negative integers below 2**63, assigned by the caller (documents) or the index
(clusters). Every method may be called inside the caller's batch; an implementation that writes
to disk decides when to commit (see ``storage``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dedup.sketches import Sketch


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: int
    #: the first member; with the "first" representative, its sketch is the representative
    first_doc: int
    size: int
    #: True while every member has the first member's content hash (a cluster of identical docs)
    identical: bool
    #: True for an empty shell whose representative left (a recrawl found its page changed or
    #: gone) and which no kept document has taken over yet; ``first_doc`` is the one that left
    orphaned: bool = False


@dataclass(frozen=True)
class Candidates:
    """Clusters that share fingerprints with a sketch, as found by :meth:`ClusterIndex.candidates`."""

    #: cluster id → number of the sketch's fingerprints it shares (its representative holds them)
    shared: dict[int, int]
    #: fingerprints that belonged to more than ``cap`` clusters: only ``cap`` were read (boilerplate)
    capped: int


class ClusterIndex(Protocol):
    def candidates(self, fingerprints: np.ndarray, cap: int) -> Candidates:
        """Clusters whose representative holds any of ``fingerprints`` (uint64).

        For a fingerprint held by more than ``cap`` clusters only the ``cap`` lowest cluster ids
        are read, so one document costs at most s·cap lookups whatever the corpus (O(rs) overall).
        """
        ...

    def representative(self, cluster_id: int) -> Sketch:
        ...

    def cluster(self, cluster_id: int) -> ClusterInfo:
        ...

    def new_cluster(self, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None) -> int:
        """Start a cluster with ``doc_id`` as first member and ``sketch`` as representative;
        index ``indexed`` (distinct fingerprints of the sketch; default: all of them); return the
        new cluster id. Which part suffices is :func:`dedup.cluster.indexed_count`'s business."""
        ...

    def index_need(self) -> float | None:
        """The estimate down to which the index finds every cluster a document can reach.

        0.0 when every representative fingerprint is indexed (any threshold works); ``t`` when
        only part of each is (:func:`dedup.cluster.indexed_count`), which serves thresholds of
        ``t`` and above; None while the index holds nothing and has not been told.
        """
        ...

    def set_index_need(self, need: float) -> None:
        ...

    def add_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        """Record ``doc_id`` in the cluster; ``identical`` is False when its content differs from
        the first member's (the cluster then stops being "identical documents only")."""
        ...

    def set_representative(self, cluster_id: int, sketch: Sketch) -> None:
        """Replace the representative sketch and re-index its fingerprints (the "popular" rule)."""
        ...

    def member_fingerprints(self, cluster_id: int) -> np.ndarray:
        """All fingerprints of all members' sketches, with repeats (for the "popular" rule).

        Only needed when the representative is "popular"; the index records them through
        :meth:`record_member_sketch`.
        """
        ...

    def record_member_sketch(self, cluster_id: int, sketch: Sketch) -> None:
        ...

    def find_exact(self, content_hash: int) -> tuple[int, int] | None:
        """(doc_id, cluster_id) of the first document with this content hash, if any."""
        ...

    def add_exact(self, content_hash: int, doc_id: int, cluster_id: int) -> None:
        """Remember the document with this content hash; a hash known already keeps its first."""
        ...

    def cluster_of(self, doc_id: int) -> int | None:
        ...

    def members(self, cluster_id: int) -> list[int]:
        """The documents of the cluster, in id order (the first member included)."""
        ...

    def remove_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        """Take ``doc_id``, a member that is not the representative, out of the cluster;
        ``identical`` says whether its content hash was the first member's."""
        ...

    def remove_representative(self, cluster_id: int) -> list[int]:
        """The representative leaves, and every member with it: its postings leave the index,
        the cluster is left an empty orphaned shell, and the other members are returned in id
        order, to be decided again."""
        ...

    def take_over(
        self, cluster_id: int, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None
    ) -> None:
        """An orphaned cluster gets ``doc_id`` as first member and ``sketch`` as representative,
        ``indexed`` posted as :meth:`new_cluster` posts it."""
        ...

    def discard_orphan(self, cluster_id: int) -> None:
        """The orphaned shell no kept document took over is gone."""
        ...

    def remove_exact(self, content_hash: int, doc_id: int) -> None:
        """Forget the content hash when ``doc_id`` is the document it points at."""
        ...
