"""One crawl's dedup session: what the two stages of :mod:`crawler.pipelines` talk to.

The dedup stage decides, the storage stage stores, and both write into the same LMDB write
transaction, so both share one :class:`DedupSession` per crawler (:meth:`DedupSession.of`). It
reads the settings once (:func:`session_settings`), opens the store, hands each page
(:class:`~crawler.work.page.PageView`) to the one :class:`~crawler.work.steps.StoreWork` that
decides, stores, commits and logs (its docstring tells how and when), and turns what comes back
into the item, or the ``DropItem``, that Scrapy gets, counting the ``neardup/`` stats on the
event-loop thread, where Scrapy's stats live.

**Where the work runs.** While an asyncio event loop runs (``NEARDUP_WORKER="process"``, the
default), in one worker process fed over a pipe in arrival order (:mod:`crawler.work.process` says
why): the stages then return an awaitable. The crawl opens the store once itself first, so that
a busy or mismatched store still fails ``open_spider`` and repairs are logged there. With no
asyncio loop (the stages driven by hand) or ``NEARDUP_WORKER="inline"``, the same work runs
inline on the caller's thread, and the stages return the item or raise the drop. A timer
commits an idle batch, so a slow crawl still commits.

**Failures.** A failure while writing to the store, or a worker that dies, is logged once with
its traceback and stops the crawl (``neardup_store_error``); so does a bug met while a decision
is made or written, named as one (``neardup_internal_error``; :mod:`crawler.work.steps` says
why a bug stops the crawl). Every page still on its way is dropped with a one-line reason
(``StoreFailed``). A kept page that another pipeline drops
between the stages is recorded as decided but not stored (``item_dropped``/``item_error``), so
that it cannot hold a commit back.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import DropItem
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.reactor import is_reactor_installed

from crawler.pipelines.drops import DROPS, DedupDrop, NodeStopping
from crawler.work.page import PageView
from crawler.work.process import Worker
from crawler.work.settings import WORKERS, SessionSettings
from crawler.work.outcome import Failure, Outcome, Tally
from crawler.work.steps import StoreWork
from dedup.params import ContentArea, DedupParams, SketchParams
from storage.log import new_run_id
from storage.nodes import CrawlNode
from storage.store import Store

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from crawler.frontier.acks import CommitAcks
    from twisted.python.failure import Failure as TwistedFailure

__all__ = ["DedupSession", "RunLog", "session_settings"]

logger = logging.getLogger(__name__)

_SESSIONS: weakref.WeakKeyDictionary[Crawler, DedupSession] = weakref.WeakKeyDictionary()


#: why a page is not decided once its node has lost the frontier (its Redis, or its lease)
NODE_STOPPING = "not decided: the node lost its frontier and is stopping"


def _event_loop_running() -> bool:
    """True when a timer can run: an asyncio loop is running, or a Twisted reactor is there."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return is_reactor_installed()


@dataclass(frozen=True)
class RunLog:
    """Where this run's dedup log is (the worker writes it)."""

    path: Path


