"""``neardup recluster --engine spark``: the same re-clustering, distributed by Apache Spark.

Same tokens, same sketches, same decisions as the single-machine engine
(:func:`crawler.recluster.run.recluster`), with no single-process stage:

1. **Read and sketch, in executors.** The input is cut into tasks on the driver without reading
   any page: one task per WARC or JSON Lines file (as cc-pyspark reads Common Crawl), chunks of
   HTML file names or of a store's page locations. Each executor reads its task and runs
   :func:`crawler.recluster.pool.sketch_source` on each document, the function the local
   engine's worker processes run. A document's key is its place in the input (the task's
   ordinal, then the record's ordinal in it), never its partition, so reruns and any number of
   partitions give the same output, in input order. Input that cannot be used becomes a skipped
   document with its reason, as in the local engine; a file that breaks off mid-way keeps the
   documents before the break.
2. **Exact duplicates** by content hash: the first document of each hash (its *leader*) is
   clustered; every later copy joins the leader's cluster, as the local index's exact table
   does.
3. **Candidates.** Each leader indexes the rarest part of its sketch that
   :func:`dedup.cluster.indexed_count` proves sufficient (rarest by the corpus's own fingerprint
   counts), joined on fingerprint with every leader's whole sketch. A fingerprint's postings are
   cut at the boilerplate cap (the ``cap`` lowest keys, as the local index keeps the lowest
   cluster ids); a pair is estimated only when it meets :func:`dedup.cluster.hits_needed`
   indexed fingerprints (or, under the containment rule, the resemblance bound), and
   :func:`dedup.estimators.estimate` decides which pairs qualify. The fingerprint-level work
   (a hundred rows per document) runs in Spark SQL, in the JVM; Python sees pairs only.
4. **Greedy rounds** (:mod:`crawler.recluster.rounds`): a document is decided once every
   candidate before its first kept one is decided; cluster ids number the kept documents in
   input order, as the local index numbers its clusters.

Where the two engines can differ: only through the cap. The local engine's postings hold
representatives only; here they hold every leader that might become one, so a fingerprint in
the indexed part of more than ``cap`` near-identical leaders is cut where the local index is
not (and the local engine, which picks the "rarest" part from the counts seen so far, indexes
common fingerprints early in a corpus where this engine does not). Both report how often the
cap bit (``capped``); the benchmark counts the documents decided differently under a small cap.

The popular representative is refused: it changes as its cluster grows, so whether a document
joins depends on every member before it, not on its candidates alone.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import add
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from crawler.recluster.inputs import (
    HTML_SUFFIXES,
    InputError,
    SourceDocument,
    _check_archive_start,
    read_html_files,
    read_jsonl,
    read_warc,
    store_page_document,
)
from crawler.recluster.pool import SketchedDocument, _init_sketcher, sketch_source
import numpy as np

from crawler.recluster.rounds import JOINED, KEPT, decide, preference
from crawler.recluster.run import ReclusterResult, _line, _number
from dedup.cluster import (
    KINDS,
    Assignment,
    Decision,
    bound_denominator,
    hits_needed,
    indexed_count,
)
from dedup.estimators import estimate
from dedup.index import ClusterInfo
from dedup.params import ContentArea, DedupParams, SketchParams
from dedup.summary import ClusterSummary

__all__ = ["SparkUnavailable", "Task", "recluster_spark", "spark_session", "tasks"]

#: a document's key: its task's ordinal in the high bits, its ordinal in the task in the low
RECORD_BITS = 32
#: HTML files or store pages per task
TASK_DOCUMENTS = 256
#: documents per partition of the clustering stages, unless --partitions says otherwise: a
#: partition's sketches and fingerprint rows then fit a default executor's memory
DOCUMENTS_PER_PARTITION = 20_000

#: what a --master may look like (Spark's own parser gives a Java stack trace instead)
_MASTER = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+)$"
)


def _spill() -> Any:
    """Where kept RDDs live: memory, spilling to disk when it is short (rather than dropping
    them to be computed again, or the JVM running out of memory)."""
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no pyspark, no Java, a bad master URL); one line for the user."""


# --- the Spark session ---------------------------------------------------------------------------


