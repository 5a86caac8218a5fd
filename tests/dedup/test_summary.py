"""The paper's experiment table (§1), counted as documents arrive or from the final clusters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup.cluster import Assignment, Decision, cluster_documents
from dedup.index import ClusterInfo
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams
from dedup.sketches import MinSketch
from dedup.summary import ClusterSummary


def _assignment(doc: int, cluster: int, kind: str, identical: bool) -> Assignment:
    decision = Decision(kind, cluster_id=None if kind == "kept" else cluster)
    return Assignment(doc, cluster, decision, kind == "kept", identical)


# doc, cluster, decision, identical to the cluster's first member
HAND_BUILT = [
    (0, 0, "kept", True),
    (1, 0, "exact_duplicate", True),
    (2, 1, "kept", True),
    (3, 1, "near_duplicate", False),
    (4, 1, "exact_duplicate", True),  # a copy of doc 2, but cluster 1 is already mixed
    (5, 2, "kept", True),  # a singleton
    (6, 3, "kept", True),
    (7, 3, "exact_duplicate", True),
    (8, 3, "exact_duplicate", True),
]
EXPECTED = {
    "documents": 9,
    "clusters": 4,
    "singletons": 1,
    "duplicate_clusters": 3,
    "duplicate_documents": 8,
    "identical_clusters": 2,
    "identical_documents": 5,
    "mixed_clusters": 1,
    "mixed_documents": 3,
    "duplicates": 5,
}


def test_a_hand_built_clustering_adds_up():
    summary = ClusterSummary()
    for row in HAND_BUILT:
        summary.add(_assignment(*row))
    assert summary.to_dict() == EXPECTED
    final = [
        ClusterInfo(0, first_doc=0, size=2, identical=True),
        ClusterInfo(1, first_doc=2, size=3, identical=False),
        ClusterInfo(2, first_doc=5, size=1, identical=True),
        ClusterInfo(3, first_doc=6, size=3, identical=True),
    ]
    assert ClusterSummary.from_clusters(final) == summary


def test_the_explicit_flag_overrides_the_assignment():
    summary = ClusterSummary()
    summary.add(_assignment(0, 0, "kept", True))
    summary.add(_assignment(1, 0, "near_duplicate", True), identical_to_first=False)
    assert (summary.identical_clusters, summary.mixed_clusters, summary.mixed_documents) == (
        0,
        1,
        2,
    )


def test_a_cluster_moves_from_singleton_to_identical_to_mixed():
    summary = ClusterSummary()
    steps = []
    for row in [
        (0, 7, "kept", True),
        (1, 7, "exact_duplicate", True),
        (2, 7, "near_duplicate", False),
    ]:
        summary.add(_assignment(*row))
        steps.append((summary.singletons, summary.identical_clusters, summary.mixed_clusters))
    assert steps == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    assert summary.clusters == 1 and summary.mixed_documents == 3


def test_the_paper_in_miniature_renders_as_an_aligned_table():
    # §1 per 100,000: 3.6M clusters of 12.3M docs; 2.1M identical (5.3M docs); 1.5M mixed (7M)
    infos = [ClusterInfo(i, i, 2 + (i < 11), True) for i in range(21)]  # 21 clusters, 53 docs
    infos += [ClusterInfo(21 + i, 0, 4 + (i < 10), False) for i in range(15)]  # 15, 70 docs
    infos += [ClusterInfo(36 + i, 0, 1, True) for i in range(177)]  # singletons: 300 in all
    summary = ClusterSummary.from_clusters(infos)
    assert (summary.duplicate_clusters, summary.duplicate_documents) == (36, 123)
    assert (summary.identical_clusters, summary.identical_documents) == (21, 53)
    assert (summary.mixed_clusters, summary.mixed_documents) == (15, 70)
    assert (summary.documents, summary.singletons, summary.duplicates) == (300, 177, 87)
    lines = summary.render().splitlines()
    assert len({len(line) for line in lines}) == 1  # aligned
    assert lines[0].split() == ["clusters", "documents"]
    assert lines[3].split()[-2:] == ["36", "123"] and lines[4].split()[-2:] == ["21", "53"]


def test_render_groups_thousands():
    summary = ClusterSummary.from_clusters([ClusterInfo(0, 0, 12_300, False)])
    assert "12,300" in summary.render()


def test_a_cluster_of_size_zero_is_refused():
    with pytest.raises(ValueError, match="cluster 0 has size 0"):
        ClusterSummary.from_clusters([ClusterInfo(0, 0, 0, True)])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=40))
def test_counting_as_we_go_equals_counting_the_final_clusters(plan):
    """Documents drawn from 6 topics at 4 edit levels: copies, near copies and strangers."""
    docs = []
    for topic, edits in plan:
        values = list(range(1000 * topic, 1000 * topic + 100))
        values[:edits] = [10**6 + 1000 * topic + edits * 10 + j for j in range(edits)]
        docs.append((MinSketch(sorted(values), s=100, n=100), topic * 10 + edits))
    index = MemoryIndex()
    summary = ClusterSummary()
    for assignment in cluster_documents(docs, DedupParams(threshold=0.97), index):
        summary.add(assignment)
    assert summary == ClusterSummary.from_clusters(index.clusters())
    assert summary.documents == len(plan)
    assert summary.clusters == len({topic for topic, _ in plan})
    assert summary.duplicates == len(plan) - summary.clusters
    assert np.sum([c.size for c in index.clusters()]) == len(plan)
