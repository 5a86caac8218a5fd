"""One crawl's dedup state, shared by the two stages of :mod:`crawler.pipelines`, and the one
worker that does their work.

The dedup stage decides, the storage stage stores, and both must write into the *same* LMDB
write transaction: a page's index entries and its WARC record commit together or not at all.
So the pieces live in one :class:`StoreWork` per crawler: the open :class:`~storage.store.Store`,
the :class:`~dedup.document.Sketcher`, the :class:`~dedup.cluster.GreedyClusterer` over the
store's LMDB index, the current write batch, and the dedup-log lines waiting for it to commit.
:class:`DedupSession` is the stages' side: it hands each page to the work and turns what comes
back into the item, or the ``DropItem``, that Scrapy gets.

**One worker process.** A crawl is CPU-bound on Scrapy's event-loop thread, and nearly all of
the dedup and storage work (sketch, decide, index, WARC, commit, log) is Python that holds the
GIL: on a worker *thread* it only took turns with Scrapy, and lost to running it inline (the
benchmark's 2,400 pages: 20.8 s on a thread, 17.5 s inline, 14.3 s without the stage). So,
while an asyncio event loop runs (``NEARDUP_WORKER="process"``, the default), :class:`StoreWork`
runs in one child process, started in ``open_spider``, fed over a pipe; Scrapy goes on fetching
and parsing on its core meanwhile. The stages send a page (URL, tokens, status, headers, body)
and get back a small :class:`Outcome`; the event-loop thread only pickles, counts stats and
raises the drop (about 0.1 ms a page). The crawl opens the store once itself first, so that a
busy or mismatched store still fails ``open_spider`` and repairs are logged there. *One* worker, fed in arrival order, keeps the greedy
clustering deterministic (each page is decided against every page that arrived before it) and
the LMDB write transaction on one thread. The child ignores Ctrl-C (the crawl stops it), dies
with the crawl (``PR_SET_PDEATHSIG`` on Linux), and on a closed pipe aborts its batch. With no
asyncio loop (the stages driven by hand) or ``NEARDUP_WORKER="inline"``, the same work runs
inline on the caller's thread.

**Fused storage.** When the storage stage comes directly after the dedup stage in
``ITEM_PIPELINES`` (nothing can come between them), a kept page is stored in the same step that
decides it, and the storage stage only passes the item on. Otherwise the page waits between
the stages (:class:`Pending`) and the storage stage stores it in a step of its own.

**When a batch commits.** After ``NEARDUP_BATCH_SIZE`` decisions, or once
``NEARDUP_BATCH_SECONDS`` have passed since the batch began (checked after every decision and
by a timer, so a slow crawl still commits), and when the spider closes. Never while a kept page
is between the two stages: its index entries are already in the batch and its page is not yet.
So that such pages cannot hold a commit back for ever, a decision that arrives once the batch
is full counting them is *held* (later ones queue behind it, in order) until they have been
stored and the batch has committed, or for at most ``max(1, 2 x NEARDUP_BATCH_SECONDS)`` s.

**The dedup log is written after the commit that makes it true.** Decisions are queued while
the batch is open and written (and flushed) only once it has committed. A crash therefore
never leaves a log line naming a page the store lost, and never makes a page logged twice: the
lines of the batch it interrupted are lost with the batch, and the next crawl decides those
pages again (they are not in the store's URL table) and logs them then. The price is the
instant between a commit and the writing of its lines: a kill exactly there leaves committed
decisions without their lines (the store, which is the record of what was kept, has them).
The other order would instead leave lines for pages that were never stored, and log them a
second time when they are decided again. (``storage.log``'s docstring describes that other
order as possible; this session does not use it.)

**Failures.** Sketching errors are a page's problem: the page is skipped with a reason. A
failure while *writing* (a full disk, an unreadable WARC file), or a worker that dies, is the
store's: the batch is aborted and its queued log lines discarded, the error is logged once with
its traceback, the crawl is stopped, and every page still on its way is dropped with a one-line
reason (``StoreFailed``), so that nothing after it is decided against a store that is not what
the session believes, and nothing waits for a worker that has gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import resource
import signal
import struct
import subprocess
import sys
import time
import traceback
import weakref
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import DropItem
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.project import data_path
from scrapy.utils.reactor import is_reactor_installed

from crawler import settings as defaults
from crawler.items import PageItem
from crawler.review import stored_text
from dedup.canonical import html_tokens, text_tokens
from dedup.cluster import GreedyClusterer
from dedup.document import Sketcher
from dedup.params import DedupParams, SketchParams
from storage.log import new_run_id
from storage.records import DocumentRecord
from storage.store import Store

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    from dedup.cluster import Decision
    from dedup.document import DocumentSketch
    from storage.log import DedupLog

logger = logging.getLogger(__name__)

#: where the work can run (NEARDUP_WORKER)
WORKERS = ("process", "inline")

#: clusters read per fingerprint (the boilerplate cap of GreedyClusterer), unless NEARDUP_CAP
DEFAULT_CAP = 64

_SESSIONS: weakref.WeakKeyDictionary[Crawler, DedupSession] = weakref.WeakKeyDictionary()


def _event_loop_running() -> bool:
    """True when a timer can run: an asyncio loop is running, or a Twisted reactor is there."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return is_reactor_installed()


