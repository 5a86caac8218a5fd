"""Re-clustering a corpus: the crawl's decision path, run over stored documents.

The steps are the crawl's, through the same code: ``dedup.canonical`` → ``dedup.document.Sketcher``
→ ``dedup.cluster.GreedyClusterer`` over an LMDB index (``storage``). Only the source of the
documents and what happens to the decision differ.

Documents are independent until the index step, so canonicalising and sketching run in a pool of
worker processes (``jobs``) while the parent clusters in input order — the order greedy clustering
is defined by. The index lives in LMDB (a temporary directory unless one is named), so memory
stays flat however large the corpus; the pool is fed a bounded look-ahead of chunks, so a parent
slower than its workers (cheap text, a big index) holds at most ``AHEAD`` chunks of sketches,
never the rest of the corpus.

The index is a store in its own right: every clustered document gets a record (its id as URL,
its decision, its cluster, no page), so ``neardup verify`` accepts it, also after a crash —
each batch of ``BATCH`` documents is one LMDB transaction.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any

from crawler.inputs import SourceDocument
from dedup.canonical import html_joined_tokens, text_joined_tokens
from dedup.cluster import Assignment, GreedyClusterer
from dedup.document import Sketcher
from dedup.params import DedupParams, SketchParams
from dedup.sketches import Sketch
from dedup.summary import ClusterSummary

#: documents per LMDB write transaction
BATCH = 512
#: documents per task sent to a worker process
CHUNK = 32
#: chunks in flight per worker: enough to keep workers busy, few enough to bound memory
AHEAD = 4
#: the LMDB map a new index starts with; it doubles whenever it is full
MAP_SIZE = 1 << 30

#: clusters.jsonl "decision" → the index's DocumentRecord decision
_RECORDED = {
    "new": "kept",
    "exact_duplicate": "exact_duplicate",
    "near_duplicate": "near_duplicate",
    "contained": "contained",
}


@dataclass(frozen=True)
class SketchedDocument:
    id: str
    sketch: Sketch | None
    content_hash: int = 0
    tokens: int = 0
    skip_reason: str | None = None


@dataclass
class ReclusterResult:
    summary: ClusterSummary
    skipped: Counter[str] = field(default_factory=Counter)
    stats: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary.to_dict(),
            "skipped": dict(self.skipped),
            "clustering": self.stats,
            "seconds": round(self.seconds, 3),
            "documents_per_second": round(self.summary.documents / self.seconds, 1)
            if self.seconds
            else None,
        }


# --- the worker side: one Sketcher per process, built once -------------------------------------

_worker: tuple[Sketcher, str] | None = None


def _init_worker(params: SketchParams, engine: str) -> None:
    global _worker
    _worker = (Sketcher(params), engine)


def _init_pool_worker(params: SketchParams, engine: str) -> None:
    """A pool worker leaves Ctrl-C to the parent, which stops the pool: one message, no
    traceback from every worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _init_worker(params, engine)


def sketch_source(doc: SourceDocument) -> SketchedDocument:
    """Canonicalise and sketch one document (runs in a worker process)."""
    assert _worker is not None, "call _init_worker first"
    sketcher, engine = _worker
    if doc.skip_reason:
        return SketchedDocument(doc.id, None, skip_reason=doc.skip_reason)
    unit = sketcher.params.unit
    if doc.kind == "html":
        tokens = html_joined_tokens(doc.content, unit=unit, engine=engine, encoding=doc.encoding)
    else:
        text = doc.content if isinstance(doc.content, str) else doc.content.decode("utf-8", "replace")
        tokens = text_joined_tokens(text, unit=unit)
    if not tokens:
        return SketchedDocument(doc.id, None, skip_reason="empty")
    made = sketcher.sketch(tokens)
    return SketchedDocument(doc.id, made.sketch, made.content_hash, made.tokens)


def sketch_chunk(docs: list[SourceDocument]) -> list[SketchedDocument]:
    """One worker task: a chunk of documents, so each message carries many sketches."""
    return [sketch_source(doc) for doc in docs]


Sketching = Callable[[Iterable[SourceDocument]], Iterator[SketchedDocument]]


