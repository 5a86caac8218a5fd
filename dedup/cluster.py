"""Broder's greedy clustering in O(rs) (paper §4.4), over any :class:`~dedup.index.ClusterIndex`.

"Keep a set of current clusters (initially empty) and process the sketches in turn. For each
cluster keep a representative sketch. If a new sketch sufficiently resembles a current cluster
then add the sketch to it (and possibly recompute the representative); otherwise start a new
cluster." The index maps every fingerprint of every representative to its clusters, so a new
sketch is only compared with the clusters it shares a fingerprint with: s lookups and a few
O(s) estimates per document, O(rs) for r documents, instead of O(r²s) for all pairs.

A crawler must decide before it stores and store before it records, so the work is split:

* :meth:`GreedyClusterer.decide` reads the index and returns a :class:`Decision`;
* :meth:`GreedyClusterer.apply` writes that decision and returns an :class:`Assignment`;
* :meth:`GreedyClusterer.assign` does both.

``apply`` is itself two steps, :meth:`~GreedyClusterer.write` (the index's writes only) and
:meth:`~GreedyClusterer.applied` (the clusterer's own counts), for an index that commits each
decision in an optimistic transaction and must be able to decide and write again when the
commit fails (``storage.redis_index``).

>>> from dedup.memory_index import MemoryIndex
>>> from dedup.params import DedupParams
>>> from dedup.sketches import MinSketch
>>> clusterer = GreedyClusterer(MemoryIndex(), DedupParams(threshold=0.5))
>>> a = MinSketch(range(0, 100), s=100, n=1000)
>>> b = MinSketch(range(10, 110), s=100, n=1000)  # shares 90 of its 100 smallest ids with a
>>> clusterer.assign(0, a, content_hash=1).decision.kind
'kept'
>>> d = clusterer.assign(1, b, content_hash=2).decision
>>> d.kind, d.cluster_id, d.representative_doc, d.resemblance
('near_duplicate', 0, 0, 0.9)
>>> clusterer.assign(2, a, content_hash=1).decision.kind
'exact_duplicate'

**Which candidates are skipped.** A candidate that shares ``k`` of the new sketch's fingerprints
with its representative is only estimated when the estimate could reach the threshold
(:func:`resemblance_bound`). The bound is provable for the kinds whose estimate is a count of
shared sampled ids over a denominator no smaller than the new sketch's own sample:

* MIN_s and MIN_s(MOD_m): the estimate is ``matches / s'`` where ``matches`` counts the shared ids
  among the first ``s'`` of the merged, de-duplicated sketches, so ``matches ≤ |M(A) ∩ M(B)|``,
  and ``s' = min(s, |M(A) ∪ M(B)|) ≥ |M(A)|``. Hence ``r̂ ≤ |M(A) ∩ M(B)| / |M(A)|``. With a full
  sketch this is the familiar ``shared / s``; with a short document (fewer than s shingles) the
  denominator is its own sample size, not s — the "merge rule" case, where the union itself is
  shorter than s and so ``shared < threshold·s`` can still reach the threshold.
* MOD_m: ``r̂ = |L(A) ∩ L(B)| / |L(A) ∪ L(B)|`` and ``ĉ(A in B) = |L(A) ∩ L(B)| / |L(A)|``, both
  at most ``|L(A) ∩ L(B)| / |L(A)|``; so MOD_m is also pruned under the containment rule.
* k permutations: ``matches / k``; a matching entry holds a value the representative holds, so
  while the card has no repeated value ``matches ≤ |card ∩ representative|``.

``|M(A) ∩ M(B)|`` is ``shared + capped`` at most: ``shared`` may miss a cluster's fingerprint
only when it was one of the ``capped`` boilerplate fingerprints whose cluster list was cut.
The bound assumes one index holds sketches of one kind and one ``s`` (the store enforces it).
Not pruned: size-tiered sketches (they are compared at the longer document's tier, which can
sample fewer ids than the new sketch holds), and MIN_s or permutation sketches under the
containment rule (their containment comes from the resemblance and the representative's size,
and is not bounded by ``shared`` alone).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dedup.curves import matches_needed
from dedup.estimators import Estimate, estimate
from dedup.frequency import FingerprintFrequency
from dedup.index import ClusterIndex
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams
from dedup.sketches import MinModSketch, MinSketch, ModSketch, PermutationSketch, Sketch

__all__ = [
    "DROPPED",
    "KINDS",
    "Assignment",
    "Decision",
    "Withdrawal",
    "GreedyClusterer",
    "bound_denominator",
    "cluster_documents",
    "hits_needed",
    "indexed_count",
    "popular_sketch",
    "resemblance_bound",
]

#: the decisions that drop a document: it duplicates, or is contained in, a kept one
DROPPED = ("exact_duplicate", "near_duplicate", "contained")
#: what can happen to a document, in the order they are tried: dropped, else kept
KINDS = (*DROPPED, "kept")

_STATS = (
    "documents",
    "kept",
    "exact_duplicate",
    "near_duplicate",
    "contained",
    # clusters estimated against / skipped by the bound / found
    "comparisons",
    "pruned",
    # fingerprints whose cluster list was cut at the cap / documents that met one
    "capped",
    "capped_documents",
)


@dataclass(frozen=True)
class Decision:
    """What :meth:`GreedyClusterer.decide` found for one document.

    ``resemblance``, ``containment`` (of the new document in the representative), ``matches``
    and ``sample_size`` are the :class:`~dedup.estimators.Estimate` against the chosen cluster's
    representative sketch; an exact duplicate is estimated against it too, as a record of how
    far the representative is from it. ``candidates`` is the number of clusters estimated in
    the search for a near duplicate (0 for an exact duplicate: its hash found it), ``pruned``
    the number skipped by :func:`resemblance_bound`, ``capped`` the number of fingerprints whose
    cluster list hit the cap.
    """

    kind: str
    cluster_id: int | None = None
    #: the chosen cluster's first member (its representative with the "first" rule)
    representative_doc: int | None = None
    #: the document this one duplicates: the identical one for an exact duplicate, else the
    #: representative's document
    duplicate_of: int | None = None
    resemblance: float | None = None
    containment: float | None = None
    matches: int | None = None
    sample_size: int | None = None
    candidates: int = 0
    pruned: int = 0
    capped: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"decision kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if (self.kind == "kept") != (self.cluster_id is None):
            raise ValueError(f"a {self.kind!r} decision needs cluster_id None exactly when kept")


@dataclass(frozen=True)
class Withdrawal:
    """What :meth:`GreedyClusterer.withdraw` did to a document's cluster."""

    cluster_id: int
    #: True when the document was the representative: the cluster is an orphaned shell now
    representative: bool
    #: the cluster's other members, in id order, to be decided again (empty for a member)
    orphans: tuple[int, ...]