@dataclass(frozen=True)
class SessionSettings:
    """The ``NEARDUP_*`` settings the stages need, read once with typed getters and checked."""

    store: str
    sketch: SketchParams
    dedup: DedupParams
    batch_size: int
    batch_seconds: float
    cap: int
    run_id: str | None
    #: where the work runs: "process" (a worker process, while an asyncio loop runs) or "inline"
    worker: str = defaults.NEARDUP_WORKER
    #: keep the canonical text of dropped pages in the store (review.keep_text)
    keep_text: bool = defaults.NEARDUP_KEEP_TEXT
    #: a longer text is cut to this many UTF-8 bytes (review.max_text_bytes)
    max_text_bytes: int = defaults.NEARDUP_MAX_TEXT_BYTES

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SessionSettings:
        """Read and validate; a bad value is a ``ValueError`` naming the setting."""
        sketch = {**defaults.NEARDUP_SKETCH, **settings.getdict("NEARDUP_SKETCH")}
        containment = settings.get("NEARDUP_CONTAINMENT", defaults.NEARDUP_CONTAINMENT)
        try:
            sketch_params = SketchParams.from_dict(sketch)
            dedup = DedupParams(
                threshold=settings.getfloat("NEARDUP_THRESHOLD", defaults.NEARDUP_THRESHOLD),
                containment=None if containment in (None, "") else float(containment),
                representative=settings.get(
                    "NEARDUP_REPRESENTATIVE", defaults.NEARDUP_REPRESENTATIVE
                ),
                canonicaliser=settings.get("NEARDUP_CANONICALISER", defaults.NEARDUP_CANONICALISER),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"NEARDUP settings: {exc}") from None
        batch_size = settings.getint("NEARDUP_BATCH_SIZE", defaults.NEARDUP_BATCH_SIZE)
        batch_seconds = settings.getfloat("NEARDUP_BATCH_SECONDS", defaults.NEARDUP_BATCH_SECONDS)
        cap = settings.getint("NEARDUP_CAP", DEFAULT_CAP)
        if batch_size < 1:
            raise ValueError(f"NEARDUP_BATCH_SIZE must be at least 1; got {batch_size}")
        if batch_seconds < 0:
            raise ValueError(f"NEARDUP_BATCH_SECONDS must be >= 0; got {batch_seconds}")
        if cap < 1:
            raise ValueError(f"NEARDUP_CAP must be at least 1; got {cap}")
        max_text_bytes = settings.getint("NEARDUP_MAX_TEXT_BYTES", defaults.NEARDUP_MAX_TEXT_BYTES)
        if max_text_bytes < 0:
            raise ValueError(f"NEARDUP_MAX_TEXT_BYTES must be >= 0; got {max_text_bytes}")
        worker = settings.get("NEARDUP_WORKER", defaults.NEARDUP_WORKER)
        if worker not in WORKERS:
            raise ValueError(f"NEARDUP_WORKER must be one of {', '.join(WORKERS)}; got {worker!r}")
        store = settings.get("NEARDUP_STORE", defaults.NEARDUP_STORE)
        if not store:
            raise ValueError("NEARDUP_STORE must name a directory")
        return cls(
            store=data_path(store),
            sketch=sketch_params,
            dedup=dedup,
            batch_size=batch_size,
            batch_seconds=batch_seconds,
            cap=cap,
            run_id=settings.get("NEARDUP_RUN_ID") or None,
            worker=worker,
            keep_text=settings.getbool("NEARDUP_KEEP_TEXT", defaults.NEARDUP_KEEP_TEXT),
            max_text_bytes=max_text_bytes,
        )




@dataclass
class Pending:
    """A kept page between the stages: its document is in the batch, its page not yet."""

    doc_id: int
    record: DocumentRecord
    entry: dict[str, Any]


@dataclass
class Tally:
    """What this run decided (the command's end summary reads it)."""

    decisions: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    already_decided: int = 0
    commits: int = 0


@dataclass(frozen=True)
class Outcome:
    """What a step made of a page, as plain data (it crosses the pipe from the worker).

    ``drop`` names the ``DropItem`` subclass to raise (``crawler.pipelines.DROPS``), with its
    ``message`` and log level; None passes the item on. ``counts`` are the ``neardup/`` stats to
    add one to (counted on the event-loop thread, where Scrapy's stats live). ``failure`` says,
    with its traceback, that the store failed: the crawl is stopped.
    """

    drop: str | None = None
    message: str = ""
    level: str | None = None
    counts: tuple[str, ...] = ()
    #: the WARC bytes of a page stored in this step (``neardup/stored_bytes``)
    stored_bytes: int = 0
    failure: str | None = None


_DECIDED = ("neardup/decided",)
_KEPT = ("neardup/decided", "neardup/kept")
_SKIPPED = ("neardup/skipped",)
#: the drop of every page that arrives after the store failed
STOPPING = "not decided: the store failed and the crawl is stopping"


def _failed(exc: BaseException) -> Outcome:
    """The outcome of a step that met a store failure: a one-line drop, the traceback beside."""
    why = " ".join(str(exc).split()) or "no message"
    return Outcome(
        drop="store_failed",
        message=f"not decided: writing to the store failed ({type(exc).__name__}: {why})",
        level="WARNING",
        failure="".join(traceback.format_exception(exc)).rstrip(),
    )


