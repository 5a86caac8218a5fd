"""The spider middleware of the shared frontier: what the scheduler cannot see of a response.

* The requests a callback yields are new requests, even when they copy the response's meta:
  their copy of the in-flight entry is taken off, so the scheduler does not mistake them for a
  redirect or retry replacing the request in flight.
* A response is acknowledged once its callback output has been consumed, so its links are
  queued before it leaves the in-flight list: at once if the output held no item, else when the
  crawl acknowledges the item's page (:meth:`FrontierScheduler.ack`), whichever comes last.

Enable it next to the scheduler, at a low order so that it sees the output last (after
``HttpErrorMiddleware``, 50)::

    SPIDER_MIDDLEWARES = {"crawler.frontier.middleware.FrontierSpiderMiddleware": 10}
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured

from crawler.frontier import defaults
from crawler.frontier.scheduler import FrontierScheduler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["FrontierSpiderMiddleware"]


class FrontierSpiderMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierSpiderMiddleware:
        if not crawler.settings.get(defaults.SETTING_URL):
            raise NotConfigured(f"{defaults.SETTING_URL} is not set: no shared frontier")
        return cls(crawler)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        scheduler = FrontierScheduler.of(self.crawler)
        request = response.request
        if scheduler is None or request is None:
            async for output in result:
                yield output
            return
        scheduler.output_started(request)
        items = 0
        try:
            async for output in result:
                if isinstance(output, Request):
                    output.meta.pop(defaults.ENTRY_META, None)
                else:
                    items += 1
                yield output
        finally:
            scheduler.output_finished(request, items)