@dataclass(frozen=True)
class Assignment:
    """Where :meth:`GreedyClusterer.apply` put a document."""

    doc_id: int
    cluster_id: int
    decision: Decision
    #: True for the document that started the cluster
    representative: bool
    #: True when its canonical stream equals the cluster's first member's (so for the first too)
    identical: bool


class GreedyClusterer:
    """Greedy clustering over ``index`` with the rule in ``params``.

    ``params.cap`` bounds the clusters read per fingerprint (see :meth:`ClusterIndex.candidates`): a
    fingerprint in the representatives of more than ``cap`` clusters — boilerplate — costs
    ``cap`` lookups, so a document costs at most ``s·cap`` whatever the corpus.
    """

    def __init__(self, index: ClusterIndex, params: DedupParams) -> None:
        if not isinstance(params, DedupParams):
            raise ValueError(f"params must be a DedupParams; got {type(params).__name__}")
        self.index = index
        self.params = params
        self.cap = params.cap
        #: counters over applied documents: how often each outcome, and how often the cap bit
        self.stats: dict[str, int] = dict.fromkeys(_STATS, 0)
        #: the estimate down to which the index finds every reachable cluster (0.0: all of
        #: every representative is indexed); an index that has one keeps it
        stored = index.index_need()
        self.index_need = self._index_need(stored)
        self._need_recorded = stored is not None
        #: how common each fingerprint is, to index the rarest part of a representative
        self._frequency = FingerprintFrequency() if self.index_need > 0 else None

    def _index_need(self, stored: float | None) -> float:
        """Part of each representative suffices when every estimate used is bounded by the
        shared fraction of the representative (see :func:`indexed_count`): not under the
        containment rule (a small page is contained in a large representative it shares few of
        the fingerprints of), nor with the "popular" representative (re-indexed as it moves).
        """
        p = self.params
        wanted = 0.0 if p.containment is not None or p.representative == "popular" else p.threshold
        if stored is None:
            return float(wanted)
        if wanted < stored:
            rule = (
                f"threshold {p.threshold:g}"
                if wanted
                else "the containment rule" if p.containment is not None
                else "the 'popular' representative"
            )
            raise ValueError(
                f"this index holds the part of each representative that finds clusters at "
                f"resemblance {stored:g} or more; {rule} needs more of it: cluster into a new "
                "store (or re-cluster this one with neardup recluster --store)"
            )
        return float(stored)

    # --- reading ----------------------------------------------------------------------------

    def decide(self, sketch: Sketch, content_hash: int) -> Decision:
        """Where the document would go; reads the index and writes nothing.

        Exact duplicate (same content hash) first; else the candidate with the best estimated
        resemblance at or above the threshold (ties: the lowest, oldest, cluster id); else, with
        the containment rule on, the best containment of the document in a representative at or
        above it; else a new cluster. An estimate that is ``nan`` (no evidence) never qualifies.
        """
        self._check_sketch(sketch)
        found = self.index.find_exact(content_hash)
        if found is not None:
            doc, cluster_id = found
            est = estimate(sketch, self.index.representative(cluster_id))
            return self._joined("exact_duplicate", cluster_id, est, doc, 0, 0, 0)

        cands = self.index.candidates(sketch.distinct(), self.cap)
        need = self._needed_bound()
        denominator = bound_denominator(sketch, containment=self.params.containment is not None)
        best_r: tuple[float, int, Estimate] | None = None
        best_c: tuple[float, int, Estimate] | None = None
        if self.index_need > 0:
            # part of each representative is indexed: a cluster that can reach the threshold
            # shows at least hits_needed of its indexed fingerprints (see indexed_count)
            least = None if denominator is None else hits_needed(denominator, self.index_need)
            survivors, pruned = _hit_survivors(cands.shared, cands.capped, least)
        else:
            survivors, pruned = _survivors(cands.shared, cands.capped, denominator, need)
        compared = 0
        for cluster_id in survivors:
            est = estimate(sketch, self.index.representative(cluster_id))
            compared += 1
            r = est.resemblance
            if r >= self.params.threshold and (best_r is None or r > best_r[0]):
                best_r = (r, cluster_id, est)
            if self.params.containment is not None:
                c = est.containment_a_in_b
                if c >= self.params.containment and (best_c is None or c > best_c[0]):
                    best_c = (c, cluster_id, est)
        if best_r is not None:
            _, cluster_id, est = best_r
            return self._joined(
                "near_duplicate", cluster_id, est, None, compared, pruned, cands.capped
            )
        if best_c is not None:
            _, cluster_id, est = best_c
            return self._joined("contained", cluster_id, est, None, compared, pruned, cands.capped)
        return Decision("kept", candidates=compared, pruned=pruned, capped=cands.capped)

    def _joined(
        self,
        kind: str,
        cluster_id: int,
        est: Estimate,
        duplicate_of: int | None,
        compared: int,
        pruned: int,
        capped: int,
    ) -> Decision:
        first = self.index.cluster(cluster_id).first_doc
        return Decision(
            kind,
            cluster_id=cluster_id,
            representative_doc=first,
            duplicate_of=first if duplicate_of is None else duplicate_of,
            resemblance=est.resemblance,
            containment=est.containment_a_in_b,
            matches=est.matches,
            sample_size=est.sample_size,
            candidates=compared,
            pruned=pruned,
            capped=capped,
        )

    def _needed_bound(self) -> float:
        """The smallest estimate that could make a candidate worth estimating."""
        if self.params.containment is None:
            return float(self.params.threshold)
        return float(min(self.params.threshold, self.params.containment))

    # --- writing ----------------------------------------------------------------------------

    def apply(
        self,
        doc_id: int,
        sketch: Sketch,
        content_hash: int,
        decision: Decision,
        *,
        take_over: int | None = None,
    ) -> Assignment:
        """Record ``decision`` for ``doc_id``: the index writes, then the counters.

        A new cluster gets the document as first member and representative; a member is added
        as identical when its content hash is the first member's (the index's exact table holds
        the first document of each hash); a content hash not seen before is remembered. With
        the "popular" rule the member's sketch is recorded and the representative recomputed
        (:func:`popular_sketch`), except when a cluster of identical documents gets one more
        copy, which cannot change the ranking. A kept document given ``take_over``, an orphaned
        cluster (:meth:`withdraw`), becomes its representative instead of starting a cluster,
        so the cluster keeps its id (:mod:`dedup.changes`).

        It is :meth:`write` then :meth:`applied`; an index whose writes can fail to commit
        (one optimistic transaction per decision, as ``storage.redis_index`` makes) calls the
        two itself, so that a failed commit leaves the clusterer as it was.
        """
        assignment = self.write(doc_id, sketch, content_hash, decision, take_over=take_over)
        self.applied(sketch, decision)
        return assignment

    def write(
        self,
        doc_id: int,
        sketch: Sketch,
        content_hash: int,
        decision: Decision,
        *,
        take_over: int | None = None,
    ) -> Assignment:
        """The index writes of :meth:`apply`, and nothing else: the clusterer's own state (the
        fingerprint frequencies, the counters, whether the index need is recorded) stays as it
        was, so :meth:`decide` and :meth:`write` can be run again after a commit that failed.

        The rarest part of a new representative is chosen before the page's own fingerprints
        are counted, which chooses the same part as counting first: counting adds one to every
        counter of the page's fingerprints, so each of their estimates grows by one and their
        order stays as it was (:meth:`~dedup.frequency.FingerprintFrequency.add`).
        """
        self._check_sketch(sketch)
        popular = self.params.representative == "popular"
        if decision.kind == "kept":
            indexed = None
            if self._frequency is not None:
                indexed = self._indexed_part(sketch, sketch.distinct())
            if not self._need_recorded:
                self.index.set_index_need(self.index_need)
            if take_over is None:
                cluster_id = self.index.new_cluster(doc_id, sketch, indexed)
            else:
                cluster_id = take_over
                self.index.take_over(cluster_id, doc_id, sketch, indexed)
            # the hash can be known already only if a copy was applied after this decision:
            # add_exact keeps the first document of a hash, the one exact duplicates point to
            self.index.add_exact(content_hash, doc_id, cluster_id)
            if popular:
                self.index.record_member_sketch(cluster_id, sketch)
            return Assignment(doc_id, cluster_id, decision, True, True)
        assert decision.cluster_id is not None  # Decision enforces it
        cluster_id = decision.cluster_id
        info = self.index.cluster(cluster_id)
        found = self.index.find_exact(content_hash)
        if found is None:
            self.index.add_exact(content_hash, doc_id, cluster_id)
            identical = False
        else:
            identical = found[0] == info.first_doc
        # An exact duplicate of a later member is not identical to the first, but the
        # cluster is already mixed by that member, so the flag the index keeps is the same.
        self.index.add_member(cluster_id, doc_id, identical)
        if popular:
            self.index.record_member_sketch(cluster_id, sketch)
            if not (info.identical and identical):
                members = self.index.member_fingerprints(cluster_id)
                current = self.index.representative(cluster_id)
                rep = popular_sketch(members, current, info.size + 1)
                self.index.set_representative(cluster_id, rep)
        return Assignment(doc_id, cluster_id, decision, False, identical)

    def applied(self, sketch: Sketch, decision: Decision) -> None:
        """The clusterer's own state once the index holds :meth:`write`'s writes: the page's
        fingerprints counted (for choosing later representatives' rarest part), the need
        known to be recorded, the decision counted in :attr:`stats`."""
        if self._frequency is not None:
            self._frequency.add(sketch.distinct())
        if decision.kind == "kept":
            self._need_recorded = True
        self._count(decision)

    def _indexed_part(self, sketch: Sketch, distinct: np.ndarray) -> np.ndarray | None:
        """The rarest :func:`indexed_count` fingerprints of a new representative, or None for
        all of them (a kind whose estimates the representative's part does not bound)."""
        assert self._frequency is not None
        if bound_denominator(sketch) is None:  # size-tiered, or a card with repeated values
            return None
        count = indexed_count(int(distinct.size), self.index_need)
        if count >= distinct.size:
            return None
        return self._frequency.rarest(distinct, count)

    def withdraw(self, doc_id: int, content_hash: int | None) -> Withdrawal | None:
        """Take a document out of the index: its content changed, or its page is gone.

        A member leaves its cluster; the representative takes every member with it and leaves
        the cluster an orphaned shell, whose other members the caller decides again
        (:meth:`release` each first), and which a kept document may take over
        (:meth:`apply` with ``take_over``) or :meth:`discard_orphan` removes. None for a
        document in no cluster (a skipped page). The index then answers as if the document had
        never been applied, but for the cluster ids it used.
        """
        cluster_id = self.index.cluster_of(doc_id)
        if cluster_id is None:
            return None
        info = self.index.cluster(cluster_id)
        identical = True
        if content_hash is not None:
            found = self.index.find_exact(content_hash)
            identical = found is not None and found[0] == info.first_doc
            self.index.remove_exact(content_hash, doc_id)
        if doc_id == info.first_doc:
            orphans = self.index.remove_representative(cluster_id)
            return Withdrawal(cluster_id, True, tuple(orphans))
        self.index.remove_member(cluster_id, doc_id, identical)
        return Withdrawal(cluster_id, False, ())

    def release(self, doc_id: int, content_hash: int | None) -> None:
        """An orphan of :meth:`withdraw`, about to be decided again, is no longer the document
        its content hash points at."""
        if content_hash is not None:
            self.index.remove_exact(content_hash, doc_id)

    def discard_orphan(self, cluster_id: int) -> None:
        """Remove an orphaned cluster that no kept document took over (nothing if one did)."""
        if self.index.cluster(cluster_id).orphaned:
            self.index.discard_orphan(cluster_id)

    def assign(self, doc_id: int, sketch: Sketch, content_hash: int) -> Assignment:
        """:meth:`decide` then :meth:`apply`, for callers with nothing to do in between."""
        return self.apply(doc_id, sketch, content_hash, self.decide(sketch, content_hash))

    def _count(self, decision: Decision) -> None:
        s = self.stats
        s["documents"] += 1
        s[decision.kind] += 1
        s["comparisons"] += decision.candidates
        s["pruned"] += decision.pruned
        s["capped"] += decision.capped
        s["capped_documents"] += decision.capped > 0

    def _check_sketch(self, sketch: Sketch) -> None:
        if self.params.representative == "popular" and not isinstance(
            sketch, (MinSketch, MinModSketch, ModSketch)
        ):
            raise ValueError(
                f"the 'popular' representative needs 'min', 'minmod' or 'mod' sketches; "
                f"a {sketch.kind!r} sketch has no s most popular fingerprints (see popular_sketch)"
            )


