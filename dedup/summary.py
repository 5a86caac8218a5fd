"""The paper's experiment table: how many clusters, of what, holding how many documents.

Broder (§1) clustered 30 million web documents at 50% resemblance and reported: "3.6 million
clusters containing a total of 12.3 million documents. Of these, 2.1 million clusters contained
only identical documents (5.3 million documents). The remaining 1.5 million clusters contained 7
million documents (a mixture of exact duplicates and similar)." A *cluster* there has at least two
members; the other documents resemble nothing and are singletons. :class:`ClusterSummary` counts
the same things, either as documents are assigned (:meth:`ClusterSummary.add`) or from the final
clusters (:meth:`ClusterSummary.from_clusters`); both give the same table.

>>> from dedup.index import ClusterInfo
>>> summary = ClusterSummary.from_clusters([
...     ClusterInfo(0, first_doc=0, size=3, identical=True),
...     ClusterInfo(1, first_doc=1, size=2, identical=False),
...     ClusterInfo(2, first_doc=2, size=1, identical=True),
... ])
>>> summary.duplicate_clusters, summary.duplicate_documents, summary.identical_clusters
(2, 5, 1)
>>> print(summary.render())
                               clusters  documents
all documents                         3          6
  singletons                          1          1
  clusters of 2 or more               2          5
    identical documents only          1          3
    mixed (near duplicates)           1          2
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dedup.cluster import Assignment
    from dedup.index import ClusterInfo

__all__ = ["ClusterSummary"]


@dataclass
class ClusterSummary:
    """Counts of clusters and documents, by kind of cluster."""

    documents: int = 0
    #: every cluster, singletons included
    clusters: int = 0
    singletons: int = 0
    #: clusters with two or more members (the paper's "clusters"), and the documents in them
    duplicate_clusters: int = 0
    duplicate_documents: int = 0
    #: of those, clusters whose members all share the first member's content
    identical_clusters: int = 0
    identical_documents: int = 0
    #: of those, the rest: near duplicates, possibly with exact copies among them
    mixed_clusters: int = 0
    mixed_documents: int = 0
    # cluster id → (size, identical) for incremental adds
    _seen: dict[int, tuple[int, bool]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_clusters(cls, clusters: Iterable[ClusterInfo]) -> ClusterSummary:
        """The table of a finished clustering, from each cluster's size and identical flag."""
        summary = cls()
        for info in clusters:
            summary.add_cluster(info)
        return summary

    def add_cluster(self, info: ClusterInfo) -> None:
        """Count one finished cluster (for a caller that reads each cluster for more than this)."""
        if info.size < 1:
            raise ValueError(f"cluster {info.cluster_id} has size {info.size}; expected >= 1")
        self.documents += info.size
        self._count(info.size, info.identical, +1)

    def add(self, assignment: Assignment, identical_to_first: bool | None = None) -> None:
        """Count one assigned document.

        ``identical_to_first`` defaults to ``assignment.identical``: whether its content equals
        its cluster's first member's. A cluster is first seen through its first member; a
        summary started in the middle of a clustering counts only what it is shown.
        """
        identical = assignment.identical if identical_to_first is None else identical_to_first
        self.documents += 1
        old = self._seen.get(assignment.cluster_id)
        if old is None:
            new = (1, True)
        else:
            self._count(*old, -1)
            new = (old[0] + 1, old[1] and identical)
        self._seen[assignment.cluster_id] = new
        self._count(*new, +1)

    def _count(self, size: int, identical: bool, sign: int) -> None:
        self.clusters += sign
        if size == 1:
            self.singletons += sign
            return
        self.duplicate_clusters += sign
        self.duplicate_documents += sign * size
        if identical:
            self.identical_clusters += sign
            self.identical_documents += sign * size
        else:
            self.mixed_clusters += sign
            self.mixed_documents += sign * size

    @property
    def duplicates(self) -> int:
        """Documents beyond the first of their cluster: what a deduplicating crawl drops."""
        return self.documents - self.clusters

    def to_dict(self) -> dict[str, int]:
        return {
            "documents": self.documents,
            "clusters": self.clusters,
            "singletons": self.singletons,
            "duplicate_clusters": self.duplicate_clusters,
            "duplicate_documents": self.duplicate_documents,
            "identical_clusters": self.identical_clusters,
            "identical_documents": self.identical_documents,
            "mixed_clusters": self.mixed_clusters,
            "mixed_documents": self.mixed_documents,
            "duplicates": self.duplicates,
        }

    def render(self) -> str:
        """A small aligned table for humans, rows as in the paper's sentence."""
        rows = [
            ("all documents", self.clusters, self.documents),
            ("  singletons", self.singletons, self.singletons),
            ("  clusters of 2 or more", self.duplicate_clusters, self.duplicate_documents),
            ("    identical documents only", self.identical_clusters, self.identical_documents),
            ("    mixed (near duplicates)", self.mixed_clusters, self.mixed_documents),
        ]
        label = max(len(r[0]) for r in rows)
        width = max(len("documents"), *(len(f"{n:,}") for r in rows for n in r[1:]))
        lines = [f"{'':<{label}}  {'clusters':>{width}}  {'documents':>{width}}"]
        lines += [f"{name:<{label}}  {c:>{width},}  {d:>{width},}" for name, c, d in rows]
        return "\n".join(lines)
