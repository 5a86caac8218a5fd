"""Re-clustering a corpus: the crawl's decision path, run over stored documents.

The steps are the crawl's, through the same code: ``dedup.canonical`` → ``dedup.document.Sketcher``
→ ``dedup.cluster.GreedyClusterer`` over an LMDB index (``storage``). Only the source of the
documents and what happens to the decision differ.

Documents are independent until the index step, so reading, canonicalising and sketching run in
worker processes (``jobs``; :mod:`crawler.recluster.pool`) while the parent clusters in input order
— the order greedy clustering is defined by. The index lives in LMDB (a temporary directory
unless one is named), and the workers run at most a few chunks ahead of the parent, so memory
stays flat however large the corpus.

The index is a store in its own right: every clustered document gets a record (its id as URL,
its decision, its cluster, no page), so ``neardup verify`` accepts it, also after a crash —
each batch of ``BATCH`` documents is one LMDB transaction. The records' URL index
(:meth:`storage.store.Store.find_url`) is also what keeps an id to one line of clusters.jsonl:
a document whose id was clustered before is skipped as ``repeated_id``, and the ids seen take
no memory, however large the corpus.

What went wrong with the input is said at the end, one line each, as warnings of this
module's logger (:meth:`ReclusterResult.input_problems`): each input file that broke off
(:class:`crawler.recluster.inputs.BrokenInput`), and the repeated ids.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any

from crawler.recluster.inputs import BrokenInput, SourceDocument
from crawler.recluster.pool import sketched
from dedup.cluster import Assignment, GreedyClusterer
from dedup.params import ContentArea, DedupParams, SketchParams
from dedup.summary import ClusterSummary

log = logging.getLogger(__name__)

#: documents per LMDB write transaction
BATCH = 512
#: the LMDB map a new index starts with; it doubles whenever it is full
MAP_SIZE = 1 << 30


#: the skip reason of a document whose id an earlier clustered document had
REPEATED_ID = "repeated_id"
#: repeated ids named in the summary's line (the rest are counted)
REPEATS_NAMED = 5


@dataclass
class ReclusterResult:
    """What a re-clustering did, for its summary; both engines fill one the same way."""

    summary: ClusterSummary
    skipped: Counter[str] = field(default_factory=Counter)
    stats: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: the input files that broke off, in the order they were read
    broken: list[BrokenInput] = field(default_factory=list)
    #: the first ids skipped as repeated_id, in input order
    repeated: list[str] = field(default_factory=list)
    #: for each other skip reason, the first document skipped for it (its id; ``FILE:LINE``
    #: for a JSON line): where to look
    first_skipped: dict[str, str] = field(default_factory=dict)

    def count_skipped(self, reason: str | None, n: int = 1, first: str | None = None) -> None:
        """Count ``n`` skipped documents of ``reason``, ``first`` the id of the first of them
        in input order; a broken file's marker (see
        :class:`~crawler.recluster.inputs.BrokenInput`) is counted as the broken file it is."""
        broken = BrokenInput.from_reason(reason)
        if broken is not None:
            self.broken.extend([broken] * n)
            return
        reason = reason or "unknown"
        self.skipped[reason] += n
        if first is not None:
            self.first_skipped.setdefault(reason, first)

    def skipped_by_count(self) -> list[tuple[str, int]]:
        """The skip reasons, most documents first, ties by name: the same order whichever
        engine counted them, and in whatever order its counts came in."""
        return sorted(self.skipped.items(), key=lambda item: (-item[1], item[0]))

    def count_repeated(self, n: int, first: Sequence[str]) -> None:
        """Count ``n`` documents skipped because their id was clustered before, ``first`` the
        ids of the first of them in input order (a few are enough: the line names five)."""
        self.skipped[REPEATED_ID] += n
        self.repeated.extend(first[: max(0, REPEATS_NAMED - len(self.repeated))])

    def input_problems(self) -> list[str]:
        """One line per input file that broke off, and one for the repeated ids (if any)."""
        lines = [broken.line() for broken in self.broken]
        repeats = self.skipped[REPEATED_ID]
        if repeats:
            named = ", ".join(_quoted(i) for i in self.repeated)
            more = ", ..." if repeats > len(self.repeated) else ""
            lines.append(f"{repeats} document{'s' * (repeats != 1)} skipped as {REPEATED_ID}: "
                         f"an earlier document had the id ({named}{more})")  # fmt: skip
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary.to_dict(),
            "skipped": dict(self.skipped_by_count()),
            "broken_files": len(self.broken),
            "broken": [broken.to_dict() for broken in self.broken],
            "repeated_ids": self.repeated,
            "first_skipped": self.first_skipped,
            "clustering": self.stats,
            "seconds": round(self.seconds, 3),
            "documents_per_second": round(self.summary.documents / self.seconds, 1)
            if self.seconds
            else None,
        }


def warn_input_problems(result: ReclusterResult) -> None:
    """Say :meth:`ReclusterResult.input_problems` as warnings: on stderr when nothing else
    handles this logger (Python's last resort), around any progress bar there."""
    lines = result.input_problems()
    if not lines:
        return
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stderr):
        for line in lines:
            log.warning("%s", line)


