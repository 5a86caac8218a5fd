"""One crawl's dedup state, shared by the two stages of :mod:`crawler.pipelines`.

The dedup stage decides, the storage stage stores, and both must write into the *same* LMDB
write transaction: a page's index entries and its WARC record commit together or not at all.
So the pieces live here, one set per crawler: the open :class:`~storage.store.Store`, the
:class:`~dedup.document.Sketcher`, the :class:`~dedup.cluster.GreedyClusterer` over the store's
LMDB index, the current write batch, and the dedup-log lines waiting for it to commit.

**When a batch commits.** After ``NEARDUP_BATCH_SIZE`` decisions, or once
``NEARDUP_BATCH_SECONDS`` have passed since the batch began (checked after every decision and
by a timer, so a slow crawl still commits), and when the spider closes. Never while a kept page
is between the two stages: its index entries are already in the batch and its page is not yet.

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
failure while *writing* (a full disk, an unreadable WARC file) is the store's: the batch is
aborted, its queued log lines are discarded, and the crawl is stopped, so that nothing after it
is decided against a store that is not what the session believes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import DropItem
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.project import data_path
from scrapy.utils.reactor import is_reactor_installed

from crawler import settings as defaults
from dedup.cluster import GreedyClusterer
from dedup.document import Sketcher
from dedup.params import DedupParams, SketchParams
from storage.records import DocumentRecord
from storage.store import Store

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    from storage.log import DedupLog

logger = logging.getLogger(__name__)

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


class DedupSession:
    """The shared state of one crawler's dedup and storage stages; get it with :meth:`of`."""

    def __init__(self, crawler: Crawler, config: SessionSettings) -> None:
        # a weak reference: the registry maps crawlers to sessions weakly, and a session that
        # held its crawler would keep both alive for the life of the process
        self._crawler = weakref.ref(crawler)
        self.stats = crawler.stats
        self.config = config
        self.sketcher = Sketcher(config.sketch)
        self.store: Store | None = None
        self.clusterer: GreedyClusterer | None = None
        self.log: DedupLog | None = None
        #: kept pages between the dedup and the storage stage, by URL
        self.pending: dict[str, Pending] = {}
        self.tally = Tally()
        #: which stages were built (from_crawler order is ITEM_PIPELINES order)
        self.stages: list[str] = []
        #: False once a write failed or the final commit did not happen
        self.clean = True
        self._users = 0
        self._batch: AbstractContextManager[Store] | None = None
        self._batch_started = 0.0
        self._batch_items = 0
        self._queued: list[dict[str, Any]] = []
        self._seconds: dict[str, float] = {}
        self._timer: Any = None
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

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        """Open the store (first caller only); every stage calls it from ``open_spider``."""
        self._users += 1
        if self.store is not None:
            return
        store = Store.open(self.config.store, self.config.sketch)
        for line in store.repairs:
            logger.warning("Store %s repaired on opening: %s", self.config.store, line)
        self.store = store
        self.clusterer = GreedyClusterer(store.index, self.config.dedup, cap=self.config.cap)
        self.log = store.log(self.config.run_id)
        logger.info(
            "neardup: store %s, dedup log %s; sketch %s; threshold %s",
            store.path,
            self.log.path,
            self.config.sketch.describe(),
            self.config.dedup.threshold,
        )
        if self.config.batch_seconds > 0 and _event_loop_running():
            # the clock commits an idle batch; with no event loop (a pipeline driven by hand)
            # batches still commit by size and age as decisions arrive
            self._timer = create_looping_call(self._tick)
            self._timer.start(min(self.config.batch_seconds, 1.0), now=False)

    def close(self) -> None:
        """Commit what is left and close everything (last caller only)."""
        self._users -= 1
        if self._users > 0 or self.store is None:
            return
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        try:
            if self.clean:
                for url in list(self.pending):  # pages that never reached the storage stage
                    self.not_stored(url, "the crawl closed before it reached the storage stage")
                self.commit()
        finally:
            self._abort_batch()
            stats = self.stats
            sizes = self.store.stats()
            stats.set_value("neardup/lmdb_map_growths", sizes["map_growths"])
            stats.set_value("neardup/lmdb_map_size", sizes["map_size"])
            stats.set_value("neardup/store_documents", sizes["documents"])
            if self.log is not None:
                self.log.close()
            self.store.close()
            self.store = None
            logger.info(
                "neardup: %s kept, %s exact and %s near duplicates dropped, %s skipped",
                self.tally.decisions["kept"],
                self.tally.decisions["exact_duplicate"],
                self.tally.decisions["near_duplicate"],
                self.tally.decisions["skipped"],
            )

    # --- the batch -------------------------------------------------------------------------

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
        total = self._seconds[part] = self._seconds.get(part, 0.0) + seconds
        self.stats.set_value(f"neardup/seconds/{part}", total)

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
            stats = self.stats
            stats.inc_value("neardup/commits")
            self.spent("store", time.perf_counter() - started)
        queued, self._queued = self._queued, []
        if self.log is not None:
            for entry in queued:
                self.log.write(**entry)
        return True

    def fail(self, exc: BaseException) -> None:
        """A write failed: abort the batch, forget its log lines, stop the crawl."""
        self.clean = False
        self._abort_batch()
        self._queued.clear()
        self.pending.clear()
        self.stats.inc_value("neardup/store_error")
        logger.error("neardup: writing to the store failed; stopping the crawl", exc_info=exc)
        crawler = self._crawler()
        engine = crawler.engine if crawler is not None else None
        if engine is not None and engine.spider is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="neardup_store_error"))

    def _abort_batch(self) -> None:
        batch, self._batch = self._batch, None
        if batch is not None:
            error = RuntimeError("batch aborted")
            try:
                batch.__exit__(type(error), error, None)
            except RuntimeError:
                pass

    def _batch_age(self) -> float:
        return time.monotonic() - self._batch_started if self._batch is not None else 0.0

    def _tick(self) -> None:
        if self._batch is not None and self._batch_age() >= self.config.batch_seconds:
            try:
                self.commit()
            except Exception as exc:  # noqa: BLE001 - any failed commit stops the crawl
                self.fail(exc)

    # --- pages that leave between the stages ----------------------------------------------

    def not_stored(self, url: str, why: str) -> None:
        """A kept page that will not reach the storage stage: decided, recorded, not stored.

        Its document stays (page-less, as in a dedup-only crawl), so its copies are still
        recognised; its log line says why it has no page.
        """
        pending = self.pending.pop(url, None)
        if pending is None:
            return
        pending.entry["reason"] = f"not stored: {why}"
        self.stats.inc_value("neardup/kept_not_stored")
        self.queue(pending.entry)
        self.item_done()

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
        if not self.pending or exception is None:
            return
        from crawler.pipelines import DedupDrop

        if isinstance(exception, DedupDrop):
            return
        try:
            url = ItemAdapter(item).get("url")
        except TypeError:
            return
        if url in self.pending:
            kind = "dropped" if isinstance(exception, DropItem) else "failed"
            self.not_stored(url, f"{kind} after the dedup stage ({type(exception).__name__})")