class StoreWork:
    """The work of both stages on one open store, in arrival order: decide, store, commit, log.

    Runs in the worker process, or inline (module doc). Not thread-safe: one caller at a time.
    """

    def __init__(self, config: SessionSettings, *, storing: bool, fused: bool, run_id: str) -> None:
        self.config = config
        self.storing = storing
        self.fused = fused
        self.run_id = run_id
        self.sketcher = Sketcher(config.sketch)
        self.store: Store | None = None
        self.clusterer: GreedyClusterer | None = None
        self.log: DedupLog | None = None
        #: kept pages between the dedup and the storage stage, by URL
        self.pending: dict[str, Pending] = {}
        self.tally = Tally()
        #: False once a write failed or the final commit did not happen
        self.clean = True
        self.seconds: dict[str, float] = {}
        self.not_stored_count = 0
        self._batch: AbstractContextManager[Store] | None = None
        self._batch_started = 0.0
        self._batch_items = 0
        self._queued: list[dict[str, Any]] = []
        self._told_foreign = False

    def open(self) -> list[str]:
        """Open the store and the run's dedup log; what opening repaired, one line each."""
        store = Store.open(self.config.store, self.config.sketch)
        self.store = store
        self.clusterer = GreedyClusterer(store.index, self.config.dedup, cap=self.config.cap)
        self.log = store.log(self.run_id)
        return list(store.repairs)

    # --- the steps ----------------------------------------------------------------------------

    def decide(self, page: PageView) -> Outcome:
        """The dedup stage's step: one decision (and, fused, the kept page stored)."""
        if not self.clean:
            return Outcome(drop="store_failed", message=STOPPING, level="WARNING")
        if not page.url:
            return Outcome(drop="skipped", message="skipped (no_url): the item has no url field",
                           level="WARNING", counts=("neardup/no_url",))  # fmt: skip
        store = self.store
        assert store is not None, "open_spider was not called"
        known = store.find_url(page.url)
        if known is not None:
            self.tally.already_decided += 1
            return Outcome(
                drop="already_decided",
                message=f"already decided: {page.url} is document {known} of the store",
                level="DEBUG",
                counts=("neardup/already_decided",),
            )
        if page.skip_reason:
            # the item's maker (our spider) counts neardup/skipped/<reason> for its own reasons
            return self._skip(page, page.skip_reason, page.skip_detail, count_reason=False)
        tokens = page.tokens
        if tokens is None:
            try:
                tokens = self._canonicalise(page)
            except Exception as exc:
                logger.exception("Could not canonicalise %s", page.url)
                return self._skip(page, "unparseable", f"{type(exc).__name__}: {exc}")
        else:
            self.spent("canonicalise", page.canonicalise_seconds)
        if not tokens:
            return self._skip(page, "empty", "no text after canonicalisation")

        started = time.perf_counter()
        try:
            made = self.sketcher.sketch(tokens)
        except Exception as exc:  # a sketching bug is this page's problem, not the crawl's
            logger.exception("Could not sketch %s", page.url)
            return self._skip(page, "sketch_error", f"{type(exc).__name__}: {exc}")
        sketched = time.perf_counter()
        assert self.clusterer is not None
        try:
            decision = self.clusterer.decide(made.sketch, made.content_hash)
            store = self.writing()
            doc_id = store.next_doc_id()
            assignment = self.clusterer.apply(doc_id, made.sketch, made.content_hash, decision)
            applied = time.perf_counter()
            kind = "kept" if decision.kind == "new" else decision.kind
            location = None
            if kind == "kept" and self.fused:
                # the storage stage comes next and nothing can come between: store it now
                location = store.pages.append(
                    page.url, page.status, page.headers, page.body, time=page.fetched_at
                )
            record = DocumentRecord(
                page.url, kind, time.time(), assignment.cluster_id, made.content_hash, location
            )
            store.put_document(doc_id, record, made.sketch)
            if kind != "kept" and self.config.keep_text:
                # a dropped page reaches no WARC file: keep its text so the drop can be explained
                unit = self.config.sketch.unit
                store.put_text(doc_id, stored_text(tokens, unit, self.config.max_text_bytes))
            duplicate_of = None
            if decision.duplicate_of is not None:
                original = store.document(decision.duplicate_of)
                duplicate_of = original.url if original is not None else None
            self.spent("sketch", sketched - started)
            self.spent("index", applied - sketched)
            self.spent("store", time.perf_counter() - applied)
            entry = _decision_entry(page, kind, doc_id, assignment.cluster_id, made, decision,
                                    duplicate_of, self.config.dedup.threshold,
                                    self.config.dedup.containment)  # fmt: skip
            if kind == "kept" and location is None and self.storing:
                self.pending[page.url] = Pending(doc_id, record, entry)
                return Outcome(counts=_DECIDED)
            if location is not None:
                entry["page"] = f"{location.file}:{location.offset}"
            self.queue(entry)
            self.item_done()
        except Exception as exc:
            self.fail()
            return _failed(exc)
        if kind == "kept":
            return Outcome(counts=_KEPT, stored_bytes=location.length if location else 0)
        return Outcome(drop=kind, message=_drop_message(kind, duplicate_of, decision),
                       level="INFO", counts=("neardup/decided", f"neardup/{kind}"))  # fmt: skip

    def store_page(self, page: PageView) -> Outcome:
        """The storage stage's step (unfused): append the kept page, record where it is."""
        if not self.clean:
            return Outcome(drop="store_failed", message=STOPPING, level="WARNING")
        pending = self.pending.get(page.url)
        if pending is None:
            # not a page the dedup stage kept: a pipeline between them made another item
            if not self._told_foreign:
                logger.warning("StoragePipeline: %s was not kept by DedupPipeline; not stored",
                               page.url)  # fmt: skip
                self._told_foreign = True
            return Outcome()
        started = time.perf_counter()
        try:
            store = self.writing()
            location = store.pages.append(
                page.url, page.status, page.headers, page.body, time=page.fetched_at
            )
            store.put_document(pending.doc_id, replace(pending.record, page=location))
            del self.pending[page.url]
            pending.entry["page"] = f"{location.file}:{location.offset}"
            self.spent("store", time.perf_counter() - started)
            self.queue(pending.entry)
            self.item_done()
        except Exception as exc:
            self.fail()
            return _failed(exc)
        return Outcome(counts=("neardup/kept",), stored_bytes=location.length)

    def not_stored(self, url: str, why: str) -> Outcome:
        """A kept page that will not reach the storage stage: decided, recorded, not stored.

        Its document stays (page-less, as in a dedup-only crawl), so its copies are still
        recognised; its log line says why it has no page.
        """
        pending = self.pending.pop(url, None) if self.clean else None
        if pending is None:
            return Outcome()
        pending.entry["reason"] = f"not stored: {why}"
        self.not_stored_count += 1
        self.queue(pending.entry)
        try:
            self.item_done()
        except Exception as exc:
            self.fail()
            return _failed(exc)
        return Outcome()

    def tick(self) -> Outcome:
        """The timer's step: commit an idle batch that is old enough."""
        if self.clean and self._batch is not None and self._batch_age() >= (
            self.config.batch_seconds
        ):
            try:
                self.commit()
            except Exception as exc:
                self.fail()
                return _failed(exc)
        return Outcome()

    def finish(self) -> dict[str, Any]:
        """The last step: settle pages left between the stages, commit, close the store.

        Returns the run's totals (:meth:`totals`) and ``error``, the traceback of a failed
        final commit (None when it committed).
        """
        error = None
        try:
            if self.clean:
                for url in list(self.pending):  # pages that never reached the storage stage
                    self.not_stored(url, "the crawl closed before it reached the storage stage")
                self.commit()
        except Exception as exc:
            self.clean = False
            error = "".join(traceback.format_exception(exc)).rstrip()
        finally:
            self.abort()
        sizes = self.store.stats() if self.store is not None else {}
        self.close()
        return {**self.totals(), "sizes": sizes, "error": error}

    def totals(self) -> dict[str, Any]:
        """The counters the stats and the command's summary show (``cpu``: this process's CPU
        seconds, reported by the worker process only)."""
        return {"tally": self.tally, "seconds": dict(self.seconds), "clean": self.clean,
                "not_stored": self.not_stored_count, "cpu": None}  # fmt: skip

    def close(self) -> None:
        self.abort()
        if self.log is not None:
            self.log.close()
        if self.store is not None:
            self.store.close()
            self.store = None

    def _canonicalise(self, page: PageView) -> list[str]:
        started = time.perf_counter()
        unit = self.config.sketch.unit
        if page.kind == "text":
            tokens = text_tokens(page.body.decode("utf-8", "replace"), unit=unit)
        else:
            tokens = html_tokens(page.body, unit=unit, engine=self.config.dedup.canonicaliser)
        self.spent("canonicalise", time.perf_counter() - started)
        return tokens

    def _skip(
        self, page: PageView, reason: str, detail: str | None, *, count_reason: bool = True
    ) -> Outcome:
        """Record the page as skipped (so a resumed crawl does not decide it again); drop it.

        ``neardup/skipped`` counts every skip; ``neardup/skipped/<reason>`` is counted here
        for the reasons this stage finds, and by the spider for the reasons it gives.
        """
        try:
            store = self.writing()
            doc_id = store.next_doc_id()
            store.put_document(doc_id, DocumentRecord(page.url, "skipped", time.time()))
            self.queue(_entry(page.url, "skipped", reason=reason, doc_id=doc_id, detail=detail,
                              status=page.status))  # fmt: skip
            self.item_done()
        except Exception as exc:
            self.fail()
            return _failed(exc)
        counts = ("neardup/skipped", f"neardup/skipped/{reason}") if count_reason else _SKIPPED
        return Outcome(drop="skipped", message=f"skipped ({reason}): {detail or reason}",
                       level="DEBUG", counts=counts)  # fmt: skip

    # --- the batch ------------------------------------------------------------------------------

    def writing(self) -> Store:
        """The store, with a write batch open (begun here if there is none)."""
        store = self.store
        if store is None:
            raise RuntimeError("the neardup session is not open (open_spider was not called)")
        if self._batch is None:
            batch = store.batch()
            batch.__enter__()
            self._batch = batch
            self._batch_started = time.monotonic()
            self._batch_items = 0
        return store

    def spent(self, part: str, seconds: float) -> None:
        """Add to the per-page cost split, ``neardup/seconds/<part>`` (cumulative seconds)."""
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds

    def queue(self, entry: dict[str, Any]) -> None:
        """A decision's log line, written once the batch holding it has committed."""
        self._queued.append(entry)
        self.tally.decisions[entry["decision"]] += 1
        if entry["decision"] == "skipped":
            self.tally.skipped[entry["reason"] or "unknown"] += 1

    def item_done(self) -> None:
        """One decision is complete; commit if the batch is full or old enough."""
        self._batch_items += 1
        if self._batch_items >= self.config.batch_size or self._batch_age() >= (
            self.config.batch_seconds
        ):
            self.commit()

    def must_hold(self) -> bool:
        """True when a new decision should wait: the batch is full counting the kept pages
        between the stages, which hold its commit back (module doc)."""
        if not self.pending or self._batch is None:
            return False
        return self._batch_items + len(self.pending) >= self.config.batch_size or (
            self._batch_age() >= self.config.batch_seconds
        )

    def commit(self) -> bool:
        """Commit the batch (WARC fsync, then LMDB), then write its log lines.

        Returns False, doing nothing, while a kept page is between the stages.
        """
        if self.pending:
            return False
        if self._batch is not None:
            started = time.perf_counter()
            batch, self._batch = self._batch, None
            try:
                batch.__exit__(None, None, None)
            except Exception:
                self.clean = False
                self._queued.clear()
                raise
            self.tally.commits += 1
            self.spent("store", time.perf_counter() - started)
        queued, self._queued = self._queued, []
        if self.log is not None and queued:
            self.log.write_many(queued)
        return True

    def commit_if_due(self) -> None:
        if self.clean and not self.pending and self._batch is not None and (
            self._batch_items >= self.config.batch_size
            or self._batch_age() >= self.config.batch_seconds
        ):
            try:
                self.commit()
            except Exception:  # the next step meets the failure and reports it
                logger.exception("neardup: the commit failed")
                self.fail()

    def fail(self) -> None:
        """A write failed: abort the batch, forget its log lines and the pages between."""
        self.clean = False
        self.abort()
        self._queued.clear()
        self.pending.clear()

    def abort(self) -> None:
        batch, self._batch = self._batch, None
        if batch is not None:
            error = RuntimeError("batch aborted")
            try:
                batch.__exit__(type(error), error, None)
            except RuntimeError:
                pass

    def _batch_age(self) -> float:
        return time.monotonic() - self._batch_started if self._batch is not None else 0.0