def spark_session(master: str | None, *, quiet: bool = True) -> tuple[Any, bool]:
    """The active SparkSession (under ``spark-submit``, or a caller's), else a new one on
    ``master`` (default ``local[*]``); and whether it was made here (then the caller stops it).

    The local workers run this Python (``PYSPARK_PYTHON`` unless set): the one neardup is
    installed in.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable(
            "--engine spark needs pyspark: pip install 'neardup[spark]'"
        ) from None
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started a JVM for us
    if not submitted and not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise SparkUnavailable("--engine spark needs Java 17 or later: install a JDK or set JAVA_HOME")
    if master is not None and not _MASTER.match(master):
        raise SparkUnavailable(
            f"--master {master!r} is not a Spark master URL "
            "(local, local[N], local[*], local[N,RETRIES], spark://HOST:PORT, yarn, k8s://URL)"
        )
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName("neardup recluster")
    if not submitted:
        master = master or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.ui.showConsoleProgress", "false" if quiet else "true")
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # py4j's errors carry a Java stack trace: keep its first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailable(f"cannot start Spark on {master}: {first}") from None
    session.sparkContext.setLogLevel("ERROR")
    return session, True


# --- tasks: the input cut on the driver, read in executors ---------------------------------------


@dataclass(frozen=True)
class Task:
    """One executor task's share of the input: ``kind`` and what it reads."""

    ordinal: int
    kind: str  # "warc", "jsonl", "html", "store"
    path: str = ""
    #: html: the files; store: (url, page location) of each page
    items: tuple[Any, ...] = ()
    id_field: str = "id"
    text_field: str = "text"


def tasks(
    *,
    store: str | None = None,
    warc: Iterable[str] = (),
    jsonl: Iterable[str] = (),
    html: Iterable[str] = (),
    id_field: str = "id",
    text_field: str = "text",
) -> list[Task]:
    """The tasks of an input, in input order (store, WARC, JSON Lines, HTML, as the local engine
    chains them). Reads no page: a missing file, or a file that does not begin like a WARC, is
    an :class:`InputError` here, before any work, as in the local engine."""
    out: list[Task] = []
    if store:
        for chunk in _chunks(_store_pages(store), TASK_DOCUMENTS):
            out.append(Task(len(out), "store", store, tuple(chunk)))
    for path in warc:
        if not _remote(path):
            try:
                with open(path, "rb") as stream:
                    _check_archive_start(stream, path)
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror}") from None
        out.append(Task(len(out), "warc", str(path)))
    for path in jsonl:
        if not _remote(path) and not Path(path).is_file():
            raise InputError(f"cannot read {path}: no such file")
        out.append(Task(len(out), "jsonl", str(path), id_field=id_field, text_field=text_field))
    files = [doc.content.path for doc in read_html_files(html)]  # type: ignore[union-attr]
    for chunk in _chunks(files, TASK_DOCUMENTS):
        out.append(Task(len(out), "html", items=tuple(chunk)))
    return out


def _remote(path: str) -> bool:
    """A Hadoop file system URL (hdfs://, s3a://, ...), read through Spark, not ``open``."""
    return "://" in str(path) and not str(path).startswith("file://")


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _store_pages(path: str) -> Iterator[tuple[str, Any]]:
    """(url, page location) of a store's kept pages, in document order (no page is read)."""
    from storage.errors import StoreError
    from storage.store import Store

    if not Path(path).is_dir():
        raise InputError(f"no store at {path}")
    try:
        with Store.open(path, readonly=True) as st:
            for _, record in st.documents():
                if record.page is not None:
                    yield record.url, record.page
    except StoreError as exc:
        raise InputError(str(exc)) from None


def read_task(task: Task, remote: bytes | None = None) -> Iterator[SourceDocument]:
    """The documents of one task, in order. A file that breaks off yields, after the documents
    before the break, one skipped document that says why (the job goes on)."""
    try:
        if task.kind == "warc":
            if remote is not None:
                yield from _read_warc_bytes(task.path, remote)
            else:
                yield from read_warc([task.path])
        elif task.kind == "jsonl":
            yield from read_jsonl([task.path], task.id_field, task.text_field)
        elif task.kind == "html":
            yield from read_html_files(task.items)
        elif task.kind == "store":
            yield from _read_store_pages(task.path, task.items)
    except Exception as exc:  # a corrupt or vanished file: say so, keep what came before
        reason = f"unreadable_{task.kind} ({type(exc).__name__})"
        yield SourceDocument(task.path or task.kind, "html", b"", skip_reason=reason)