class DedupSession:
    """The stages' side of one crawler's dedup work; get it with :meth:`of`.

    It hands each page to the :class:`~crawler.work.steps.StoreWork` (in the worker process, or
    inline) and turns the :class:`~crawler.work.steps.Outcome` into the item or the drop,
    counting stats on the event-loop thread.
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
        self._worker: Worker | None = None
        self._users = 0
        self._opened = False
        self._timer: Any = None
        self._stopping = False
        #: why the work stopped, once it has (the first failure reported)
        self.failure: Failure | None = None
        crawler.signals.connect(self._item_left, signal=signals.item_dropped)
        crawler.signals.connect(self._item_left, signal=signals.item_error)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        self._told_no_fetch = False
        #: a distributed crawl's acknowledgements of pages settled in the store
        self._acks: CommitAcks | None = None

    @classmethod
    def of(cls, crawler: Crawler) -> DedupSession:
        """The crawler's session, made from its settings on first use."""
        session = _SESSIONS.get(crawler)
        if session is None:
            session = _SESSIONS[crawler] = cls(crawler, session_settings(crawler.settings))
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
        if crawler is not None and self.config.frontier is not None:
            from crawler.frontier.acks import CommitAcks
            from crawler.frontier.scheduler import FrontierScheduler

            scheduler = FrontierScheduler.of(crawler)
            if scheduler is not None:
                self._acks = CommitAcks(crawler, scheduler)
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
            with Store.open(self.config.store, self.config.sketch, area=self.config.area) as store:
                for line in store.repairs:
                    logger.warning("Store %s repaired on opening: %s", self.config.store, line)
                store.check_crawl_node(self.config.crawl_node)
                with store.log(run_id) as log:
                    self.log = RunLog(log.path)
            worker = Worker(loop, on_totals=self._totals, on_failure=self._stop_crawl,
                            on_durable=self._settled)  # fmt: skip
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
        if result is not None and self._acks is not None:
            self._acks.settled(result["durable"], now=True)
        if self._acks is not None:
            self._acks.close()
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
                self._stop_crawl(result["error"])
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
        if self._acks is not None and self._acks.scheduler.lost is not None:
            # every decision would wait out the Redis client's retries for nothing
            raise NodeStopping(NODE_STOPPING, log_level="INFO")
        page = PageView.of(item)
        if self._worker is not None:
            return self._item_future(self._worker.submit(kind, page.to_wire()), item)
        work = self.work
        if work is None:
            raise RuntimeError("the neardup session is not open (open_spider was not called)")
        step = work.decide if kind == "decide" else work.store_page
        drop = self._apply(step(page))
        self._settled(work.take_durable())
        if drop is not None:
            raise drop
        return item

    def _apply(self, outcome: Outcome) -> DedupDrop | None:
        """Count the outcome's stats and stop the crawl if the work stopped; the drop the
        outcome names, or None (event-loop thread)."""
        inc = self.stats.inc_value
        for key in outcome.counts:
            inc(key)
        if outcome.stored_bytes:
            inc("neardup/stored_bytes", outcome.stored_bytes)
        if outcome.failure is not None:
            self._stop_crawl(outcome.failure)
        if outcome.fetch:
            self._fetch_in_full(outcome.fetch)
        if outcome.drop is None:
            return None
        drop = DROPS[outcome.drop](outcome.message, log_level=outcome.level)
        drop.run, drop.follow_links = outcome.run, outcome.follow_links
        return drop

    def _item_future(self, outcome: asyncio.Future[Outcome], item: Any) -> asyncio.Future[Any]:
        """The future a stage returns for ``item``, from the future of the worker's outcome:
        ``item`` once the outcome keeps it, else the outcome's drop as its exception."""
        future: asyncio.Future[Any] = outcome.get_loop().create_future()
        outcome.add_done_callback(functools.partial(self._resolve, future, item))
        return future

    def _resolve(
        self, future: asyncio.Future[Any], item: Any, outcome: asyncio.Future[Outcome]
    ) -> None:
        """The worker's outcome arrived: apply it, and resolve the stage's future with it."""
        drop = self._apply(outcome.result())
        if future.done():  # cancelled: Scrapy no longer waits for this item
            return
        if drop is None:
            future.set_result(item)
        else:
            future.set_exception(drop)

    def _fetch_in_full(self, urls: tuple[str, ...]) -> None:
        """Ask the spider for the whole pages the work kept by a re-decision (their bodies
        are not in the store): ``fetch_in_full(url)``, which our spider has."""
        crawler = self._crawler()
        fetch = getattr(crawler.spider if crawler is not None else None, "fetch_in_full", None)
        if fetch is None:
            if not self._told_no_fetch:
                logger.warning("neardup: %d kept pages need their bodies fetched in full, and the "
                               "spider has no fetch_in_full(url); the next run fetches them",
                               len(urls))  # fmt: skip
                self._told_no_fetch = True
            return
        for url in urls:
            fetch(url)

    def _spider_closed(self, reason: str, **_: Any) -> None:
        """A crawl that finished (not stopped, not failed) ends the store's crawl run: the next
        crawl of the store is a recrawl against it (storage.history); one that did not is
        resumed by the next crawl."""
        if reason != "finished" or not self.clean or self.log is None:
            return
        try:
            with Store.open(self.config.store, self.config.sketch, area=self.config.area) as store:
                with store.batch():
                    store.history.finish_run(time.time())
        except Exception as exc:  # noqa: BLE001 - the run stays open: the next crawl resumes it
            logger.warning("neardup: the crawl run could not be marked finished (%s); the next "
                           "crawl of the store resumes it", exc)  # fmt: skip

    def _apply_unawaited(self, outcome: asyncio.Future[Outcome]) -> None:
        """The outcome of a step no item waits for (a tick, a page not stored): its stats and
        its failure; the drop it may name has no item to drop."""
        self._apply(outcome.result())

    def _totals(self, totals: Mapping[str, Any]) -> None:
        """The work's counters into the stats: commits, the cost split, pages not stored."""
        self.tally = totals["tally"]
        set_value = self.stats.set_value
        if totals.get("crawl_run"):
            set_value("neardup/crawl_run", totals["crawl_run"])
        if self.tally.commits:
            set_value("neardup/commits", self.tally.commits)
        if totals["not_stored"]:
            set_value("neardup/kept_not_stored", totals["not_stored"])
        for part, seconds in totals["seconds"].items():
            set_value(f"neardup/seconds/{part}", seconds)
        if totals["cpu"] is not None:
            set_value("neardup/worker_cpu_seconds", round(totals["cpu"], 3))

    def _stop_crawl(self, failure: Failure) -> None:
        """The work stopped: say why once, with the traceback, and close the spider.

        The record carries the one line as ``neardup_failure``, for a caller that reports it
        itself (``neardup crawl`` prints it as its error line)."""
        self.clean = False
        if self._stopping:
            return
        self._stopping = True
        self.failure = failure
        bug = failure.kind == "bug"
        self.stats.inc_value("neardup/internal_error" if bug else "neardup/store_error")
        said = f"the store failed: {failure.line}" if failure.kind == "store" else failure.line
        details = f"\n{failure.details}" if failure.details else ""
        logger.error("neardup: %s; stopping the crawl%s", said, details,
                     extra={"neardup_failure": failure.line})  # fmt: skip
        crawler = self._crawler()
        engine = crawler.engine if crawler is not None else None
        if engine is not None and engine.spider is not None:
            from scrapy.utils.defer import deferred_from_coro

            reason = "neardup_internal_error" if bug else "neardup_store_error"
            deferred_from_coro(engine.close_spider_async(reason=reason))

    def _tick(self) -> None:
        if self._worker is not None:
            self._worker.submit("tick").add_done_callback(self._apply_unawaited)
        elif self.work is not None:
            self._apply(self.work.tick())
            self._settled(self.work.take_durable())
            self._totals(self.work.totals())

    # --- pages that leave between the stages ----------------------------------------------------

    def _item_left(
        self,
        item: Any,
        exception: BaseException | None = None,
        failure: TwistedFailure | None = None,
        **_: Any,
    ) -> None:
        """item_dropped (``exception``) and item_error (``failure``) after the dedup stage.

        Until the page is settled its pending entry would hold back every commit.
        """
        if exception is None and failure is not None:
            exception = failure.value
        if self.fused or not self.storing or not self._opened or exception is None:
            return
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
            self._worker.submit("not_stored", url, why).add_done_callback(self._apply_unawaited)
        elif self.work is not None:
            self._apply(self.work.not_stored(url, why))
            self._settled(self.work.take_durable())

    def _settled(self, urls: list[str]) -> None:
        """Pages the store settled: a distributed crawl's frontier may acknowledge them."""
        if self._acks is not None and urls:
            self._acks.settled(urls)