def _entry(url: str, decision: str, **fields: Any) -> dict[str, Any]:
    """A dedup-log line (storage.log.DedupLog.write's keywords), decided now."""
    return {"url": url, "decision": decision, "time": time.time(), **fields}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def _decision_entry(
    page: PageView,
    kind: str,
    doc_id: int,
    cluster_id: int,
    made: DocumentSketch,
    decision: Decision,
    duplicate_of: str | None,
    threshold: float,
    containment_rule: float | None,
) -> dict[str, Any]:
    resemblance, containment = _round(decision.resemblance), _round(decision.containment)
    reason = None
    if kind == "exact_duplicate":
        # identical canonical streams: both are exactly 1 (the estimate against the cluster's
        # representative, which may be another member, is not what this page matched)
        resemblance = containment = 1.0
        reason = "identical canonical text"
    elif kind == "near_duplicate":
        reason = f"estimated resemblance {resemblance} >= threshold {threshold}"
    elif kind == "contained":
        reason = f"estimated containment {containment} >= {containment_rule}"
    return _entry(
        page.url,
        kind,
        reason=reason,
        doc_id=doc_id,
        cluster_id=cluster_id,
        duplicate_of=duplicate_of,
        resemblance=resemblance,
        containment=containment,
        tokens=made.tokens,
        shingles=made.shingles,
        matches=decision.matches,
        sample_size=decision.sample_size,
        status=page.status,
    )


