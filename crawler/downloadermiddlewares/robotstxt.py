"""Scrapy's robots.txt middleware, with every request that waits for a host's robots.txt given
its rules.

While a host's robots.txt is being fetched, Scrapy's middleware keeps a Deferred for it, and
each request that arrives meanwhile awaits that Deferred. A Deferred passes each callback's
return value to the next, and the callback each waiter adds returns None; so only the first
waiter gets the parsed rules, and the others get None, which the middleware reads as "no
robots.txt": they are fetched, whatever robots.txt says. A recrawl requests every known URL at
once, so it met this on every host. Once the Deferred has fired, the middleware's table holds
the host's rules (or None when robots.txt could not be read), so a waiter that got None reads
them there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxt
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.robotstxt import RobotParser

__all__ = ["RobotsTxtMiddleware"]


class RobotsTxtMiddleware(ScrapyRobotsTxt):
    """``scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware``, in its place (the same
    setting, ``ROBOTSTXT_OBEY``), whose waiting requests all get the host's rules."""

    async def robot_parser(self, request: Request) -> RobotParser | None:
        parser = await super().robot_parser(request)
        if parser is None:
            settled = self._parsers.get(urlparse_cached(request).netloc)
            if not isinstance(settled, Deferred):
                return settled
        return parser
