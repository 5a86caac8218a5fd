"""The spider: fetch a site, canonicalise each HTML page, yield one item per URL.

Every URL the spider schedules comes back as exactly one :class:`~crawler.items.PageItem`:
either a page with its canonical tokens, or a page with a ``skip_reason`` saying why it cannot
be compared (not HTML, empty, too large, an HTTP error, a timeout, a redirect loop, ...). So the
pipelines see every decision, and the dedup log can say why a linked page was never stored.

Three things are done here rather than left to Scrapy's components, each for a reason:

* **Redirects.** Scrapy's RedirectMiddleware hands a redirected request back to the scheduler,
  whose duplicate filter silently drops a loop (or a redirect to a page already crawled): the
  URL would yield nothing. The spider follows ``Location`` itself, so a loop, a chain that is
  too long, or a target outside the allowed hosts becomes a skipped item with a reason.
* **Ports.** OffsiteMiddleware compares host names only, so a crawl of ``127.0.0.1:8000`` would
  wander to every other port of the machine. The spider checks the port as well, for links and
  for redirect targets; OffsiteMiddleware still runs on host names as a second guard.
* **max_pages and depth.** The spider schedules at most ``NEARDUP_MAX_PAGES`` URLs (counted
  across a Ctrl-C and its resume, in the JOBDIR's spider state) and follows no link beyond
  ``DEPTH_LIMIT``, so a page it schedules is never dropped later without an item
  (DepthMiddleware would drop such requests silently, and CLOSESPIDER_PAGECOUNT overshoots).

**Links, once the page is decided.** ``parse`` does not yield a page's links: it puts them on
the item (``links``, canonical and within the crawl's scope) and on the response, and they are
requested only once the pipelines are done with the item, which Scrapy tells by
``item_scraped``, ``item_dropped`` or ``item_error`` (each with the response). A page the dedup
stage dropped as a duplicate says, on its drop (:class:`~crawler.pipelines.drops.DedupDrop`),
whether its links are followed and with which run of duplicates along the path: that is how a
spider trap ends (:mod:`crawler.work.links`). Every other outcome, a kept page, another
pipeline's drop or error, or no dedup stage at all, has its links followed. So a trap cannot fan
out while decisions are pending, and nothing waits: a page whose item never comes back simply
has no links followed. The requests go to the engine (``engine.crawl``), through Scrapy's own
DepthMiddleware and RefererMiddleware (priority for breadth-first order, depth stats, the
Referer header) when the crawl has them enabled; other spider middlewares see the page's item
but not its links. A page decided while the crawl is closing (Ctrl-C) has its links queued
before the scheduler saves its queue to the JOBDIR, so a resumed crawl requests them.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, Spider, signals
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
    UnsupportedURLSchemeError,
)
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.response import get_meta_refresh
from twisted.internet import error as tx_error
from w3lib.url import canonicalize_url, safe_url_string

from crawler import settings as defaults
from crawler.downloadermiddlewares.conditional import FULL_FETCH, KNOWN_DIGEST
from crawler.items import PageItem
from crawler.spiders.paths import path_refusal
from crawler.work.page import empty_detail
from crawler.work.refusal import media_type_of, refused
from dedup.canonical import ENGINES, UNITS, document_tokens
from dedup.html_text import DocumentTooDeep, charset_of
from dedup.params import ContentArea
from storage.errors import StoreWriteError
from storage.pages import payload_digest

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    # typing.Self requires Python 3.11
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = [
    "AllowedHost",
    "SiteSpider",
    "charset",
    "classify_failure",
    "header_pairs",
    "media_type",
]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}

# request.meta keys of ours
DEPTH = "neardup_depth"  # link depth from a start URL (a redirect does not add to it)
CHAIN = "neardup_redirects"  # the URLs requested before this one in a redirect chain
RUN = "neardup_run"  # the run of duplicates along the link path (crawler.work.links)
LINKS = "neardup_links"  # the page's links, waiting for its decision (set by parse)
#: spider.state key: the URLs this crawl has scheduled, across a stop and its resume
_SCHEDULED = "neardup_scheduled"


@dataclass(frozen=True)
class AllowedHost:
    """One entry of the allowed hosts: a domain (subdomains too) and, if given, one port.

    >>> AllowedHost.parse("127.0.0.1:8000").allows("http://127.0.0.1:8000/a")
    True
    >>> AllowedHost.parse("127.0.0.1:8000").allows("http://127.0.0.1:8001/a")
    False
    >>> AllowedHost.parse("example.org").allows("https://www.example.org/")
    True
    >>> AllowedHost.parse("example.org").allows("https://badexample.org/")
    False
    """

    name: str
    port: int | None = None

    @classmethod
    def parse(cls, entry: str) -> AllowedHost:
        text = entry.strip()
        parts = urlsplit(text if "://" in text else f"//{text}")
        try:
            name, port = parts.hostname, parts.port
        except ValueError:
            name, port = None, None
        if not name:
            raise ValueError(f"allowed domain must be a host or host:port; got {entry!r}")
        return cls(name.lower().rstrip("."), port)

    @classmethod
    def of_url(cls, url: str) -> AllowedHost:
        """The host of a start URL, with its port only when the URL names one."""
        parts = urlsplit(url)
        return cls((parts.hostname or "").lower().rstrip("."), parts.port)

    def allows(self, url: str) -> bool:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        if host != self.name and not host.endswith("." + self.name):
            return False
        if self.port is None:
            return True
        try:
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        return port == self.port


class SiteSpider(Spider):
    """Crawl from ``start_urls`` within the allowed hosts; one :class:`PageItem` per URL.

    Arguments (``scrapy crawl neardup -a start_urls=URL1,URL2``): ``start_urls`` and, to widen
    or narrow the default (the start URLs' hosts with their ports), ``allowed_domains``.
    Settings: ``NEARDUP_SKETCH`` (its ``unit``), ``NEARDUP_CANONICALISER``,
    ``NEARDUP_CONTENT_AREA`` (which part of a page counts), ``NEARDUP_INCLUDE``,
    ``NEARDUP_EXCLUDE``, ``NEARDUP_ALLOWED_DOMAINS``, ``NEARDUP_MAX_PAGES``, ``DEPTH_LIMIT``,
    ``REDIRECT_MAX_TIMES``.
    """

    name = "neardup"

    def __init__(
        self,
        start_urls: Iterable[str] | str | None = None,
        allowed_domains: Iterable[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = _as_list(start_urls)
        if not self.start_urls:
            raise ValueError("SiteSpider needs at least one start URL (start_urls)")
        self._allowed_arg = _as_list(allowed_domains) if allowed_domains is not None else None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider._configure(crawler.settings)
        crawler.signals.connect(spider._opened, signal=signals.spider_opened)
        crawler.signals.connect(spider._item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(spider._item_dropped, signal=signals.item_dropped)
        crawler.signals.connect(spider._item_error, signal=signals.item_error)
        return spider

    def _configure(self, settings: BaseSettings) -> None:
        sketch = settings.getdict("NEARDUP_SKETCH", defaults.NEARDUP_SKETCH)
        self.unit: str = sketch.get("unit", defaults.NEARDUP_SKETCH["unit"])
        self.engine: str = settings.get("NEARDUP_CANONICALISER", defaults.NEARDUP_CANONICALISER)
        # checked now: a bad value would otherwise make every page "unparseable"
        if self.unit not in UNITS:
            raise ValueError(f"NEARDUP_SKETCH unit must be one of {UNITS}; got {self.unit!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"NEARDUP_CANONICALISER must be one of {ENGINES}; got {self.engine!r}")
        area = {**defaults.NEARDUP_CONTENT_AREA, **settings.getdict("NEARDUP_CONTENT_AREA")}
        try:
            self.area = ContentArea.from_dict(area)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"NEARDUP_CONTENT_AREA: {exc}") from None
        self.include = _patterns(settings, "NEARDUP_INCLUDE")
        self.exclude = _patterns(settings, "NEARDUP_EXCLUDE")
        self.max_pages = settings.getint("NEARDUP_MAX_PAGES", defaults.NEARDUP_MAX_PAGES)
        self.max_path_repeats = settings.getint("NEARDUP_MAX_PATH_REPEATS",
                                                defaults.NEARDUP_MAX_PATH_REPEATS)
        self.max_path_segments = settings.getint("NEARDUP_MAX_PATH_SEGMENTS",
                                                 defaults.NEARDUP_MAX_PATH_SEGMENTS)
        self.depth_limit = settings.getint("DEPTH_LIMIT")
        self.max_redirects = settings.getint("REDIRECT_MAX_TIMES", 20)
        # UrlLengthMiddleware would drop a longer URL silently, after we counted it as scheduled
        self.max_url_length = settings.getint("URLLENGTH_LIMIT", 2083)

        entries = self._allowed_arg
        if entries is None:
            entries = settings.getlist("NEARDUP_ALLOWED_DOMAINS", defaults.NEARDUP_ALLOWED_DOMAINS)
        if entries:
            self.allowed = [AllowedHost.parse(e) for e in entries]
        else:
            self.allowed = [AllowedHost.of_url(u) for u in self.start_urls if "://" in u]
        # for OffsiteMiddleware, which knows host names only
        self.allowed_domains = sorted({h.name for h in self.allowed if h.name})

        self.links = LinkExtractor(deny_extensions=[], unique=True, canonicalize=False)
        #: every URL scheduled, with the link depth it was scheduled at
        self.seen: dict[str, int] = {}
        self.scheduled = 0
        #: the spider's state a resumed crawl reads back (None until the first slot is taken)
        self._state: dict[str, Any] | None = None
        self._told_max_pages = False
        self._middlewares: list[Any] = []
        self._jobdir = settings.get("JOBDIR") or ""

    # --- scheduling ------------------------------------------------------------------------------

    async def start(self) -> AsyncIterator[Request | PageItem]:
        for url in self.start_urls:
            try:
                canonical = canonicalize_url(url)
                parts = urlsplit(canonical)
                if parts.scheme not in _DEFAULT_PORTS or not parts.netloc:
                    raise ValueError("not an http(s) URL")
            except ValueError as exc:
                yield self._skip(PageItem(url=url), "bad_url", f"start URL {url!r}: {exc}")
                continue
            if canonical in self.seen or not self._take_slot():
                continue
            self.seen[canonical] = 0
            request = self._request(canonical, depth=0)
            request.meta["allow_offsite"] = True  # a start URL is fetched whatever the hosts
            yield request
        for url, depth in self._known_urls():  # a recrawl asks for every page the store knows
            if url in self.seen or self.refusal(url) or not self._take_slot():
                continue
            self.seen[url] = depth
            yield self._request(url, depth=depth)

    def _known_urls(self) -> Iterator[tuple[str, int]]:
        """The URLs the store has decided, in the order it decided them (none for a new
        store), each with its link depth (0 where the store does not know it): the next run
        of a store requests each again (docs/recrawl.md), and follows a page's links only as
        deep as the first run would have."""
        from scrapy.utils.project import data_path

        from storage.errors import StoreError
        from storage.store import Store, url_key

        path = data_path(self.settings.get("NEARDUP_STORE", defaults.NEARDUP_STORE))
        if not self.settings.getbool("NEARDUP_ENABLED", True) or not Store.exists(path):
            return
        if self.settings.get("NEARDUP_FRONTIER"):  # a node's store is not recrawled: its
            return  # frontier in Redis knows every URL the crawl has seen (docs/distributed.md)
        try:
            with Store.open(path, readonly=True) as store:
                known = []
                for url in dict.fromkeys(url for _, url in store.urls()):
                    state = store.history.get(url_key(url))
                    depth = state.depth if state is not None else None
                    known.append((url, depth or 0))
        except (StoreError, OSError) as exc:
            logger.warning("neardup: the store's URLs could not be read: %s", exc)
            return
        yield from known

    def fetch_in_full(self, url: str) -> None:
        """Request ``url`` again, unconditionally: the dedup work kept it and needs its body
        (a page decided again after the page it duplicated changed, which answered 304), at
        the depth it was scheduled at."""
        request = self._request(url, depth=self.seen.get(url, 0))
        request.meta[FULL_FETCH] = True
        self._schedule(request.replace(dont_filter=True))

    def _take_slot(self) -> bool:
        if self._state is None:
            # the URLs an interrupted run of this crawl scheduled count too: Scrapy's
            # SpiderState keeps ``state`` in the JOBDIR across a stop and its resume
            self._state = getattr(self, "state", {})
            self.scheduled += int(self._state.get(_SCHEDULED, 0))
        if self.max_pages and self.scheduled >= self.max_pages:
            self.crawler.stats.inc_value("neardup/links/max_pages")
            if not self._told_max_pages:
                logger.info("Scheduled NEARDUP_MAX_PAGES=%d URLs; no more", self.max_pages)
                self._told_max_pages = True
            return False
        self.scheduled += 1
        self._state[_SCHEDULED] = self.scheduled
        return True

    def _request(
        self,
        url: str,
        depth: int,
        chain: list[str] | None = None,
        run: tuple[int, int] | None = None,
    ) -> Request:
        meta: dict[str, Any] = {
            DEPTH: depth,
            "dont_redirect": True,  # redirects are followed by _redirect, see the module doc
            "handle_httpstatus_all": True,  # a 404 is a decision too: it reaches parse
        }
        if run is not None:
            meta[RUN] = run
        if chain:
            meta[CHAIN] = chain
            meta["depth_reset"] = True  # keep DepthMiddleware's count at or below ours
        return Request(url, callback=self.parse, errback=self.errback, meta=meta)

    def refusal(self, url: str) -> str | None:
        """Why ``url`` (canonical) must not be fetched (``offsite``, ``excluded``, ...), or None.

        The include and exclude patterns are searched for in the canonical URL.
        """
        parts = urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS:
            return "scheme"
        if self.max_url_length and len(url) > self.max_url_length:
            return "too_long"
        if not any(host.allows(url) for host in self.allowed):
            return "offsite"
        if self.exclude and any(p.search(url) for p in self.exclude):
            return "excluded"
        if self.include and not any(p.search(url) for p in self.include):
            return "not_included"
        return path_refusal(parts.path, self.max_path_repeats, self.max_path_segments)

    def _page_links(self, response: TextResponse, depth: int) -> list[str]:
        """The page's links the crawl may follow: canonical, in scope, each once (refused
        ones counted by reason). None beyond DEPTH_LIMIT."""
        if self.depth_limit and depth >= self.depth_limit:
            return []
        try:
            urls = [link.url for link in self.links.extract_links(response)]
            _, refresh = get_meta_refresh(response)
            if refresh:
                urls.append(refresh)
        except Exception:  # a link extractor failure must not lose the page's item
            logger.warning("Could not extract links from %s", response.url, exc_info=True)
            self.crawler.stats.inc_value("neardup/links/extraction_error")
            return []
        stats = self.crawler.stats
        links: dict[str, None] = {}
        for raw in urls:
            try:
                url = canonicalize_url(raw)
            except ValueError:
                stats.inc_value("neardup/links/bad_url")
                continue
            if url in links or url in self.seen:
                continue
            refused = self.refusal(url)
            if refused:
                stats.inc_value(f"neardup/links/{refused}")
                continue
            links[url] = None
        return list(links)

    def _requests_for(
        self, links: list[str], depth: int, run: tuple[int, int] | None
    ) -> Iterator[Request]:
        """Requests for the links not requested yet, within NEARDUP_MAX_PAGES."""
        stats = self.crawler.stats
        for url in links:
            if url in self.seen:
                continue
            if not self._take_slot():
                continue
            self.seen[url] = depth
            stats.inc_value("neardup/links/followed")
            yield self._request(url, depth=depth, run=run)

    # --- a page's links, once it is decided -----------------------------------------------------

    def _opened(self, **_: Any) -> None:
        self._middlewares = _link_middlewares(self.crawler)  # they need the crawl's stats

    def _item_scraped(self, item: Any, response: Response | Failure | None, **_: Any) -> None:
        self._decided(response, None)

    def _item_dropped(
        self,
        item: Any,
        response: Response | Failure | None,
        exception: BaseException,
        **_: Any,
    ) -> None:
        self._decided(response, exception)

    def _item_error(self, item: Any, response: Response | Failure | None, **_: Any) -> None:
        self._decided(response, None)

    def _decided(self, response: Response | Failure | None, drop: BaseException | None) -> None:
        """The page's item is through the pipelines: request its links, unless its drop says
        not to (a duplicate past the budget: module doc)."""
        if not isinstance(response, Response):
            return
        links = response.meta.pop(LINKS, None)
        if not links:
            return
        run = getattr(drop, "run", None)
        if drop is not None and not getattr(drop, "follow_links", True):
            if run is not None:  # a duplicate past the budget, not a crawl that is stopping
                stats = self.crawler.stats
                stats.inc_value("neardup/links/duplicate_budget", len(links))
                stats.inc_value("neardup/duplicate_budget_pages")
            return
        depth = response.meta.get(DEPTH, 0) + 1
        for request in self._requests_for(links, depth, run):
            processed = self._through_middlewares(request, response)
            if processed is not None and not self._schedule(processed):
                return

    def _through_middlewares(self, request: Request, response: Response) -> Request | None:
        """``request`` as Scrapy's depth and referer middlewares would have passed it on."""
        for middleware in self._middlewares:
            request = middleware.get_processed_request(request, response)
            if request is None:
                return None
        return request

    def _schedule(self, request: Request) -> bool:
        """Hand ``request`` to the engine; False, the crawl stopping, when the JOBDIR in the
        store cannot take it (one line, as for the store itself: crawler.cli.crawl)."""
        try:
            self.crawler.engine.crawl(request)
        except OSError as exc:
            line = str(StoreWriteError.of(exc, self._jobdir or "JOBDIR"))
            logger.error("neardup: the crawl's queue could not be written: %s; stopping the crawl",
                         line, exc_info=True, extra={"neardup_failure": line})  # fmt: skip
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(self.crawler.engine.close_spider_async(reason="jobdir_error"))
            return False
        return True

    # --- responses -------------------------------------------------------------------------------

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Request | PageItem]:
        depth = response.meta.get(DEPTH, 0)
        if response.status in REDIRECT_STATUSES and b"Location" in response.headers:
            yield from self._redirect(response, depth)
            return
        item = PageItem(
            url=response.url,
            status=response.status,
            headers=header_pairs(response),
            body=response.body,
            fetched_at=time.time(),
            depth=depth,
        )
        if response.status == 304:  # the store's copy is current: the work keeps it
            yield item
            return
        reason, detail = self._refuse_content(response)
        if reason:
            yield self._skip(item, reason, detail)
            return
        known = response.meta.get(KNOWN_DIGEST)
        if known is not None and payload_digest(response.body) == known:
            # the body the store has: the work keeps its decision, and needs no tokens
            item.tokens = None
            yield from self._with_links(item, response, depth)
            return
        started = time.perf_counter()
        try:
            # bytes and the header's charset, not response.text: Scrapy guesses an undeclared
            # encoding with whichever detector is installed, and re-clustering the stored page
            # must give the very same tokens (dedup.canonical.decode_html decides, both times)
            tokens = document_tokens(
                response.body,
                "html",
                self.unit,
                self.engine,
                encoding=charset(response),
                area=self.area,
            )
        except DocumentTooDeep as exc:  # bad input, not a bug: one line says so
            yield self._skip(item, "too_deep", str(exc))
            return
        except Exception as exc:  # a canonicaliser bug must not stop the crawl; it is logged
            logger.error("Could not canonicalise %s", response.url, exc_info=True)
            yield self._skip(item, "unparseable", _one_line(f"{type(exc).__name__}: {exc}"))
            return
        item.canonicalise_seconds = time.perf_counter() - started
        self.crawler.stats.inc_value("neardup/canonicalise_seconds", item.canonicalise_seconds)
        if not tokens:  # skipped: it follows no links (a trap could serve blank pages forever)
            yield self._skip(item, "empty", empty_detail(self.area))
            return
        item.tokens = tokens
        self.crawler.stats.inc_value("neardup/canonicalised")
        yield from self._with_links(item, response, depth)

    def _with_links(self, item: PageItem, response: Response, depth: int) -> Iterator[PageItem]:
        """The item, with the page's links, which are requested once it is decided."""
        html = response if isinstance(response, HtmlResponse) else response.replace(
            cls=HtmlResponse
        )  # a sniffed page, or XHTML
        assert isinstance(html, HtmlResponse)
        item.links = self._page_links(html, depth)
        item.run = response.meta.get(RUN)
        if item.links:
            response.meta[LINKS] = item.links  # requested once the page is decided
        yield item

    def _refuse_content(self, response: Response) -> tuple[str, str]:
        """("", "") for an HTML page to canonicalise, else (skip reason, detail)."""
        content_type = (response.headers.get(b"Content-Type") or b"").decode("latin-1")
        return refused(response.status, content_type, response.body)

    def _redirect(self, response: Response, depth: int) -> Iterator[Request | PageItem]:
        chain = [*response.meta.get(CHAIN, []), response.url]
        location = safe_url_string(response.headers[b"Location"] or b"")
        origin = chain[0]
        item = PageItem(
            url=origin,
            status=response.status,
            headers=header_pairs(response),
            body=response.body,
            fetched_at=time.time(),
            depth=depth,
        )
        path = " -> ".join(chain)
        try:
            target = canonicalize_url(urljoin(response.url, location))
        except ValueError:
            yield self._skip(item, "redirect", f"bad Location {location!r} after {path}")
            return
        if target in chain:
            yield self._skip(item, "redirect_loop", f"{path} -> {target}")
            return
        if len(chain) > self.max_redirects:
            yield self._skip(item, "too_many_redirects", f"more than {self.max_redirects}: {path}")
            return
        refused = self.refusal(target)
        if refused or target in self.seen:
            why = f"is {refused}" if refused else "is crawled on its own"
            yield self._skip(item, "redirect", f"{path} -> {target}, which {why}")
            return
        self.seen[target] = depth
        self.crawler.stats.inc_value("neardup/redirects_followed")
        yield self._request(target, depth=depth, chain=chain, run=response.meta.get(RUN))

    def errback(self, failure: Failure) -> Iterator[PageItem]:
        request: Request = failure.request  # type: ignore[attr-defined]
        chain = request.meta.get(CHAIN, [])
        reason, detail = classify_failure(failure)
        if reason == "too_large":
            limit = request.meta.get("download_maxsize", self.settings.getint("DOWNLOAD_MAXSIZE"))
            detail = f"body over DOWNLOAD_MAXSIZE ({limit} bytes): {detail}"
        if chain:
            detail = f"{detail} (redirected from {chain[0]})"
        response = getattr(failure.value, "response", None)
        item = PageItem(
            url=chain[0] if chain else request.url,
            status=response.status if response is not None else 0,
            headers=header_pairs(response) if response is not None else [],
            fetched_at=time.time(),
            depth=request.meta.get(DEPTH, 0),
        )
        yield self._skip(item, reason, detail)

    def _skip(self, item: PageItem, reason: str, detail: str) -> PageItem:
        item.skip_reason = reason
        item.skip_detail = _one_line(detail)
        item.tokens = []
        self.crawler.stats.inc_value(f"neardup/skipped/{reason}")
        logger.info("Skipped %s: %s (%s)", item.url, reason, item.skip_detail)
        return item