def _drop_message(kind: str, duplicate_of: str | None, decision: Decision) -> str:
    """The DropItem message: what the page matched, and how alike they are."""
    r, c = decision.resemblance, decision.containment
    sample = (
        f"{decision.matches} of {decision.sample_size} sketch entries"
        if decision.sample_size
        else "no sketch entries"
    )
    if kind == "exact_duplicate":
        return f"exact duplicate of {duplicate_of} (resemblance 1.00: identical canonical text)"
    if kind == "near_duplicate":
        return f"near duplicate of {duplicate_of} (estimated resemblance {r:.2f}, {sample})"
    return (
        f"contained in {duplicate_of} (estimated containment {c:.2f}, "
        f"estimated resemblance {r:.2f})"
    )


# --- the worker process --------------------------------------------------------------------------

_FRAME = struct.Struct(">I")


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(data)) + data


def _unframe(buffer: bytearray) -> list[Any]:
    """Every complete message at the start of ``buffer`` (removed from it)."""
    messages = []
    start = 0
    while len(buffer) - start >= _FRAME.size:
        (size,) = _FRAME.unpack_from(buffer, start)
        end = start + _FRAME.size + size
        if len(buffer) < end:
            break
        messages.append(pickle.loads(buffer[start + _FRAME.size : end]))
        start = end
    del buffer[:start]
    return messages


class _ChildPipe:
    """The worker's ends of its two pipes: blocking reads of whole messages, and replies kept
    until :meth:`flush`, so that a burst of pages is answered with one write."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self._in = bytearray()
        self._out: list[bytes] = []

    def receive(self) -> list[Any] | None:
        """The messages that have arrived (waiting for at least one); None at end of input."""
        while True:
            messages = _unframe(self._in)
            if messages:
                return messages
            data = os.read(self.read_fd, 1 << 20)
            if not data:
                return None
            self._in += data

    def send(self, message: Any) -> None:
        self._out.append(_frame(message))

    def flush(self) -> None:
        data = memoryview(b"".join(self._out))
        self._out.clear()
        while data:
            data = data[os.write(self.write_fd, data) :]


class _Forward(logging.Handler):
    """Sends the worker's log records to the crawl, which logs them where Scrapy logs."""

    def __init__(self, pipe: _ChildPipe) -> None:
        super().__init__(logging.INFO)
        self.pipe = pipe
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.pipe.send(("log", record.levelno, record.name, self.format(record)))
        except Exception:  # noqa: BLE001 - logging must never break the work
            self.handleError(record)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the crawl dies (a SIGKILL leaves no worker behind,
    holding the store's writer lock); elsewhere the closed pipe ends it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: the worker's command line: ``python -c _CHILD PACKAGE_ROOT READ_FD WRITE_FD``
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from crawler.session import _child_main; _child_main()"
)


def _child_main() -> None:
    """The worker process (see :data:`_CHILD` and :class:`_Worker`)."""
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the crawl, which stops us
    _die_with_parent()
    if os.getppid() != parent:  # the crawl died before we asked
        return
    pipe = _ChildPipe(int(sys.argv[1]), int(sys.argv[2]))
    root = logging.getLogger()
    root.addHandler(_Forward(pipe))
    root.setLevel(logging.INFO)
    first = pipe.receive()
    if not first:
        return
    _, config, storing, fused, run_id = first[0]
    work = StoreWork(config, storing=storing, fused=fused, run_id=run_id)
    try:
        repairs = work.open()
    except Exception as exc:  # noqa: BLE001 - reported to the crawl, which stops
        pipe.send(("open_failed", "".join(traceback.format_exception(exc)).rstrip()))
        pipe.flush()
        return
    pipe.send(("opened", repairs))
    try:
        _serve(pipe, work, first[1:])
    finally:
        work.close()  # an aborted batch at worst: the next open cuts its WARC tail off


def _serve(pipe: _ChildPipe, work: StoreWork, messages: list[Any]) -> None:
    """Run the steps in arrival order, holding decisions while a commit waits (module doc)."""
    held: deque[tuple[Any, ...]] = deque()
    held_since = 0.0
    hold_limit = max(1.0, 2 * work.config.batch_seconds)

    def run(message: tuple[Any, ...]) -> None:
        kind, seq = message[0], message[1]
        try:
            if kind == "decide":
                outcome = work.decide(PageView.from_wire(message[2]))
            elif kind == "store":
                outcome = work.store_page(PageView.from_wire(message[2]))
            elif kind == "not_stored":
                outcome = work.not_stored(message[2], message[3])
            else:
                outcome = work.tick()
                pipe.send(("totals", {**work.totals(), "cpu": _cpu_seconds()}))
        except Exception as exc:  # noqa: BLE001 - a bug in a step fails the store, not us
            work.fail()
            outcome = _failed(exc)
        pipe.send(("done", seq, outcome))

    while True:
        for message in messages:
            if message[0] == "finish":
                while held:
                    run(held.popleft())
                pipe.send(("finished", message[1], {**work.finish(), "cpu": _cpu_seconds()}))
                pipe.flush()
                os._exit(0)  # all is committed and closed: no interpreter teardown to wait for
            if message[0] == "decide" and (held or work.must_hold()):
                if not held:
                    held_since = time.monotonic()
                held.append(message)
                continue
            run(message)
            if held:
                expired = time.monotonic() - held_since >= hold_limit
                if expired or not work.pending:
                    work.commit_if_due()
                    while held and (expired or not work.must_hold()):
                        run(held.popleft())
                    held_since = time.monotonic()
        pipe.flush()
        received = pipe.receive()
        if received is None:  # the crawl has gone without closing: commit nothing more
            return
        messages = received


