"""The whole Spark run: documents → clusters → ``clusters.jsonl`` (or Parquet), in input order.

Cluster ids number the kept documents in input order, as the local index numbers its clusters
(:mod:`.numbering`). The output is sorted by document key (a range-partitioned sort),
formatted in executors by the local engine's own line writer, and only written on the driver.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import IO, Any, NamedTuple

from crawler.recluster.inputs import SourceDocument
from crawler.recluster.pool import SketchedDocument, sketch_source
from crawler.recluster.run import ReclusterResult, clusters_line, json_number
from crawler.recluster.spark.candidates import PREFERENCES, BroadcastSearch, Search, split_copies
from crawler.recluster.spark.described import described
from crawler.recluster.spark.greedy import greedy_rounds
from crawler.recluster.spark.kept import kept
from crawler.recluster.spark.numbering import numbered
from crawler.recluster.spark.postings import BLOB_BYTES
from crawler.recluster.spark.routes import task_range_route
from crawler.recluster.spark.sketch import SparkJob, documents
from crawler.recluster.spark.small_input import SmallInput
from crawler.recluster.spark.steps import passed_through, python_step
from crawler.recluster.spark.tasks import TASK_DOCUMENTS, Task
from dedup.cluster import KINDS, Assignment, Decision
from dedup.index import ClusterInfo
from dedup.params import ContentArea, DedupParams, SketchParams
from dedup.summary import ClusterSummary

__all__ = [
    "DOCUMENTS_PER_PARTITION", "PHASES", "Plan", "cluster", "default_partitions",
    "expected_documents", "in_input_order", "recluster_spark", "warm_workers",
]

log = logging.getLogger(__name__)

#: documents per partition of the clustering stages, unless --partitions says otherwise: a
#: partition's sketches and fingerprint rows then fit a default executor's memory
DOCUMENTS_PER_PARTITION = 20_000
#: bytes of clusters.jsonl per row handed from the executors to the driver: as small as a
#: packed array, for the same reason (:data:`~.postings.BLOB_BYTES`)
CHUNK = BLOB_BYTES
#: the session's setting that sizes the shuffles Spark plans itself (joins, aggregations)
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


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
    broadcast: int | None = None,
    exact_cap: bool | None = None,
    on_progress: Callable[[str, int], None] | None = None,
) -> ReclusterResult:
    """Cluster the documents of ``work`` on Spark; write clusters.jsonl lines to ``out`` (in
    input order) or a Parquet dataset to ``parquet``. Same result as the local engine's
    (:func:`crawler.recluster.run.recluster`), HTML read with the content area ``area``.
    ``stretch``: pending documents per range of a greedy round (fewer: more rounds).
    ``broadcast``: documents up to which the candidate search runs in one stage
    (:class:`~crawler.recluster.spark.candidates.BroadcastSearch`; 0: never).
    ``exact_cap``: where the boilerplate cap bites, search again until it cuts where the local
    index's cuts (:meth:`~crawler.recluster.spark.candidates.Search.settled`); None: when the
    cap is below its default (:func:`~.sketch.exact_cap_wanted`).
    ``on_progress(phase, documents)``: told what the run is doing (:data:`PHASES`) and how many
    documents have been read, every :data:`POLL` seconds while they are read."""
    if dedup.representative == "popular":
        raise ValueError("the 'popular' representative is not available on Spark")
    from pyspark.util import inheritable_thread_target

    # the caller's session (a notebook's) goes on after the run, ended or failed, as it was
    with _given_back(session) as releases:
        started = time.perf_counter()
        job = SparkJob(params, dedup, partitions or 0, sketch, area, exact_cap=exact_cap)
        if stretch is not None:
            job.stretch = stretch
        if broadcast is not None:
            job.broadcast = broadcast
        result = ReclusterResult(ClusterSummary())
        phase = _Phases()
        cores = session.sparkContext.defaultParallelism
        documents_read = None if on_progress is None else session.sparkContext.accumulator(0)
        # the jobs run beside the driver's planning, in threads of their own, carry the caller's
        # Spark properties and tags (job group, description, scheduler pool), as the jobs it runs
        # itself do: a thread started plainly would run them outside the caller's group and pool
        def same_properties(function: Callable) -> Callable:
            return inheritable_thread_target(session)(function)

        with ThreadPoolExecutor(2) as beside:
            # first, while the driver plans the reading
            beside.submit(same_properties(warm_workers), session)
            cached = documents(session, work, job, documents_read).persist()
            releases.append(cached.unpersist)
            # one pass over the sketched documents: how many there are, and why any were skipped.
            # Meanwhile the driver makes the clustering stages' plan (most of a second of its
            # time, with every core otherwise idle if it came after), for the partitions the
            # tasks suggest; only if the count asks for other partitions is it made again.
            counted = beside.submit(same_properties(_counted), cached)
            expected = expected_documents(work)
            job.partitions = partitions or default_partitions(cores, expected)
            plan = Plan(session, cached, job, expected)
            releases.append(plan.drop)
            if on_progress is not None:
                _follow(counted, documents_read, on_progress)
            total = 0
            for reason, n in counted.result():
                total += n
                if reason is not None:
                    result.skipped[reason] += n
        wanted = partitions or default_partitions(cores, total)
        if wanted != job.partitions or (plan.whole, plan.small) != (
                job.searches_whole(total), job.decides_in_one_task(total)):
            log.debug("planned for %d partitions and %d documents, %d documents want %d: "
                      "planned again", job.partitions, expected, total, wanted)
            plan.drop()
            job.partitions = wanted
            plan = Plan(session, cached, job, total)
            releases.append(plan.drop)
        phase("read and sketch")
        if on_progress is not None:
            on_progress(CLUSTERING, total)
        docs = plan.docs
        clustered = cluster(plan)
        rows = clustered.rows.persist()
        releases.append(rows.unpersist)
        phase("cluster")
        if on_progress is not None:
            on_progress(WRITING, total)
        # the summary's small jobs run beside the write's, on the cores the write leaves idle (the
        # driver plans one while the other runs); the first to need a partition of rows caches it
        with ThreadPoolExecutor(1) as beside:
            summary = beside.submit(same_properties(_summary), rows)
            ordered = in_input_order(rows.join(docs.select("key", "id"), "key"), len(work),
                                     job.partitions)
            context = session.sparkContext
            if parquet is not None:
                named = ordered.selectExpr(
                    "key AS position", "id", "cluster", "representative", "r AS resemblance",
                    "kind AS decision",
                )
                with described(context, "writing Parquet"):
                    python_step(named, _rounded, _PARQUET).write.mode("overwrite").parquet(parquet)
            if out is not None:
                # the next partition is computed while this one is written
                text = python_step(ordered, _lines, "text string")
                with described(context, "writing clusters.jsonl"):
                    for chunk in text.toLocalIterator(prefetchPartitions=True):
                        out.write(chunk.text)
            result.summary, kinds = summary.result()
        result.stats = {"documents": result.summary.documents, **kinds, **clustered.stats}
        phase("summary and write")
        result.seconds = time.perf_counter() - started
        return result  # and what the run cached is released on the way out


@contextmanager
def _given_back(session: Any) -> Iterator[list[Callable[[], Any]]]:
    """``session`` as it was once the block ends or fails: its ``spark.sql.shuffle.partitions``
    (set or not; :class:`Plan` sets it for the run's plans), and nothing cached of the run's.
    The block adds a release (an ``unpersist``) for each thing it caches to the list it is
    given; they are called, last first, as it ends (a second release of the same frame, as a
    plan dropped early and again, does nothing)."""
    conf = session.conf
    before = conf.get(SHUFFLE_PARTITIONS, None)  # None: not set
    releases: list[Callable[[], Any]] = []
    try:
        yield releases
    finally:
        for release in reversed(releases):
            try:
                release()
            except Exception as exc:  # noqa: BLE001 - the run's own error, if any, is the one told
                log.debug("releasing what the run cached failed: %s", exc)
        if before is None:
            conf.unset(SHUFFLE_PARTITIONS)
        else:
            conf.set(SHUFFLE_PARTITIONS, before)


#: what a run tells ``on_progress`` it is doing, in this order
READING, CLUSTERING, WRITING = PHASES = ("reading", "clustering", "writing")
#: seconds between two looks at the documents read (a task adds its own as it ends)
POLL = 0.5


def _follow(
    reading: Future, documents_read: Any, on_progress: Callable[[str, int], None]
) -> None:
    """Tell ``on_progress`` the documents read so far (a Spark accumulator's value) until
    ``reading``, the job that reads and sketches them, is done; and once more then: all."""
    while not wait([reading], timeout=POLL).done:
        on_progress(READING, documents_read.value)
    on_progress(READING, documents_read.value)


def _counted(documents: Any) -> list[Any]:
    """The documents read and sketched, counted by skip reason (None: sketched): the job that
    reads them."""
    with described(documents.sparkSession.sparkContext, "reading and sketching"):
        return documents.groupBy("skip").count().collect()


#: the Spark applications whose workers :func:`warm_workers` has warmed
_warmed: set[str] = set()


def warm_workers(session: Any) -> None:
    """A task per core that passes nothing through Arrow, once per Spark application, started
    as a run starts. An application's first Python task pays for starting its Python worker
    and the JVM's Arrow path (1.4 s of a 1.7 s first task on 20,000 pages); paid here, it
    overlaps the second the driver spends planning the reading, and the sketching tasks find
    the workers ready (a first run on 20,000 pages in ``local[2]``: 9.85 against 10.14 s,
    medians of 9 interleaved pairs, 8 of them faster). Whatever goes wrong here, the run
    itself says."""
    context = session.sparkContext
    if context.applicationId in _warmed:
        return
    _warmed.add(context.applicationId)
    cores = context.defaultParallelism
    try:
        with described(context, "starting the Python workers"):
            python_step(session.range(0, cores, 1, cores), passed_through, "id long").collect()
    except Exception as exc:  # noqa: BLE001 - a warm-up's failure is not the run's
        log.debug("warming the workers failed: %s", exc)


def in_input_order(frame: Any, tasks: int, partitions: int) -> Any:
    """``frame``'s rows sorted by key, partition after partition: partition ``p`` holds the
    input tasks ``tasks·p/partitions`` to the next one's, each sorted. The input order is
    known before any row is read (a key's high bits are its task), so this is a plain
    repartition, not a global sort's range partitioning, which first samples its whole input
    in a job of its own (on 20,000 pages, 0.3 s of a 7.5 s run)."""
    if tasks <= 1 or partitions <= 1:
        return frame.coalesce(1).sortWithinPartitions("key")
    return (frame.selectExpr("*", f"{task_range_route('key', tasks, partitions)} AS _route")
            .repartition(partitions, "_route").sortWithinPartitions("key").drop("_route"))


def expected_documents(work: list[Task]) -> int:
    """How many documents ``work`` holds, as far as its tasks tell before reading: an HTML or
    store task names its documents; a WARC or JSON Lines file is counted as one task's worth
    (:data:`~.tasks.TASK_DOCUMENTS`).

    >>> expected_documents([Task(0, "html", items=("a.html", "b.html")), Task(1, "warc", "x.warc")])
    1026
    """
    return sum(len(task.items) or TASK_DOCUMENTS for task in work)


def default_partitions(cores: int, documents: int) -> int:
    """Partitions of the clustering stages, unless --partitions says: one per
    :data:`DOCUMENTS_PER_PARTITION` documents, at least two and one per core, rounded up to a
    multiple of the cores, so that no wave of tasks leaves a core idle (on 60,000 pages in
    ``local[2]``, 4 partitions instead of 3 took a warm run from 57.5 to 53.1 s).

    >>> default_partitions(2, 20_000), default_partitions(2, 60_000), default_partitions(1, 60_000)
    (2, 4, 3)
    """
    wanted = max(2, cores, -(-documents // DOCUMENTS_PER_PARTITION))
    return -(-wanted // cores) * cores


class _Phases:
    """Logs (at DEBUG) how long each phase of a run took, for whoever tunes a cluster."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        log.debug("%s: %.2f s", name, now - self.last)
        self.last = now


class Clustered(NamedTuple):
    """What :func:`cluster` hands back (what the rows were made from is the plan's to release:
    :meth:`Plan.drop`)."""

    #: a row per clustered document (:data:`~.numbering.ROWS`)
    rows: Any
    #: the counters of the search and the rounds
    stats: dict[str, int]


class Plan:
    """The clustering stages up to the candidates' preferences, planned and not yet run: the
    documents cut into ``job.partitions``, the leaders and copies, the search. Making it takes
    the driver hundreds of round trips to the JVM, so a run makes it while the documents are
    still being sketched."""

    def __init__(
        self, session: Any, docs: Any, job: SparkJob, documents: int | None = None
    ) -> None:
        """``documents``: how many ``docs`` holds, as far as known (None: too many to say), which
        picks the search (:meth:`~.sketch.SparkJob.searches_whole`)."""
        session.conf.set(SHUFFLE_PARTITIONS, str(job.partitions))
        self.job = job
        # one input task per partition suits reading; the stages after want fewer, larger
        # ones (a task costs the scheduler tens of milliseconds, however little it holds)
        self.docs = docs.coalesce(job.partitions)
        #: what the plan and its run (:func:`cluster`) keep, to unpersist once no longer read
        self.held: list[Any] = []
        #: whether the search runs in one stage, the whole input broadcast to each task
        self.whole = documents is not None and job.searches_whole(documents)
        #: whether one task decides and numbers every document after that stage
        self.small = documents is not None and job.decides_in_one_task(documents)
        if self.small:
            self.search: Search | SmallInput = SmallInput(self.docs, job)
            return
        self.leaders, copies = split_copies(self.docs)
        self.copies = copies.persist()
        self.held.append(self.copies)
        searching = BroadcastSearch if self.whole else Search
        self.search = searching(self.leaders, job, self.docs.where("sketch IS NOT NULL"))

    def drop(self) -> None:
        """Unpersist what the plan cached and its run kept: a plan that will not run, or one
        whose run ended or failed."""
        self.search.release()
        for frame in self.held:
            frame.unpersist()


def cluster(plan: Plan) -> Clustered:
    """The clustering stages, run: from a documents DataFrame (:data:`~.sketch.DOCUMENTS`) as
    planned in ``plan`` to a row per document."""
    phase = _Phases()
    job, search = plan.job, plan.search
    held = plan.held
    context = plan.docs.sparkSession.sparkContext
    if isinstance(search, SmallInput):
        with described(context, "candidate pairs"):
            stats = search.stats()
        phase("candidates")  # the rows are decided by the first job that reads them
        return Clustered(search.rows, {**stats, "passes": 1, "exact_cap": False,
                                       "broadcast": True})
    while True:
        with described(context, f"candidate pairs (pass {search.passes})"
                       if search.passes > 1 else "candidate pairs"):
            stats = search.stats()
        phase("candidates")
        if search.passes > 1:
            log.debug("pass %d: the candidates of %d of %d documents changed", search.passes,
                      search.changed, search.waiting)
        if search.waiting:
            # kept by the first round's job, which estimates the pairs on its way
            prefs = kept(search.preferences, held)
        else:  # no pair to estimate: no document prefers any other
            prefs = plan.docs.sparkSession.createDataFrame([], PREFERENCES)
        rounds = greedy_rounds(plan.leaders, prefs, job.partitions, job.stretch, search.waiting)
        decisions = rounds.decisions
        held += rounds.steps
        phase("estimates and greedy rounds")
        # a first search whose cap cut nothing cut nothing differently from the local index's
        if not job.exact_cap or (search.passes == 1 and not stats["capped"]):
            break
        with described(context, f"the cap's cuts checked (pass {search.passes})"):
            if search.settled(decisions, prefs):
                break
        log.debug("pass %d: leaders that joined a cluster took places under the cap",
                  search.passes - 1)
    search.release()
    rows = numbered(decisions, plan.copies, job.partitions, rounds.kept_per_task)
    stats["rounds"] = rounds.count
    stats["passes"] = search.passes
    stats["exact_cap"] = job.exact_cap
    stats["broadcast"] = plan.whole  # the search in one stage (BroadcastSearch)
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


def _assignment(cluster_id: int, representative: bool, r: float | None, kind: str,
                identical: bool) -> Assignment:
    decision = Decision(kind, None if kind == "kept" else cluster_id, resemblance=r)
    return Assignment(0, cluster_id, decision, representative, identical)


def _lines(batches: Iterable[Any]) -> Iterator[Any]:
    """clusters.jsonl text, in chunks of about :data:`CHUNK` bytes, rows in the order given."""
    import pyarrow as pa

    chunk: list[str] = []
    size = 0
    for batch in batches:
        c = batch.to_pydict()
        for doc_id, cid, rep, r, kind, same in zip(
            c["id"], c["cluster"], c["representative"], c["r"], c["kind"], c["identical"]
        ):
            line = clusters_line(doc_id, _assignment(cid, rep, r, kind, same))
            chunk.append(line)
            size += len(line)
            if size >= CHUNK:
                yield pa.RecordBatch.from_pydict({"text": ["".join(chunk)]})
                chunk, size = [], 0
    if chunk:
        yield pa.RecordBatch.from_pydict({"text": ["".join(chunk)]})


_PARQUET = ("position long, id string, cluster long, representative boolean, "
            "resemblance double, decision string")


def _rounded(batches: Iterable[Any]) -> Iterator[Any]:
    """Resemblances rounded as clusters.jsonl writes them
    (:func:`~crawler.recluster.run.json_number`)."""
    import pyarrow as pa

    for batch in batches:
        c = batch.to_pydict()
        c["resemblance"] = [json_number(r) for r in c["resemblance"]]
        yield pa.RecordBatch.from_pydict(c)
