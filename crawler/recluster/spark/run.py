"""The whole Spark run: documents → clusters → ``clusters.jsonl`` (or Parquet), in input order.

One job reads and sketches every document and counts them; the count sizes the clustering
stages' partitions (:func:`cluster`); then the summary and the output, sorted by key,
formatted in executors by the local engine's own line writer, written on the driver. The run's
queries need two settings of the session (:data:`SHUFFLE_PARTITIONS`, :data:`RUN_SETTINGS`),
which the run sets and gives back as it ends or fails, whoever started the session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, NamedTuple

from crawler.recluster.inputs import SourceDocument
from crawler.recluster.pool import SketchedDocument, sketch_source
from crawler.recluster.run import (
    REPEATED_ID,
    REPEATS_NAMED,
    ReclusterResult,
    clusters_line,
    json_number,
    warn_input_problems,
)
from crawler.recluster.spark.candidates import PREFERENCES, Search, split_copies
from crawler.recluster.spark.described import described
from crawler.recluster.spark.greedy import greedy_rounds
from crawler.recluster.spark.kept import cached, kept
from crawler.recluster.spark.numbering import numbered
from crawler.recluster.spark.postings import BLOB_BYTES
from crawler.recluster.spark.routes import task_range_route
from crawler.recluster.spark.sketch import SparkJob, documents
from crawler.recluster.spark.steps import python_step, record_batch
from crawler.recluster.spark.tasks import Task
from dedup.cluster import KINDS, Assignment, Decision
from dedup.index import ClusterInfo
from dedup.params import ContentArea, DedupParams, SketchParams
from dedup.summary import ClusterSummary

__all__ = ["DOCUMENTS_PER_PARTITION", "PHASES", "RUN_SETTINGS", "SHUFFLE_PARTITIONS", "cluster",
           "default_partitions", "in_input_order", "recluster_spark", "run_settings"]

log = logging.getLogger(__name__)

#: documents per partition of the clustering stages, unless --partitions says otherwise: a
#: partition's sketches and fingerprint rows then fit a default executor's memory
DOCUMENTS_PER_PARTITION = 20_000
#: the joins and aggregations Spark plans itself cut into the run's partitions
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: the session's other settings a run sets for its own queries, each for its reason
RUN_SETTINGS = {
    # the engine sizes every exchange itself (even shares by route, ranges of keys):
    # adaptive execution would re-plan each as a job of its own and merge what it sized
    "spark.sql.adaptive.enabled": "false",
}


def recluster_spark(
    session: Any,
    work: list[Task],
    params: SketchParams,
    dedup: DedupParams,
    *,
    out: IO[str] | None = None,
    parquet: str | None = None,
    partitions: int | None = None,
    sketch: Callable[[SourceDocument], SketchedDocument] = sketch_source,
    area: ContentArea | None = None,
    stretch: int | None = None,
    exact_cap: bool | None = None,
    on_progress: Callable[[str, int], None] | None = None,
) -> ReclusterResult:
    """Cluster the documents of ``work`` on Spark; write clusters.jsonl lines to ``out`` (in
    input order) or a Parquet dataset to ``parquet``. Same result as the local engine's
    (:func:`crawler.recluster.run.recluster`), HTML read with the content area ``area``.
    ``stretch``: pending documents per range of a greedy round (fewer: more rounds).
    ``exact_cap``: where the boilerplate cap bites, search again until it cuts where the local
    index's cuts (:meth:`~crawler.recluster.spark.candidates.Search.settled`); None: when the
    cap is below its default (:func:`~.sketch.exact_cap_wanted`).
    ``on_progress(phase, documents)``: told what the run is doing (:data:`PHASES`) and how many
    documents have been read, every :data:`POLL` seconds while they are read."""
    if dedup.representative == "popular":
        raise ValueError("the 'popular' representative is not available on Spark")
    from pyspark.sql import functions as F

    started = time.perf_counter()
    job = SparkJob(params, dedup, partitions or 0, sketch, area, exact_cap=exact_cap)
    if stretch is not None:
        job.stretch = stretch
    context = session.sparkContext
    tell = on_progress or (lambda phase, n: None)
    result = ReclusterResult(ClusterSummary())
    read = None if on_progress is None else context.accumulator(0)
    with run_settings(session) as held:
        # the count's aggregations come before the count sizes the partitions: one per core
        session.conf.set(SHUFFLE_PARTITIONS, str(context.defaultParallelism))
        docs = cached(documents(session, work, job, read))
        held.append(docs)
        with _following(read, on_progress), described(context, "reading and sketching"):
            # the sketched documents' distinct ids too: fewer than them, and some id repeats
            counted = docs.groupBy("skip").agg(F.count("*"), F.countDistinct("id"),
                                               F.min_by("id", "key")).collect()  # fmt: skip
        for reason, n, _, first in counted:
            if reason is not None:
                result.count_skipped(reason, n, first)
        # a broken file's line is said in input order, as the local engine reads the files
        place = {task.path: task.ordinal for task in reversed(work)}
        result.broken.sort(key=lambda broken: place.get(broken.path, len(work)))
        total = sum(n for _, n, _, _ in counted)
        if any(reason is None and ids < n for reason, n, ids, _ in counted):
            with described(context, "repeated ids"):
                docs = _first_of_each_id(docs, result, held)
        job.partitions = partitions or default_partitions(context.defaultParallelism, total)
        session.conf.set(SHUFFLE_PARTITIONS, str(job.partitions))
        tell(CLUSTERING, total)
        clustered = cluster(docs, job, held)
        rows = cached(clustered.rows)
        held.append(rows)
        result.summary, kinds = _summary(rows)
        tell(WRITING, total)
        ordered = in_input_order(rows.join(docs.select("key", "id"), "key"), len(work),
                                 job.partitions)
        if parquet is not None:
            named = ordered.selectExpr("key AS position", "id", "cluster", "representative",
                                       "r AS resemblance", "kind AS decision")
            with described(context, "writing Parquet"):
                python_step(named, _rounded, _PARQUET).write.mode("overwrite").parquet(parquet)
        if out is not None:
            text = python_step(ordered, _lines, _TEXT)
            with described(context, "writing clusters.jsonl"):
                # the next partition is computed while this one is written
                for chunk in text.toLocalIterator(prefetchPartitions=True):
                    out.write(chunk.text)
    result.stats = {"documents": result.summary.documents, **kinds, **clustered.stats}
    result.seconds = time.perf_counter() - started
    warn_input_problems(result)
    return result


def _first_of_each_id(docs: Any, result: ReclusterResult, held: list[Any]) -> Any:
    """``docs`` with each sketched document whose id an earlier one (a lower key) had skipped as
    :data:`~crawler.recluster.run.REPEATED_ID`, as the local engine skips it, counted in
    ``result``. Only ids and keys are shuffled to find them."""
    from pyspark.sql import functions as F

    sketched = docs.where("sketch IS NOT NULL").select("key", "id")
    firsts = (sketched.groupBy("id").agg(F.min("key").alias("first"), F.count("*").alias("n"))
              .where("n > 1"))  # fmt: skip
    repeated = cached(sketched.join(firsts, "id").where("key != first").select("key", "id"))
    held.append(repeated)
    n = repeated.count()
    if not n:
        return docs
    first = [row.id for row in repeated.orderBy("key").limit(REPEATS_NAMED).collect()]
    result.count_repeated(n, first)
    marked = docs.join(repeated.selectExpr("key", "true AS repeat"), "key", "left")
    again = F.col("repeat").isNotNull()
    marked = cached(
        marked.withColumn("skip", F.when(again, F.lit(REPEATED_ID)).otherwise(F.col("skip")))
        .withColumn("sketch", F.when(again, F.lit(None)).otherwise(F.col("sketch")))
        .select(*docs.columns))
    held.append(marked)
    return marked


@contextmanager
def run_settings(session: Any) -> Iterator[list[Any]]:
    """:data:`RUN_SETTINGS` set in ``session`` for the block, then given back as they were (set
    or not) with :data:`SHUFFLE_PARTITIONS`, whether it ends or fails; and nothing the run
    cached left cached: the block adds each frame it caches (anything with ``unpersist``) to
    the list it is given."""
    conf = session.conf
    before = {key: conf.get(key, None) for key in (SHUFFLE_PARTITIONS, *RUN_SETTINGS)}
    for key, value in RUN_SETTINGS.items():
        conf.set(key, value)
    held: list[Any] = []
    try:
        yield held
    finally:
        for frame in reversed(held):
            try:
                frame.unpersist()
            except Exception as exc:  # noqa: BLE001 - the run's own error, if any, is the one told
                log.debug("releasing what the run cached failed: %s", exc)
        for key, value in before.items():
            if value is None:  # not set before
                conf.unset(key)
            else:
                conf.set(key, value)


#: what a run tells ``on_progress`` it is doing, in this order
READING, CLUSTERING, WRITING = PHASES = ("reading", "clustering", "writing")
#: seconds between two looks at the documents read (a task adds its own as it ends)
POLL = 0.5


@contextmanager
def _following(read: Any, on_progress: Callable[[str, int], None] | None) -> Iterator[None]:
    """While the block reads the documents, tell ``on_progress`` every :data:`POLL` seconds how
    many have been read (the Spark accumulator ``read``), from a thread that starts no job;
    and once more as it ends: all of them."""
    if on_progress is None:
        yield
        return
    done = threading.Event()

    def follow() -> None:
        while not done.wait(POLL):
            on_progress(READING, read.value)

    follower = threading.Thread(target=follow, name="neardup progress", daemon=True)
    follower.start()
    try:
        yield
    finally:
        done.set()
        follower.join()
    on_progress(READING, read.value)


def in_input_order(frame: Any, tasks: int, partitions: int) -> Any:
    """``frame``'s rows sorted by key, partition after partition: partition ``p`` holds the
    input tasks ``tasks·p/partitions`` to the next one's, each sorted. The input order is
    known before any row is read (a key's high bits are its task), so this is a plain
    repartition, not a global sort's range partitioning, which first samples its input in a
    job of its own."""
    if tasks <= 1 or partitions <= 1:
        return frame.coalesce(1).sortWithinPartitions("key")
    route = task_range_route(frame.sparkSession, "key", tasks, partitions)
    return (frame.selectExpr("*", f"{route} AS _route").repartition(partitions, "_route")
            .sortWithinPartitions("key").drop("_route"))


def default_partitions(cores: int, documents: int) -> int:
    """Partitions of the clustering stages, unless --partitions says: one per
    :data:`DOCUMENTS_PER_PARTITION` documents, at least two and one per core, rounded up to a
    multiple of the cores, so that no wave of tasks leaves a core idle.

    >>> default_partitions(2, 20_000), default_partitions(2, 60_000), default_partitions(1, 60_000)
    (2, 4, 3)
    """
    wanted = max(2, cores, -(-documents // DOCUMENTS_PER_PARTITION))
    return -(-wanted // cores) * cores


class Clustered(NamedTuple):
    """What :func:`cluster` hands back: a row per sketched document (:data:`~.numbering.ROWS`)
    and the counters of the search and the rounds."""

    rows: Any
    stats: dict[str, int]


def cluster(docs: Any, job: SparkJob, held: list[Any]) -> Clustered:
    """The clustering stages, from the documents (:data:`~.sketch.DOCUMENTS`) to a row per
    sketched document, in ``job.partitions``: the exact copies and their leaders, the
    candidate search, the greedy rounds (again while ``--exact-cap``'s search is not settled),
    the cluster ids. What they cache is added to ``held``, to unpersist once the rows are
    read (:func:`run_settings`)."""
    context = docs.sparkSession.sparkContext
    # one input task per partition suits reading; the stages after want fewer, larger ones
    docs = docs.coalesce(job.partitions)
    leaders, copies = split_copies(docs)
    copies = cached(copies)
    held.append(copies)
    search = Search(leaders, job, docs.where("sketch IS NOT NULL"))
    held.append(search)
    while True:
        with described(context, f"candidate pairs (pass {search.passes})"
                       if search.passes > 1 else "candidate pairs"):
            stats = search.stats()
        if search.passes > 1:
            log.debug("pass %d: the candidates of %d of %d documents changed", search.passes,
                      search.changed, search.waiting)
        if search.waiting:
            # kept by the first round's job, which estimates the pairs on its way
            prefs = kept(search.preferences, held)
        else:  # no pair to estimate: no document prefers any other
            prefs = docs.sparkSession.createDataFrame([], PREFERENCES)
        rounds = greedy_rounds(leaders, prefs, job.partitions, job.stretch, search.waiting)
        decisions = rounds.decisions
        held += rounds.steps
        log.debug("estimates and greedy rounds: %d rounds", rounds.count)
        # a first search whose cap cut nothing cut nothing differently from the local index's
        if not job.exact_cap or (search.passes == 1 and not stats["capped"]):
            break
        with described(context, f"the cap's cuts checked (pass {search.passes})"):
            if search.settled(decisions, prefs):
                break
        log.debug("pass %d: leaders that joined a cluster took places under the cap",
                  search.passes - 1)
    search.unpersist()
    rows = numbered(decisions, copies, job.partitions, rounds.kept_per_task)
    stats.update(rounds=rounds.count, passes=search.passes, exact_cap=job.exact_cap)
    return Clustered(rows, stats)


def _summary(rows: Any) -> tuple[ClusterSummary, dict[str, int]]:
    """The summary table, clusters counted by size and by whether all members are identical,
    and the documents counted by decision, in one pass in Spark; the table's arithmetic is
    :class:`~dedup.summary.ClusterSummary`'s."""
    from pyspark.sql import functions as F

    # SQL text, not Column objects: each Column is a round trip to the JVM
    decided = [F.expr(f"sum(CAST(kind = '{kind}' AS LONG)) AS {kind}") for kind in KINDS]
    summing = (
        rows.groupBy("cluster")
        .agg(F.expr("count(*) AS size"), F.expr("min(CAST(identical AS INT)) AS same"), *decided)
        .groupBy("size", "same")
        .agg(F.expr("count(*) AS n"), *(F.expr(f"sum({kind}) AS {kind}") for kind in KINDS))
    )
    with described(rows.sparkSession.sparkContext, "summary"):
        shapes = summing.collect()
    total: Counter[str] = Counter()
    kinds = dict.fromkeys(KINDS, 0)
    for shape in shapes:
        info = ClusterInfo(0, 0, shape["size"], bool(shape["same"]))
        one = ClusterSummary.from_clusters([info]).to_dict()
        total.update({k: v * shape["n"] for k, v in one.items()})
        for kind in KINDS:
            kinds[kind] += int(shape[kind])
    total.pop("duplicates", None)
    return ClusterSummary(**{k: int(v) for k, v in total.items()}), kinds


#: clusters.jsonl text, a chunk of lines a row
_TEXT = "text string"


def _lines(batches: Iterable[Any]) -> Iterator[Any]:
    """clusters.jsonl text, rows in the order given, in chunks of about a packed array's bytes
    (:data:`~.postings.BLOB_BYTES`), for the same reason as a packed array's size."""
    chunk: list[str] = []
    size = 0
    for batch in batches:
        c = batch.to_pydict()
        for doc_id, cid, rep, r, kind, same in zip(
            c["id"], c["cluster"], c["representative"], c["r"], c["kind"], c["identical"]
        ):
            decision = Decision(kind, None if kind == "kept" else cid, resemblance=r)
            line = clusters_line(doc_id, Assignment(0, cid, decision, rep, same))
            chunk.append(line)
            size += len(line)
            if size >= BLOB_BYTES:
                yield record_batch(_TEXT, [["".join(chunk)]])
                chunk, size = [], 0
    if chunk:
        yield record_batch(_TEXT, [["".join(chunk)]])


#: the Parquet dataset's rows
_PARQUET = ("position long, id string, cluster long, representative boolean, "
            "resemblance double, decision string")


def _rounded(batches: Iterable[Any]) -> Iterator[Any]:
    """Resemblances rounded as clusters.jsonl writes them
    (:func:`~crawler.recluster.run.json_number`)."""
    for batch in batches:
        c = batch.to_pydict()
        c["resemblance"] = [json_number(r) for r in c["resemblance"]]
        yield record_batch(_PARQUET, c.values())
