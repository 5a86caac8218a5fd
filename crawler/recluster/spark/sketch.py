"""Reading and sketching, in executors: every document of the input as one row of a DataFrame.

Each executor task reads one input task (:mod:`.tasks`) and runs the local engine's own
per-document function (:func:`crawler.recluster.pool.sketch_source`), so tokens and sketches
are the same. Each row holds what the clustering stages read, computed once here: the sketch's
bytes, its distinct fingerprints, how many of them a representative indexes and the bound's
terms (:func:`dedup.cluster.indexed_count`, :func:`~dedup.cluster.hits_needed`,
:func:`~dedup.cluster.bound_denominator`). A document that cannot be used is a row with its
skip reason and no sketch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import reduce
from typing import Any
from urllib.parse import urlparse

import numpy as np

from crawler.recluster.inputs import InputError, SourceDocument
from crawler.recluster.pool import SketchedDocument, init_sketcher, sketch_source
from crawler.recluster.spark.steps import python_step, record_batch
from crawler.recluster.spark.tasks import Task, document_key, read_task, remote
from dedup.cluster import bound_denominator, hits_needed, indexed_count
from dedup.estimators import estimate
from dedup.params import DEFAULT_CAP, ContentArea, DedupParams, SketchParams

__all__ = ["DOCUMENTS", "SparkJob", "document_batch", "document_row", "documents",
           "exact_cap_wanted"]

#: the documents DataFrame: key (input order), id, content hash, skip reason (no sketch),
#: sketch bytes, distinct fingerprints (int64 bytes: only numpy reads them), indexed count,
#: hits needed, bound denominator, and the estimate of the sketch against itself (what an
#: exact copy of a representative reports)
DOCUMENTS = (
    "key long, id string, hash long, skip string, sketch binary, fps binary, "
    "k int, least int, den int, self_r double"
)
#: documents per Arrow batch handed to the JVM
BATCH = 1024


@dataclass
class SparkJob:
    """What the executors run; ``sketch`` is the per-document function (tests wrap it)."""

    params: SketchParams
    dedup: DedupParams
    partitions: int
    sketch: Callable[[SourceDocument], SketchedDocument] = sketch_source
    #: the content area HTML documents are read with (None: the whole page)
    area: ContentArea | None = None
    #: pending documents per range of a greedy round (crawler.recluster.spark.greedy)
    stretch: int = 50_000
    #: search again until the cap cuts where the local index's does (``--exact-cap``,
    #: :meth:`.candidates.Search.settled`); None: :func:`exact_cap_wanted`
    exact_cap: bool | None = None

    def __post_init__(self) -> None:
        self.exact_cap = exact_cap_wanted(self.dedup, self.exact_cap)

    @property
    def need(self) -> float:
        """The estimate a candidate must be able to reach to be worth reading: the threshold
        (under the containment rule no resemblance bound is proven: 0, read every one)."""
        return 0.0 if self.dedup.containment is not None else float(self.dedup.threshold)


def exact_cap_wanted(dedup: DedupParams, asked: bool | None) -> bool:
    """Whether the search cuts where the local index cuts (``--exact-cap``): as ``asked``,
    else when the boilerplate cap is below its default. A smaller cap bites more often, so
    the faster search decides more documents otherwise than the local engine; the exact one
    (more passes of the search) decides them all alike (docs/spark.md).

    >>> [exact_cap_wanted(DedupParams(cap=cap), asked) for cap, asked
    ...  in ((4, None), (DEFAULT_CAP, None), (4, False), (DEFAULT_CAP, True))]
    [True, False, False, True]
    """
    return dedup.cap < DEFAULT_CAP if asked is None else asked


def documents(session: Any, work: list[Task], job: SparkJob, documents_read: Any = None) -> Any:
    """The documents DataFrame (:data:`DOCUMENTS`) of ``work``: one Spark partition per local
    task, so a file is read by one task, start to end; files on a Hadoop file system (a URL)
    are read by Spark (``binaryFile``) and parsed by the same readers. ``documents_read``: a
    Spark accumulator that each task adds its documents to as it ends, for a progress bar."""
    frames = []
    local = [t for t in work if not remote(t.path)]
    if local:
        # a row per task, made in the JVM: the executors find the task by its place in
        # ``local``, which travels with the function (Spark broadcasts it when it is large)
        frames.append(session.range(0, len(local), 1, len(local)).selectExpr(
            "id AS slot", "CAST(NULL AS STRING) AS path", "CAST(NULL AS BINARY) AS content"))
    far = [t for t in work if remote(t.path)]
    if far:
        try:
            read = session.read.format("binaryFile").load([t.path for t in far])
        except Exception as exc:  # a missing file or an unknown file system: Spark says which
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot read the input files: {first}") from None
        frames.append(read.selectExpr("CAST(NULL AS LONG) AS slot", "path", "content"))
    if not frames:
        return session.createDataFrame([], DOCUMENTS)
    inputs = reduce(lambda a, b: a.unionByName(b), frames)
    # Hadoop names a file in its own way (hdfs:///x may come back as hdfs://host:8020/x)
    by_path = {urlparse(t.path).path: t for t in far}
    return python_step(inputs, _sketch_batches(job, local, by_path, documents_read), DOCUMENTS)


def _sketch_batches(
    job: SparkJob, local: list[Task], by_path: dict[str, Task], documents_read: Any = None
) -> Callable[[Iterable[Any]], Iterator]:
    params, engine, sketch, area = job.params, job.dedup.canonicaliser, job.sketch, job.area
    need, containment = job.need, job.dedup.containment is not None

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        init_sketcher(params, engine, area)
        for batch in batches:
            columns = batch.to_pydict()
            for slot, path, content in zip(columns["slot"], columns["path"], columns["content"]):
                task = local[slot] if slot is not None else by_path[urlparse(path).path]
                rows, n = [], -1
                for n, doc in enumerate(read_task(task, content)):
                    try:
                        made = sketch(doc)
                    except Exception as exc:  # a page that breaks the canonicaliser: skipped
                        why = f"error ({type(exc).__name__})"
                        made = SketchedDocument(doc.id, None, skip_reason=why)
                    key = document_key(task.ordinal, n)
                    rows.append(document_row(key, made, need, containment))
                    if len(rows) == BATCH:
                        yield document_batch(rows)
                        rows = []
                if rows:
                    yield document_batch(rows)
                if documents_read is not None:
                    documents_read.add(n + 1)

    return run


def document_row(key: int, made: SketchedDocument, need: float, containment: bool) -> tuple:
    """One row of :data:`DOCUMENTS` for a sketched (or skipped) document."""
    sketch = made.sketch
    if sketch is None:
        return key, made.id, 0, made.skip_reason or "unknown", None, _NO_VALUES, 0, None, None, None
    distinct = sketch.distinct()
    denominator = bound_denominator(sketch, containment=containment)
    least = hits_needed(denominator, need) if need > 0 and denominator is not None else None
    if need > 0 and bound_denominator(sketch) is not None:
        indexed = indexed_count(int(distinct.size), need)
    else:  # no proven bound (or none asked for): every fingerprint is indexed
        indexed = int(distinct.size)
    signed_hash = int(np.uint64(made.content_hash).view(np.int64))
    self_r = estimate(sketch, sketch).resemblance
    return (key, made.id, signed_hash, None, sketch.to_bytes(), distinct.view(np.int64),
            indexed, least, denominator, self_r)


_NO_VALUES = np.empty(0, dtype=np.int64)


def document_batch(rows: list[tuple]) -> Any:
    """An Arrow batch of :data:`DOCUMENTS` rows."""
    columns = list(zip(*rows))
    columns[5] = [values.tobytes() for values in columns[5]]  # the fingerprints' bytes
    return record_batch(DOCUMENTS, columns)