def resemblance_bound(
    sketch: Sketch, shared: int, capped: int = 0, *, containment: bool = False
) -> float | None:
    """An upper bound on the estimate against a representative that shares ``shared`` values.

    ``capped`` is the number of the sketch's fingerprints whose cluster lists were cut at the
    cap (each may hide one more shared value). With ``containment`` the bound must also hold
    for the containment estimate. ``None`` when no bound is proven (see the module docstring).

    >>> s = MinSketch(range(100), s=100, n=500)
    >>> resemblance_bound(s, 79), resemblance_bound(s, 79, capped=1)
    (0.79, 0.8)
    >>> resemblance_bound(MinSketch(range(10), s=100, n=10), 9)  # a short document: 9 of 10
    0.9
    """
    size = bound_denominator(sketch, containment=containment)
    if size is None:
        return None
    return min(shared + capped, size) / size


#: fingerprints indexed beyond the pigeonhole bound (see indexed_count and hits_needed)
SLACK = 3


def indexed_count(size: int, need: float) -> int:
    """How many of a representative's ``size`` distinct fingerprints the index holds.

    A document whose estimate against representative B reaches ``need`` shares at least
    ``need·|B|`` of B's sampled fingerprints: every estimate here is a count of shared values
    over a denominator no smaller than B's own sample (MIN_s and MIN_s(MOD_m): ``s' =
    min(s, |M(A) ∪ M(B)|) ≥ |M(B)|``; MOD_m resemblance: ``|L(A) ∪ L(B)| ≥ |L(B)|``; k
    permutations with distinct values: k). So at most ``u = |B| − ⌈need·|B|⌉`` of B's
    fingerprints are unshared (⌈need·|B|⌉ as :func:`~dedup.curves.matches_needed` rounds it),
    and *any* ``u + 1`` of them include a shared one, which the document's lookup of all its
    own fingerprints finds (the pigeonhole behind the prefix filter of similarity joins). Indexing ``u + SLACK`` makes such a document meet at least
    ``SLACK`` of them (:func:`hits_needed`), so candidates met through one or two common
    fingerprints are skipped unread. At threshold 0.8 that is 23 of MIN_100's 100
    postings: the index is under a quarter of the size, and so is the cost of writing it.
    Any part will do, so :class:`GreedyClusterer` indexes the rarest.

    >>> indexed_count(100, 0.8), indexed_count(100, 0.9), indexed_count(100, 0.0)
    (23, 13, 100)
    >>> indexed_count(3, 0.8), indexed_count(0, 0.8)  # a short page: all of it
    (3, 0)
    """
    if need <= 0 or size == 0:
        return size
    return min(size, size - matches_needed(need, size) + SLACK)