def _adjacent_stages(crawler: Crawler) -> bool:
    """True when the storage stage directly follows the dedup stage in ``ITEM_PIPELINES``
    (so no other pipeline can see, change or drop a kept page between them)."""
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    try:
        paths = build_component_list(
            crawler.settings.get_component_priority_dict_with_base("ITEM_PIPELINES")
        )
        classes = [load_object(p) if isinstance(p, str) else p for p in paths]
    except Exception:  # noqa: BLE001 - an unloadable entry: Scrapy itself will say so
        return False
    kinds = [getattr(c, "neardup_stage", "other") for c in classes]
    for i in range(len(kinds) - 1):
        if kinds[i] == "dedup":
            return kinds[i + 1] == "storage"
    return False


def session_settings(settings: BaseSettings) -> SessionSettings:
    """The work's settings, read once with typed getters and checked; a bad value is a
    ``ValueError`` naming the setting."""
    from scrapy.utils.project import data_path

    from crawler import settings as defaults

    sketch = {**defaults.NEARDUP_SKETCH, **settings.getdict("NEARDUP_SKETCH")}
    given = settings.get("NEARDUP_CONTAINMENT", defaults.NEARDUP_CONTAINMENT)
    containment = None if given in (None, "") else _number(settings, "NEARDUP_CONTAINMENT",
                                                           None, float)  # fmt: skip
    threshold = _number(settings, "NEARDUP_THRESHOLD", defaults.NEARDUP_THRESHOLD, float)
    cap = _number(settings, "NEARDUP_CAP", defaults.NEARDUP_CAP, int)
    try:
        sketch_params = SketchParams.from_dict(sketch)
        dedup = DedupParams(
            threshold=threshold,
            containment=containment,
            representative=settings.get(
                "NEARDUP_REPRESENTATIVE", defaults.NEARDUP_REPRESENTATIVE
            ),
            canonicaliser=settings.get("NEARDUP_CANONICALISER", defaults.NEARDUP_CANONICALISER),
            cap=cap,
        )
        area = ContentArea.from_dict(
            {**defaults.NEARDUP_CONTENT_AREA, **settings.getdict("NEARDUP_CONTENT_AREA")}
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"NEARDUP settings: {exc}") from None
    batch_size = _number(settings, "NEARDUP_BATCH_SIZE", defaults.NEARDUP_BATCH_SIZE, int)
    batch_seconds = _number(settings, "NEARDUP_BATCH_SECONDS", defaults.NEARDUP_BATCH_SECONDS,
                            float)  # fmt: skip
    if batch_size < 1:
        raise ValueError(f"NEARDUP_BATCH_SIZE must be at least 1; got {batch_size}")
    if batch_seconds < 0:
        raise ValueError(f"NEARDUP_BATCH_SECONDS must be >= 0; got {batch_seconds}")
    max_text_bytes = _number(settings, "NEARDUP_MAX_TEXT_BYTES", defaults.NEARDUP_MAX_TEXT_BYTES,
                             int)  # fmt: skip
    if max_text_bytes < 0:
        raise ValueError(f"NEARDUP_MAX_TEXT_BYTES must be >= 0; got {max_text_bytes}")
    worker = settings.get("NEARDUP_WORKER", defaults.NEARDUP_WORKER)
    if worker not in WORKERS:
        raise ValueError(f"NEARDUP_WORKER must be one of {', '.join(WORKERS)}; got {worker!r}")
    store = settings.get("NEARDUP_STORE", defaults.NEARDUP_STORE)
    if not store:
        raise ValueError("NEARDUP_STORE must name a directory")
    budget = _duplicate_budget(
        settings.get("NEARDUP_DUPLICATE_BUDGET", defaults.NEARDUP_DUPLICATE_BUDGET)
    )
    frontier, crawl_node = _frontier(settings)
    return SessionSettings(
        store=data_path(store),
        sketch=sketch_params,
        dedup=dedup,
        batch_size=batch_size,
        batch_seconds=batch_seconds,
        run_id=settings.get("NEARDUP_RUN_ID") or None,
        area=area,
        worker=worker,
        keep_text=settings.getbool("NEARDUP_KEEP_TEXT", defaults.NEARDUP_KEEP_TEXT),
        max_text_bytes=max_text_bytes,
        duplicate_budget=budget,
        frontier=frontier,
        crawl_node=crawl_node,
        frontier_retries=_number(settings, "NEARDUP_FRONTIER_RETRIES",
                                 defaults.NEARDUP_FRONTIER_RETRIES, int),
    )


