"""Re-clustering a corpus: the crawl's decision path, run over stored documents.

The steps are the crawl's, through the same code: ``dedup.canonical`` → ``dedup.document.Sketcher``
→ ``dedup.cluster.GreedyClusterer`` over an LMDB index (``storage``). Only the source of the
documents and what happens to the decision differ.

Documents are independent until the index step, so canonicalising and sketching run in a pool of
worker processes (``jobs``) while the parent clusters in input order — the order greedy clustering
is defined by. The index lives in LMDB (a temporary directory unless one is named), so memory
stays flat however large the corpus.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any

from crawler.inputs import SourceDocument
from dedup.canonical import html_tokens, text_tokens
from dedup.cluster import Assignment, GreedyClusterer
from dedup.document import Sketcher
from dedup.params import DedupParams, SketchParams
from dedup.sketches import Sketch
from dedup.summary import ClusterSummary

#: documents per LMDB write transaction
BATCH = 512


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


def sketch_source(doc: SourceDocument) -> SketchedDocument:
    """Canonicalise and sketch one document (runs in a worker process)."""
    assert _worker is not None, "call _init_worker first"
    sketcher, engine = _worker
    if doc.skip_reason:
        return SketchedDocument(doc.id, None, skip_reason=doc.skip_reason)
    unit = sketcher.params.unit
    if doc.kind == "html":
        tokens = html_tokens(doc.content, unit=unit, engine=engine)
    else:
        text = doc.content if isinstance(doc.content, str) else doc.content.decode("utf-8", "replace")
        tokens = text_tokens(text, unit=unit)
    if not tokens:
        return SketchedDocument(doc.id, None, skip_reason="empty")
    made = sketcher.sketch(tokens)
    return SketchedDocument(doc.id, made.sketch, made.content_hash, made.tokens)


def sketched(
    sources: Iterable[SourceDocument], params: SketchParams, engine: str, jobs: int
) -> Iterator[SketchedDocument]:
    """Sketches in input order, made by ``jobs`` processes (1: in this process)."""
    if jobs <= 1:
        _init_worker(params, engine)
        yield from map(sketch_source, sources)
        return
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with ctx.Pool(jobs, initializer=_init_worker, initargs=(params, engine)) as pool:
        yield from pool.imap(sketch_source, sources, chunksize=16)


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
) -> ReclusterResult:
    """Cluster ``sources`` in order; write one clusters.jsonl line per document to ``out``.

    ``on_progress(documents, clusters)`` is called after every document.
    """
    from storage.store import Store

    started = time.perf_counter()
    jobs = jobs or os.cpu_count() or 1
    result = ReclusterResult(ClusterSummary())
    with _index_directory(index_dir) as directory, Store.open(directory, params) as store:
        clusterer = GreedyClusterer(store.index, dedup, cap=cap)
        stream = sketched(sources, params, dedup.canonicaliser, jobs)
        while True:
            chunk = list(islice(stream, BATCH))
            if not chunk:
                break
            lines = []
            with store.batch():
                for doc in chunk:
                    if doc.sketch is None:
                        result.skipped[doc.skip_reason or "unknown"] += 1
                        continue
                    assignment = clusterer.assign(store.next_doc_id(), doc.sketch,
                                                  doc.content_hash)
                    result.summary.add(assignment)
                    lines.append(_line(doc.id, assignment))
                    if on_progress:
                        on_progress(result.summary.documents, result.summary.clusters)
            if out is not None:
                out.write("".join(lines))
        result.stats = dict(clusterer.stats)
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
