"""The work of the crawl's two stages on one open store: decide, store, commit, log.

The dedup stage decides, the storage stage stores, and both must write into the *same* LMDB
write transaction: a page's index entries and its WARC record commit together or not at all.
So the pieces live in one :class:`StoreWork` per crawler: the open :class:`~storage.store.Store`,
the :class:`~dedup.document.Sketcher`, the :class:`~dedup.cluster.GreedyClusterer` over the
store's LMDB index, the current write batch, and the dedup-log lines waiting for it to commit.
Each step takes a :class:`~crawler.work.page.PageView` and gives back an
:class:`~crawler.work.outcome.Outcome`, plain data that the session
(:mod:`crawler.pipelines.session`) turns into the item or its drop. The work runs in the worker
process (:mod:`crawler.work.process`), or inline on the caller's thread; it imports nothing of
Scrapy, so that the worker starts without it.

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
stored and the batch has committed, or for at most ``max(1, 2 x NEARDUP_BATCH_SECONDS)`` s
(:meth:`StoreWork.must_hold` says when; the worker holds).

**The dedup log is written after the commit that makes it true.** Decisions are queued while
the batch is open and written (and flushed) only once it has committed. A crash therefore
never leaves a log line naming a page the store lost, and never makes a page logged twice: the
lines of the batch it interrupted are lost with the batch, and the next crawl decides those
pages again (they are not in the store's URL table) and logs them then. The price is the
instant between a commit and the writing of its lines: a kill exactly there leaves committed
decisions without their lines (the store, which is the record of what was kept, has them).
The other order would instead leave lines for pages that were never stored, and log them a
second time when they are decided again. (``storage.log``'s docstring describes that other
order as possible; this work does not use it.)

**Failures.** Three kinds, each met where it can happen, so that one is never reported as
another:

* *A page's problem* (its HTML cannot be canonicalised, its tokens cannot be sketched): the page
  is skipped with a reason and the crawl goes on. Nothing of the page has reached the batch
  yet, so skipping it loses only that page. A URL that cannot be written as UTF-8 (a lone
  surrogate another pipeline put there) is dropped the same way, without a record, since no
  record can hold it.
* *A store failure* (``OSError``, ``lmdb.Error`` or a :class:`~storage.errors.StoreError` while
  reading or writing the store: a full disk, a read-only directory, a file that cannot grow):
  the batch is aborted and its queued log lines discarded, the step's outcome carries the
  :class:`Failure` (the session stops the crawl), and every later step is a one-line drop
  (``StoreFailed``), so that nothing after it is decided against a store that is not what the
  session believes.
* *A bug* (any other exception while a decision is being made or written: ours, or a value
  another pipeline put in the item that the store cannot take): handled exactly as a store
  failure, but named as what it is, with the page's URL and the traceback. It stops the crawl
  rather than skipping the page because the batch may already hold half of the page's index
  entries, so it must be aborted, which loses the other decisions of the batch too; and because
  a bug in deciding or recording is seldom about one page: skipping would record page after page
  as skipped, and a resumed crawl passes over recorded pages for good. Stopped, the store stays
  at its last commit and the next crawl, once the bug is fixed, decides those pages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from crawler.work.links import DUPLICATE_DECISIONS, follows_links, run_after
from crawler.work.outcome import STORE_FAILURES, Failure, Outcome, Tally
from dedup.canonical import document_tokens
from dedup.cluster import GreedyClusterer
from dedup.document import Sketcher
from dedup.html_text import DocumentTooDeep
from dedup.units import JoinedTokens
from storage.records import DocumentRecord
from storage.store import Store
from storage.texts import stored_text

if TYPE_CHECKING:
    from crawler.work.page import PageView
    from crawler.work.settings import SessionSettings
    from dedup.cluster import Decision
    from dedup.document import DocumentSketch
    from storage.log import DedupLog

__all__ = ["STOPPING", "Pending", "StoreWork"]

logger = logging.getLogger(__name__)

@dataclass
class Pending:
    """A kept page between the stages: its document is in the batch, its page not yet."""

    doc_id: int
    record: DocumentRecord
    entry: dict[str, Any]


_DECIDED = ("neardup/decided",)
_KEPT = ("neardup/decided", "neardup/kept")
_SKIPPED = ("neardup/skipped",)
#: the drop of every page that arrives after the store failed
STOPPING = "not decided: the store failed and the crawl is stopping"


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
        #: why the work stopped (None while it is clean)
        self.failure: Failure | None = None
        self.seconds: dict[str, float] = {}
        self.not_stored_count = 0
        self._batch: AbstractContextManager[Store] | None = None
        self._batch_started = 0.0
        self._batch_items = 0
        self._queued: list[dict[str, Any]] = []
        self._told_foreign = False

    def open(self) -> list[str]:
        """Open the store and the run's dedup log; what opening repaired, one line each."""
        store = Store.open(self.config.store, self.config.sketch, area=self.config.area)
        self.store = store
        self.clusterer = GreedyClusterer(store.index, self.config.dedup)
        self.log = store.log(self.run_id)
        return list(store.repairs)

    # --- the steps ----------------------------------------------------------------------------

    def decide(self, page: PageView) -> Outcome:
        """The dedup stage's step: one decision (and, fused, the kept page stored).

        In three parts, one job each: :meth:`_answer_without_deciding` (the pages that need no
        decision), :meth:`_sketched` (the page's sketch, or its skip), :meth:`_record` (the
        decision, made and written into the batch). Only the first and the last touch the
        store, so only they can fail it (module doc, *Failures*).
        """
        answer = self.guarded(page.url, lambda: self._answer_without_deciding(page))
        if answer is not None:
            return answer
        made = self._sketched(page)
        if isinstance(made, Outcome):
            return made
        tokens, sketched, started = made
        return self.guarded(page.url, lambda: self._record(page, tokens, sketched, started))

    def _answer_without_deciding(self, page: PageView) -> Outcome | None:
        """The outcome of a page that needs no decision of its own, or None: the work has
        stopped, the page has no URL or one the store cannot write, the store decided it
        before, or the item's maker skipped it."""
        if not self.clean:
            return self.stopped()
        if not page.url:
            return Outcome(drop="skipped", message="skipped (no_url): the item has no url field",
                           level="WARNING", counts=("neardup/no_url",))  # fmt: skip
        if not _writable(page.url):
            # a lone surrogate (another pipeline's doing): no record can hold it, so it has none
            return Outcome(
                drop="skipped",
                message=f"skipped (bad_url): {page.url!r} is not valid Unicode text",
                level="WARNING",
                counts=("neardup/bad_url",),
            )
        store = self.store
        assert store is not None, "open_spider was not called"
        known = store.find_url(page.url)
        if known is not None:
            self.tally.already_decided += 1
            # its links are followed as they were when it was decided: a resumed crawl
            # re-derives them, and stops at a trap where the first crawl stopped
            record = store.document(known)
            copied = record is not None and record.decision in DUPLICATE_DECISIONS
            run = run_after(page.run, record.cluster_id if copied and record else None)
            return Outcome(
                drop="already_decided",
                message=f"already decided: {page.url} is document {known} of the store",
                level="DEBUG",
                counts=("neardup/already_decided",),
                run=run,
                follow_links=follows_links(run, self.config.duplicate_budget),
            )
        if page.skip_reason:
            # the item's maker (our spider) counts neardup/skipped/<reason> for its own reasons
            return self._skip(page, page.skip_reason, page.skip_detail, count_reason=False)
        return None

    def _sketched(
        self, page: PageView
    ) -> tuple[Sequence[str] | JoinedTokens, DocumentSketch, float] | Outcome:
        """(tokens, sketch, when sketching began), or the page skipped with the reason it
        cannot be compared. An error here is the page's problem: nothing of it is written."""
        tokens = page.tokens
        if tokens is None:
            try:
                tokens = self._canonicalise(page)
            except DocumentTooDeep as exc:
                return self.guarded(page.url, lambda: self._skip(page, "too_deep", str(exc)))
            except Exception as exc:
                logger.exception("Could not canonicalise %s", page.url)
                detail = f"{type(exc).__name__}: {exc}"
                return self.guarded(page.url, lambda: self._skip(page, "unparseable", detail))
        else:
            self.spent("canonicalise", page.canonicalise_seconds)
        if not tokens:
            detail = "no text after canonicalisation"
            return self.guarded(page.url, lambda: self._skip(page, "empty", detail))
        started = time.perf_counter()
        try:
            made = self.sketcher.sketch(tokens)
        except Exception as exc:  # a sketching bug is this page's problem, not the crawl's
            logger.exception("Could not sketch %s", page.url)
            detail = f"{type(exc).__name__}: {exc}"
            return self.guarded(page.url, lambda: self._skip(page, "sketch_error", detail))
        return tokens, made, started

    def _record(
        self,
        page: PageView,
        tokens: Sequence[str] | JoinedTokens,
        made: DocumentSketch,
        started: float,
    ) -> Outcome:
        """Decide the sketched page against the index and write the decision into the batch
        (fused: with the kept page); queue its log line."""
        sketched = time.perf_counter()
        assert self.clusterer is not None
        decision = self.clusterer.decide(made.sketch, made.content_hash)
        store = self.writing()
        doc_id = store.next_doc_id()
        assignment = self.clusterer.apply(doc_id, made.sketch, made.content_hash, decision)
        applied = time.perf_counter()
        kind = decision.kind
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
        run = run_after(page.run, assignment.cluster_id if kind != "kept" else None)
        follow = follows_links(run, self.config.duplicate_budget)
        if not follow and page.links:
            entry["links_not_followed"] = page.links  # the duplicate budget (crawler.work.links)
        if kind == "kept" and location is None and self.storing:
            self.pending[page.url] = Pending(doc_id, record, entry)
            return Outcome(counts=_DECIDED)
        if location is not None:
            entry["page"] = f"{location.file}:{location.offset}"
        self.queue(entry)
        self.item_done()
        if kind == "kept":
            return Outcome(counts=_KEPT, stored_bytes=location.length if location else 0)
        return Outcome(drop=kind, message=_drop_message(kind, duplicate_of, decision),
                       level="INFO", counts=("neardup/decided", f"neardup/{kind}"),
                       run=run, follow_links=follow)  # fmt: skip

    def store_page(self, page: PageView) -> Outcome:
        """The storage stage's step (unfused): append the kept page, record where it is."""
        if not self.clean:
            return self.stopped()
        pending = self.pending.get(page.url)
        if pending is None:
            # not a page the dedup stage kept: a pipeline between them made another item
            if not self._told_foreign:
                logger.warning("StoragePipeline: %s was not kept by DedupPipeline; not stored",
                               page.url)  # fmt: skip
                self._told_foreign = True
            return Outcome()
        return self.guarded(page.url, lambda: self._store_pending(page, pending))

    def _store_pending(self, page: PageView, pending: Pending) -> Outcome:
        started = time.perf_counter()
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
        return self.guarded(url, self._item_done_outcome)

    def tick(self) -> Outcome:
        """The timer's step: commit an idle batch that is old enough."""
        if self.clean and self._batch is not None and self._batch_age() >= (
            self.config.batch_seconds
        ):
            return self.guarded(None, self._commit_outcome)
        return Outcome()

    def finish(self) -> dict[str, Any]:
        """The last step: settle pages left between the stages, commit, close the store.

        Returns the run's totals (:meth:`totals`) and ``error``, the :class:`Failure` of a
        final commit that did not happen (None when it committed, or when the work had stopped
        already: that failure was reported then).
        """
        was_clean = self.clean
        try:
            if self.clean:
                for url in list(self.pending):  # pages that never reached the storage stage
                    self.not_stored(url, "the crawl closed before it reached the storage stage")
            if self.clean:
                self.commit()
        except Exception as exc:  # noqa: BLE001 - named by Failure.of, reported by the session
            self.fail(Failure.of(exc, None, self.config.store))
        finally:
            self.abort()
        sizes = self.store.stats() if self.store is not None and self.clean else {}
        try:
            self.close()
        except STORE_FAILURES as exc:
            self.fail(Failure.of(exc, None, self.config.store))
        error = self.failure if was_clean and not self.clean else None
        return {**self.totals(), "sizes": sizes, "error": error}

    def totals(self) -> dict[str, Any]:
        """The counters the stats and the command's summary show (``cpu``: this process's CPU
        seconds, reported by the worker process only)."""
        return {"tally": self.tally, "seconds": dict(self.seconds), "clean": self.clean,
                "not_stored": self.not_stored_count, "cpu": None}  # fmt: skip

    def close(self) -> None:
        """Close the log and the store. After a failure they may fail to close too (the disk
        that refused the batch refuses their last flush): that is logged, not raised, since
        the failure was reported already and the next open repairs what is left."""
        self.abort()
        log, self.log = self.log, None
        store, self.store = self.store, None
        for part in (log, store):
            if part is None:
                continue
            try:
                part.close()
            except STORE_FAILURES as exc:
                if self.clean:
                    raise
                logger.debug("neardup: closing %s after a failure: %s", type(part).__name__, exc)

    # --- failures -------------------------------------------------------------------------------

    def guarded(self, url: str | None, step: Callable[[], Outcome | None]) -> Any:
        """``step()``, or, when it raises, the work stopped with the :class:`Failure` that the
        exception means (a store failure or a bug: module doc, *Failures*)."""
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - each kind is named by Failure.of
            return self.failed(Failure.of(exc, url, self.config.store))

    def failed(self, failure: Failure) -> Outcome:
        """Stop the work for ``failure``: abort the batch, forget its log lines and the pages
        between the stages; the outcome that reports it (the session stops the crawl)."""
        if failure.kind == "bug":
            logger.debug("neardup: %s\n%s", failure.line, failure.details)
        self.fail(failure)
        return Outcome(drop="store_failed", message=failure.drop_message, level="INFO",
                       failure=failure)  # fmt: skip

    def stopped(self) -> Outcome:
        """The drop of a page that arrives once the work has stopped; it carries the failure
        again, so that whichever outcome the session reads first stops the crawl."""
        return Outcome(drop="store_failed", message=STOPPING, level="INFO",
                       failure=self.failure)  # fmt: skip

    def _item_done_outcome(self) -> Outcome:
        self.item_done()
        return Outcome()

    def _commit_outcome(self) -> Outcome:
        self.commit()
        return Outcome()

    def _canonicalise(self, page: PageView) -> JoinedTokens:
        started = time.perf_counter()
        tokens = document_tokens(
            page.body,
            page.kind,
            self.config.sketch.unit,
            self.config.dedup.canonicaliser,
            area=self.config.area,
        )
        self.spent("canonicalise", time.perf_counter() - started)
        return tokens

    def _skip(
        self, page: PageView, reason: str, detail: str | None, *, count_reason: bool = True
    ) -> Outcome:
        """Record the page as skipped (so a resumed crawl does not decide it again); drop it.

        ``neardup/skipped`` counts every skip; ``neardup/skipped/<reason>`` is counted here
        for the reasons this stage finds, and by the spider for the reasons it gives. Call it
        through :meth:`guarded`: it writes to the store.
        """
        store = self.writing()
        doc_id = store.next_doc_id()
        store.put_document(doc_id, DocumentRecord(page.url, "skipped", time.time()))
        self.queue(_entry(page.url, "skipped", reason=reason, doc_id=doc_id, detail=detail,
                          status=page.status))  # fmt: skip
        self.item_done()
        counts = ("neardup/skipped", f"neardup/skipped/{reason}") if count_reason else _SKIPPED
        # a page the spider skipped comes without links; one skipped here (it could not be
        # sketched) is no copy of anything, and its links are followed
        return Outcome(drop="skipped", message=f"skipped ({reason}): {detail or reason}",
                       level="DEBUG", counts=counts, follow_links=True)  # fmt: skip

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
        """A decision's log line, written (and counted) once the batch holding it has
        committed."""
        self._queued.append(entry)

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
            batch.__exit__(None, None, None)  # a failure: fail() forgets the queued lines
            self.tally.commits += 1
            self.spent("store", time.perf_counter() - started)
        queued, self._queued = self._queued, []
        for entry in queued:
            self.tally.decisions[entry["decision"]] += 1
            if entry["decision"] == "skipped":
                self.tally.skipped[entry["reason"] or "unknown"] += 1
        if self.log is not None and queued:
            self.log.write_many(queued)
        return True

    def commit_if_due(self) -> None:
        """Commit a full or old batch between steps (the worker's hold); a failure stops the
        work, and the next step's outcome reports it (:meth:`stopped`)."""
        if self.clean and not self.pending and self._batch is not None and (
            self._batch_items >= self.config.batch_size
            or self._batch_age() >= self.config.batch_seconds
        ):
            self.guarded(None, self._commit_outcome)

    def fail(self, failure: Failure) -> None:
        """The work stops: abort the batch, forget its log lines and the pages between."""
        self.clean = False
        if self.failure is None:
            self.failure = failure
        self.abort()
        self.tally.not_committed += len(self._queued) + len(self.pending)
        self._queued.clear()
        self.pending.clear()

    def abort(self) -> None:
        """Abort the open batch, if any. The store cuts off what the batch wrote; where it
        cannot (the disk that failed the batch fails the repair too), the next open does."""
        batch, self._batch = self._batch, None
        if batch is not None:
            error = RuntimeError("batch aborted")
            try:
                batch.__exit__(type(error), error, None)
            except Exception as exc:  # noqa: BLE001 - the failure itself is reported elsewhere
                if exc is not error:
                    logger.debug("neardup: aborting the batch: %s", exc, exc_info=True)

    def _batch_age(self) -> float:
        return time.monotonic() - self._batch_started if self._batch is not None else 0.0


def _writable(url: str) -> bool:
    """True when ``url`` can be written as UTF-8 (a lone surrogate cannot)."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
