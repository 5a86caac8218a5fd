"""A complete :class:`~dedup.index.ClusterIndex` held in dicts, for tests and small corpora.

It is the reference for what the protocol means, not a stand-in: ``dedup.cluster`` runs over it
exactly as over ``storage.lmdb_index.LmdbIndex``. Everything lives in memory and dies with the
process, so use it where the corpus fits in RAM and nothing needs to survive a restart.

Postings (fingerprint → cluster ids) are kept as sorted lists, so the ``cap`` lowest (oldest)
cluster ids of a boilerplate fingerprint are a slice.

>>> from dedup.sketches import MinSketch
>>> index = MemoryIndex()
>>> c = index.new_cluster(7, MinSketch([3, 5, 9], s=3, n=40))
>>> index.candidates(np.array([1, 5, 9], dtype=np.uint64), cap=64)
Candidates(shared={0: 2}, capped=0)
>>> index.cluster(c)
ClusterInfo(cluster_id=0, first_doc=7, size=1, identical=True, orphaned=False)
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dedup.index import Candidates, ClusterInfo
from dedup.sketches import Sketch

__all__ = ["MemoryIndex"]


@dataclass
class _Cluster:
    first_doc: int
    size: int
    representative: Sketch
    #: the sketches recorded by record_member_sketch (the "popular" rule), one array per member
    member_values: list[npt.NDArray[np.uint64]] = field(default_factory=list)
    #: its documents, in id order
    members: list[int] = field(default_factory=list)
    #: members whose content hash is not the first member's (identical while there are none)
    odd: int = 0
    orphaned: bool = False


class MemoryIndex:
    """The cluster index in dicts; cluster ids are 0, 1, 2, … in order of creation."""

    def __init__(self) -> None:
        self._postings: dict[int, list[int]] = {}
        #: by cluster id; None once a cluster is gone
        self._clusters: list[_Cluster | None] = []
        self._exact: dict[int, tuple[int, int]] = {}
        self._doc_cluster: dict[int, int] = {}
        self._need: float | None = None

    # --- reading ----------------------------------------------------------------------------

    def candidates(self, fingerprints: np.ndarray, cap: int) -> Candidates:
        """Clusters whose representative holds any of the (distinct) ``fingerprints``.

        A fingerprint repeated in the input counts once, so ``shared`` is the size of the
        intersection of two *sets* of fingerprints.
        """
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"cap must be a positive integer; got {cap!r}")
        shared: dict[int, int] = {}
        capped = 0
        for fp in np.unique(np.asarray(fingerprints, dtype=np.uint64)).tolist():
            clusters = self._postings.get(fp)
            if not clusters:
                continue
            if len(clusters) > cap:
                capped += 1
                clusters = clusters[:cap]
            for cluster_id in clusters:
                shared[cluster_id] = shared.get(cluster_id, 0) + 1
        return Candidates(shared=shared, capped=capped)

    def representative(self, cluster_id: int) -> Sketch:
        return self._get(cluster_id).representative

    def cluster(self, cluster_id: int) -> ClusterInfo:
        c = self._get(cluster_id)
        return ClusterInfo(cluster_id, c.first_doc, c.size, c.odd == 0, c.orphaned)

    def member_fingerprints(self, cluster_id: int) -> np.ndarray:
        values = self._get(cluster_id).member_values
        if not values:
            return np.empty(0, dtype=np.uint64)
        return np.concatenate(values)

    def find_exact(self, content_hash: int) -> tuple[int, int] | None:
        return self._exact.get(content_hash)

    def cluster_of(self, doc_id: int) -> int | None:
        return self._doc_cluster.get(doc_id)

    # --- writing ----------------------------------------------------------------------------

    def index_need(self) -> float | None:
        if self._need is None and self._clusters:
            return 0.0  # clusters indexed before anyone said otherwise: all of each
        return self._need

    def set_index_need(self, need: float) -> None:
        self._need = _checked_need(need)

    def new_cluster(self, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None) -> int:
        self._check_new_doc(doc_id)
        cluster_id = len(self._clusters)
        self._clusters.append(_Cluster(doc_id, 1, sketch, members=[doc_id]))
        self._doc_cluster[doc_id] = cluster_id
        self._index(cluster_id, sketch.distinct() if indexed is None else np.unique(indexed))
        return cluster_id

    def add_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        c = self._get(cluster_id)
        if c.orphaned:
            raise ValueError(f"cluster {cluster_id} is orphaned: only take_over adds to it")
        self._check_new_doc(doc_id)
        c.size += 1
        c.odd += not identical
        insort(c.members, doc_id)
        self._doc_cluster[doc_id] = cluster_id

    def members(self, cluster_id: int) -> list[int]:
        return list(self._get(cluster_id).members)

    def remove_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        c = self._get(cluster_id)
        if self._doc_cluster.get(doc_id) != cluster_id:
            raise ValueError(f"document {doc_id} is not in cluster {cluster_id}")
        if doc_id == c.first_doc:
            raise ValueError(f"document {doc_id} represents cluster {cluster_id}: "
                             "remove_representative takes it out")  # fmt: skip
        del c.members[bisect_left(c.members, doc_id)]
        del self._doc_cluster[doc_id]
        c.size -= 1
        c.odd -= not identical

    def remove_representative(self, cluster_id: int) -> list[int]:
        c = self._get(cluster_id)
        if c.orphaned:
            raise ValueError(f"cluster {cluster_id} has no representative")
        self._unindex(cluster_id, c.representative)
        members = c.members
        for doc_id in members:
            del self._doc_cluster[doc_id]
        c.members, c.size, c.odd, c.orphaned = [], 0, 0, True
        return [doc_id for doc_id in members if doc_id != c.first_doc]

    def take_over(
        self, cluster_id: int, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None
    ) -> None:
        c = self._get(cluster_id)
        if not c.orphaned:
            raise ValueError(f"cluster {cluster_id} has a representative; only an orphaned "
                             "cluster can be taken over")  # fmt: skip
        self._check_new_doc(doc_id)
        c.first_doc, c.representative, c.orphaned = doc_id, sketch, False
        c.members, c.size = [doc_id], 1
        self._doc_cluster[doc_id] = cluster_id
        self._index(cluster_id, sketch.distinct() if indexed is None else np.unique(indexed))

    def discard_orphan(self, cluster_id: int) -> None:
        if not self._get(cluster_id).orphaned:
            raise ValueError(f"cluster {cluster_id} has a representative")
        self._clusters[cluster_id] = None

    def remove_exact(self, content_hash: int, doc_id: int) -> None:
        found = self._exact.get(content_hash)
        if found is not None and found[0] == doc_id:
            del self._exact[content_hash]

    def set_representative(self, cluster_id: int, sketch: Sketch) -> None:
        c = self._get(cluster_id)
        self._unindex(cluster_id, c.representative)
        c.representative = sketch
        self._index(cluster_id, sketch.distinct())

    def record_member_sketch(self, cluster_id: int, sketch: Sketch) -> None:
        self._get(cluster_id).member_values.append(sketch.values)

    def add_exact(self, content_hash: int, doc_id: int, cluster_id: int) -> None:
        """Remember the first document with this content hash; later calls keep the first."""
        self._get(cluster_id)
        self._exact.setdefault(content_hash, (doc_id, cluster_id))

    # --- beyond the protocol: inspection ----------------------------------------------------

    def __len__(self) -> int:
        """The number of clusters."""
        return sum(c is not None for c in self._clusters)

    def clusters(self) -> Iterator[ClusterInfo]:
        """Every cluster, in id order (for :meth:`dedup.summary.ClusterSummary.from_clusters`)."""
        for cluster_id, c in enumerate(self._clusters):
            if c is not None:
                yield self.cluster(cluster_id)

    def postings(self, fingerprint: int) -> list[int]:
        """The clusters whose representative holds ``fingerprint`` (a copy, sorted)."""
        return list(self._postings.get(int(fingerprint), ()))

    # --- helpers ----------------------------------------------------------------------------

    def _get(self, cluster_id: int) -> _Cluster:
        c = self._clusters[cluster_id] if 0 <= cluster_id < len(self._clusters) else None
        if c is None:
            raise KeyError(f"no cluster {cluster_id}")
        return c

    def _check_new_doc(self, doc_id: int) -> None:
        if doc_id in self._doc_cluster:
            raise ValueError(f"document {doc_id} is already in cluster {self._doc_cluster[doc_id]}")

    def _index(self, cluster_id: int, fingerprints: np.ndarray) -> None:
        for fp in fingerprints.tolist():
            insort(self._postings.setdefault(fp, []), cluster_id)

    def _unindex(self, cluster_id: int, sketch: Sketch) -> None:
        """Take the cluster out of the postings of every fingerprint of ``sketch`` it is in."""
        for fp in sketch.distinct().tolist():
            clusters = self._postings.get(fp)
            if not clusters:
                continue
            at = bisect_left(clusters, cluster_id)
            if at < len(clusters) and clusters[at] == cluster_id:
                del clusters[at]
                if not clusters:
                    del self._postings[fp]


def _checked_need(need: float) -> float:
    if not 0.0 <= need <= 1.0:
        raise ValueError(f"index need must be in [0, 1]; got {need!r}")
    return float(need)