# --- helpers (pure functions) --------------------------------------------------------------------


def _link_middlewares(crawler: Crawler) -> list[Any]:
    """Scrapy's DepthMiddleware and RefererMiddleware, as the crawl enables them, for the
    requests of links, which reach the engine without passing the spider middlewares."""
    from scrapy.exceptions import NotConfigured
    from scrapy.spidermiddlewares.depth import DepthMiddleware
    from scrapy.spidermiddlewares.referer import RefererMiddleware
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import build_from_crawler, load_object

    enabled = {
        load_object(path) if isinstance(path, str) else path
        for path in build_component_list(
            crawler.settings.get_component_priority_dict_with_base("SPIDER_MIDDLEWARES")
        )
    }
    middlewares = []
    for cls in (DepthMiddleware, RefererMiddleware):  # the order spider output meets them
        if cls in enabled:
            try:
                middlewares.append(build_from_crawler(cls, crawler))
            except NotConfigured:
                pass
    return middlewares


def media_type(response: Response) -> str:
    """The media type of the Content-Type header, lower case, without parameters."""
    return media_type_of((response.headers.get(b"Content-Type") or b"").decode("latin-1"))


def charset(response: Response) -> str | None:
    """The charset label of the Content-Type header, if any (unchecked: decode_html checks).

    >>> charset(Response("http://x/", headers={"Content-Type": 'text/html; charset="ISO-8859-1"'}))
    'ISO-8859-1'
    """
    raw = response.headers.get(b"Content-Type") or b""
    return charset_of(raw.decode("latin-1"))