def _read_warc_bytes(path: str, data: bytes) -> Iterator[SourceDocument]:
    """The records of a WARC file Spark read from a Hadoop file system (``binaryFiles``: the
    whole file), through the same reader as a local file."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".warc") as fh:
        fh.write(data)
        fh.flush()
        for doc in read_warc([fh.name]):
            yield doc


def _read_store_pages(path: str, items: tuple[Any, ...]) -> Iterator[SourceDocument]:
    from storage.store import Store

    with Store.open(path, readonly=True) as st:
        for url, location in items:
            try:
                page = st.pages.read(location)
            except Exception as exc:
                yield SourceDocument(url, "html", b"", skip_reason=f"unreadable ({type(exc).__name__})")
                continue
            yield store_page_document(page.url, page.headers, page.body)


# --- sketching, in executors ---------------------------------------------------------------------


@dataclass
class SparkJob:
    """What the executors run; ``sketch`` is the per-document function (tests wrap it)."""

    params: SketchParams
    dedup: DedupParams
    partitions: int
    sketch: Callable[[SourceDocument], SketchedDocument] = sketch_source
    #: the content area HTML documents are read with (None: the whole page)
    area: ContentArea | None = None
    stats: dict[str, int] = field(default_factory=dict)


def _sketch_partition(job: SparkJob) -> Callable[[Iterable[tuple[int, SourceDocument]]], Iterator]:
    params, engine, sketch, area = job.params, job.dedup.canonicaliser, job.sketch, job.area

    def run(docs: Iterable[tuple[int, SourceDocument]]) -> Iterator[tuple[int, tuple]]:
        _init_sketcher(params, engine, area)
        for key, doc in docs:
            try:
                made = sketch(doc)
            except Exception as exc:  # a page that breaks the canonicaliser: skipped, not fatal
                made = SketchedDocument(doc.id, None, skip_reason=f"error ({type(exc).__name__})")
            yield key, (made.id, made.sketch, made.content_hash, made.skip_reason)

    return run


def _task_documents(item: tuple[Task, bytes | None]) -> Iterator[tuple[int, SourceDocument]]:
    task, remote = item
    base = task.ordinal << RECORD_BITS
    for n, doc in enumerate(read_task(task, remote)):
        yield base + n, doc


def sketched_rdd(sc: Any, job: SparkJob, work: list[Task]) -> Any:
    """(key, (id, sketch | None, content hash, skip reason)) for every document, one Spark
    partition per task (so a WARC file is read by one task, start to end)."""
    local = [(t, None) for t in work if not (t.kind == "warc" and _remote(t.path))]
    rdd = sc.parallelize(local, max(1, len(local))) if local else sc.emptyRDD()
    remote = [t for t in work if t.kind == "warc" and _remote(t.path)]
    if remote:
        # Hadoop names a file in its own way (hdfs:///x may come back as hdfs://host:8020/x)
        by_path = {urlparse(t.path).path: t for t in remote}
        files = sc.binaryFiles(",".join(t.path for t in remote)).map(
            lambda kv: (by_path[urlparse(kv[0]).path], kv[1])
        )
        rdd = rdd.union(files)
    return rdd.flatMap(_task_documents).mapPartitions(_sketch_partition(job))


# --- clustering, distributed ---------------------------------------------------------------------
#
# Every RDD keyed by a document is hash-partitioned into the same ``partitions`` (and every RDD
# keyed by a fingerprint likewise), so that PySpark's joins of two of them move no data: a
# stage costs a shuffle only where the key changes.


class KeyRanges:
    """A partition function that keeps input order: partition p holds the p-th slice of the
    documents, counted from each task's number of documents (known after sketching).

    >>> ranges = KeyRanges([0, 3, 10], 4)  # task 0 holds 3 documents, task 1 holds 7
    >>> [ranges((task << RECORD_BITS) + n) for task, n in [(0, 0), (0, 2), (1, 0), (1, 6)]]
    [0, 0, 1, 3]
    """

    def __init__(self, starts: list[int], partitions: int) -> None:
        #: documents before each task, and in all (the last entry)
        self.starts = tuple(starts)
        self.partitions = partitions

    def __call__(self, key: int) -> int:
        position = self.starts[key >> RECORD_BITS] + (key & ((1 << RECORD_BITS) - 1))
        return min(self.partitions - 1, position * self.partitions // max(1, self.starts[-1]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyRanges) and (self.starts, self.partitions) == (
            other.starts, other.partitions)

    def __hash__(self) -> int:
        return hash((self.starts, self.partitions))


def _first_of_hash(v: tuple[int, Any]) -> tuple[int, Any, list[tuple[int, float]]]:
    return v[0], v[1], []


def _add_to_hash(c: tuple[int, Any, list], v: tuple[int, Any]) -> tuple[int, Any, list]:
    """Keep the earliest document of a content hash; later ones become copies of it, each
    with its estimate against itself (what the local engine reports for a copy of a
    representative)."""
    key, sketch, copies = c
    if v[0] < key:
        copies.append((key, estimate(sketch, sketch).resemblance))
        return v[0], v[1], copies
    copies.append((v[0], estimate(v[1], v[1]).resemblance))
    return c


def _merge_hash(a: tuple[int, Any, list], b: tuple[int, Any, list]) -> tuple[int, Any, list]:
    first, later = (a, b) if a[0] < b[0] else (b, a)
    first[2].extend(later[2])
    first[2].append((later[0], estimate(later[1], later[1]).resemblance))
    return first


def _indexed_share(sketch: Any, need: float) -> int:
    """How many of a leader's fingerprints are indexed (all, for kinds with no proven bound)."""
    distinct = sketch.distinct().size
    if bound_denominator(sketch) is None:
        return int(distinct)
    return indexed_count(int(distinct), need)