class _Worker:
    """The crawl's side of the worker process: sends steps, settles their futures."""

    def __init__(self, session: DedupSession, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.loop = loop
        self.proc: subprocess.Popen[bytes] | None = None
        self._seq = 0
        self._futures: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        self._in = bytearray()
        self._backlog = bytearray()
        self._read_fd = self._write_fd = -1
        self._finished: dict[str, Any] | None = None
        self._gone = False

    def start(self, config: SessionSettings, storing: bool, fused: bool, run_id: str) -> None:
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        # this very package, whatever the working directory holds
        package_root = str(Path(__file__).resolve().parent.parent)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, package_root, str(from_parent), str(to_parent)],
                pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL,
            )  # fmt: skip
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self._read_fd, self._write_fd = from_child, to_child
        os.set_blocking(from_child, False)
        os.set_blocking(to_child, False)
        self.loop.add_reader(from_child, self._readable)
        self._send(("open", config, storing, fused, run_id))

    def submit(self, kind: str, *args: Any, item: Any = None) -> asyncio.Future[Any]:
        """Send a step; the future gets ``item``, or the step's drop as its exception."""
        future = self.loop.create_future()
        if self._gone:
            self.session._settle(future, _gone_outcome(self.proc), item)
            return future
        self._seq += 1
        self._futures[self._seq] = (future, item)
        self._send((kind, self._seq, *args))
        return future

    def _send(self, message: Any) -> None:
        data = _frame(message)
        if self._backlog:
            self._backlog += data
            return
        try:
            written = os.write(self._write_fd, data)
        except BlockingIOError:
            written = 0
        except OSError:  # the worker has gone; _lost says so
            return
        if written < len(data):
            self._backlog += data[written:]
            self.loop.add_writer(self._write_fd, self._drain)

    def _drain(self) -> None:
        try:
            written = os.write(self._write_fd, self._backlog)
        except BlockingIOError:
            return
        except OSError:
            written = len(self._backlog)
        del self._backlog[:written]
        if not self._backlog:
            self.loop.remove_writer(self._write_fd)

    def _readable(self) -> None:
        try:
            data = os.read(self._read_fd, 1 << 20)
        except BlockingIOError:
            return
        if not data:
            self._lost()
            return
        self._in += data
        for message in _unframe(self._in):
            self._handle(message)

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "done":
            waiting = self._futures.pop(message[1], None)
            if waiting is not None:
                self.session._settle(waiting[0], message[2], waiting[1])
        elif kind == "log":
            logging.getLogger(message[2]).log(message[1], "%s", message[3])
        elif kind == "totals":
            self.session._totals(message[1])
        elif kind == "opened":
            for line in message[1]:
                logger.warning("Store %s repaired on opening: %s", self.session.config.store, line)
        elif kind == "open_failed":
            self.session._stop_crawl(f"the worker could not open the store:\n{message[1]}")
        elif kind == "finished":
            self._finished = message[2]

    def _lost(self) -> None:
        """The worker's pipe closed: every page still waiting for it is dropped."""
        if self._gone:
            return
        self._gone = True
        self.loop.remove_reader(self._read_fd)
        if self._backlog:
            self.loop.remove_writer(self._write_fd)
            self._backlog.clear()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        outcome = _gone_outcome(self.proc)
        futures, self._futures = self._futures, {}
        if futures or self._finished is None:
            self.session._stop_crawl(outcome.failure or "the worker process exited")
        for future, item in futures.values():
            self.session._settle(future, replace(outcome, failure=None), item)

    def finish(self) -> dict[str, Any] | None:
        """The last step, waited for (blocking): the worker commits, closes and exits."""
        if not self._gone:
            self._seq += 1
            self._send(("finish", self._seq))
            if self._backlog:
                self.loop.remove_writer(self._write_fd)
            self.loop.remove_reader(self._read_fd)
            os.set_blocking(self._write_fd, True)
            os.set_blocking(self._read_fd, True)
            try:
                while self._backlog:
                    del self._backlog[: os.write(self._write_fd, self._backlog)]
                while self._finished is None:
                    data = os.read(self._read_fd, 1 << 20)
                    if not data:
                        break
                    self._in += data
                    for message in _unframe(self._in):
                        self._handle(message)
            except OSError:
                pass
            self._gone = True
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc is not None and self._finished is None:
            # it answered nothing: make sure it is gone. A worker that answered has closed the
            # store (its writer lock is free) and only has its interpreter to tear down
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._finished is None:
            outcome = _gone_outcome(self.proc)
            for future, item in self._futures.values():
                self.session._settle(future, replace(outcome, failure=None), item)
            self._futures.clear()
        return self._finished


def _gone_outcome(proc: subprocess.Popen[bytes] | None) -> Outcome:
    code = proc.returncode if proc is not None else None
    how = f"exited with status {code}" if code is not None else "stopped answering"
    return Outcome(
        drop="store_failed",
        message=f"not decided: the neardup worker process {how}",
        level="WARNING",
        failure=f"the neardup worker process {how}",
    )


@dataclass(frozen=True)
class RunLog:
    """Where this run's dedup log is (the worker writes it)."""

    path: Path


