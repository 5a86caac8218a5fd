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
   a hundred rows per document, runs in Spark SQL, in the JVM.
3. **Estimates and preferences**, in executors: :func:`dedup.estimators.estimate` on each pair's
   sketches, then :func:`crawler.recluster.rounds.preference` orders a document's qualifying
   candidates as the sequential clusterer would try them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from crawler.recluster.rounds import preference
from crawler.recluster.spark.sketch import SparkJob
from dedup.estimators import estimate
from dedup.sketches import sketch_from_bytes

__all__ = ["PREFERENCES", "candidate_pairs", "preferences", "search_stats", "split_copies"]

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


def candidate_pairs(leaders: Any, job: SparkJob) -> Any:
    """``(d, e, hits, capped, keep)`` for every document d that met an earlier leader e's
    indexed fingerprints (or only the first posting past the cap): how many it met, how many
    of d's fingerprints the cap cut, and whether the pair is worth estimating (as
    :meth:`dedup.cluster.GreedyClusterer.decide` filters candidates)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cap, need = job.dedup.cap, job.need
    containment = job.dedup.containment is not None
    bound = job.dedup.threshold if not containment else min(job.dedup.threshold, job.dedup.containment)
    fps = leaders.select(
        F.col("key").alias("d"), "k", F.size("fps").alias("n"), F.explode("fps").alias("f"))
    # a fingerprint of one document only meets no other: only shared ones are looked up (the
    # count also partitions the rows by fingerprint, as the join below needs)
    shared = (
        fps.withColumn("count", F.count("*").over(Window.partitionBy("f")))
        .where("count > 1")
    )
    if need > 0:
        # the k rarest of d's n fingerprints: its unshared ones first, then the rarest shared;
        # counted from the most common end, a shared one is indexed when its place there
        # reaches n - k + 1
        common_first = Window.partitionBy("d").orderBy(
            F.desc("count"), (F.col("f") < 0).desc(), F.desc("f"))
        indexed = (
            shared.withColumn("place", F.row_number().over(common_first))
            .where("place >= n - k + 1")
            .select("f", F.col("d").alias("e"))
        )
    else:
        indexed = shared.select("f", F.col("d").alias("e"))
    lowest = Window.partitionBy("f").orderBy("e")
    postings = indexed.withColumn("rank", F.row_number().over(lowest)).where(f"rank <= {cap + 1}")
    met = shared.select("d", "f").join(postings, "f").where("e < d")
    pairs = met.groupBy("d", "e").agg(
        F.sum((F.col("rank") <= cap).cast("int")).alias("hits"),
        F.sum((F.col("rank") == cap + 1).cast("int")).alias("over"),
    )
    # each fingerprint of d whose postings were cut may hide one more hit on any candidate
    pairs = pairs.withColumn("capped", F.sum("over").over(Window.partitionBy("d"))).drop("over")
    terms = leaders.select(F.col("key").alias("d"), "least", "den")
    found = pairs.join(terms, "d")
    if need > 0:
        keep = F.col("least").isNull() | (F.col("hits") + F.col("capped") >= F.col("least"))
    else:
        upper = F.least(F.col("hits") + F.col("capped"), F.col("den")) / F.col("den")
        keep = F.col("den").isNull() | ~(upper < F.lit(float(bound)))
    return found.withColumn("keep", (F.col("hits") > 0) & keep).select("d", "e", "hits", "capped", "keep")


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
            tags = batch.column("tag").to_numpy()
            ds = batch.column("d").to_numpy()
            es = batch.column("e")
            blobs = batch.column("sketch")
            for i in range(batch.num_rows):
                d = int(ds[i])
                if tags[i] == 0:
                    raw[d] = blobs[i].as_py()
                    continue
                if d != current:
                    if current is not None:
                        settle()
                    current, estimates = d, []
                e = es[i].as_py()
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
