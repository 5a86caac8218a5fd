"""A small input clustered in three stages: the whole input broadcast to every task, which finds
the exact duplicates and searches for its share of the documents; then one task decides them
all in input order and numbers the clusters.

Up to ``SparkJob.broadcast`` documents (20,000) the candidate search already runs in one stage
(:class:`.candidates.BroadcastSearch`), and up to ``SparkJob.stretch`` (50,000) the first greedy
round is one task that holds every waiting document. What a run at that size paid for was the
rest: the exact duplicates (an aggregation and two joins), the rounds' joins and range
partitioning, and the cluster ids' shuffle, 14 stages in 9 jobs at 10,000 documents and
hundreds of round trips from the driver to plan them, for a second of work. So where both
limits hold, and the boilerplate cap is searched the faster way (``--exact-cap`` searches
again with the rounds' decisions, :meth:`.candidates.Search.settled`):

1. **Gathered**: every sketched document's key, content hash and estimate against itself
   (:data:`SKETCHED`), with its fingerprints, sizes and sketch, packed as for the search.
2. **A share of the search**, in each of the job's partitions, as
   :func:`.broadcast_steps.searched` runs it for the leaders (the first document of each
   content hash, as :func:`.candidates.split_copies` finds them), and each document of the
   share with its leader (:data:`LED`).
3. **One task**: every document's leader and every leader's preferences, in input order, decided
   by :func:`crawler.recluster.rounds.decide_in_order` (every document that waits is there, so
   a candidate with no preferences of its own is kept), then numbered as
   :mod:`.numbering` numbers them. That task holds no more than one partition of the search's
   input (:data:`~.run.DOCUMENTS_PER_PARTITION`), where the rounds' one stretch already held
   every waiting document.

Same candidates, counters and clusters as the other paths (a test runs all three). On
10,000 synthetic documents in ``local[2]`` (the clustering stages of :mod:`benchmarks.spark`'s
scale runs), three interleaved pairs of sessions of five runs each: first runs 3.13, 2.53 and
2.85 s against 6.28, 5.85 and 6.23 s through the rounds; the last two runs 1.47 to 1.65 s against
3.10 to 3.42 s; 3 stages in 3 jobs against 14 in 9.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

# not `from crawler.recluster.spark import ...` (see the same import in .candidates)
import crawler.recluster.spark.postings as postings  # noqa: PLR0402
from crawler.recluster.rounds import KEPT, decide_in_order
from crawler.recluster.spark.broadcast_steps import (
    PREFERENCE_KINDS, PREFERENCES, SHARE, broadcast_blobs, searched,
)
from crawler.recluster.spark.candidates import TALLIED, pruning_bound
from crawler.recluster.spark.numbering import ROWS
from crawler.recluster.spark.routes import routes
from crawler.recluster.spark.search_steps import (
    MOVED, TALLY, at_home, moved_batch, received, spread,
)
from crawler.recluster.spark.sketch import SparkJob
from crawler.recluster.spark.steps import python_step

__all__ = ["LED", "SKETCHED", "SmallInput", "decided_and_numbered", "leaders_of"]

#: the kinds of moved arrays of this path: (key, content hash, bits of the estimate against
#: itself) of every sketched document; (key, leader, those bits) of a share's documents
SKETCHED, LED = 19, 20


class SmallInput:
    """The plan of a small input's clustering (see the module): :attr:`rows`, a row per
    sketched document (:data:`~.numbering.ROWS`), made in one task from the search's kept
    output; :meth:`stats` runs the search."""

    def __init__(self, docs: Any, job: SparkJob) -> None:
        from pyspark.sql import functions as F

        columns = ("key", "hash", "self_r", "fps", "k", "least", "den", "sketch")
        gathered = python_step(docs.where("sketch IS NOT NULL").select(*columns), _gather, MOVED)
        shares = job.partitions
        everywhere = (docs.sparkSession.range(0, shares, 1, shares)
                      .withColumnRenamed("id", SHARE).crossJoin(F.broadcast(gathered)))
        dedup = job.dedup
        share = _share(shares, dedup.cap, pruning_bound(job), dedup.threshold, dedup.containment)
        self._judged = python_step(everywhere, share, MOVED).persist()
        led = self._judged.where(f"kind IN ({LED}, {PREFERENCES})").coalesce(1)
        #: every sketched document's row, made by one task when first read
        self.rows = python_step(led, decided_and_numbered, ROWS)

    def stats(self) -> dict[str, int]:
        """Run the search: its counters, as :meth:`.candidates.Search.stats` counts them, and
        the greedy rounds (one if any document has a qualifying candidate, as the rounds of a
        single stretch take)."""
        total = np.zeros(len(TALLIED) + 3, dtype=np.int64)
        for row in self._judged.where(f"kind = {TALLY}").select("data").collect():
            total += np.frombuffer(row.data, dtype=np.int64)
        stats = dict(zip(TALLIED, map(int, total)))
        stats["rounds"] = int(total[-1] > 0)
        return stats

    def release(self) -> None:
        """Unpersist the search's output, once the rows are no longer read."""
        self._judged.unpersist()