def candidate_pairs(
    session: Any, leaders: Any, dedup: DedupParams, need: float, partitions: int
) -> tuple[Any, dict[str, int]]:
    """(leader e, document d) for every pair worth estimating, as GreedyClusterer.decide picks
    them, and the counters of the search.

    Fingerprint-level work (a hundred rows per document) runs in Spark SQL, in the JVM: each
    leader's indexed part (its rarest fingerprints by the corpus's counts, ties by the smaller
    value, as :class:`dedup.frequency.FingerprintFrequency` breaks them), each fingerprint's
    ``cap + 1`` lowest postings, the hits of every document on the earlier leaders' postings,
    and the filter of :func:`dedup.cluster.hits_needed` (or, under the containment rule, of the
    resemblance bound), in the same arithmetic as the local engine's.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, IntegerType, LongType, StructField, StructType

    cap = dedup.cap
    containment = dedup.containment is not None
    bound = dedup.threshold if not containment else min(dedup.threshold, dedup.containment)
    session.conf.set("spark.sql.shuffle.partitions", str(partitions))
    schema = StructType([
        StructField("d", LongType(), False),
        StructField("fps", ArrayType(LongType(), False), False),
        StructField("k", IntegerType(), False),
        StructField("least", IntegerType(), True),
        StructField("den", IntegerType(), True),
    ])
    rows = leaders.map(lambda kv: _leader_row_for_sql(kv[0], kv[1], need, containment))
    docs = session.createDataFrame(rows, schema)
    fps = docs.select("d", F.explode("fps").alias("f"))
    if need > 0:
        counts = fps.groupBy("f").count()
        rarest = Window.partitionBy("d").orderBy("count", F.col("f") < 0, "f")
        indexed = (
            fps.join(counts, "f")
            .join(docs.select("d", "k"), "d")
            .withColumn("r", F.row_number().over(rarest))
            .where("r <= k")
            .select("f", F.col("d").alias("e"))
        )
    else:
        indexed = fps.select("f", F.col("d").alias("e"))
    lowest = Window.partitionBy("f").orderBy("e")
    postings = indexed.withColumn("rank", F.row_number().over(lowest)).where(f"rank <= {cap + 1}")
    met = fps.join(postings, "f").where("e < d")
    hits = met.where(f"rank <= {cap}").groupBy("d", "e").agg(F.count("*").alias("hits"))
    capped = met.where(f"rank = {cap + 1}").groupBy("d").agg(F.count("*").alias("capped"))
    found = (
        hits.join(capped, "d", "left")
        .fillna(0, ["capped"])
        .join(docs.select("d", "least", "den"), "d")
    )
    if need > 0:
        keep = F.col("least").isNull() | (F.col("hits") + F.col("capped") >= F.col("least"))
    else:
        upper = F.least(F.col("hits") + F.col("capped"), F.col("den")) / F.col("den")
        keep = F.col("den").isNull() | ~(upper < F.lit(float(bound)))
    found = found.withColumn("keep", keep).persist(_spill())
    totals = found.groupBy().agg(
        F.sum(F.col("keep").cast("long")).alias("comparisons"),
        F.sum((~F.col("keep")).cast("long")).alias("pruned"),
    ).first()
    capped_totals = capped.groupBy().agg(
        F.sum("capped").alias("capped"), F.count("*").alias("capped_documents")
    ).first()
    pairs = found.where("keep").select("e", "d").rdd.map(lambda r: (r[0], r[1]))
    stats = {
        "comparisons": int(totals["comparisons"] or 0),
        "pruned": int(totals["pruned"] or 0),
        "capped": int(capped_totals["capped"] or 0),
        "capped_documents": int(capped_totals["capped_documents"] or 0),
    }
    return pairs, stats


def _leader_row_for_sql(d: int, sketch: Any, need: float, containment: bool) -> tuple:
    """A leader as Spark SQL holds it: its distinct fingerprints (as signed 64-bit integers),
    how many it indexes, and the bound's terms."""
    distinct = sketch.distinct()
    denominator = bound_denominator(sketch, containment=containment)
    least = None
    if need > 0 and denominator is not None:
        least = hits_needed(denominator, need)
    k = _indexed_share(sketch, need) if need > 0 else int(distinct.size)
    return d, distinct.view(np.int64).tolist(), k, least, denominator