class DedupSession:
    """The stages' side of one crawler's dedup work; get it with :meth:`of`.

    It hands each page to the :class:`StoreWork` (in the worker process, or inline) and turns the
    :class:`Outcome` into the item or the drop, counting stats on the event-loop thread.
    """

    def __init__(self, crawler: Crawler, config: SessionSettings) -> None:
        # a weak reference: the registry maps crawlers to sessions weakly, and a session that
        # held its crawler would keep both alive for the life of the process
        self._crawler = weakref.ref(crawler)
        self.stats = crawler.stats
        self.config = config
        #: which stages were built (from_crawler order is ITEM_PIPELINES order)
        self.stages: list[str] = []
        #: True when the storage stage directly follows the dedup stage (set by :meth:`open`)
        self.fused = False
        #: False once a write failed or the final commit did not happen
        self.clean = True
        #: what this run decided (complete once the session is closed)
        self.tally = Tally()
        self.log: RunLog | None = None
        #: the work, when it runs inline (else it is in the worker process)
        self.work: StoreWork | None = None
        self._worker: _Worker | None = None
        self._users = 0
        self._opened = False
        self._timer: Any = None
        self._stopping = False
        crawler.signals.connect(self._item_left, signal=signals.item_dropped)
        crawler.signals.connect(self._item_left, signal=signals.item_error)

    @classmethod
    def of(cls, crawler: Crawler) -> DedupSession:
        """The crawler's session, made from its settings on first use."""
        session = _SESSIONS.get(crawler)
        if session is None:
            session = _SESSIONS[crawler] = cls(
                crawler, SessionSettings.from_settings(crawler.settings)
            )
        return session

    @classmethod
    def find(cls, crawler: Crawler) -> DedupSession | None:
        """The crawler's session if a stage made one (for the command's summary)."""
        return _SESSIONS.get(crawler)

    @property
    def storing(self) -> bool:
        """True when the storage stage runs: it, not the dedup stage, finishes kept pages."""
        return "storage" in self.stages

    @property
    def in_worker(self) -> bool:
        """True while the work runs in the worker process."""
        return self._worker is not None

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        """Open the store and start the work (first caller only); every stage calls it from
        ``open_spider``."""
        self._users += 1
        if self._opened:
            return
        crawler = self._crawler()
        self.fused = self.storing and crawler is not None and _adjacent_stages(crawler)
        run_id = self.config.run_id or new_run_id()
        loop = None
        if self.config.worker == "process":
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None  # driven by hand (or a non-asyncio reactor): the work runs inline
        if loop is None:
            work = StoreWork(self.config, storing=self.storing, fused=self.fused, run_id=run_id)
            for line in work.open():
                logger.warning("Store %s repaired on opening: %s", self.config.store, line)
            self.work = work
            assert work.log is not None
            self.log = RunLog(work.log.path)
        else:
            # opened here first, so that a busy or mismatched store (or a bad run id) fails
            # open_spider, and the repairs are logged; then the worker opens it for the crawl
            with Store.open(self.config.store, self.config.sketch) as store:
                for line in store.repairs:
                    logger.warning("Store %s repaired on opening: %s", self.config.store, line)
                with store.log(run_id) as log:
                    self.log = RunLog(log.path)
            worker = _Worker(self, loop)
            worker.start(self.config, self.storing, self.fused, run_id)
            self._worker = worker
        self._opened = True
        logger.info(
            "neardup: store %s, dedup log %s; sketch %s; threshold %s; work %s",
            self.config.store,
            self.log.path,
            self.config.sketch.describe(),
            self.config.dedup.threshold,
            f"in worker process {self._worker.proc.pid}" if self._worker and self._worker.proc
            else "inline",
        )
        if self.config.batch_seconds > 0 and _event_loop_running():
            # the clock commits an idle batch; with no event loop (a pipeline driven by hand)
            # batches still commit by size and age as decisions arrive
            self._timer = create_looping_call(self._tick)
            self._timer.start(min(self.config.batch_seconds, 1.0), now=False)

    def close(self) -> None:
        """Commit what is left and close everything (last caller only).

        Scrapy closes the pipelines only once no item is in them, so the work has nothing left
        but the final commit; this waits for it (Ctrl-C therefore commits too).
        """
        self._users -= 1
        if self._users > 0 or not self._opened:
            return
        self._opened = False
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        if self._worker is not None:
            result = self._worker.finish()
            self._worker = None
        else:
            assert self.work is not None
            result = self.work.finish()
            self.work = None
        if result is None:
            self.clean = False
        else:
            self._totals(result)
            self.clean = self.clean and result["clean"]
            sizes = result["sizes"]
            if sizes:
                self.stats.set_value("neardup/lmdb_map_growths", sizes["map_growths"])
                self.stats.set_value("neardup/lmdb_map_size", sizes["map_size"])
                self.stats.set_value("neardup/store_documents", sizes["documents"])
            if result["error"] is not None:
                self.clean = False
                self.stats.inc_value("neardup/store_error")
                logger.error("neardup: the final commit failed:\n%s", result["error"])
        logger.info(
            "neardup: %s kept, %s exact and %s near duplicates dropped, %s skipped",
            self.tally.decisions["kept"],
            self.tally.decisions["exact_duplicate"],
            self.tally.decisions["near_duplicate"],
            self.tally.decisions["skipped"],
        )

    # --- handing pages to the work --------------------------------------------------------------

    def run(self, kind: str, item: Any) -> Any:
        """Hand ``item`` to the work's ``kind`` step ("decide" or "store"): an awaitable of the
        item (or of its drop) while the worker process runs; else the item, or the drop
        raised, now."""
        page = PageView.of(item)
        if self._worker is not None:
            return self._worker.submit(kind, page.to_wire(), item=item)
        work = self.work
        if work is None:
            raise RuntimeError("the neardup session is not open (open_spider was not called)")
        step = work.decide if kind == "decide" else work.store_page
        self._settled(step(page))
        return item

    def _settled(self, outcome: Outcome) -> None:
        """Count the outcome's stats and raise its drop, if any (event-loop thread)."""
        inc = self.stats.inc_value
        for key in outcome.counts:
            inc(key)
        if outcome.stored_bytes:
            inc("neardup/stored_bytes", outcome.stored_bytes)
        if outcome.failure is not None:
            self._stop_crawl(outcome.failure)
        if outcome.drop is not None:
            from crawler.pipelines import DROPS

            raise DROPS[outcome.drop](outcome.message, log_level=outcome.level)

    def _settle(self, future: asyncio.Future[Any], outcome: Outcome, item: Any) -> None:
        """A worker's outcome arrived: settle the future the stage returned."""
        try:
            self._settled(outcome)
        except Exception as exc:  # noqa: BLE001 - the drop, handed to whoever awaits
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(item)

    def _totals(self, totals: Mapping[str, Any]) -> None:
        """The work's counters into the stats: commits, the cost split, pages not stored."""
        self.tally = totals["tally"]
        set_value = self.stats.set_value
        if self.tally.commits:
            set_value("neardup/commits", self.tally.commits)
        if totals["not_stored"]:
            set_value("neardup/kept_not_stored", totals["not_stored"])
        for part, seconds in totals["seconds"].items():
            set_value(f"neardup/seconds/{part}", seconds)
        if totals["cpu"] is not None:
            set_value("neardup/worker_cpu_seconds", round(totals["cpu"], 3))

    def _stop_crawl(self, failure: str) -> None:
        """The store failed: say so once, with the traceback, and close the spider."""
        self.clean = False
        if self._stopping:
            return
        self._stopping = True
        self.stats.inc_value("neardup/store_error")
        logger.error("neardup: writing to the store failed; stopping the crawl\n%s", failure)
        crawler = self._crawler()
        engine = crawler.engine if crawler is not None else None
        if engine is not None and engine.spider is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="neardup_store_error"))

    def _tick(self) -> None:
        if self._worker is not None:
            self._worker.submit("tick").add_done_callback(_consume)
        elif self.work is not None:
            self._settled(self.work.tick())
            self._totals(self.work.totals())

    # --- pages that leave between the stages ----------------------------------------------------

    def _item_left(
        self,
        item: Any,
        exception: BaseException | None = None,
        failure: Failure | None = None,
        **_: Any,
    ) -> None:
        """item_dropped (``exception``) and item_error (``failure``) after the dedup stage.

        Until the page is settled its pending entry would hold back every commit.
        """
        if exception is None and failure is not None:
            exception = failure.value
        if self.fused or not self.storing or not self._opened or exception is None:
            return
        from crawler.pipelines import DedupDrop

        if isinstance(exception, DedupDrop):
            return
        try:
            url = ItemAdapter(item).get("url")
        except TypeError:
            return
        if not url:
            return
        kind = "dropped" if isinstance(exception, DropItem) else "failed"
        why = f"{kind} after the dedup stage ({type(exception).__name__})"
        if self._worker is not None:
            self._worker.submit("not_stored", url, why).add_done_callback(_consume)
        elif self.work is not None:
            self._settled(self.work.not_stored(url, why))


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a fire-and-forget step's result, so asyncio does not report it as lost."""
    if not future.cancelled():
        future.exception()