def _gather(batches: Iterable[Any]) -> Iterator[Any]:
    """A partition's sketched documents packed for every task: as the search's leaders are
    (:func:`.search_steps.spread` for one bucket), and their keys, hashes and estimates
    against themselves (:data:`SKETCHED`)."""
    batches = list(batches)
    yield from spread(routes(1, 1))(batches)
    key, content, self_r = [], [], []
    for batch in batches:
        key.append(batch.column("key").to_numpy())
        content.append(batch.column("hash").to_numpy())
        self_r.append(batch.column("self_r").to_numpy(zero_copy_only=False).astype(np.float64))
    if key:
        packed = postings.pack(np.concatenate(key), np.concatenate(content),
                               np.concatenate(self_r).view(np.int64))
        yield moved_batch(*at_home(0, SKETCHED, packed))


def leaders_of(key: np.ndarray, content: np.ndarray) -> np.ndarray:
    """Each document's leader: the least key of its content hash.

    >>> leaders_of(np.array([5, 2, 9, 7]), np.array([1, 3, 1, 3])).tolist()
    [5, 2, 5, 2]
    """
    order = np.lexsort((key, content))
    ordered = content[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    leader = np.empty_like(key)
    leader[order] = key[order][np.maximum.accumulate(np.where(first, np.arange(order.size), 0))]
    return leader


def _share(shares: int, cap: int, bound: float | None, threshold: float,
           containment: float | None) -> Any:
    """The step of one task: its share's documents with their leaders (:data:`LED`), and the
    search for its share of the leaders' pairs."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        share, got = broadcast_blobs(batches)
        if share is None:  # no sketched document
            return
        key, content, self_r = postings.unpack(got.get(SKETCHED, []), 3)
        leader = leaders_of(key, content)
        mine = postings.bucket_of(key, shares) == share
        yield moved_batch(*at_home(share, LED, postings.pack(
            key[mine], leader[mine], self_r[mine])))
        leaders = np.sort(key[key == leader])
        yield from searched(share, shares, got, cap, bound, threshold, containment,
                            leaders=leaders)

    return run


def decided_and_numbered(batches: Iterable[Any]) -> Iterator[Any]:
    """Every document's row (:data:`~.numbering.ROWS`), in input order, from every document's
    leader (:data:`LED`) and every leader's preferences (:data:`.broadcast_steps.PREFERENCES`):
    the leaders decided in input order, then each cluster numbered by its representative's
    rank among the kept documents; an exact copy reports its leader's cluster."""
    import pyarrow as pa

    got, _ = received(batches)
    key, leader, self_r = postings.unpack(got.get(LED, []), 3)
    order = np.argsort(key)
    key, leader, self_r = key[order], leader[order], self_r[order].view(np.float64)
    decisions = dict(decide_in_order(_preferences(got.get(PREFERENCES, [])), unseen=KEPT))
    out: dict[str, list[Any]] = {name: [] for name in _ROW_NAMES}
    led: dict[int, tuple[bool, int, float]] = {}  # a leader: represents, cluster, estimate
    clusters = 0
    for k, lead, own in zip(key.tolist(), leader.tolist(), self_r.tolist()):
        if k == lead:
            kind, rep, r = decisions.get(k) or ("kept", None, None)
            if kind == "kept":
                led[k] = (True, clusters, 1.0)
                clusters += 1
            else:
                led[k] = (False, led[rep][1], r)
            represents, cluster, r = led[k]
            row = (k, cluster, represents, r, kind, represents)
        else:  # a copy of the representative reports its own estimate against itself
            represents, cluster, r = led[lead]
            row = (k, cluster, False, own if represents else r, "exact_duplicate", represents)
        for name, value in zip(_ROW_NAMES, row):
            out[name].append(value)
    yield pa.RecordBatch.from_pydict(out, schema=_rows_arrow())


_ROW_NAMES = ("key", "cluster", "representative", "r", "kind", "identical")


def _preferences(blobs: list[bytes]) -> Iterator[tuple[int, list, dict]]:
    """Each leader with candidates, in input order: (key, its preferences in order, no status
    known), as :func:`~crawler.recluster.rounds.decide_in_order` takes them."""
    d, pos, e, kind, r = postings.unpack(blobs, 5)
    order = np.lexsort((pos, d))
    names = [PREFERENCE_KINDS[i] for i in kind[order].tolist()]
    rows = zip(d[order].tolist(), e[order].tolist(), names, r[order].view(np.float64).tolist())
    current, prefs = None, []
    for doc, candidate, name, estimate in rows:
        if doc != current:
            if current is not None:
                yield current, prefs, {}
            current, prefs = doc, []
        prefs.append((candidate, name, estimate))
    if current is not None:
        yield current, prefs, {}


def _rows_arrow() -> Any:
    import pyarrow as pa

    return pa.schema([("key", pa.int64()), ("cluster", pa.int64()),
                      ("representative", pa.bool_()), ("r", pa.float64()),
                      ("kind", pa.string()), ("identical", pa.bool_())])
