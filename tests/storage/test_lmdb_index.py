"""LmdbIndex answers exactly as MemoryIndex, the reference for the ClusterIndex protocol."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup.cluster import GreedyClusterer, indexed_count
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams, SketchParams
from dedup.sketches import MinSketch
from storage.store import Store

# A small fingerprint universe, so clusters share fingerprints and the cap bites.
fingerprints = st.lists(st.integers(0, 40), min_size=1, max_size=6, unique=True)


def sketch(values: list[int]) -> MinSketch:
    return MinSketch(sorted(values), s=6, n=len(values))


operations = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.integers(0, 30), fingerprints),
        st.tuples(st.just("member"), st.integers(0, 12), st.integers(0, 30), st.booleans()),
        st.tuples(st.just("represent"), st.integers(0, 12), fingerprints),
        st.tuples(st.just("record"), st.integers(0, 12), fingerprints),
        st.tuples(st.just("exact"), st.integers(0, 5), st.integers(0, 30), st.integers(0, 12)),
        st.tuples(st.just("commit")),
    ),
    max_size=40,
)


def outcome(method, *args):
    """What ``method(*args)`` returns, or the type of the exception it raises."""
    try:
        value = method(*args)
    except (KeyError, ValueError) as exc:
        return type(exc).__name__
    if isinstance(value, np.ndarray):
        return sorted(value.tolist())
    return value


def observe(index, queries):
    """Everything the protocol can be asked, for every id the test uses."""
    seen = [outcome(index.candidates, np.array(fps, dtype=np.uint64), cap) for fps, cap in queries]
    for cluster_id in range(14):
        seen.append(outcome(index.cluster, cluster_id))
        seen.append(outcome(index.representative, cluster_id))
        seen.append(outcome(index.member_fingerprints, cluster_id))
    seen += [index.cluster_of(d) for d in range(31)]
    seen += [index.find_exact(h) for h in range(6)]
    return seen


def perform(index, op):
    kind, *args = op
    if kind == "new":
        return outcome(index.new_cluster, args[0], sketch(args[1]))
    if kind == "member":
        return outcome(index.add_member, *args)
    if kind == "represent":
        return outcome(index.set_representative, args[0], sketch(args[1]))
    if kind == "record":
        return outcome(index.record_member_sketch, args[0], sketch(args[1]))
    assert kind == "exact"
    return outcome(index.add_exact, *args)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ops=operations,
    queries=st.lists(st.tuples(fingerprints, st.integers(1, 3)), min_size=1, max_size=5),
)
def test_same_operations_same_answers_as_memory_index(ops, queries):
    memory = MemoryIndex()
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "s") as store:
        on_disk = store.index
        batch = store.batch()
        batch.__enter__()
        try:
            for op in ops:
                if op[0] == "commit":  # reads outside a batch use their own transactions
                    batch.__exit__(None, None, None)
                    assert observe(on_disk, queries) == observe(memory, queries)
                    batch = store.batch()
                    batch.__enter__()
                    continue
                assert perform(on_disk, op) == perform(memory, op), op
                assert observe(on_disk, queries) == observe(memory, queries)
        finally:
            batch.__exit__(None, None, None)
        assert observe(on_disk, queries) == observe(memory, queries)
        assert len(on_disk) == len(memory)
        assert list(on_disk.clusters()) == list(memory.clusters())


def test_cap_reads_only_the_lowest_cluster_ids(tmp_path):
    boilerplate = 7
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            for doc in range(10):
                store.index.new_cluster(doc, MinSketch([boilerplate, 100 + doc], s=2, n=2))
        found = store.index.candidates(np.array([boilerplate, 105], dtype=np.uint64), cap=3)
    assert found.shared == {0: 1, 1: 1, 2: 1, 5: 1}
    assert found.capped == 1
    with pytest.raises(ValueError, match="cap must be a positive integer"):
        MemoryIndex().candidates(np.array([1], dtype=np.uint64), cap=0)


def test_greedy_clustering_gives_the_same_clusters_on_both_indexes(tmp_path):
    rng = np.random.default_rng(5)
    base = [rng.integers(0, 2**40, size=300, dtype=np.uint64) for _ in range(8)]
    docs = []
    for i in range(60):
        ids = base[i % 8].copy()
        ids[: rng.integers(0, 40)] = rng.integers(0, 2**40, dtype=np.uint64)  # small edits
        docs.append((MinSketch.from_ids(ids, 50), int(rng.integers(0, 20))))
    params = DedupParams(threshold=0.8, representative="popular")
    memory = GreedyClusterer(MemoryIndex(), params)
    expected = [memory.assign(i, sk, h) for i, (sk, h) in enumerate(docs)]
    with Store.open(tmp_path / "s") as store:
        on_disk = GreedyClusterer(store.index, params)
        got = []
        for start in range(0, len(docs), 7):
            with store.batch():
                for i in range(start, min(start + 7, len(docs))):
                    sk, h = docs[i]
                    got.append(on_disk.apply(i, sk, h, on_disk.decide(sk, h)))
        assert got == expected
        assert len({a.cluster_id for a in got}) < len(docs)  # something was clustered
        assert store.index.members(got[-1].cluster_id)[-1] == len(docs) - 1


def test_the_index_need_is_kept_with_the_store(tmp_path):
    """A store indexed in part for threshold 0.85 says so after reopening, holds that part of
    each representative, and refuses a lower threshold with the reason."""
    rep = MinSketch(range(1000, 1100), s=100, n=100)
    with Store.open(tmp_path, SketchParams()) as store, store.batch():
        assert store.index.index_need() is None
        GreedyClusterer(store.index, DedupParams(threshold=0.85)).assign(0, rep, 1)
    with Store.open(tmp_path) as store:
        assert store.index.index_need() == 0.85
        held = [fp for fp in range(1000, 1100) if store.index.postings(fp)]
        assert len(held) == indexed_count(100, 0.85) == 18
        with pytest.raises(ValueError, match="threshold 0.8 needs more of it"):
            GreedyClusterer(store.index, DedupParams(threshold=0.8))
