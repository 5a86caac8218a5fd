"""Exact duplicates, candidate pairs and their estimates: which earlier documents each document
could join, in the order greedy clustering prefers them (docs/spark.md, stages 3 to 5).

The first document of each content hash (its *leader*) is clustered; every later copy joins
its leader's cluster, as the local index's exact table makes it. Each leader indexes the rarest
part of its sketch that :func:`dedup.cluster.indexed_count` proves sufficient, met on
fingerprint with every leader's sketch and cut at the boilerplate cap; a pair is estimated only
when it meets :func:`dedup.cluster.hits_needed` indexed fingerprints, in the local engine's
arithmetic; :func:`crawler.recluster.rounds.preference` orders each document's qualifying
candidates. The work is numpy's in executors (:mod:`.postings`, run by :mod:`.search_steps`);
Spark moves packed arrays between the steps.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np

# not `from crawler.recluster.spark import ...`: that names the package, whose __init__ imports
# this module (tests/test_layers.py counts it a cycle)
import crawler.recluster.spark.search_steps as step
from crawler.recluster.spark.kept import cached
from crawler.recluster.spark.postings import unpack
from crawler.recluster.spark.routes import routes
from crawler.recluster.spark.search_steps import MOVED, PACKED, PREFERENCES, Kind
from crawler.recluster.spark.sketch import SparkJob
from crawler.recluster.spark.steps import python_step

__all__ = ["PREFERENCES", "TALLIED", "Search", "pruning_bound", "split_copies"]

#: buckets per partition: a bucket travels to its partition under its route (:mod:`.routes`);
#: many small buckets let a skewed fingerprint or document weigh little
_BUCKETS_PER_PARTITION = 16
#: the counters of :func:`.postings.tally`, in its order, but for its last (``Search.waiting``)
#: and the count the verdicts add after it (``Search.changed``)
TALLIED = ("comparisons", "pruned", "capped", "capped_documents")
#: the rows of :attr:`Kind.LONG` and of :attr:`Kind.CHANGED`
_LONG, _CHANGED = "key long, top long", "d long"


def split_copies(documents: Any) -> tuple[Any, Any]:
    """The leaders (every sketched document that is the first of its content hash) and the
    copies ``(key, leader, self_r)`` of the rest."""
    from pyspark.sql import functions as F

    sketched = documents.where("sketch IS NOT NULL")
    firsts = (
        sketched.groupBy("hash")
        .agg(F.min("key").alias("leader"), F.count("*").alias("n"))
        .where("n > 1")
    )
    copies = (
        sketched.select("key", "hash", "self_r")
        .join(firsts, "hash")
        .where("key != leader")
        .select("key", "leader", "self_r")
    )
    leaders = sketched.join(copies.select("key"), "key", "left_anti")
    return leaders, copies


class Search:
    """The candidate search of one run, from the leaders to their :data:`PREFERENCES`: six
    shuffles, each bringing together the packed arrays one step of :mod:`.postings` needs.
    ``preferences`` is the DataFrame of the result; :meth:`stats` runs the search up to the
    verdicts (cached, for the preferences); :meth:`unpersist` releases what it cached."""

    #: once :meth:`stats` has run: documents with a pair to estimate (the most that can wait
    #: for a greedy round), and those whose pairs this pass estimates (:meth:`settled`)
    waiting: int | None = None
    changed: int | None = None

    def __init__(self, leaders: Any, job: SparkJob, sketched: Any) -> None:
        """``sketched``: every document with a sketch, leaders and copies; with
        ``job.exact_cap`` each leader's indexed part is then ranked by the local clusterer's
        running count-min estimates over them (:func:`.postings.rarest_counted`) rather than
        by the corpus's counts, for the local engine's very postings."""
        partitions = job.partitions
        buckets = routes(leaders.sparkSession, partitions * _BUCKETS_PER_PARTITION, partitions)
        bound = pruning_bound(job)
        of = of_kind

        def moved(*frames: Any) -> Any:
            return reduce(lambda a, b: a.unionByName(b), frames).repartition(partitions, "bucket")

        as_local = job.exact_cap and job.need > 0  # else every fingerprint is indexed
        spread = cached(python_step(leaders.select("key", "fps", "k", "least", "den", "sketch"),
                                    step.spread(buckets, own=as_local), MOVED))
        counted = cached(python_step(moved(of(spread, Kind.HELD)), step.count(buckets), MOVED))
        self._cached = [spread, counted]
        if as_local:
            # the count-min counters as the local clusterer fills them, in input order: a
            # shuffle by counter, then each count back to its document
            hits = python_step(sketched.select("key", "fps"), step.hits(buckets), MOVED)
            running = python_step(moved(hits), step.running(buckets), MOVED)
            posted = cached(python_step(  # every search reads it
                moved(of(spread, Kind.DOCUMENT), of(spread, Kind.OWN), running),
                step.index_counted(buckets), MOVED))
            self._cached.append(posted)
        else:
            posted = python_step(moved(of(spread, Kind.DOCUMENT), of(counted, Kind.COUNTED)),
                                 step.index(buckets), MOVED)

        def search(left_out: Any, before: Any = None) -> tuple[Any, Any]:
            """One pass from the postings to the preferences: its verdicts and preferences.
            ``before``: the verdicts of the pass before, whose pairs this one's are compared
            with; then only the documents whose pairs changed are estimated again."""
            met = python_step(moved(of(counted, Kind.MEMBER), posted),
                              step.meet(buckets, job.dedup.cap, left_out, job.exact_cap), MOVED)
            judging = [of(spread, Kind.DOCUMENT), met]
            again = before is not None
            if again:  # the pairs kept before, to the partition that kept them
                judging.append(of(before, Kind.KEPT).selectExpr(
                    "bucket", f"CAST({int(Kind.BEFORE)} AS BYTE) AS kind", "data"))
            judged = cached(python_step(moved(*judging),
                                        step.verdicts(bound, buckets, left_out, again), MOVED))
            pairs = Kind.FRESH if again else Kind.KEPT
            served = python_step(moved(of(judged, Kind.WANTED), of(spread, Kind.SKETCH)),
                                 step.serve, MOVED)
            return judged, python_step(moved(of(judged, pairs), served),
                                       step.prefer(job.dedup.threshold, job.dedup.containment,
                                                   pairs), PREFERENCES)

        #: plans a pass: its verdicts and preferences from the leaders ``left_out`` (None, or a
        #: broadcast array) and the verdicts of the pass ``before`` (None in the first)
        self._search = search
        self._context = leaders.sparkSession.sparkContext
        self._left_out = np.empty(0, dtype=np.int64)
        self._broadcasts: list[Any] = []
        self._spent: list[Any] = []
        self._judged, self.preferences = search(None)
        #: passes of the search so far (see :meth:`settled`)
        self.passes = 1

    def settled(self, decisions: Any, prefs: Any) -> bool:
        """Whether the greedy rounds' ``decisions`` (:data:`.greedy.DECISIONS`), made from the
        preferences ``prefs``, are final; if not, the next pass is planned (its
        :attr:`preferences`, for :meth:`stats` and the rounds).

        The local index posts representatives only, and its boilerplate cap keeps each
        fingerprint's ``cap`` lowest of them; this search posts every leader. The decisions
        are final when no leader that joined a cluster sits among the ``cap + 1`` lowest
        postings of a fingerprint the cap cuts, and every leader left out still joined one
        (:func:`.postings.contested`). Otherwise the joined leaders are left out of the
        postings and the search runs again; each pass settles a longer stretch of the input,
        so the passes end. A later pass estimates only the pairs of the documents whose pairs
        changed (:attr:`changed`); the others keep their preferences (a candidate newly left
        out joined a cluster, so the rounds passed over it anyway)."""
        joined = decisions.where("kind != 'kept'").select("key")
        long = python_step(of_kind(self._judged, Kind.LONG), step.as_rows(_LONG), _LONG)
        rows = python_step(long.join(joined, "key"), step.packed_keys, PACKED).collect()
        key, top = unpack([r.data for r in rows], 2)
        left_out = np.unique(key)
        back = np.setdiff1d(self._left_out, left_out, assume_unique=True)
        newly_cut = np.setdiff1d(key[top == 1], self._left_out)
        if not back.size and not newly_cut.size:
            return True
        self._left_out = left_out
        self._broadcasts.append(self._context.broadcast(left_out))
        before = self._judged
        self._spent.append(before)  # read by this pass's verdicts, then released (stats)
        self._judged, fresh = self._search(self._broadcasts[-1], before)
        changed = python_step(of_kind(self._judged, Kind.CHANGED), step.as_rows(_CHANGED),
                              _CHANGED)
        self.preferences = prefs.join(changed, "d", "left_anti").unionByName(fresh)
        self.passes += 1
        return False

    def stats(self) -> dict[str, int]:
        """The counters of the search, as the local clusterer keeps them: pairs estimated
        (``comparisons``) and skipped by the bound (``pruned``), fingerprints the cap cut
        (``capped``) and the documents they belong to."""
        total = np.zeros(len(TALLIED) + 2, dtype=np.int64)
        for row in of_kind(self._judged, Kind.TALLY).select("data").collect():
            total += np.frombuffer(row.data, dtype=np.int64)
        self.waiting, self.changed = int(total[-2]), int(total[-1])
        for spent in self._spent:  # the verdicts before, compared and no longer read
            spent.unpersist()
        self._spent.clear()
        return dict(zip(TALLIED, map(int, total)))

    def unpersist(self) -> None:
        """Unpersist the steps cached on the way, and the sets of leaders left out that were
        broadcast; call once the preferences are kept (a second call does nothing more)."""
        for held in (*self._cached, *self._spent, self._judged, *self._broadcasts):
            held.unpersist()


def pruning_bound(job: SparkJob) -> float | None:
    """The resemblance bound that prunes pairs, under the containment rule (None: the pairs
    are filtered by the indexed fingerprints they meet, :func:`.postings.verdicts`)."""
    if job.need > 0:
        return None
    containment = job.dedup.containment
    return job.dedup.threshold if containment is None else min(job.dedup.threshold, containment)


def of_kind(frame: Any, kind: Kind) -> Any:
    """The rows of moved arrays of one kind."""
    return frame.where(f"kind = {int(kind)}")  # SQL text: one round trip to the JVM