@contextmanager
def sketching(params: SketchParams, engine: str, jobs: int) -> Iterator[Sketching]:
    """A function turning sources into sketches in input order, by ``jobs`` processes.

    The pool is started on entry, before the caller opens its index, so the forked workers hold
    no LMDB environment and no writer lock of it (a killed parent must not leave its lock held
    by orphans). Workers read only their task queue.
    """
    if jobs <= 1:
        _init_worker(params, engine)
        yield lambda sources: map(sketch_source, sources)
        return
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with ctx.Pool(jobs, initializer=_init_pool_worker, initargs=(params, engine)) as pool:

        def stream(sources: Iterable[SourceDocument]) -> Iterator[SketchedDocument]:
            pending: deque[Any] = deque()
            it = iter(sources)
            while True:
                chunk = list(islice(it, CHUNK))
                if chunk:
                    pending.append(pool.apply_async(sketch_chunk, (chunk,)))
                if pending and (not chunk or len(pending) >= AHEAD * jobs):
                    yield from pending.popleft().get()
                elif not chunk:
                    return

        yield stream


def sketched(
    sources: Iterable[SourceDocument], params: SketchParams, engine: str, jobs: int
) -> Iterator[SketchedDocument]:
    """Sketches in input order, made by ``jobs`` processes (1: in this process)."""
    with sketching(params, engine, jobs) as stream:
        yield from stream(sources)


# --- the parent side: greedy clustering over the LMDB index ------------------------------------


def recluster(
    sources: Iterable[SourceDocument],
    params: SketchParams,
    dedup: DedupParams,
    *,
    out: IO[str] | None = None,
    index_dir: str | Path | None = None,
    jobs: int | None = None,
    cap: int = 64,
    on_progress: Callable[[int, int], None] | None = None,
    map_size: int = MAP_SIZE,
) -> ReclusterResult:
    """Cluster ``sources`` in order; write one clusters.jsonl line per document to ``out``.

    ``on_progress(documents, clusters)`` is called after every document. ``map_size`` is the
    LMDB map the index starts with (it grows as needed; ``stats["map_growths"]`` counts how
    often).
    """
    from storage.records import DocumentRecord
    from storage.store import Store

    started = time.perf_counter()
    jobs = jobs or os.cpu_count() or 1
    result = ReclusterResult(ClusterSummary())
    with (
        sketching(params, dedup.canonicaliser, jobs) as sketch_all,
        _index_directory(index_dir) as directory,
        # the index is rebuilt from the input if lost: no fsync per batch (durable=False)
        Store.open(directory, params, map_size=map_size, durable=False) as store,
    ):
        clusterer = GreedyClusterer(store.index, dedup, cap=cap)
        stream = sketch_all(sources)
        while True:
            lines = []
            now = time.time()
            taken = 0
            with store.batch():
                # documents are taken as they come, not a batch at a time: each one taken
                # lets the pool start another, so the workers never wait for a whole batch
                for doc in islice(stream, BATCH):
                    taken += 1
                    if doc.sketch is None:
                        result.skipped[doc.skip_reason or "unknown"] += 1
                        continue
                    doc_id = store.next_doc_id()
                    assignment = clusterer.assign(doc_id, doc.sketch, doc.content_hash)
                    store.put_document(doc_id, DocumentRecord(
                        doc.id, _RECORDED[assignment.decision.kind], now,
                        assignment.cluster_id, doc.content_hash))
                    result.summary.add(assignment)
                    lines.append(_line(doc.id, assignment))
                    if on_progress:
                        on_progress(result.summary.documents, result.summary.clusters)
            if out is not None:
                out.write("".join(lines))
            if taken < BATCH:
                break
        result.stats = {**clusterer.stats, "map_growths": store.map_growths}
    result.seconds = time.perf_counter() - started
    return result


def _line(doc_id: str, a: Assignment) -> str:
    resemblance = 1.0 if a.representative else a.decision.resemblance
    record = {
        "id": doc_id,
        "cluster": a.cluster_id,
        "representative": a.representative,
        "resemblance": _number(resemblance),
        "decision": a.decision.kind,
    }
    return json.dumps(record, ensure_ascii=False) + "\n"


def _number(value: float | None) -> float | None:
    """JSON has no NaN: an estimate without evidence (an empty MOD_m sample) is null."""
    if value is None or math.isnan(value):
        return None
    return round(float(value), 6)


class _index_directory:
    """A named index directory, or a temporary one removed afterwards."""

    def __init__(self, named: str | Path | None) -> None:
        self.named = named
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> str:
        if self.named is not None:
            return str(self.named)
        self._tmp = tempfile.TemporaryDirectory(prefix="neardup-recluster-")
        return self._tmp.name

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