def _decide_partition(
    rows: Iterable[tuple[int, tuple[Iterable[Any], Iterable[tuple[int, int]]]]],
) -> Iterator[tuple[int, tuple[str, Any]]]:
    """One round for a partition of pending documents: take in the statuses of their candidates
    decided last round; emit each still pending as (key, ("S", state)) and each decided as
    (key, ("D", decision))."""
    for d, (states, updates) in rows:
        states = list(states)
        if not states:  # an update for a document decided already
            continue
        prefs, status = states[0]
        status = dict(status)
        status.update(updates)
        decision = decide(prefs, status)
        if decision is None:
            yield d, ("S", (prefs, status))
        else:
            yield d, ("D", decision)


def _values_of(tag: str) -> Callable[[Iterable[tuple[int, tuple[str, Any]]]], Iterator]:
    def pick(rows: Iterable[tuple[int, tuple[str, Any]]]) -> Iterator[tuple[int, Any]]:
        return ((k, v[1]) for k, v in rows if v[0] == tag)

    return pick


def _statuses(rows: Iterable[tuple[int, tuple]]) -> Iterator[tuple[int, int]]:
    return ((d, KEPT if decision[0] == "kept" else JOINED) for d, decision in rows)


def greedy_rounds(
    leaders: Any, estimates: Any, dedup: DedupParams, partitions: int
) -> tuple[list[Any], int]:
    """The decisions ``(leader key, (kind, representative key, resemblance))`` of every leader,
    as one RDD per round, and the number of rounds."""
    threshold, containment = dedup.threshold, dedup.containment
    waiting = (
        estimates.groupByKey(partitions)
        .mapValues(lambda est: (preference(est, threshold, containment), {}))
        .filter(lambda kv: kv[1][0])
        .persist(_spill())
    )
    by_candidate = (
        waiting.flatMap(lambda kv: ((e, kv[0]) for e in {p[0] for p in kv[1][0]}))
        .partitionBy(partitions)
        .persist(_spill())
    )
    decided = (
        leaders.subtractByKey(waiting, partitions)
        .mapValues(lambda _: ("kept", None, None))
        .persist(_spill())
    )
    done = [decided]
    pending = waiting.count()
    while pending:
        status = decided.mapPartitions(_statuses, preservesPartitioning=True)
        updates = (
            by_candidate.join(status, partitions)
            .map(lambda kv: (kv[1][0], (kv[0], kv[1][1])))
        )
        step = waiting.cogroup(updates, partitions).mapPartitions(
            _decide_partition, preservesPartitioning=True
        ).persist(_spill())
        step.localCheckpoint()  # the next round starts from here, not from the first
        counts = step.map(lambda kv: kv[1][0]).countByValue()
        if not counts.get("D"):
            raise RuntimeError("greedy rounds made no progress (a bug: candidates are earlier)")
        waiting.unpersist()
        waiting = step.mapPartitions(_values_of("S"), preservesPartitioning=True)
        decided = step.mapPartitions(_values_of("D"), preservesPartitioning=True)
        pending = counts.get("S", 0)
        done.append(decided)
    by_candidate.unpersist()
    return done, len(done)


