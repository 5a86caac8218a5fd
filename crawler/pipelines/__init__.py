"""The crawl-time dedup stage and storage stage, as Scrapy item pipelines for any project.

::

    ITEM_PIPELINES = {"crawler.pipelines.DedupPipeline": 300,
                      "crawler.pipelines.StoragePipeline": 400}
    NEARDUP_STORE = "neardup-store"

:class:`DedupPipeline` gives every page one decision (docs/architecture.md): ``kept``,
``exact_duplicate``, ``near_duplicate``, ``contained`` or ``skipped`` with a reason. A duplicate is
dropped with a :class:`~scrapy.exceptions.DropItem` subclass whose message names the page it
matched and the estimated resemblance, so Scrapy counts
``item_dropped_reasons_count/NearDuplicate`` and so on. :class:`StoragePipeline` writes each kept
page to the store's WARC files. Anything placed after them (a feed export, a database) sees kept
pages only.

**Items.** :class:`~crawler.items.PageItem` from our spider, or any item with a ``url`` and
either ``tokens`` (a canonical token stream), ``body``/``html`` (HTML, bytes or text) or
``text``; ``status``, ``headers`` and ``skip_reason``/``skip_detail`` are used when present.

**Decision, then storage, in one batch.** The dedup stage both decides and *applies* the
decision to the LMDB index, and records the document (without a page): so the next page is
decided against an index that already holds this one, even if pages were to interleave between
the stages, and a crawl without the storage stage still keeps a complete index. The storage
stage then appends the page and records where it is. Both write into the session's open batch
(:mod:`crawler.work.steps`), which commits them together, WARC first. The work itself runs in
one worker process beside the crawl (:mod:`crawler.work.process`), in arrival order, so
``process_item`` returns an awaitable
(with no asyncio event loop, as when the stages are driven by hand, it runs inline and returns
the item or raises the drop, one of :mod:`crawler.pipelines.drops`); when the storage stage directly follows the dedup stage, a kept
page is stored in the step that decides it.

**Already decided.** A URL the store already has a document for (a resumed crawl, a repeated
one) is not decided again: it is dropped with :class:`AlreadyDecided` at DEBUG level, counted as
``neardup/already_decided``, and not logged, so no page is ever stored twice.

Settings (defaults in :mod:`crawler.settings`): ``NEARDUP_ENABLED``, ``NEARDUP_STORE`` (a
relative path goes under the project's ``.scrapy/``, as ``HTTPCACHE_DIR`` does),
``NEARDUP_SKETCH``, ``NEARDUP_THRESHOLD``, ``NEARDUP_CONTAINMENT``,
``NEARDUP_REPRESENTATIVE``, ``NEARDUP_CANONICALISER``, ``NEARDUP_BATCH_SIZE``,
``NEARDUP_BATCH_SECONDS``, ``NEARDUP_KEEP_TEXT`` and ``NEARDUP_MAX_TEXT_BYTES`` (the
canonical text of each dropped page, kept compressed in the store for ``neardup explain``, cut
to that many bytes); also ``NEARDUP_CAP`` (clusters read per fingerprint, ``dedup.cap``),
``NEARDUP_RUN_ID`` (the dedup log's file name; default: start time and process id),
``NEARDUP_WORKER`` (``"process"``, the default, or ``"inline"``: where the work runs, see
:mod:`crawler.pipelines.session`) and ``NEARDUP_DUPLICATE_BUDGET`` (how many duplicates of one
cluster in a row along a link path have their links followed, so that a spider trap ends; a
negative number for no budget: :mod:`crawler.work.links`, read from each drop by
:class:`~crawler.spiders.SiteSpider`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from crawler.pipelines.drops import (
    DROPS,
    AlreadyDecided,
    Contained,
    DedupDrop,
    ExactDuplicate,
    NearDuplicate,
    Skipped,
    StoreFailed,
)
from crawler.pipelines.session import DedupSession
from crawler.work.page import PageView
from crawler.work.steps import STOPPING

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    # typing.Self requires Python 3.11
    from typing_extensions import Self

__all__ = [
    "DROPS",
    "AlreadyDecided",
    "Contained",
    "DedupDrop",
    "DedupPipeline",
    "ExactDuplicate",
    "NearDuplicate",
    "PageView",
    "Skipped",
    "StoragePipeline",
    "StoreFailed",
]


class DedupPipeline:
    """The dedup stage: one decision per page; duplicates and unusable pages are dropped."""

    #: what the session looks for in ITEM_PIPELINES to tell whether the stages are adjacent
    neardup_stage = "dedup"

    def __init__(self, crawler: Crawler, session: DedupSession) -> None:
        self.crawler = crawler
        self.session = session

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("NEARDUP_ENABLED", True):
            raise NotConfigured("NEARDUP_ENABLED is False")
        session = DedupSession.of(crawler)
        if "storage" in session.stages:
            raise ValueError(
                "ITEM_PIPELINES: DedupPipeline must come before StoragePipeline "
                "(give it the smaller number)"
            )
        session.stages.append("dedup")
        return cls(crawler, session)

    def open_spider(self) -> None:
        self.session.open()

    def close_spider(self) -> None:
        self.session.close()

    def process_item(self, item: Any) -> Any:
        """Decide the page (in the worker): an awaitable of the item, or of its drop."""
        if not self.session.clean:
            raise StoreFailed(STOPPING, log_level="INFO")
        return self.session.run("decide", item)


class StoragePipeline:
    """The storage stage: each kept page into the store's WARC files, with the original
    status, headers and body, in the same batch as its index entries."""

    neardup_stage = "storage"

    def __init__(self, crawler: Crawler, session: DedupSession) -> None:
        self.crawler = crawler
        self.session = session

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("NEARDUP_ENABLED", True):
            raise NotConfigured("NEARDUP_ENABLED is False")
        session = DedupSession.of(crawler)
        session.stages.append("storage")
        return cls(crawler, session)

    def open_spider(self) -> None:
        if "dedup" not in self.session.stages:
            raise ValueError(
                "ITEM_PIPELINES: StoragePipeline needs crawler.pipelines.DedupPipeline "
                "before it (it stores the pages the dedup stage keeps)"
            )
        self.session.open()

    def close_spider(self) -> None:
        self.session.close()

    def process_item(self, item: Any) -> Any:
        """Store a kept page (in the worker): an awaitable of the item."""
        s = self.session
        if s.fused:
            return item  # the dedup stage's step stored it already (crawler.work.steps)
        if not s.clean:
            raise StoreFailed(STOPPING, log_level="INFO")
        return s.run("store", item)
