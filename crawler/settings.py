"""Scrapy settings: the ``NEARDUP_`` defaults, and config.yaml mapped onto Scrapy's names.

The module-level ``NEARDUP_*`` names are the defaults of every setting of ours, in the manner of
``scrapy/settings/default_settings.py``: a component reads ``settings.get("NEARDUP_X",
NEARDUP_X)``, so that adding the pipelines to any Scrapy project works without our config file.
Their values come from the config dataclasses, so config.yaml, :class:`crawler.config.Config`
and these names cannot drift apart.

:func:`scrapy_settings` maps a whole :class:`Config` at ``"project"`` priority, so ``scrapy
crawl -s NEARDUP_THRESHOLD=0.8`` (command-line priority) still wins over the file.

>>> settings = scrapy_settings(Config())
>>> settings["NEARDUP_THRESHOLD"], settings["ROBOTSTXT_OBEY"], settings["DEPTH_LIMIT"]
(0.9, True, 0)
>>> settings["NEARDUP_THROTTLE_ENABLED"], settings["AUTOTHROTTLE_ENABLED"]
(True, False)
>>> settings["NEARDUP_SKETCH"]["shingle_size"]
4
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.logformatter import LogFormatter

from crawler.config import Config, CrawlParams
from crawler.extensions.throttle import DEFAULT_WINDOW
from crawler.frontier import defaults as frontier
from dedup.params import ContentArea, DedupParams, SketchParams

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response
    from scrapy.logformatter import LogFormatterResult
    from twisted.python.failure import Failure

_CONFIG = Config()
_SKETCH: SketchParams = _CONFIG.sketch
_DEDUP: DedupParams = _CONFIG.dedup
_CRAWL: CrawlParams = _CONFIG.crawl
_AREA: ContentArea = _CONFIG.canonical

# --- neardup's own settings, with their defaults ------------------------------------------------

NEARDUP_ENABLED = True  # False turns the near-duplicate pipelines off (NotConfigured)
NEARDUP_STORE = _CONFIG.store  # directory of the store: LMDB index, WARC files, dedup logs
NEARDUP_SKETCH = _SKETCH.to_dict()  # sketch parameters (dedup.params.SketchParams as a dict)
NEARDUP_THRESHOLD = _DEDUP.threshold  # estimated resemblance at which a page joins a cluster
NEARDUP_CONTAINMENT = _DEDUP.containment  # None, or containment at which a page is dropped too
NEARDUP_REPRESENTATIVE = _DEDUP.representative  # cluster representative: "first" or "popular"
NEARDUP_CANONICALISER = _DEDUP.canonicaliser  # HTML canonicaliser: "fast" (lexbor) or "reference"
NEARDUP_CONTENT_AREA = _AREA.to_dict()  # which part of a page counts (dedup.params.ContentArea)
NEARDUP_BATCH_SIZE = _CRAWL.batch_size  # pages per LMDB write transaction
NEARDUP_BATCH_SECONDS = _CRAWL.batch_seconds  # most seconds between two LMDB commits
NEARDUP_ALLOWED_DOMAINS: list[str] = list(_CRAWL.allowed_domains)  # [] = start URLs' hosts
NEARDUP_INCLUDE: list[str] = list(_CRAWL.include)  # regexes; if any, a link must match one
NEARDUP_EXCLUDE: list[str] = list(_CRAWL.exclude)  # regexes; a link matching one is not followed
NEARDUP_MAX_PAGES = _CRAWL.max_pages  # URLs the spider schedules at most (0 = no limit)
# links whose path repeats itself, or is this deep, are not followed (crawler.spiders.paths)
NEARDUP_MAX_PATH_REPEATS = _CRAWL.max_path_repeats
NEARDUP_MAX_PATH_SEGMENTS = _CRAWL.max_path_segments
# links of a duplicate followed while it is at most the N-th of its cluster in a row along the
# link path (crawler.work.links); -1: no budget (config.yaml's null)
NEARDUP_DUPLICATE_BUDGET = _CRAWL.duplicate_budget_setting
# a recrawl's requests carry the store's validators of each URL (crawler.downloadermiddlewares)
NEARDUP_CONDITIONAL = _CRAWL.conditional_requests
NEARDUP_KEEP_TEXT = _CONFIG.review.keep_text  # keep dropped pages' canonical text (explain)
NEARDUP_MAX_TEXT_BYTES = _CONFIG.review.max_text_bytes  # a longer kept text is cut to this
NEARDUP_CAP = _DEDUP.cap  # clusters read per fingerprint: the boilerplate cap (keeps it O(rs))
NEARDUP_WORKER = "process"  # where decisions and storage run: "process" (a worker) or "inline"
NEARDUP_RUN_ID = None  # name of this run's dedup log; None = start time and process id
NEARDUP_PROGRESS = False  # the live progress line on stderr (neardup crawl turns it on)
NEARDUP_PROGRESS_INTERVAL = 1.0  # seconds between two progress lines
# our AutoThrottle (crawler.extensions.throttle.LatencyThrottle): the delay follows the median
# latency of a host's last responses, so one slow page cannot set the pace; it steps aside when
# Scrapy's AUTOTHROTTLE_ENABLED is on, and reads AUTOTHROTTLE_START_DELAY, _MAX_DELAY,
# _TARGET_CONCURRENCY and _DEBUG as Scrapy's does
NEARDUP_THROTTLE_ENABLED = _CRAWL.autothrottle
NEARDUP_THROTTLE_WINDOW = DEFAULT_WINDOW  # responses in that median
# a crawl on several machines (docs/distributed.md): the crawler.frontier scheduler and index
NEARDUP_FRONTIER = None  # redis://HOST:PORT/DB of the shared frontier and index; None: one machine
NEARDUP_FRONTIER_NODE = "1/1"  # this node, "I/K": node I of K (each host belongs to one node)
NEARDUP_FRONTIER_CRAWL = None  # the crawl's name, prefix of its Redis keys (None: from start URLs)
NEARDUP_FRONTIER_SETTLE = frontier.SETTLE_SECONDS  # s between the two looks that end the crawl
NEARDUP_FRONTIER_RETRIES = frontier.RETRIES  # retries of a Redis command before the node stops
NEARDUP_FRONTIER_LEASE = frontier.LEASE_SECONDS  # s a killed node's lease outlives it


def neardup_defaults() -> dict[str, Any]:
    """Every ``NEARDUP_*`` default above, as a fresh dict (mutable values copied)."""
    return {
        name: (value.copy() if isinstance(value, (dict, list)) else value)
        for name, value in globals().items()
        if name.startswith("NEARDUP_")
    }


def scrapy_settings(config: Config) -> dict[str, Any]:
    """The Scrapy settings for a crawl with ``config``; apply them at ``"project"`` priority.

    Besides the mapped keys it fixes what a dedup crawl needs whatever the config says: no
    telnet console, INFO logging, and the same ``NEARDUP_*`` names :func:`neardup_defaults`
    lists, so a component never needs a fallback when run from our command line.
    """
    crawl = config.crawl
    settings: dict[str, Any] = {
        "BOT_NAME": "neardup",
        "SPIDER_MODULES": ["crawler.spiders"],  # so that a crawl can name the spider "neardup"
        "USER_AGENT": crawl.user_agent,
        "ROBOTSTXT_OBEY": crawl.robots_txt,
        # one host is the usual crawl, so the per-domain cap must not undercut the global one
        "CONCURRENT_REQUESTS": crawl.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": crawl.concurrency,
        # crawl.autothrottle turns on our throttle, not Scrapy's: Scrapy's lets one slow
        # response set the delay, and no later non-200 response lower it again
        "EXTENSIONS": {"crawler.extensions.throttle.LatencyThrottle": 0},
        "NEARDUP_THROTTLE_ENABLED": crawl.autothrottle,
        "AUTOTHROTTLE_ENABLED": False,
        # config's download_delay is "the delay before the throttle adapts it": both its start
        # and (as Scrapy defines DOWNLOAD_DELAY under AutoThrottle) its floor
        "AUTOTHROTTLE_START_DELAY": crawl.download_delay,
        "DOWNLOAD_DELAY": crawl.download_delay,
        "DOWNLOAD_TIMEOUT": crawl.timeout,
        # also the decompressed size limit of HttpCompressionMiddleware (the gzip-bomb guard)
        "DOWNLOAD_MAXSIZE": crawl.max_page_bytes,
        "DOWNLOAD_WARNSIZE": crawl.max_page_bytes // 2,
        "DEPTH_LIMIT": crawl.max_depth,
        # max_pages is enforced by the spider, which schedules at most that many URLs and so
        # yields exactly that many items; CLOSESPIDER_PAGECOUNT would let in-flight requests
        # through and count robots.txt, so it is left to the user.
        "NEARDUP_MAX_PAGES": crawl.max_pages,
        "NEARDUP_MAX_PATH_REPEATS": crawl.max_path_repeats,
        "NEARDUP_MAX_PATH_SEGMENTS": crawl.max_path_segments,
        "NEARDUP_DUPLICATE_BUDGET": crawl.duplicate_budget_setting,
        # a recrawl asks for each URL the store knows only if it changed (If-None-Match,
        # If-Modified-Since from the store's history)
        "NEARDUP_CONDITIONAL": crawl.conditional_requests,
        "DOWNLOADER_MIDDLEWARES": {
            # in the place of Scrapy's: every request waiting for robots.txt gets its rules
            "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
            "crawler.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": 100,
            "crawler.downloadermiddlewares.conditional.ConditionalGetMiddleware": 580,
        },
        # no consoles listening on the machine: a crawl is driven by its config, not remotely
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "LOG_LEVEL": "INFO",
        # the spider yields one item per response: Scrapy's 100 (CONCURRENT_ITEMS) would start
        # 100 tasks to process each response's output
        "CONCURRENT_ITEMS": 1,
        # a check for the developer of a spider, whose cache is keyed on the bound method: a
        # request's callback is a new one each time (a request read back from a JOBDIR, one
        # made per link), so it would parse the spider's source again and again
        "WARN_ON_GENERATOR_RETURN_VALUE": False,
        # every decision is logged by the pipelines; Scrapy's per-item DEBUG lines would only
        # repeat whole bodies
        "LOG_FORMATTER": "crawler.settings.QuietLogFormatter",
    }
    settings.update(
        {
            "NEARDUP_ENABLED": True,
            "NEARDUP_STORE": config.store,
            "NEARDUP_SKETCH": config.sketch.to_dict(),
            "NEARDUP_THRESHOLD": config.dedup.threshold,
            "NEARDUP_CONTAINMENT": config.dedup.containment,
            "NEARDUP_REPRESENTATIVE": config.dedup.representative,
            "NEARDUP_CANONICALISER": config.dedup.canonicaliser,
            "NEARDUP_CAP": config.dedup.cap,
            "NEARDUP_CONTENT_AREA": config.canonical.to_dict(),
            "NEARDUP_BATCH_SIZE": crawl.batch_size,
            "NEARDUP_BATCH_SECONDS": crawl.batch_seconds,
            "NEARDUP_ALLOWED_DOMAINS": list(crawl.allowed_domains),
            "NEARDUP_INCLUDE": list(crawl.include),
            "NEARDUP_EXCLUDE": list(crawl.exclude),
            "NEARDUP_KEEP_TEXT": config.review.keep_text,
            "NEARDUP_MAX_TEXT_BYTES": config.review.max_text_bytes,
        }
    )
    # our settings that config.yaml does not carry (run id, progress, ...) keep their defaults
    for name, value in neardup_defaults().items():
        settings.setdefault(name, value)
    return settings


class QuietLogFormatter(LogFormatter):
    """Scrapy's log formatter, naming an item by its URL instead of printing it whole.

    A :class:`~crawler.items.PageItem` carries the page body and its token list; Scrapy's
    default "Dropped: ..." and "Scraped from ..." lines would print both for every page.
    """

    def scraped(
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult:
        return _brief(super().scraped(item, response, spider))

    def dropped(
        self,
        item: Any,
        exception: BaseException,
        response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult:
        return _brief(super().dropped(item, exception, response, spider))

    def item_error(
        self,
        item: Any,
        exception: BaseException,
        response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult:
        return _brief(super().item_error(item, exception, response, spider))


def _brief(result: LogFormatterResult) -> LogFormatterResult:
    args = result.get("args")
    if isinstance(args, dict) and "item" in args:
        item = args["item"]
        url = getattr(item, "url", None)
        if url is None and ItemAdapter.is_item(item):  # a dict, or another project's item
            url = ItemAdapter(item).get("url")
        if url is not None:
            result = {**result, "args": {**args, "item": f"<{type(item).__name__} {url}>"}}
    return result
