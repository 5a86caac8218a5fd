"""What the crawl's dedup work needs to know: the ``NEARDUP_*`` settings, as plain values.

The session reads them from Scrapy's settings once and checks them
(:func:`crawler.pipelines.session.session_settings`); the worker process gets this object over
its pipe (:mod:`crawler.work.process`). Unpickling it there imports this module, so it imports
nothing of Scrapy.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawler.config import CrawlParams, ReviewParams
from crawler.frontier.defaults import RETRIES
from dedup.params import ContentArea, DedupParams, SketchParams
from storage.nodes import CrawlNode

__all__ = ["WORKERS", "SessionSettings"]

#: where the work can run (NEARDUP_WORKER)
WORKERS = ("process", "inline")


@dataclass(frozen=True)
class SessionSettings:
    """The ``NEARDUP_*`` settings the work needs (defaults: :mod:`crawler.settings`'s)."""

    store: str
    sketch: SketchParams
    dedup: DedupParams
    batch_size: int
    batch_seconds: float
    run_id: str | None
    #: which part of a page counts (canonical.content_area, include, exclude)
    area: ContentArea = ContentArea()
    #: where the work runs: "process" (a worker process, while an asyncio loop runs) or "inline"
    worker: str = WORKERS[0]
    #: keep the canonical text of dropped pages in the store (review.keep_text)
    keep_text: bool = ReviewParams.keep_text
    #: a longer text is cut to this many UTF-8 bytes (review.max_text_bytes)
    max_text_bytes: int = ReviewParams.max_text_bytes
    #: duplicates of one cluster in a row whose links are followed (None: all; see
    #: crawler.work.links)
    duplicate_budget: int | None = CrawlParams.duplicate_link_budget
    #: the Redis URL of a distributed crawl's frontier and index (NEARDUP_FRONTIER); None: a
    #: single machine's crawl, decided against the store's own index
    frontier: str | None = None
    #: which node of which distributed crawl this is (NEARDUP_FRONTIER_NODE, _CRAWL)
    crawl_node: CrawlNode | None = None
    #: retries of a Redis command before the node gives its Redis up (NEARDUP_FRONTIER_RETRIES)
    frontier_retries: int = RETRIES