def hits_needed(size: int, need: float) -> int:
    """The fewest indexed fingerprints of a representative that a document of ``size`` sampled
    fingerprints meets if its estimate against it can reach ``need``.

    Of B's indexed part at most ``u`` are unshared (:func:`indexed_count`), so at least
    ``min(SLACK, ⌈need·|B|⌉)`` are shared. B's size is not known before reading it, but the
    estimate is also at most ``min(|A|, |B|) / max(|A|, |B|)``, so ``|B| ≥ need·|A|`` and
    ``⌈need·|B|⌉ ≥ ⌈need²·|A|⌉`` (less a hair, against rounding).

    >>> hits_needed(100, 0.8), hits_needed(2, 0.8), hits_needed(1, 0.9)
    (3, 2, 1)
    """
    return min(SLACK, max(1, math.ceil(need * need * size - 1e-6)))


def _hit_survivors(shared: dict[int, int], capped: int, least: int | None) -> tuple[list[int], int]:
    """The candidates that met at least ``least`` indexed fingerprints (each capped fingerprint
    may hide one more), in id order, and how many did not.

    >>> _hit_survivors({7: 5, 3: 1, 5: 2}, 0, 3), _hit_survivors({7: 5, 3: 1, 5: 2}, 1, 3)
    (([7], 2), ([5, 7], 1))
    """
    if least is None:
        return sorted(shared), 0
    keep = sorted(cid for cid, hits in shared.items() if hits + capped >= least)
    return keep, len(shared) - len(keep)


