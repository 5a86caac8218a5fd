"""The crawl's scheduler: Scrapy's, with the queue in memory while the crawl runs and in the
JOBDIR only once it stops.

With a JOBDIR, Scrapy's scheduler pickles every request to its disk queue as it is scheduled,
and its priority queue removes a queue's directory whenever the queue runs empty and makes it
again at the next request: a crawl whose queue is often drained (a site on a fast server, a
recrawl whose requests mostly answer 304) pays file-system work for every request. Our crawl
needs the JOBDIR for one thing only: resuming after a clean stop (Ctrl-C). A crawl that was
killed discards its JOBDIR (``crawler.cli.crawl``), so a queue written as the crawl runs is
never read back. So :class:`ResumableScheduler` keeps every request in Scrapy's memory queue
and, when the spider closes, moves what is left into the disk queue, which Scrapy then saves as
it always does; opening a JOBDIR that holds a saved queue moves it back into memory first, so
the resumed crawl keeps the saved order (breadth first) ahead of the requests it adds.

A saved queue that cannot be written (a full disk) is logged once with the one line the
command shows (``neardup_failure``): the crawl is then not clean and its JOBDIR is discarded,
as after a kill, rather than resumed with part of its queue.

The queue a crawl holds in memory is the one Scrapy holds without a JOBDIR: requests, not
pages. Use it as ``SCHEDULER = "crawler.scheduler.ResumableScheduler"``, with ``JOBDIR``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.core.scheduler import Scheduler

from storage.errors import StoreWriteError

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from twisted.internet.defer import Deferred

__all__ = ["ResumableScheduler"]

logger = logging.getLogger(__name__)


class ResumableScheduler(Scheduler):
    """Scrapy's scheduler; the JOBDIR's disk queue is written when the spider closes (module
    doc)."""

    def open(self, spider: Spider) -> Deferred[None] | None:
        opened = super().open(spider)
        if self.dqs is not None:  # a saved queue: back into memory, in its order
            while (request := self.dqs.pop()) is not None:
                self.mqs.push(request)
        return opened

    def _dqpush(self, request: Request) -> bool:
        return False  # into memory (Scrapy's fallback), saved by close

    def close(self, reason: str) -> Deferred[None] | None:
        if self.dqs is not None:
            try:
                while (request := self.mqs.pop()) is not None:
                    super()._dqpush(request)  # one that cannot be pickled is counted, logged
            except OSError as exc:
                line = str(StoreWriteError.of(exc, self.dqdir or "JOBDIR"))
                logger.error("neardup: the crawl's queue could not be saved: %s", line,
                             exc_info=True, extra={"neardup_failure": line})  # fmt: skip
        return super().close(reason)