def _number(settings: BaseSettings, name: str, default: Any, kind: type) -> Any:
    """The setting ``name`` as an int or a float (``kind``); a value that is not one is a
    ``ValueError`` naming the setting (Scrapy's getters name only the value)."""
    value = settings.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if kind is int and number.is_integer():
        return int(number)
    if kind is float and not math.isnan(number):
        return number
    noun = "a whole number" if kind is int else "a number"
    raise ValueError(f"{name} must be {noun}; got {value!r}")


def _frontier(settings: BaseSettings) -> tuple[str | None, CrawlNode | None]:
    """The distributed crawl's Redis URL and this node (``NEARDUP_FRONTIER``, ``_NODE``,
    ``_CRAWL``), or (None, None) for a single machine's crawl."""
    from crawler import settings as defaults
    from crawler.frontier.partition import parse_node

    url = settings.get("NEARDUP_FRONTIER", defaults.NEARDUP_FRONTIER)
    if not url:
        return None, None
    node, nodes = parse_node(settings.get("NEARDUP_FRONTIER_NODE", defaults.NEARDUP_FRONTIER_NODE))
    crawl = settings.get("NEARDUP_FRONTIER_CRAWL", defaults.NEARDUP_FRONTIER_CRAWL)
    if not crawl:
        raise ValueError("NEARDUP_FRONTIER_CRAWL must name the distributed crawl (neardup crawl "
                         "derives it from the start URLs)")  # fmt: skip
    return str(url), CrawlNode(str(crawl), node, nodes)


def _duplicate_budget(value: Any) -> int | None:
    """``NEARDUP_DUPLICATE_BUDGET`` as the work takes it: a count, or None for no budget
    (given as a negative number or "none": Scrapy's settings cannot hold None)."""
    if isinstance(value, str) and value.strip().lower() in ("none", "null"):
        return None
    try:
        budget = int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"NEARDUP_DUPLICATE_BUDGET must be a whole number (negative: no budget); got {value!r}"
        ) from None
    return None if budget < 0 else budget