@dataclass
class Clustered:
    """What :func:`cluster` hands back: every clustered document's row, the documents' ids,
    in input order, and counters."""

    rows: Any
    stats: dict[str, int]


def cluster(session: Any, sketched: Any, job: SparkJob, ranges: KeyRanges) -> Clustered:
    """(key, (cluster id, representative, resemblance, kind, identical)) per clustered
    document, partitioned by ``ranges`` (so in input order partition by partition)."""
    dedup, partitions = job.dedup, job.partitions
    need = 0.0 if dedup.containment is not None else float(dedup.threshold)
    by_hash = (
        sketched.filter(lambda kv: kv[1][1] is not None)
        .map(lambda kv: (kv[1][2], (kv[0], kv[1][1])))
        .combineByKey(_first_of_hash, _add_to_hash, _merge_hash, partitions)
        .persist(_spill())
    )
    leaders = by_hash.map(lambda kv: (kv[1][0], kv[1][1])).partitionBy(partitions).persist(_spill())
    pairs, stats = candidate_pairs(session, leaders, dedup, need, partitions)
    estimates = (
        pairs.join(leaders, partitions)
        .map(lambda kv: (kv[1][0], (kv[0], kv[1][1])))
        .join(leaders, partitions)
        .map(lambda kv: (kv[0], (kv[1][0][0], *_estimate(kv[1][1], kv[1][0][1]))))
    )
    done, rounds = greedy_rounds(leaders, estimates, dedup, partitions)
    decisions = done[0].context.union(done).partitionBy(partitions, ranges).persist(_spill())
    # cluster ids number the kept documents in input order: partition p's kept documents
    # come after those of partitions 0..p-1
    kept = decisions.mapPartitions(
        lambda rows: [sum(1 for _, d in rows if d[0] == "kept")]
    ).collect()
    offsets = [sum(kept[:p]) for p in range(len(kept))]
    ids = decisions.mapPartitionsWithIndex(
        lambda p, rows: zip(
            sorted(d for d, decision in rows if decision[0] == "kept"), itertools.count(offsets[p])
        )
    )
    rep_cluster = (
        decisions.map(lambda kv: (kv[0] if kv[1][0] == "kept" else kv[1][1], kv[0]))
        .join(ids, partitions)
        .map(lambda kv: kv[1])
    )
    led = (
        decisions.join(rep_cluster, partitions)
        .map(lambda kv: (kv[0], _leader_row(kv[1][0], kv[1][1])))
        .persist(_spill())
    )
    copied = (
        by_hash.flatMap(lambda kv: ((kv[1][0], copy) for copy in kv[1][2]))
        .join(led, partitions)
        .map(lambda kv: (kv[1][0][0], _copy_row(kv[1][0][1], kv[1][1])))
    )
    rows = led.union(copied)
    stats["rounds"] = rounds
    return Clustered(rows, stats)


def _estimate(sketch_d: Any, sketch_e: Any) -> tuple[float, float]:
    """Resemblance of document d and leader e, and the containment of d in e."""
    est = estimate(sketch_d, sketch_e)
    return est.resemblance, est.containment_a_in_b


def _leader_row(decision: tuple[str, int | None, float | None], cluster_id: int) -> tuple:
    kind, _, r = decision
    if kind == "kept":
        return cluster_id, True, 1.0, "kept", True
    return cluster_id, False, r, kind, False


def _copy_row(own: float, leader: tuple) -> tuple:
    cluster_id, representative, r, _, _ = leader
    # a copy of the representative itself is estimated against itself (1.0 but for MOD_m's
    # empty samples); a copy of a member, as that member was
    return cluster_id, False, own if representative else r, "exact_duplicate", representative