def _adjacent_stages(crawler: Crawler) -> bool:
    """True when the storage stage directly follows the dedup stage in ``ITEM_PIPELINES``
    (so no other pipeline can see, change or drop a kept page between them)."""
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    from crawler.pipelines import DedupPipeline, StoragePipeline

    try:
        paths = build_component_list(
            crawler.settings.get_component_priority_dict_with_base("ITEM_PIPELINES")
        )
        classes = [load_object(p) if isinstance(p, str) else p for p in paths]
    except Exception:  # noqa: BLE001 - an unloadable entry: Scrapy itself will say so
        return False
    kinds = [
        "dedup" if isinstance(c, type) and issubclass(c, DedupPipeline)
        else "storage" if isinstance(c, type) and issubclass(c, StoragePipeline)
        else "other"
        for c in classes
    ]  # fmt: skip
    for i in range(len(kinds) - 1):
        if kinds[i] == "dedup":
            return kinds[i + 1] == "storage"
    return False


# --- a page, as the work needs it ---------------------------------------------------------------


@dataclass
class PageView:
    """What the stages read from an item, whatever its class (plain data: it is pickled to the
    worker)."""

    url: str
    #: None when the item carries no token stream (the dedup stage canonicalises then)
    tokens: Sequence[str] | None
    skip_reason: str | None
    skip_detail: str | None
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    #: "html" or "text": how to canonicalise ``body`` when there are no tokens
    kind: str
    fetched_at: float | None
    canonicalise_seconds: float

    def to_wire(self) -> tuple[Any, ...]:
        """The page as a tuple for the worker's pipe: the tokens joined into one string (one
        object to pickle instead of hundreds) unless one holds the separator.

        >>> page = PageView("http://a.test/", ["a", "rose"], None, None, 200, [], b"", "html",
        ...                 None, 0.0)
        >>> PageView.from_wire(page.to_wire()) == page
        True
        """
        tokens: Any = self.tokens
        if tokens is not None:
            joined = _TOKEN_SEP.join(tokens)
            if joined.count(_TOKEN_SEP) == len(tokens) - 1 and tokens:
                tokens = joined
        return (self.url, tokens, self.skip_reason, self.skip_detail, self.status, self.headers,
                self.body, self.kind, self.fetched_at, self.canonicalise_seconds)  # fmt: skip

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...]) -> PageView:
        page = cls(*wire)
        if isinstance(page.tokens, str):
            page.tokens = page.tokens.split(_TOKEN_SEP)
        return page

    @classmethod
    def of(cls, item: Any) -> PageView:
        if type(item) is PageItem:  # our spider's item: plain attributes, no adapter needed
            return cls(
                url=item.url,
                tokens=item.tokens,
                skip_reason=item.skip_reason or None,
                skip_detail=item.skip_detail or None,
                status=item.status or 200,
                headers=_header_pairs(item.headers),
                body=item.body,
                kind="html",
                fetched_at=item.fetched_at or None,
                canonicalise_seconds=item.canonicalise_seconds,
            )
        a = ItemAdapter(item)
        body: Any = a.get("body")
        kind = "html"
        if body is None and a.get("html") is not None:
            body = a.get("html")
        if body is None and a.get("text") is not None:
            body, kind = a.get("text"), "text"
        if isinstance(body, str):
            body = body.encode("utf-8")
        tokens = a.get("tokens")
        return cls(
            url=str(a.get("url") or ""),
            tokens=None if tokens is None else list(tokens),
            skip_reason=a.get("skip_reason") or None,
            skip_detail=a.get("skip_detail") or None,
            status=int(a.get("status") or 200),
            headers=_header_pairs(a.get("headers")),
            body=bytes(body or b""),
            kind=kind,
            fetched_at=a.get("fetched_at") or None,
            canonicalise_seconds=float(a.get("canonicalise_seconds") or 0.0),
        )


#: joins the tokens of a page on its way to the worker (tokens that hold it go as a list)
_TOKEN_SEP = "\x00"


def _header_pairs(value: Any) -> list[tuple[str, str]]:
    """Headers as (name, value) strings from pairs, a dict, or Scrapy's Headers."""
    if not value:
        return [("Content-Type", "text/html; charset=utf-8")]
    pairs: Iterable[Any] = value.items() if isinstance(value, Mapping) else value
    out = []
    for name, values in pairs:
        for v in values if isinstance(values, (list, tuple)) else [values]:
            out.append((_text(name), _text(v)))
    return out


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else str(value)
