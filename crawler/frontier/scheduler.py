"""A Scrapy scheduler over the crawl's shared frontier in Redis: node I of K.

Every request Scrapy schedules goes to Redis, to the queue of the node that owns its host (this
node's or another's), if the crawl has not seen it; no request waits in this process's memory.
:meth:`FrontierScheduler.next_request` pops this node's queue into its in-flight list, and the
request stays there until it is acknowledged:

* a page the crawl keeps an item of: the crawl calls :meth:`FrontierScheduler.ack` (or
  :meth:`~FrontierScheduler.ack_url`) once the page is decided and committed to its store
  (after the page's links were queued, which
  :class:`~crawler.frontier.middleware.FrontierSpiderMiddleware` waits for), or this scheduler
  when a pipeline raised on the item (``item_error``: there is nothing to commit);
* a response whose callback yields no item: the middleware, when the output is consumed;
* a failure (a download error, robots.txt, an HTTP error status): the errback this scheduler
  gives each request, before the request's own errback, if any;
* a redirect or retry: the new request takes the old one's place (:mod:`.queue`).

**Start.** The node's in-flight list goes back to its queue (what a killed run held), and the
spider's start requests are pushed like any other, each to its owner, once for the whole crawl
(the seen set). The node registers when Scrapy first finds it idle: by then its start requests
are all queued.

**End.** An idle node closes only when the crawl is finished: all K nodes registered and every
queue and in-flight list of every node empty, seen so at two looks at least
``NEARDUP_FRONTIER_SETTLE`` seconds apart. A page's links are queued before the page is
acknowledged, so empty lists mean that no node holds work and none can make more. Until then
the spider is kept open (``DontCloseSpider``), and Scrapy looks again at its next heartbeat
(every 5 s), which is also how soon an idle node sees requests another node queued for it.
Nor are the looks that end the crawl left to the heartbeat: an idle node looks once the last
request it held is acknowledged, every second while it waits for the others, and
``NEARDUP_FRONTIER_SETTLE`` seconds after a look that found the crawl's lists empty; it closes
if it is still idle and the lists are still empty (one transaction of ``LLEN`` a look).

**One process a node.** Before it touches the node's lists the scheduler takes the node's lease
(:mod:`.lease`), and it renews it while it runs: a node started a second time, elsewhere,
stops with one line, and a node started again after a kill waits for the killed process's
lease to expire (``NEARDUP_FRONTIER_LEASE`` seconds at most).

**Losing Redis.** A command that fails once its retries are spent (Redis gone for longer than
``NEARDUP_FRONTIER_RETRIES`` allow, about half a minute), or a look that finds the crawl's keys
gone (a Redis restarted without its data), stops the node: one line says so (logged as the
crawl's failure, ``neardup_failure``), the spider closes, and from then on the scheduler asks
Redis nothing (a request's entry stays in flight there; the next run of the node takes it back).

Settings (defaults in :mod:`crawler.frontier.defaults`): ``NEARDUP_FRONTIER`` (the Redis URL),
``NEARDUP_FRONTIER_NODE`` (``"I/K"``), ``NEARDUP_FRONTIER_CRAWL`` (the crawl's name: its keys'
prefix), ``NEARDUP_FRONTIER_SETTLE``, ``NEARDUP_FRONTIER_RETRIES``,
``NEARDUP_FRONTIER_LEASE``. Stats: ``neardup/frontier/...``.
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.request import RequestFingerprinter

from crawler.frontier import defaults
from crawler.frontier.partition import check_crawl_name, parse_node
from crawler.frontier.lease import NodeLease
from crawler.frontier.queue import FrontierLost, NodeQueues

if TYPE_CHECKING:
    import redis
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.utils.request import RequestFingerprinterProtocol
    from twisted.python.failure import Failure

__all__ = ["WAITING_STAT", "FrontierScheduler"]

#: the stat an idle node keeps of the nodes it waits for to start (``"2/3, 3/3 of crawl N"``)
WAITING_STAT = "neardup/frontier/waiting_for"

logger = logging.getLogger(__name__)

_SCHEDULERS: weakref.WeakKeyDictionary[Crawler, FrontierScheduler] = weakref.WeakKeyDictionary()
_T = TypeVar("_T")


def _until_lost(default: Any) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """A scheduler method that gives ``default`` once Redis is lost, and loses it when Redis
    fails it (module doc, *Losing Redis*)."""

    def wrap(method: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(method)
        def guarded(self: FrontierScheduler, *args: Any, **kwargs: Any) -> _T:
            import redis

            if self.lost is None:
                try:
                    return method(self, *args, **kwargs)
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    self._lose(f"the crawl's Redis at {self.where} does not answer "
                               f"({' '.join(str(exc).split()) or type(exc).__name__})")  # fmt: skip
                except FrontierLost as exc:
                    self._lose(str(exc))
            return default

        return guarded

    return wrap


class _AckOnFailure:
    """The errback a popped request is given: acknowledge it, then the request's own errback
    (or none: the failure is returned, and Scrapy handles it as it would have)."""

    def __init__(self, scheduler: FrontierScheduler, original: Any, url: str) -> None:
        self.scheduler = scheduler
        self.original = original
        #: the URL it was popped with (a redirect made from it has another)
        self.url = url

    def __call__(self, failure: Failure) -> Any:
        self.scheduler.ack(failure.request)  # type: ignore[attr-defined]  # Scrapy sets it
        if self.original is not None:
            return self.original(failure)
        return failure


class FrontierScheduler(BaseScheduler):
    """Node ``node`` of ``nodes`` of the crawl ``crawl`` whose frontier is in ``server``.

    ``settle``: seconds between the two looks that end the crawl; ``lease``: seconds the
    node's lease lasts from a renewal; ``fingerprinter``: what fills
    the seen set (Scrapy's default one unless given); ``user_agent``: this node's, taken off
    the redirects it hands on; ``crawler``: for stats and signals (``from_crawler`` gives all).
    """

    def __init__(
        self,
        server: redis.Redis,
        crawl: str,
        node: int,
        nodes: int,
        *,
        settle: float = defaults.SETTLE_SECONDS,
        lease: float = defaults.LEASE_SECONDS,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        user_agent: str | None = None,
        crawler: Crawler | None = None,
    ) -> None:
        check_crawl_name(crawl)
        if not 1 <= node <= nodes:
            raise ValueError(f"node {node} of {nodes}: the node must be between 1 and {nodes}")
        self.server = server
        self.crawl = crawl
        self.node = node
        self.nodes = nodes
        self.settle = settle
        self.lease_seconds = lease
        #: the node's lease, while this process holds it (module doc, *One process a node*)
        self.lease: NodeLease | None = None
        self._renewal: Any = None
        #: Scrapy's request fingerprints fill the seen set (the crawler's, from from_crawler)
        self.fingerprinter = fingerprinter or RequestFingerprinter()
        #: this node's User-Agent, taken off the redirects it hands to other nodes
        self.user_agent = user_agent
        self.crawler = crawler
        self.stats = crawler.stats if crawler is not None else None
        self.queues: NodeQueues | None = None
        self._registered = False
        self._empty_since: float | None = None
        self._second_look: Any = None
        #: entries of requests whose callback output is being consumed: ack wanted or not
        self._open_outputs: dict[bytes, bool] = {}
        #: URL → entries of the requests this node popped and has not acknowledged
        self._in_flight: dict[str, list[bytes]] = {}
        #: why Redis cannot be used any more (module doc, *Losing Redis*), else None
        self.lost: str | None = None
        named = server.connection_pool.connection_kwargs
        #: the server, to name it in a message
        self.where = f"redis://{named.get('host', '')}:{named.get('port', '')}/{named.get('db', 0)}"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        from crawler.frontier.connection import client

        settings = crawler.settings
        url = settings.get(defaults.SETTING_URL)
        if not url:
            raise NotConfigured(f"{defaults.SETTING_URL} (the frontier's redis:// URL) is not set")
        crawl = settings.get(defaults.SETTING_CRAWL)
        if not crawl:
            raise NotConfigured(f"{defaults.SETTING_CRAWL} (the crawl's name) is not set")
        node, nodes = parse_node(settings.get(defaults.SETTING_NODE, "1/1"))
        settle = settings.getfloat(defaults.SETTING_SETTLE, defaults.SETTLE_SECONDS)
        retries = settings.getint(defaults.SETTING_RETRIES, defaults.RETRIES)
        lease = settings.getfloat(defaults.SETTING_LEASE, defaults.LEASE_SECONDS)
        server = client(url, retries)  # a Redis restart is ridden out (.connection)
        scheduler = cls(
            server, crawl, node, nodes, settle=settle, lease=lease,
            fingerprinter=crawler.request_fingerprinter,
            user_agent=settings.get("USER_AGENT"), crawler=crawler,
        )  # fmt: skip
        _SCHEDULERS[crawler] = scheduler
        return scheduler

    @classmethod
    def of(cls, crawler: Crawler) -> FrontierScheduler | None:
        """The frontier scheduler of ``crawler``'s crawl, if it runs on one (for the parts of
        the crawl that acknowledge requests)."""
        return _SCHEDULERS.get(crawler)

    # --- Scrapy's scheduler interface --------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self.queues = NodeQueues(self.server, spider, self.crawl, self.node, self.nodes)
        self.queues.check_nodes()
        if not self._take_lease():
            return
        recovered = self.queues.recover()
        self._inc("neardup/frontier/recovered", recovered)
        logger.info(
            "Frontier %s: node %d of %d, %d requests queued (%d back from a stopped run)",
            self.crawl, self.node, self.nodes, len(self.queues), recovered,
        )  # fmt: skip
        if self.crawler is not None:
            self.crawler.signals.connect(self._idle, signal=signals.spider_idle)
            self.crawler.signals.connect(self._item_error, signal=signals.item_error)

    def close(self, reason: str) -> None:
        for call in (self._second_look, self._renewal):
            if call is not None:
                call.cancel()
        self._second_look = self._renewal = None
        if self.lease is not None and self.lost is None:
            self._give_lease_back()
        if self.crawler is not None:
            self.crawler.signals.disconnect(self._idle, signal=signals.spider_idle)
            self.crawler.signals.disconnect(self._item_error, signal=signals.item_error)
        self.server.close()

    # --- one process a node -------------------------------------------------------------------

    def _take_lease(self) -> bool:
        """Take the node's lease (waiting for a killed process's to expire), or stop: the node
        is running elsewhere."""
        lease = NodeLease(self.server, self.crawl, self.node, self.lease_seconds)
        holder = lease.acquire(on_wait=lambda: logger.info(
            "Frontier %s: node %d of %d is held by another process; waiting up to %g s for its "
            "lease to expire (a killed run's does)", self.crawl, self.node, self.nodes,
            self.lease_seconds))  # fmt: skip
        if holder is not None:
            self._lose(f"node {self.node}/{self.nodes} of the crawl {self.crawl!r} is already "
                       f"running ({holder}): start each node once")  # fmt: skip
            return False
        self.lease = lease
        self._renew_in()
        return True

    def _renew_in(self) -> None:
        if self.crawler is not None:
            from scrapy.utils.asyncio import call_later

            self._renewal = call_later(self.lease_seconds / 3, self._renew)

    @_until_lost(None)
    def _renew(self) -> None:
        """Keep the lease, every third of its time; a lease another process took stops this
        one."""
        assert self.lease is not None
        self._renewal = None
        holder = self.lease.renew()
        if holder is not None:
            self.lease = None
            self._lose(f"node {self.node}/{self.nodes} of the crawl {self.crawl!r} was taken "
                       f"over by another process ({holder}): start each node once")  # fmt: skip
            return
        self._renew_in()

    @_until_lost(None)
    def _give_lease_back(self) -> None:
        assert self.lease is not None
        self.lease.release()
        self.lease = None

    def _item_error(self, item: Any, response: Any, **_: Any) -> None:
        """A pipeline raised on an item: nothing of it will be committed, so nobody will
        acknowledge its request but this."""
        request = getattr(response, "request", None)
        if request is not None:
            self.ack(request)

    def _lose(self, line: str) -> None:
        """Redis is lost: say so once, and close the spider."""
        self.lost = line
        logger.error("%s", line, extra={"neardup_failure": f"{line}: the node stopped"})
        engine = self.crawler.engine if self.crawler is not None else None
        if engine is not None and engine.spider is not None:
            from scrapy.utils.asyncio import call_later
            from scrapy.utils.defer import deferred_from_coro

            call_later(0, lambda: deferred_from_coro(
                engine.close_spider_async(reason="frontier_lost")))  # fmt: skip

    @_until_lost(False)
    def has_pending_requests(self) -> bool:
        return self.queues is not None and len(self.queues) > 0

    @_until_lost(False)
    def enqueue_request(self, request: Request) -> bool:
        """Queue ``request`` for its host's node, unless the crawl has seen it. A request that
        still carries an in-flight entry was made from that request by a downloader middleware
        (the spider middleware takes entries off the spider's own requests): it replaces it."""
        assert self.queues is not None, "open() was not called"
        replaces = request.meta.pop(defaults.ENTRY_META, None)
        replaced_url = None
        if isinstance(request.errback, _AckOnFailure):
            replaced_url = request.errback.url
            request = request.replace(errback=request.errback.original)
        if replaces is not None:
            self._drop_own_user_agent(request)
        fingerprint = None if request.dont_filter else self.fingerprinter.fingerprint(request)
        owner = self.queues.owner(request)
        queued = self.queues.push(request, fingerprint, replaces)
        if replaces is not None:
            self._open_outputs.pop(replaces, None)
            self._forget(replaced_url or request.url, replaces)
            self._inc("neardup/frontier/replaced")
        if not queued:
            self._inc("neardup/frontier/filtered")
            return False
        self._inc("neardup/frontier/enqueued")
        if owner != self.node:
            self._inc("neardup/frontier/enqueued/other_node")
        return True

    def _drop_own_user_agent(self, request: Request) -> None:
        """A redirect copies its request's headers, among them the User-Agent this node's
        ``UserAgentMiddleware`` gave it; the node that fetches it gives its own (which may name
        it), so this node's is taken off."""
        own = self.user_agent
        if own and request.headers.get("User-Agent") == own.encode():
            del request.headers["User-Agent"]

    @_until_lost(None)
    def next_request(self) -> Request | None:
        assert self.queues is not None, "open() was not called"
        try:
            popped = self.queues.pop()
        except ValueError as exc:
            logger.error("%s; dropped", exc)
            self._inc("neardup/frontier/undecodable")
            return None
        if popped is None:
            return None
        request, entry = popped
        self._waiting_for("")  # busy: whoever queued it has started
        request.meta[defaults.ENTRY_META] = entry
        self._in_flight.setdefault(request.url, []).append(entry)
        request.errback = _AckOnFailure(self, request.errback, request.url)
        self._inc("neardup/frontier/dequeued")
        return request

    # --- acknowledgement ---------------------------------------------------------------------

    @_until_lost(None)
    def ack(self, request: Request) -> None:
        """The crawl is done with ``request``: its page is decided and committed (or it has no
        page). Its entry leaves the in-flight list, at once, or when its callback output is
        consumed if that is still going on (the page's links are queued first). Only the
        first acknowledgement counts: a response refused by a spider middleware (an HTTP
        error status) is acknowledged by its errback, then its empty output finishes."""
        entry = request.meta.get(defaults.ENTRY_META)
        if entry is not None and self._ack_entry(request.url, entry):
            del request.meta[defaults.ENTRY_META]  # so a second acknowledgement finds nothing

    @_until_lost(None)
    def ack_url(self, url: str) -> None:
        """:meth:`ack` for the request of ``url`` that this node popped (the URL of a page
        item is its response's, which is its request's: a redirect's target has its own)."""
        entries = self._in_flight.get(url)
        if entries:
            self._ack_entry(url, entries[0])

    def _ack_entry(self, url: str, entry: bytes) -> bool:
        """Remove ``entry`` now (True), or once its callback output is consumed (False)."""
        if entry in self._open_outputs:
            self._open_outputs[entry] = True
            return False
        self._remove(url, entry)
        return True

    def output_started(self, request: Request) -> None:
        """The spider middleware: ``request``'s callback output is being consumed."""
        entry = request.meta.get(defaults.ENTRY_META)
        if entry is not None:
            self._open_outputs.setdefault(entry, False)

    @_until_lost(None)
    def output_finished(self, request: Request, items: int) -> None:
        """The spider middleware: the output is consumed and held ``items`` items. Without
        items nobody else will acknowledge the request, so it is acknowledged now."""
        entry = request.meta.get(defaults.ENTRY_META)
        if entry is None:
            return
        wanted = self._open_outputs.pop(entry, False)
        if wanted or not items:
            del request.meta[defaults.ENTRY_META]
            self._remove(request.url, entry)

    def _remove(self, url: str, entry: bytes) -> None:
        assert self.queues is not None
        if not self._forget(url, entry):
            return  # acknowledged already (by URL, then once more as a request)
        self._inc("neardup/frontier/acked")
        if not self.queues.ack(entry):
            # the LREM ran, but its reply was lost in a reconnect and the client sent it
            # again (a Redis restart): the entry is out of the list all the same
            self._inc("neardup/frontier/acked/reply_lost")
        if not self._in_flight:  # this node holds nothing now: the crawl may be finished
            self._look_in(0.0)

    def _forget(self, url: str, entry: bytes) -> bool:
        """Take ``entry`` off this node's in-flight requests; False if it was not there."""
        entries = self._in_flight.get(url, [])
        found = entry in entries
        if found:
            entries.remove(entry)
        if not entries:
            self._in_flight.pop(url, None)
        return found

    # --- termination --------------------------------------------------------------------------

    @_until_lost(None)
    def _idle(self, spider: Spider, **_: Any) -> None:  # (a signal handler: it gets them all)
        """Keep an idle node open until the whole crawl is finished (module doc)."""
        assert self.queues is not None
        if not self._registered:
            self.queues.register()
            self._registered = True
        if not self._in_flight and self.server.llen(self.queues.inflight_key):
            # idle, holding nothing, yet entries in flight: popped by a command whose reply
            # was lost (a connection that broke), so no request of this process has them
            self._inc("neardup/frontier/recovered", self.queues.recover())
        if self.finished():
            return
        self._look_in(self._next_look())
        raise DontCloseSpider

    def _next_look(self) -> float:
        """Seconds to the next look of an idle node: the second of two, or the next poll."""
        return self.settle + 0.05 if self._empty_since is not None else defaults.IDLE_LOOK_SECONDS

    def _look_in(self, seconds: float) -> None:
        """Look at the whole crawl in ``seconds``, without waiting for Scrapy's heartbeat."""
        if self._second_look is None and self.crawler is not None:
            from scrapy.utils.asyncio import call_later

            self._second_look = call_later(seconds, self._look)

    @_until_lost(None)
    def _look(self) -> None:
        """A look between heartbeats, by an idle node: once the last request it held was
        acknowledged, every ``IDLE_LOOK_SECONDS`` while it waits for the others, and
        ``settle`` seconds after a look that found the crawl's lists empty. A node whose
        crawl is finished closes; one that is busy again is left to Scrapy."""
        self._second_look = None
        engine = self.crawler.engine if self.crawler is not None else None
        if not self._registered or engine is None or engine.spider is None:
            return
        if not engine.spider_is_idle():
            return  # busy again: the idle handler looks when it is idle
        if self.finished():
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="finished"))
        else:
            self._look_in(self._next_look())

    def finished(self) -> bool:
        """True at the second of two looks, ``settle`` seconds apart or more, that both found
        every node registered and every queue and in-flight list empty."""
        assert self.queues is not None
        left = self.queues.work_left(self._registered)
        missing = self.queues.unregistered() if left == -1 else []
        self._waiting_for(", ".join(f"{n}/{self.nodes}" for n in missing))
        if left != 0:
            self._empty_since = None
            return False
        now = time.monotonic()
        if self._empty_since is None:
            self._empty_since = now
            return False
        return now - self._empty_since >= self.settle

    def _waiting_for(self, nodes: str) -> None:
        """Keep the nodes this one waits for to start in the stats (the progress line)."""
        if self.stats is not None and (nodes or self.stats.get_value(WAITING_STAT)):
            self.stats.set_value(WAITING_STAT, f"{nodes} of crawl {self.crawl}" if nodes else "")

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(key, count)
