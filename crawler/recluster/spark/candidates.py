"""Exact duplicates, candidate pairs and their estimates: which earlier documents each document
could join, in the order greedy clustering prefers them.

1. **Exact duplicates** by content hash: the first document of each hash (its *leader*) is
   clustered; every later copy joins its leader's cluster, as the local index's exact table
   makes it.
2. **Candidates.** Each leader indexes the rarest part of its sketch that
   :func:`dedup.cluster.indexed_count` proves sufficient (rarest by the corpus's own
   fingerprint counts, ties by the smaller value, as :class:`dedup.frequency.FingerprintFrequency`
   breaks them), joined on fingerprint with every leader's whole sketch. A fingerprint's
   postings are cut at the boilerplate cap (the ``cap`` lowest keys, as the local index keeps
   the lowest cluster ids); a pair is estimated only when it meets
   :func:`dedup.cluster.hits_needed` indexed fingerprints (under the containment rule, when the
   resemblance bound allows it), in the local engine's arithmetic. This fingerprint-level work,
   a hundred values per document, is numpy's in executors (:mod:`.postings`); Spark moves the
   arrays between its steps.
3. **Estimates and preferences**, in executors: :func:`dedup.estimators.estimate` on each pair's
   sketches, then :func:`crawler.recluster.rounds.preference` orders a document's qualifying
   candidates as the sequential clusterer would try them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from crawler.recluster.rounds import preference
from crawler.recluster.spark.postings import (
    bucket_of,
    indexed,
    meet,
    pack,
    shared,
    unpack,
    verdicts,
)
from crawler.recluster.spark.sketch import SparkJob
from dedup.estimators import estimate
from dedup.sketches import sketch_from_bytes

__all__ = ["PAIRS", "PREFERENCES", "candidate_pairs", "preferences", "search_stats", "split_copies"]

#: a document's qualifying candidates, ``pos`` 0 first: (document, place in its preference
#: order, candidate, decision kind if it joins that candidate, estimated resemblance)
PREFERENCES = "d long, pos int, e long, kind string, r double"


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


def candidate_pairs(leaders: Any, job: SparkJob) -> tuple[Any, list[Any]]:
    """:data:`PAIRS`: ``(d, e, hits, capped, keep)`` for every document d that met an earlier
    leader e's indexed fingerprints (or only the first posting past the cap): how many it met,
    how many of d's fingerprints the cap cut, and whether the pair is worth estimating (as
    :meth:`dedup.cluster.GreedyClusterer.decide` filters candidates); and the intermediate
    DataFrames cached on the way, for the caller to unpersist once the pairs are made.

    Four shuffles, each bringing together what one step of :mod:`.postings` needs: the rows of
    a fingerprint (to count it; to meet its postings), or of a document (to pick its rarest
    part; to sum its pairs). What Spark moves between them is a few packed arrays per bucket
    of fingerprints or documents, not a row per fingerprint.
    """
    from pyspark.sql import functions as F

    partitions = job.partitions
    buckets = partitions * _BUCKETS_PER_PARTITION
    bound = None
    if job.need <= 0:
        containment = job.dedup.containment
        bound = job.dedup.threshold if containment is None else min(job.dedup.threshold, containment)

    def moved(*frames: Any) -> Any:
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        return union.repartition(partitions, "bucket")

    spread = leaders.select("key", "fps", "k", "least", "den").mapInArrow(
        _spread(buckets), _MOVED).persist()
    counted = moved(spread.where(F.col("kind") == _HELD)).mapInArrow(
        _count(buckets), _MOVED).persist()
    posted = moved(spread.where(F.col("kind") == _DOCUMENT),
                   counted.where(F.col("kind") == _COUNTED)).mapInArrow(_index(buckets), _MOVED)
    met = moved(counted.where(F.col("kind") == _MEMBER), posted).mapInArrow(
        _meet(buckets, job.dedup.cap), _MOVED)
    pairs = moved(spread.where(F.col("kind") == _DOCUMENT), met).mapInArrow(
        _verdicts(bound), PAIRS)
    return pairs, [spread, counted]


#: the candidate pairs (see :func:`candidate_pairs`)
PAIRS = "d long, e long, hits int, capped int, keep boolean"
#: what Spark moves between the steps: packed int64 columns (:func:`.postings.pack`) bound for
#: a bucket of fingerprints or of documents
_MOVED = "bucket int, kind byte, data binary"
#: buckets per partition: Spark hashes a bucket to a partition, and many buckets even them out
_BUCKETS_PER_PARTITION = 16
#: the kinds of moved arrays: (d, f) of every leader; (d, size, k, least, den) of every
#: leader; (d, f, count) of shared fingerprints, to their document; (d, f) of shared
#: fingerprints, to their fingerprint; (f, e) postings; (d, e, hits, over) partial sums
_HELD, _DOCUMENT, _COUNTED, _MEMBER, _POSTED, _MET = range(6)


def _arrow_moved(bucket: list[int], kind: list[int], data: list[bytes]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [pa.array(bucket, pa.int32()), pa.array(kind, pa.int8()), pa.array(data, pa.binary())],
        names=["bucket", "kind", "data"])


def _routed(kind: int, by: np.ndarray, columns: tuple[np.ndarray, ...], buckets: int) -> Any:
    """One Arrow batch: the rows of ``columns`` cut by the bucket of ``by``, packed."""
    where = bucket_of(by, buckets)
    order = np.argsort(where, kind="stable")
    where = where[order]
    starts = np.searchsorted(where, np.arange(buckets + 1))
    bucket, data = [], []
    for b in range(buckets):
        lo, hi = starts[b], starts[b + 1]
        if hi > lo:
            bucket.append(b)
            data.append(pack(*(c[order[lo:hi]] for c in columns)))
    return _arrow_moved(bucket, [kind] * len(bucket), data)


def _received(batches: Iterable[Any]) -> dict[int, list[bytes]]:
    got: dict[int, list[bytes]] = {}
    for batch in batches:
        for kind, data in zip(batch.column("kind").to_pylist(), batch.column("data").to_pylist()):
            got.setdefault(kind, []).append(data)
    return got


def _spread(buckets: int) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        keys, sizes, ks, leasts, dens, held = [], [], [], [], [], []
        for batch in batches:
            fps = batch.column("fps").to_pylist()
            arrays = [np.frombuffer(b, dtype=np.int64) for b in fps]
            key = batch.column("key").to_numpy()
            size = np.array([a.size for a in arrays], dtype=np.int64)
            keys.append(key)
            sizes.append(size)
            ks.append(batch.column("k").to_numpy(zero_copy_only=False).astype(np.int64))
            leasts.append(batch.column("least").fill_null(-1).to_numpy().astype(np.int64))
            dens.append(batch.column("den").fill_null(-1).to_numpy().astype(np.int64))
            held.append((np.repeat(key, size), np.concatenate(arrays) if arrays else size))
        if not keys:
            return
        d = np.concatenate([h[0] for h in held])
        f = np.concatenate([h[1] for h in held])
        key = np.concatenate(keys)
        yield _routed(_HELD, f, (d, f), buckets)
        yield _routed(_DOCUMENT, key, (key, np.concatenate(sizes), np.concatenate(ks),
                                       np.concatenate(leasts), np.concatenate(dens)), buckets)

    return run


def _count(buckets: int) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        d, f = unpack(_received(batches).get(_HELD, []), 2)
        d, f, count = shared(d, f)
        yield _routed(_COUNTED, d, (d, f, count), buckets)
        yield _routed(_MEMBER, f, (d, f), buckets)

    return run


def _index(buckets: int) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got = _received(batches)
        doc, size, k, _, _ = unpack(got.get(_DOCUMENT, []), 5)
        d, f, count = unpack(got.get(_COUNTED, []), 3)
        f, e = indexed(d, f, count, doc, size, k)
        yield _routed(_POSTED, f, (f, e), buckets)

    return run


def _meet(buckets: int, cap: int) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got = _received(batches)
        d, f = unpack(got.get(_MEMBER, []), 2)
        pf, pe = unpack(got.get(_POSTED, []), 2)
        d, e, hits, over = meet(d, f, pf, pe, cap)
        yield _routed(_MET, d, (d, e, hits, over), buckets)

    return run


def _verdicts(bound: float | None) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        got = _received(batches)
        doc, _, _, least, den = unpack(got.get(_DOCUMENT, []), 5)
        d, e, hits, over = unpack(got.get(_MET, []), 4)
        d, e, hits, capped, keep = verdicts(d, e, hits, over, doc, least, den, bound)
        yield pa.RecordBatch.from_arrays(
            [pa.array(d, pa.int64()), pa.array(e, pa.int64()), pa.array(hits, pa.int32()),
             pa.array(capped, pa.int32()), pa.array(keep, pa.bool_())],
            names=["d", "e", "hits", "capped", "keep"])

    return run


def search_stats(pairs: Any) -> dict[str, int]:
    """The counters of the candidate search, as the local clusterer keeps them: pairs estimated
    (``comparisons``) and skipped by the bound (``pruned``), fingerprints the cap cut
    (``capped``) and the documents they belong to."""
    from pyspark.sql import functions as F

    per_document = pairs.groupBy("d").agg(
        F.sum(F.col("keep").cast("long")).alias("kept"),
        F.sum(((F.col("hits") > 0) & ~F.col("keep")).cast("long")).alias("pruned"),
        F.max("capped").alias("capped"),
    )
    totals = per_document.agg(
        F.sum("kept").alias("comparisons"),
        F.sum("pruned").alias("pruned"),
        F.sum("capped").alias("capped"),
        F.sum((F.col("capped") > 0).cast("long")).alias("capped_documents"),
    ).first()
    return {name: int(totals[name] or 0) for name in ("comparisons", "pruned", "capped", "capped_documents")}


def preferences(leaders: Any, pairs: Any, job: SparkJob) -> Any:
    """:data:`PREFERENCES` of every document with a qualifying candidate among ``pairs``.

    The pairs go to the partition of their document d (Spark's own hash partitioning of d), and
    each sketch a partition's pairs need goes there once, ahead of the pairs (routed by one of
    the documents that needs it): a template page that is a candidate of thousands of pages
    crosses the network once per partition, not once per pair.
    """
    from pyspark.sql import functions as F

    partitions = job.partitions
    kept = pairs.where("keep").select("d", "e").withColumn(
        "part", F.pmod(F.hash("d"), F.lit(partitions)))
    needed = (
        kept.groupBy("part", "e").agg(F.min("d").alias("route"))
        .select("route", F.col("e").alias("key"))
        .unionByName(kept.select(F.col("d").alias("route"), F.col("d").alias("key")).distinct())
    )
    shipped = needed.join(leaders.select("key", "sketch"), "key").select(
        F.lit(0).alias("tag"), "route", F.col("key").alias("d"), F.lit(None).cast("long").alias("e"),
        "sketch")
    wanted = kept.select(F.lit(1).alias("tag"), F.col("d").alias("route"), "d", "e",
                         F.lit(None).cast("binary").alias("sketch"))
    rows = (
        shipped.unionByName(wanted)
        .repartition(partitions, "route")
        .sortWithinPartitions("tag", "d", "e")
    )
    return rows.mapInArrow(_prefer(job.dedup.threshold, job.dedup.containment), PREFERENCES)


def _prefer(threshold: float, containment: float | None) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        raw: dict[int, bytes] = {}  # this partition's sketches, parsed when first needed
        parsed: dict[int, Any] = {}
        out: dict[str, list[Any]] = {"d": [], "pos": [], "e": [], "kind": [], "r": []}
        current, estimates = None, []

        def sketch(key: int) -> Any:
            got = parsed.get(key)
            if got is None:
                got = parsed[key] = sketch_from_bytes(raw.pop(key))
            return got

        def settle() -> None:
            for pos, (e, kind, r) in enumerate(preference(estimates, threshold, containment)):
                for name, value in zip(out, (current, pos, e, kind, r)):
                    out[name].append(value)

        for batch in batches:
            columns = (batch.column(name).to_pylist() for name in ("tag", "d", "e", "sketch"))
            for tag, d, e, blob in zip(*columns):
                if tag == 0:
                    raw[d] = blob
                    continue
                if d != current:
                    if current is not None:
                        settle()
                    current, estimates = d, []
                est = estimate(sketch(d), sketch(e))
                estimates.append((e, est.resemblance, est.containment_a_in_b))
            if len(out["d"]) >= 4096:
                yield pa.RecordBatch.from_pydict(out, schema=_PREFERENCES_ARROW())
                out = {name: [] for name in out}
        if current is not None:
            settle()
        yield pa.RecordBatch.from_pydict(out, schema=_PREFERENCES_ARROW())

    return run


def _PREFERENCES_ARROW() -> Any:  # noqa: N802 - a constant made on first use (pyarrow is lazy)
    import pyarrow as pa

    return pa.schema([("d", pa.int64()), ("pos", pa.int32()), ("e", pa.int64()),
                      ("kind", pa.string()), ("r", pa.float64())])
