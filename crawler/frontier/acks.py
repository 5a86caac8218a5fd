"""A page's frontier entry acknowledged once the crawl is done with it: its item is through the
pipelines, so its links are queued, and its decision is committed to the node's store.

The frontier keeps each request a node popped in the node's in-flight list until it is
acknowledged (:mod:`crawler.frontier.scheduler`); what is still there when the node is killed
is fetched again when it restarts. For a page the crawl decides, two things must have happened
first, in either order:

* Scrapy is done with the page's item: ``item_scraped``, ``item_dropped`` or ``item_error``
  fired with its response. Our spider requests a page's links from those very signals
  (:mod:`crawler.spiders.site`), so by the end of the signal they are queued;
* the dedup work settled the item's URL: its decision is committed to the store, or there was
  nothing to write (a page passed over), as the work reports
  (:meth:`crawler.work.steps.StoreWork.take_durable`).

:class:`CommitAcks` waits for both and acknowledges on the event loop's next turn after the
later one, so after every handler of the signal has run. An item is matched to its settled
URL by the item's URL, in arrival order, since the work settles pages in the order it got them;
what is acknowledged is the response's own request (its in-flight entry), since an item may
carry another URL than the request that fetched it (a redirect that could not be followed
names the URL the chain began with).

A request whose item never comes back settled (the work stopped on a store failure) is not
acknowledged: it stays in flight and is fetched again when the node restarts. Requests without
a page item are acknowledged by the scheduler and the spider middleware, as they describe.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.http import Response

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from crawler.frontier.scheduler import FrontierScheduler

__all__ = ["CommitAcks"]

_ITEM_SIGNALS = (signals.item_scraped, signals.item_dropped, signals.item_error)


class CommitAcks:
    """Acknowledges, for ``scheduler``, each page of ``crawler`` once it is both through the
    pipelines and settled in the store (:meth:`settled`)."""

    def __init__(self, crawler: Crawler, scheduler: FrontierScheduler) -> None:
        self.crawler = crawler
        self.scheduler = scheduler
        #: item URL → the requests of its items through the pipelines, not yet settled
        self._through: dict[str, deque[Request | None]] = {}
        #: item URL → settlements that came before their item was through
        self._settled: Counter[str] = Counter()
        for signal in _ITEM_SIGNALS:
            crawler.signals.connect(self._item_done, signal=signal)

    def close(self) -> None:
        for signal in _ITEM_SIGNALS:
            self.crawler.signals.disconnect(self._item_done, signal=signal)

    @property
    def waiting(self) -> int:
        """Pages through the pipelines whose settlement has not come (yet)."""
        return sum(len(requests) for requests in self._through.values())

    def settled(self, urls: list[str], *, now: bool = False) -> None:
        """The work settled these pages (committed, or nothing to write). ``now``: the crawl
        is closing, every item is through, so acknowledge without waiting for a next turn."""
        for url in urls:
            waiting = self._through.get(url)
            if waiting:
                request = waiting.popleft()
                if not waiting:
                    del self._through[url]
                self._ack(request, now=now)
            else:
                self._settled[url] += 1

    def _item_done(self, item: Any, response: Any = None, **_: Any) -> None:
        try:
            url = ItemAdapter(item).get("url")
        except TypeError:
            return
        if not isinstance(url, str) or not url:
            return
        # a failure's request was acknowledged by the errback it was given; a start item has none
        request = response.request if isinstance(response, Response) else None
        if self._settled[url] > 0:
            self._settled[url] -= 1
            if not self._settled[url]:
                del self._settled[url]
            self._ack(request)
        else:
            self._settled.pop(url, None)
            self._through.setdefault(url, deque()).append(request)

    def _ack(self, request: Request | None, *, now: bool = False) -> None:
        if request is None:
            return
        try:
            loop = None if now else asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self.scheduler.ack(request)
        else:  # after the rest of the signal's handlers: the page's links are queued then
            loop.call_soon(self.scheduler.ack, request)
