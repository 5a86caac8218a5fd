"""Greedy clustering (§4.4) over the in-memory index: known truth, the cap, the rules."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup.cluster import (
    SLACK,
    Assignment,
    Decision,
    GreedyClusterer,
    cluster_documents,
    hits_needed,
    indexed_count,
    popular_sketch,
    resemblance_bound,
)
from dedup.curves import matches_needed, p_at_least
from dedup.estimators import estimate, exact_resemblance
from dedup.index import ClusterIndex, ClusterInfo
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams, SketchParams
from dedup.shingles import shingles
from dedup.sketches import (
    MinModSketch,
    MinSketch,
    ModSketch,
    PermutationSketch,
    Sketch,
    TieredSketch,
)
from dedup.summary import ClusterSummary

# --- helpers -------------------------------------------------------------------------------


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Pseudo-words of 3 to 8 letters: one 8-byte unit each, so units and words agree."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 8))))
    return sorted(words)


def _substitute(rng: random.Random, words: list[str], vocab: list[str], k: int) -> list[str]:
    """``k`` substitutions at least w = 4 apart and 4 from the ends: each changes 4 shingles."""
    spaced = range(4, len(words) - 3, 4)
    out = list(words)
    for pos in rng.sample(spaced, k):
        while out[pos] == words[pos]:
            out[pos] = rng.choice(vocab)
    return out


def _min_ids(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**63, size=n, dtype=np.uint64)


def _perturb(rng: np.random.Generator, ids: np.ndarray, fraction: float) -> np.ndarray:
    out = ids.copy()
    swap = rng.random(ids.size) < fraction
    out[swap] = _min_ids(rng, int(swap.sum()))
    return out


def _poisson_binomial_tail(probabilities: list[float]) -> list[float]:
    """``tail[m] = P[more than m of the independent events happen]``."""
    dist = [1.0]
    for p in probabilities:
        nxt = [0.0] * (len(dist) + 1)
        for j, q in enumerate(dist):
            nxt[j] += q * (1 - p)
            nxt[j + 1] += q * p
        dist = nxt
    return [max(0.0, 1.0 - math.fsum(dist[: m + 1])) for m in range(len(dist))]


# --- known truth -----------------------------------------------------------------------------

NEAR_EDITS = (1, 2, 3)  # 297 shingles, 4k changed: r = (297 − 4k)/(297 + 4k) ≥ 0.92
FAR_EDITS = (16, 24)  # r ≤ 0.645


@pytest.fixture(scope="module")
def corpus():
    """60 bases of 300 words, each with near versions (r ≥ 0.9) and far ones (r ≤ 0.65)."""
    rng = random.Random(20240601)
    vocab = _vocabulary(rng, 5000)
    bases = [[rng.choice(vocab) for _ in range(300)] for _ in range(60)]
    versions = []  # (base index, words, exact r to the base, exact r to its far siblings)
    for b, base in enumerate(bases):
        base_set = shingles(base, 4, "B")
        edited = [_substitute(rng, base, vocab, k) for k in NEAR_EDITS + FAR_EDITS]
        sets = [shingles(words, 4, "B") for words in edited]
        far = sets[len(NEAR_EDITS) :]
        for words, shingle_set in zip(edited, sets, strict=True):
            r = exact_resemblance(shingle_set, base_set)
            siblings = [exact_resemblance(shingle_set, f) for f in far if f is not shingle_set]
            versions.append((b, words, r, siblings))
    rng.shuffle(versions)
    return bases, versions


def test_edits_reach_the_resemblance_they_aim_at(corpus):
    bases, versions = corpus
    for _, _, r, _ in versions:
        assert r >= 0.9 or r <= 0.65
    assert sum(v[2] >= 0.9 for v in versions) == len(bases) * len(NEAR_EDITS)
    base_sets = [shingles(b, 4, "B") for b in bases[:10]]
    assert max(exact_resemblance(a, b) for a in base_sets for b in base_sets if a is not b) < 0.01


def test_clusters_follow_the_resemblance_within_the_binomial_error(corpus):
    from dedup.document import Sketcher

    bases, versions = corpus
    sketcher = Sketcher(SketchParams())
    s = SketchParams().size
    threshold = 0.8
    k = matches_needed(threshold, s)  # 80 of 100
    clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=threshold))

    base_cluster = []
    for i, words in enumerate(bases):
        doc = sketcher.sketch(words)
        base_cluster.append(clusterer.assign(i, doc.sketch, doc.content_hash).cluster_id)
    assert len(set(base_cluster)) == len(bases)  # bases never merge (r ≈ 0)

    # Each version's chance of a mistake under the binomial model of §4.2: a near version
    # misses its base (fewer than k matches), or joins the cluster a far version of the same
    # base may have started (at most the chance of k matches with it, union bound); a far
    # version reaches k matches against its base. Other bases are at r ≈ 0: chance ≈ 0.
    mistakes, chances = 0, []
    for j, (b, words, r, siblings) in enumerate(versions):
        doc = sketcher.sketch(words)
        got = clusterer.assign(len(bases) + j, doc.sketch, doc.content_hash)
        if r >= 0.9:
            strays = math.fsum(p_at_least(k, s, q) for q in siblings)
            chances.append(min(1.0, 1 - p_at_least(k, s, r) + strays))
            mistakes += got.cluster_id != base_cluster[b]
        else:
            chances.append(p_at_least(k, s, r))
            mistakes += got.cluster_id == base_cluster[b]
    tail = _poisson_binomial_tail(chances)
    allowed = next(m for m, p in enumerate(tail) if p < 1e-4)
    assert mistakes <= allowed, (mistakes, allowed, sum(chances))
    assert allowed <= 2  # the check has teeth: at most 2 mistakes out of 300
    stats = clusterer.stats
    assert stats["documents"] == len(bases) + len(versions)
    assert stats["near_duplicate"] >= len(bases) * len(NEAR_EDITS) - mistakes
    # O(rs): only clusters sharing a fingerprint are estimated, far fewer than r per document
    assert stats["comparisons"] <= 3 * stats["documents"]


# --- exact duplicates ------------------------------------------------------------------------


def test_exact_duplicates_are_found_by_hash_and_counted_as_identical():
    a = MinSketch(range(100), s=100, n=300)
    b = MinSketch(range(500, 600), s=100, n=300)
    index = MemoryIndex()
    clusterer = GreedyClusterer(index, DedupParams())
    summary = ClusterSummary()
    for doc_id, (sketch, h) in enumerate([(a, 11), (a, 11), (b, 22), (a, 11), (b, 22)]):
        assignment = clusterer.assign(doc_id, sketch, h)
        summary.add(assignment)
    kinds = [clusterer.stats[k] for k in ("kept", "exact_duplicate", "near_duplicate")]
    assert kinds == [2, 3, 0]
    assert assignment.decision == Decision(
        "exact_duplicate",
        cluster_id=1,
        representative_doc=2,
        duplicate_of=2,
        resemblance=1.0,
        containment=1.0,
        matches=100,
        sample_size=100,
    )
    assert assignment.identical and not assignment.representative
    assert summary.identical_clusters == 2 and summary.identical_documents == 5
    assert summary.mixed_clusters == 0
    assert ClusterSummary.from_clusters(index.clusters()) == summary


def test_exact_duplicate_of_a_near_duplicate_names_the_identical_document():
    base = MinSketch(range(100), s=100, n=100)
    near = MinSketch(range(5, 105), s=100, n=100)
    clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.8))
    clusterer.assign(0, base, 1)
    assert clusterer.assign(1, near, 2).decision.kind == "near_duplicate"
    copy = clusterer.assign(2, near, 2)
    assert copy.decision.kind == "exact_duplicate"
    assert (copy.decision.duplicate_of, copy.decision.representative_doc) == (1, 0)
    assert not copy.identical  # identical to doc 1, not to the first member
    assert clusterer.index.cluster(0).identical is False


def test_a_changed_page_is_not_identical_and_makes_the_cluster_mixed():
    clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.8))
    clusterer.assign(0, MinSketch(range(100), s=100, n=100), 1)
    clusterer.assign(1, MinSketch(range(100), s=100, n=100), 1)
    assert clusterer.index.cluster(0).identical
    near = clusterer.assign(2, MinSketch(range(3, 103), s=100, n=100), 2)
    assert near.decision.kind == "near_duplicate" and not near.identical
    assert clusterer.index.cluster(0) == ClusterInfo(0, first_doc=0, size=3, identical=False)
    assert clusterer.index.find_exact(2) == (2, 0)


# --- choosing among candidates ---------------------------------------------------------------


def test_ties_go_to_the_oldest_cluster_and_otherwise_the_best_wins():
    clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.5))
    clusterer.assign(0, MinSketch(range(100), s=100, n=100), 1)
    clusterer.assign(1, MinSketch(range(100, 200), s=100, n=100), 2)
    halves = [*range(50), *range(100, 150)]
    tie = clusterer.decide(MinSketch(halves, s=100, n=100), 3)
    assert (tie.kind, tie.cluster_id, tie.resemblance, tie.candidates) == (
        "near_duplicate",
        0,
        0.5,
        2,
    )
    lean = [*range(40), *range(100, 160)]  # 40 matches with cluster 0, 60 with cluster 1
    best = clusterer.decide(MinSketch(lean, s=100, n=100), 4)
    assert (best.cluster_id, best.resemblance, best.matches, best.sample_size) == (1, 0.6, 60, 100)


def full_index() -> MemoryIndex:
    """An index told to hold every representative fingerprint: the one pruning works on."""
    index = MemoryIndex()
    index.set_index_need(0.0)
    return index


def test_below_the_threshold_starts_a_new_cluster():
    clusterer = GreedyClusterer(full_index(), DedupParams(threshold=0.9))
    clusterer.assign(0, MinSketch(range(100), s=100, n=100), 1)
    decision = clusterer.decide(MinSketch(range(11, 111), s=100, n=100), 2)  # 89 of 100
    assert decision == Decision("kept", pruned=1)  # 89 shared: 0.89 at most, never 0.9
    assert clusterer.decide(MinSketch(range(10, 110), s=100, n=100), 2).kind == "near_duplicate"


def test_decide_writes_nothing():
    index = MemoryIndex()
    clusterer = GreedyClusterer(index, DedupParams(threshold=0.5, representative="popular"))
    a = MinSketch(range(100), s=100, n=100)
    clusterer.assign(0, a, 1)
    before = (list(index.clusters()), index.postings(5), index.member_fingerprints(0).tolist())
    for sketch, h in [(a, 1), (MinSketch(range(10, 110), s=100, n=100), 2)]:
        clusterer.decide(sketch, h)
    after = (list(index.clusters()), index.postings(5), index.member_fingerprints(0).tolist())
    assert before == after
    assert index.find_exact(2) is None and index.cluster_of(1) is None
    assert clusterer.stats["documents"] == 1


# --- pruning: provably safe, and the same clusters as estimating every cluster ---------------


@st.composite
def _sketch_pair(draw: st.DrawFn) -> tuple[Sketch, Sketch]:
    kind = draw(st.sampled_from(["min", "minmod", "mod", "permutation"]))
    universe = draw(st.integers(1, 120))
    a = draw(st.sets(st.integers(0, universe), min_size=1, max_size=80))
    b = draw(st.sets(st.integers(0, universe), min_size=1, max_size=80))
    s = draw(st.integers(1, 40))
    ids_a, ids_b = (np.array(sorted(x), dtype=np.uint64) * np.uint64(4) for x in (a, b))
    make: Callable[[np.ndarray], Sketch] = {
        "min": lambda ids: MinSketch.from_ids(ids, s),
        "minmod": lambda ids: MinModSketch.from_ids(ids, s, 8),
        "mod": lambda ids: ModSketch.from_ids(ids, 8),
        "permutation": lambda ids: PermutationSketch.from_ids(ids, s, 3),
    }[kind]
    return make(ids_a), make(ids_b)


@settings(max_examples=300, deadline=None)
@given(_sketch_pair(), st.integers(0, 3), st.booleans())
def test_the_bound_is_never_below_the_estimate(pair, hidden, containment):
    a, b = pair
    shared = np.intersect1d(a.values, b.values).size
    # ``hidden`` shared fingerprints lost to the cap are made up for by ``capped``
    bound = resemblance_bound(a, max(0, shared - hidden), hidden, containment=containment)
    if bound is None:
        assert containment or a.values.size == 0 or isinstance(a, PermutationSketch)
        return
    est = estimate(a, b)
    assert est.resemblance <= bound or math.isnan(est.resemblance)
    if containment:
        assert est.containment_a_in_b <= bound or math.isnan(est.containment_a_in_b)


def _reference_clusters(sketches: list[tuple[Sketch, int]], params: DedupParams) -> list[int]:
    """Greedy clustering by estimating every cluster, O(r²s): what the index must agree with."""
    reps: list[Sketch] = []
    exact: dict[int, int] = {}
    out = []
    for sketch, h in sketches:
        if h in exact:
            out.append(exact[h])
            continue
        ests = [estimate(sketch, rep) for rep in reps]
        r_best = [
            (e.resemblance, -c) for c, e in enumerate(ests) if e.resemblance >= params.threshold
        ]
        c_best = [
            (e.containment_a_in_b, -c)
            for c, e in enumerate(ests)
            if params.containment is not None and e.containment_a_in_b >= params.containment
        ]
        if r_best or c_best:
            cluster = -max(r_best or c_best)[1]
        else:
            cluster = len(reps)
            reps.append(sketch)
        exact.setdefault(h, cluster)
        out.append(cluster)
    return out


@pytest.mark.parametrize(
    ("kind", "containment"),
    [
        ("min", None),
        ("minmod", None),
        ("mod", None),
        ("mod", 0.85),
        ("tiered", 0.85),
        ("permutation", None),
        ("min", 0.85),
    ],
)
@pytest.mark.parametrize("part", [False, True], ids=["full-index", "part-index"])
def test_index_and_pruning_give_the_clusters_of_comparing_all(kind, containment, part):
    rng = np.random.default_rng(7)
    topics = [_min_ids(rng, int(rng.integers(150, 600))) for _ in range(25)]
    docs: list[tuple[Sketch, int]] = []
    for i in range(200):
        t = int(rng.integers(len(topics)))
        ids = _perturb(rng, topics[t], float(rng.uniform(0.0, 0.15)))
        if rng.random() < 0.3:  # a part of the topic: containment cases
            start = int(rng.integers(0, ids.size // 2))
            ids = ids[start : start + ids.size // 3]
        make: Callable[[np.ndarray], Sketch] = {
            "min": lambda x: MinSketch.from_ids(x, 64),
            "minmod": lambda x: MinModSketch.from_ids(x, 32, 4),
            "mod": lambda x: ModSketch.from_ids(x, 8),
            "tiered": TieredSketch.from_ids,
            "permutation": lambda x: PermutationSketch.from_ids(x, 32, 5),
        }[kind]
        docs.append((make(ids), i))
        if rng.random() < 0.1:
            docs.append(docs[-1])  # an exact copy
    params = DedupParams(threshold=0.8, containment=containment)
    index = MemoryIndex() if part else full_index()
    assignments = cluster_documents(docs, replace(params, cap=1000), index)
    got = [a.cluster_id for a in assignments]
    assert got == _reference_clusters(docs, params)
    kinds = Counter(a.decision.kind for a in assignments)
    # the corpus exercises every outcome, so agreement means something
    assert kinds["kept"] >= 25 and kinds["near_duplicate"] >= 20 and kinds["exact_duplicate"] > 0
    assert (kinds["contained"] >= 20) == (containment is not None)
    pruned = sum(a.decision.pruned for a in assignments)
    prunable = kind in ("min", "minmod", "mod", "permutation") and (
        containment is None or kind == "mod"
    )
    # the containment rule needs every fingerprint indexed, so it keeps a full index
    in_part = part and containment is None and kind != "tiered"
    assert (pruned > 0) == prunable
    # a part index holds about a fifth of each representative's fingerprints
    postings = sum(len(v) for v in index._postings.values())
    held = sum(np.unique(index.representative(c).values).size for c in range(len(index)))
    assert (postings < held / 3) == in_part


# --- the cap -----------------------------------------------------------------------------------


def _boilerplate_sketches(count: int) -> list[MinSketch]:
    """Sketches sharing fingerprint 0 (a boilerplate shingle) and nothing else."""
    return [
        MinSketch([0, *range(1000 * (i + 1), 1000 * (i + 1) + 99)], s=100, n=1000)
        for i in range(count)
    ]


def test_the_cap_bounds_the_work_per_document_and_is_counted():
    cap, count = 10, 100
    # containment on with MIN_s: nothing is pruned, so every candidate read is estimated
    clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.8, containment=0.9, cap=cap))
    decisions = [
        clusterer.assign(i, sketch, i).decision
        for i, sketch in enumerate(_boilerplate_sketches(count))
    ]
    assert all(d.kind == "kept" for d in decisions)
    assert [d.candidates for d in decisions] == [min(i, cap) for i in range(count)]
    assert [d.capped for d in decisions] == [int(i > cap) for i in range(count)]
    assert clusterer.stats["capped"] == clusterer.stats["capped_documents"] == count - cap - 1
    assert clusterer.stats["comparisons"] == sum(min(i, cap) for i in range(count))
    assert len(clusterer.index.candidates(np.array([0], dtype=np.uint64), cap).shared) == cap


def test_a_near_duplicate_beyond_the_cap_is_still_found_by_its_other_fingerprints():
    cap = 10
    clusterer = GreedyClusterer(full_index(), DedupParams(threshold=0.8, cap=cap))
    sketches = _boilerplate_sketches(50)
    for i, sketch in enumerate(sketches):
        clusterer.assign(i, sketch, i)
    target = sketches[40].values.tolist()
    near = MinSketch(sorted(target[:95] + [10**9 + j for j in range(5)]), s=100, n=1000)
    decision = clusterer.decide(near, 999)
    assert (decision.kind, decision.cluster_id, decision.capped) == ("near_duplicate", 40, 1)
    # without pruning it would have estimated the cap's 10 boilerplate clusters too
    assert decision.candidates == 1 and decision.pruned == cap


# --- containment -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_and_part():
    rng = random.Random(5)
    vocab = _vocabulary(rng, 5000)
    long = [rng.choice(vocab) for _ in range(1000)]
    return long, long[200:400]


@pytest.mark.parametrize("kind", ["tiered", "mod"])
def test_a_contiguous_part_is_contained_only_under_the_containment_rule(long_and_part, kind):
    from dedup.document import Sketcher

    long, part = long_and_part
    sketcher = Sketcher(SketchParams(kind=kind))
    docs = [sketcher.sketch(t) for t in (long, part)]
    pairs = [(d.sketch, d.content_hash) for d in docs]
    on = cluster_documents(pairs, DedupParams(threshold=0.8, containment=0.9))
    off = cluster_documents(pairs, DedupParams(threshold=0.8))
    # A ⊂ B: every sampled id of the part is in the long document's sample at the same tier
    assert (on[1].decision.kind, on[1].cluster_id, on[1].decision.containment) == (
        "contained",
        0,
        1.0,
    )
    assert (on[1].decision.resemblance or 0.0) < 0.5
    assert (off[1].decision.kind, off[1].cluster_id) == ("kept", 1)


def test_a_contiguous_part_is_contained_under_min_s_with_a_derived_containment(long_and_part):
    from dedup.document import Sketcher
    from dedup.estimators import containment_from_resemblance

    long, part = long_and_part
    sketcher = Sketcher(SketchParams(kind="min"))
    docs = [sketcher.sketch(t) for t in (long, part)]
    n_long, n_part = docs[0].shingles, docs[1].shingles
    r = n_part / n_long  # the exact resemblance of a part
    level = 0.3
    s = SketchParams().size
    # the fewest matches whose derived containment reaches the level, and the chance of fewer
    k = next(
        m for m in range(s + 1) if containment_from_resemblance(m / s, n_part, n_long) >= level
    )
    assert 1 - p_at_least(k, s, r) < 1e-3
    pairs = [(d.sketch, d.content_hash) for d in docs]
    on = cluster_documents(pairs, DedupParams(threshold=0.8, containment=level))
    assert (on[1].decision.kind, on[1].cluster_id) == ("contained", 0)
    off = cluster_documents(pairs, DedupParams(threshold=0.8))
    assert off[1].decision.kind == "kept"


# --- the "popular" representative ------------------------------------------------------------


def test_the_popular_representative_is_the_s_most_frequent_fingerprints():
    rng = random.Random(3)
    s = 5
    clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.0, representative="popular"))
    members: list[list[int]] = []
    for doc_id in range(30):
        values = sorted(rng.sample(range(10, 18), s))  # any two 5-subsets of 8 values meet
        members.append(values)
        a = clusterer.assign(doc_id, MinSketch(values, s=s, n=40), doc_id)
        assert a.cluster_id == 0
        counts = Counter(v for m in members for v in m)
        expected = sorted(sorted(counts, key=lambda v: (-counts[v], v))[:s])
        rep = clusterer.index.representative(0)
        assert rep.values.tolist() == expected and rep.n == 40
        index = clusterer.index
        assert isinstance(index, MemoryIndex)
        assert all(index.postings(v) == ([0] if v in expected else []) for v in range(10, 18))


@given(st.lists(st.sets(st.integers(0, 30), min_size=1, max_size=6), min_size=1, max_size=12))
def test_popular_sketch_matches_a_count_by_hand(members):
    fps = np.array([v for m in members for v in sorted(m)], dtype=np.uint64)
    counts = Counter(fps.tolist())
    ranked = sorted(counts, key=lambda v: (-counts[v], v))
    s = 6
    got = popular_sketch(fps, MinSketch(sorted(members[0]), s=s, n=len(members[0])), len(members))
    assert got.values.tolist() == sorted(ranked[:s])
    mod = popular_sketch(fps, ModSketch([], m=1, n=50), len(members))
    t = math.floor(fps.size / len(members) + 0.5)
    assert mod.values.tolist() == sorted(ranked[:t])


@pytest.mark.parametrize(
    "sketch",
    [
        TieredSketch.from_ids(np.arange(10, dtype=np.uint64)),
        PermutationSketch.from_ids(np.arange(10, dtype=np.uint64), 4, 1),
    ],
)
def test_popular_needs_a_kind_whose_values_can_be_pooled(sketch):
    index = MemoryIndex()
    clusterer = GreedyClusterer(index, DedupParams(representative="popular"))
    with pytest.raises(ValueError, match="'popular' representative"):
        clusterer.assign(0, sketch, 1)
    assert len(index) == 0  # refused before any write


# --- construction and helpers ----------------------------------------------------------------


def test_bad_arguments_are_reported_by_name():
    with pytest.raises(ValueError, match="dedup.cap must be a positive integer"):
        DedupParams(cap=0)
    with pytest.raises(ValueError, match="decision kind"):
        Decision("dropped")
    with pytest.raises(ValueError, match="cluster_id None exactly when kept"):
        Decision("near_duplicate")
    index = MemoryIndex()
    index.new_cluster(1, MinSketch([1], s=1, n=1))
    with pytest.raises(ValueError, match="document 1 is already in cluster 0"):
        index.add_member(0, 1, True)
    with pytest.raises(KeyError):
        index.cluster(5)


def test_memory_index_is_a_cluster_index_and_cluster_documents_uses_it():
    index: ClusterIndex = MemoryIndex()
    sketches = [(MinSketch(range(i, i + 100), s=100, n=100), i) for i in (0, 2, 500)]
    out = cluster_documents(sketches, DedupParams(), index, first_doc_id=10)
    assert [(a.doc_id, a.cluster_id, a.representative) for a in out] == [
        (10, 0, True),
        (11, 0, False),
        (12, 1, True),
    ]
    assert isinstance(out[0], Assignment)
    assert index.cluster_of(11) == 0 and index.find_exact(500) == (12, 1)


@given(
    st.dictionaries(st.integers(0, 2**40), st.integers(1, 120), max_size=40),
    st.integers(0, 5),
    st.integers(1, 120),
    st.floats(0.0, 1.0),
)
def test_vectorised_pruning_keeps_exactly_what_the_scalar_bound_keeps(shared, capped, d, need):
    from dedup.cluster import _survivors

    kept = [c for c in sorted(shared) if min(shared[c] + capped, d) / d >= need]
    assert _survivors(shared, capped, d, need) == (kept, len(shared) - len(kept))
    assert _survivors(shared, capped, None, need) == (sorted(shared), 0)


# --- the part of each representative that is indexed -------------------------------------------


def test_indexed_count_is_the_pigeonhole_bound_plus_the_slack():
    for size in range(1, 300):
        for need in (0.5, 0.8, 0.85, 0.9, 0.95, 1.0):
            unshared = size - math.ceil(need * size - 1e-9)
            assert indexed_count(size, need) == min(size, unshared + SLACK)


@settings(max_examples=400)
@given(
    st.integers(1, 120),  # |A|
    st.integers(1, 120),  # |B|
    st.integers(0, 120),  # shared
    st.sampled_from([0.5, 0.7, 0.8, 0.85, 0.9, 0.95]),
    st.sampled_from(["min", "mod"]),
)
def test_a_representative_a_document_can_join_shows_it_enough_indexed_hits(a, b, k, need, kind):
    """The worst case: B's indexed part is its unshared fingerprints first. Whenever the real
    estimate reaches ``need``, the document still meets ``hits_needed`` of them."""
    k = min(k, a, b)
    shared = np.arange(k, dtype=np.uint64) * 2 + 1
    only_a = np.arange(a - k, dtype=np.uint64) * 2 + 10_000
    only_b = np.arange(b - k, dtype=np.uint64) * 2 + 20_001
    make = {"min": lambda x: MinSketch(np.sort(x), s=120, n=x.size),
            "mod": lambda x: ModSketch(np.sort(x), m=1, n=x.size)}[kind]
    sa, sb = make(np.concatenate([shared, only_a])), make(np.concatenate([only_b, shared]))
    if estimate(sa, sb).resemblance < need:
        return
    indexed = np.concatenate([only_b, shared])[: indexed_count(b, need)]  # unshared first
    hits = np.intersect1d(indexed, sa.values).size
    assert hits >= hits_needed(a, need)


def test_the_rarest_part_is_indexed_so_boilerplate_makes_no_candidates():
    """Pages sharing 30 boilerplate fingerprints and nothing else: a full index makes every
    earlier page a candidate (pruned, at a lookup each); the part index learns the boilerplate
    is common and indexes each page's own fingerprints, so a new page finds no one."""
    rng = np.random.default_rng(3)
    boiler = rng.integers(1, 2**40, size=30, dtype=np.uint64)

    def sketch_of(values: np.ndarray) -> MinSketch:
        return MinSketch(np.unique(values), s=100, n=1000)

    pages = [sketch_of(np.concatenate([boiler, rng.integers(2**41, 2**62, size=70, dtype=np.uint64)]))
             for _ in range(60)]
    part, full = MemoryIndex(), full_index()
    for index in (part, full):
        clusterer = GreedyClusterer(index, DedupParams(threshold=0.8))
        for i, page in enumerate(pages):
            clusterer.assign(i, page, i)
    late = [GreedyClusterer(ix, DedupParams(threshold=0.8)).decide(pages[-1], 59) for ix in
            (part, full)]
    assert [d.kind for d in late] == ["exact_duplicate", "exact_duplicate"]
    fresh = sketch_of(np.concatenate([boiler, np.arange(70, dtype=np.uint64) + 2**63]))
    found_part = part.candidates(fresh.values, cap=1000).shared
    found_full = full.candidates(fresh.values, cap=1000).shared
    assert len(found_full) == 60
    assert len(found_part) <= 3  # only the first pages, before the boilerplate was known
    # and a near copy of a late page is still found through its own fingerprints
    own = np.setdiff1d(pages[50].values, boiler)
    copy = sketch_of(np.concatenate([boiler, own[:65], np.arange(5, dtype=np.uint64) + 2**63]))
    d = GreedyClusterer(part, DedupParams(threshold=0.8)).decide(copy, -2)
    assert (d.kind, d.cluster_id) == ("near_duplicate", 50)


@pytest.mark.parametrize(
    "params, rule",
    [
        (DedupParams(threshold=0.7), "threshold 0.7"),
        (DedupParams(threshold=0.9, containment=0.8), "the containment rule"),
        (DedupParams(threshold=0.9, representative="popular"), "the 'popular' representative"),
    ],
)
def test_a_part_index_refuses_a_rule_it_cannot_serve(params, rule):
    index = MemoryIndex()
    GreedyClusterer(index, DedupParams(threshold=0.8)).assign(0, MinSketch(range(100), 100, 100), 1)
    assert index.index_need() == 0.8
    with pytest.raises(ValueError, match=f"resemblance 0.8 or more; {rule} needs more of it"):
        GreedyClusterer(index, params)
    # a higher threshold is served by the same part (it finds more than it needs)
    assert GreedyClusterer(index, DedupParams(threshold=0.95)).index_need == 0.8