def _survivors(
    shared: dict[int, int], capped: int, denominator: int | None, need: float
) -> tuple[list[int], int]:
    """The candidates worth estimating, in id order, and how many the bound pruned.

    :func:`resemblance_bound` for all candidates at once: most candidates of a page share a
    few boilerplate fingerprints only, so a Python loop over them would cost more than the
    few estimates that follow. The same float division as the scalar bound, so the same
    candidates survive.

    >>> _survivors({7: 90, 3: 10, 5: 79}, 1, 100, 0.8)
    ([5, 7], 1)
    >>> _survivors({7: 1, 3: 2}, 0, None, 0.8)  # no proven bound: nothing pruned
    ([3, 7], 0)
    """
    if denominator is None or not shared:
        return sorted(shared), 0
    ids = np.fromiter(shared.keys(), dtype=np.int64, count=len(shared))
    counts = np.fromiter(shared.values(), dtype=np.int64, count=len(shared))
    upper = np.minimum(counts + capped, denominator) / denominator
    keep = np.sort(ids[~(upper < need)])
    return keep.tolist(), len(shared) - int(keep.size)


def bound_denominator(sketch: Sketch, *, containment: bool = False) -> int | None:
    """The sample size that bounds every estimate of ``sketch``, or None if none is proven.

    Computed once per document: the bound of a candidate is then ``min(shared + capped, d) / d``.
    """
    size = int(sketch.values.size)
    if size == 0:
        return None
    if isinstance(sketch, ModSketch):
        return size
    if containment:
        return None
    if isinstance(sketch, (MinSketch, MinModSketch)):
        return size
    if isinstance(sketch, PermutationSketch) and np.unique(sketch.values).size == size:
        return size
    return None