# --- the whole run -------------------------------------------------------------------------------


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
) -> ReclusterResult:
    """Cluster the documents of ``work`` on Spark; write clusters.jsonl lines to ``out`` (in
    input order) or a Parquet dataset to ``parquet``. Same result as the local engine's
    (:func:`crawler.recluster.run.recluster`), HTML read with the content area ``area``."""
    if dedup.representative == "popular":
        raise ValueError("the 'popular' representative is not available on Spark")
    started = time.perf_counter()
    sc = session.sparkContext
    job = SparkJob(params, dedup, partitions or 0, sketch, area)
    sketched = sketched_rdd(sc, job, work).persist(_spill())
    result = ReclusterResult(ClusterSummary())
    # one pass over the sketches: how many documents each task read, and why any were skipped
    read = sketched.map(
        lambda kv: (kv[0] >> RECORD_BITS, None if kv[1][1] is not None else kv[1][3] or "unknown")
    ).countByValue()
    per_task = [0] * (len(work) + 1)
    for (task, reason), n in read.items():
        per_task[task + 1] += n
        if reason is not None:
            result.skipped[reason] += n
    if partitions is None:
        documents = sum(per_task)
        partitions = max(2, sc.defaultParallelism, -(-documents // DOCUMENTS_PER_PARTITION))
    job.partitions = partitions
    ranges = KeyRanges(list(itertools.accumulate(per_task)), partitions)
    clustered = cluster(session, sketched, job, ranges)
    rows = clustered.rows.persist(_spill())
    kinds = rows.map(lambda kv: kv[1][3]).countByValue()
    result.summary = _summary(rows)
    result.stats = {
        "documents": result.summary.documents,
        **{k: int(kinds.get(k, 0)) for k in KINDS},
        **clustered.stats,
    }
    # each row meets its document's id, in input order partition by partition
    ids = sketched.filter(lambda kv: kv[1][1] is not None).mapValues(lambda v: (1, v[0]))
    ordered = (
        rows.mapValues(lambda row: (0, row))
        .union(ids)
        .repartitionAndSortWithinPartitions(partitions, ranges)
        .mapPartitions(_pair_rows)
    )
    if parquet is not None:
        _write_parquet(session, ordered, parquet)
    if out is not None:
        for _, doc_id, row in ordered.toLocalIterator(prefetchPartitions=True):
            out.write(_line(doc_id, _assignment(row)))
    for rdd in (sketched, rows):
        rdd.unpersist()
    result.seconds = time.perf_counter() - started
    return result


def _pair_rows(entries: Iterable[tuple[int, tuple[int, Any]]]) -> Iterator[tuple[int, str, tuple]]:
    """(key, id, row) from a partition sorted by key, where each key has its row and its id."""
    held: dict[int, Any] = {}
    key = None
    for k, (tag, value) in entries:
        if k != key:
            held, key = {}, k
        held[tag] = value
        if len(held) == 2:
            yield k, held[1], held[0]


def _assignment(row: tuple) -> Assignment:
    cluster_id, representative, r, kind, identical = row
    decision = Decision(kind, None if kind == "kept" else cluster_id, resemblance=r)
    return Assignment(0, cluster_id, decision, representative, identical)


def _summary(rows: Any) -> ClusterSummary:
    """The summary table from each cluster's size and identical flag, counted in executors."""
    sizes = rows.map(lambda kv: (kv[1][0], (1, kv[1][4]))).reduceByKey(
        lambda a, b: (a[0] + b[0], a[1] and b[1])
    )
    parts = sizes.mapPartitions(
        lambda it: [ClusterSummary.from_clusters(
            ClusterInfo(cid, 0, size, identical) for cid, (size, identical) in it
        ).to_dict()]
    ).collect()
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    total.pop("duplicates", None)
    return ClusterSummary(**{k: int(v) for k, v in total.items()})


def _write_parquet(session: Any, ordered: Any, path: str) -> None:
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    schema = StructType([
        StructField("position", LongType(), False),
        StructField("id", StringType(), False),
        StructField("cluster", LongType(), False),
        StructField("representative", BooleanType(), False),
        StructField("resemblance", DoubleType(), True),
        StructField("decision", StringType(), False),
    ])
    records = ordered.map(lambda t: (t[0], t[1], t[2][0], t[2][1], _number(t[2][2]), t[2][3]))
    frame = session.createDataFrame(records, schema)
    frame.write.mode("overwrite").parquet(path)