# --- the parent side: greedy clustering over the LMDB index ------------------------------------


def recluster(
    sources: Iterable[SourceDocument],
    params: SketchParams,
    dedup: DedupParams,
    *,
    out: IO[str] | None = None,
    index_dir: str | Path | None = None,
    jobs: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    map_size: int = MAP_SIZE,
    feed_here: bool = False,
    area: ContentArea | None = None,
) -> ReclusterResult:
    """Cluster ``sources`` in order; write one clusters.jsonl line per document to ``out``.

    ``on_progress(documents, clusters)`` is called after every document. ``map_size`` is the
    LMDB map the index starts with (it grows as needed; ``stats["map_growths"]`` counts how
    often). ``sources`` are read in a process of their own unless ``feed_here`` (for an
    iterator whose side effects the caller reads; see :func:`crawler.recluster.pool.sketched`).
    ``area`` is the content area HTML documents are read with (None: the whole page).
    """
    from storage.records import DocumentRecord
    from storage.store import Store

    started = time.perf_counter()
    jobs = jobs or os.cpu_count() or 1
    result = ReclusterResult(ClusterSummary())
    with (
        # the processes start first: none of them may hold the index's LMDB environment
        sketched(sources, params, dedup.canonicaliser, jobs, feed_here=feed_here, area=area)
        as stream,
        _index_directory(index_dir) as directory,
        # the index is rebuilt from the input if lost: no fsync per batch (durable=False)
        Store.open(directory, params, map_size=map_size, durable=False, area=area) as store,
    ):
        clusterer = GreedyClusterer(store.index, dedup)
        while True:
            lines = []
            now = time.time()
            taken = 0
            with store.batch():
                # documents are taken as they come, not a batch at a time, so the workers
                # never wait for the parent to finish a whole batch
                for doc in islice(stream, BATCH):
                    taken += 1
                    if doc.sketch is None:
                        result.count_skipped(doc.skip_reason, first=doc.id)
                        continue
                    if store.find_url(doc.id) is not None:
                        result.count_repeated(1, [doc.id])
                        continue
                    doc_id = store.next_doc_id()
                    assignment = clusterer.assign(doc_id, doc.sketch, doc.content_hash)
                    store.put_document(doc_id, DocumentRecord(
                        doc.id, assignment.decision.kind, now,
                        assignment.cluster_id, doc.content_hash))
                    result.summary.add(assignment)
                    lines.append(clusters_line(doc.id, assignment))
                    if on_progress:
                        on_progress(result.summary.documents, result.summary.clusters)
            if out is not None:
                out.write("".join(lines))
            if taken < BATCH:
                break
        result.stats = {**clusterer.stats, "map_growths": store.map_growths}
    result.seconds = time.perf_counter() - started
    warn_input_problems(result)
    return result


def clusters_line(doc_id: str, a: Assignment) -> str:
    r"""One clusters.jsonl line, as ``json.dumps`` writes the record (a test holds it to that);
    only the id needs JSON's quoting, so it alone goes through the encoder.

    >>> from dedup.cluster import Decision
    >>> joined = Assignment(3, 1, Decision("near_duplicate", 1, 0, 0, 0.875), False, False)
    >>> print(clusters_line('say "hi"', joined), end="")  # doctest: +NORMALIZE_WHITESPACE
    {"id": "say \"hi\"", "cluster": 1, "representative": false, "resemblance": 0.875,
     "decision": "near_duplicate"}
    """
    resemblance = 1.0 if a.representative else json_number(a.decision.resemblance)
    return (
        f'{{"id": {_quoted(doc_id)}, "cluster": {a.cluster_id:d}, '
        f'"representative": {"true" if a.representative else "false"}, '
        f'"resemblance": {"null" if resemblance is None else repr(resemblance)}, '
        f'"decision": "{a.decision.kind}"}}\n'
    )


_quoted = json.JSONEncoder(ensure_ascii=False).encode


def json_number(value: float | None) -> float | None:
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