def header_pairs(response: Response) -> list[tuple[str, str]]:
    """The response headers as (name, value) strings in order, one pair per value.

    Content-Length is made to describe the body the item carries: Scrapy decompresses a
    gzipped body and drops Content-Encoding but keeps the compressed length.
    """
    pairs: list[tuple[str, str]] = []
    for name, values in response.headers.items():
        key = name.decode("latin-1")
        for value in values:
            text = value.decode("latin-1")
            if key.lower() == "content-length":
                text = str(len(response.body))
            pairs.append((key, text))
    return pairs


def classify_failure(failure: Failure) -> tuple[str, str]:
    """A failed request as (skip reason, one-line detail)."""
    exc = failure.value
    message = _one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, HttpError) and exc.response is not None:
        return f"http_{exc.response.status}", f"HTTP status {exc.response.status}"
    if isinstance(exc, IgnoreRequest):
        if "robots.txt" in message:
            return "robots_txt", "forbidden by robots.txt"
        if "decompression" in message or "Decompression" in type(exc.__cause__).__name__:
            return "decompression_bomb", message
        return "ignored", message
    if isinstance(exc, (DownloadTimeoutError, tx_error.TimeoutError, tx_error.TCPTimedOutError)):
        return "timeout", message
    if isinstance(exc, DownloadCancelledError):
        if not str(exc) or "max size" in message:
            return "too_large", message
        return "cancelled", message
    if isinstance(exc, (CannotResolveHostError, tx_error.DNSLookupError)):
        return "dns_error", message
    if isinstance(exc, UnsupportedURLSchemeError):
        return "bad_url", message
    connection = (
        DownloadConnectionRefusedError,
        DownloadFailedError,
        ResponseDataLossError,
        tx_error.ConnectError,
        tx_error.ConnectionLost,
        tx_error.ConnectionDone,
    )
    if isinstance(exc, connection):
        return "connection_error", f"{type(exc).__name__}: {message}"
    return "fetch_error", f"{type(exc).__name__}: {message}"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _as_list(value: Iterable[str] | str | None) -> list[str]:
    """A list from a list or from ``-a name=a,b`` (one comma-separated string)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [v.strip() for v in items if v and v.strip()]


def _patterns(settings: BaseSettings, name: str) -> list[re.Pattern[str]]:
    default = getattr(defaults, name)
    compiled = []
    for pattern in settings.getlist(name, default):
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"{name}: bad regular expression {pattern!r}: {exc}") from None
    return compiled