def popular_sketch(fingerprints: np.ndarray, like: Sketch, members: int) -> Sketch:
    """The representative made of the most popular of the members' ``fingerprints`` (§4.4).

    ``fingerprints`` are all sampled values of all ``members`` sketches, with repeats; a value's
    popularity is the number of members holding it. Values are ranked by popularity, ties broken
    by the smaller value, and the top ``t`` kept, in a sketch of ``like``'s kind and parameters:

    * MIN_s and MIN_s(MOD_m): ``t = s`` (fewer if the members hold fewer distinct values). Every
      member's values are multiples of m, so the result is a valid MIN_s(MOD_m) sample.
    * MOD_m: there is no s; ``t`` is the members' mean sample size (rounded), so the
      representative is as large as a typical member's sample, made of the ids most members
      share — the cluster's "consensus document" sampled at rate 1/m.
    * size-tiered and permutation sketches: ``ValueError``. Tiered members sample at different
      rates (a level-0 member holds ids a level-2 member cannot), so their counts do not
      compare; a permutation card is positional and its entry j is a minimum under permutation
      j, which a ranking of pooled values does not respect.

    The result keeps ``like.n`` (the document size that MIN_s containment estimates use), raised
    where the kind requires a larger n for its sample.

    >>> members = np.array([1, 2, 3, 2, 3, 4, 3, 4, 5], dtype=np.uint64)  # [1,2,3] [2,3,4] [3,4,5]
    >>> popular_sketch(members, MinSketch([1, 2, 3], s=3, n=50), 3).values.tolist()
    [2, 3, 4]
    >>> popular_sketch(members, MinSketch([1, 2], s=2, n=50), 3).values.tolist()  # 2 beats 4
    [2, 3]
    """
    if members < 1:
        raise ValueError(f"members must be >= 1; got {members}")
    fps = np.asarray(fingerprints, dtype=np.uint64)
    if isinstance(like, (MinSketch, MinModSketch)):
        t = like.s
    elif isinstance(like, ModSketch):
        t = math.floor(fps.size / members + 0.5)
    else:
        raise ValueError(
            f"no 'popular' representative for {like.kind!r} sketches: only 'min', 'minmod' "
            "and 'mod' samples can be pooled and ranked"
        )
    values, counts = np.unique(fps, return_counts=True)
    order = np.lexsort((values, -counts))  # by count descending, then value ascending
    top = np.sort(values[order[:t]])
    if isinstance(like, MinSketch):
        n = max(like.n, top.size) if top.size == like.s else top.size
        return MinSketch(top, like.s, n)
    if isinstance(like, MinModSketch):
        return MinModSketch(top, like.s, like.m, max(like.n, top.size))
    assert isinstance(like, ModSketch)
    return ModSketch(top, like.m, max(like.n, top.size))


def cluster_documents(
    sketches_and_hashes: Iterable[tuple[Sketch, int]],
    params: DedupParams,
    index: ClusterIndex | None = None,
    *,
    first_doc_id: int = 0,
) -> list[Assignment]:
    """Cluster ``(sketch, content_hash)`` pairs in order; document ids count from ``first_doc_id``.

    A fresh :class:`~dedup.memory_index.MemoryIndex` is used unless ``index`` is given.

    >>> from dedup.sketches import MinSketch
    >>> same = MinSketch([1, 2, 3], s=3, n=3)
    >>> other = MinSketch([7, 8, 9], s=3, n=3)
    >>> [a.cluster_id for a in cluster_documents([(same, 1), (other, 2), (same, 1)],
    ...                                          DedupParams())]
    [0, 1, 0]
    """
    clusterer = GreedyClusterer(MemoryIndex() if index is None else index, params)
    return [
        clusterer.assign(first_doc_id + i, sketch, content_hash)
        for i, (sketch, content_hash) in enumerate(sketches_and_hashes)
    ]
