"""A Scrapy extension: one live progress line on stderr while a crawl runs.

::

    EXTENSIONS = {"crawler.extensions.progress.ProgressLine": 500}
    NEARDUP_PROGRESS = True

About once a second (``NEARDUP_PROGRESS_INTERVAL``) it shows the responses received (pages,
redirects, robots.txt: what the end summary calls responses) and their rate over the last
interval, what the dedup stage decided, and the requests waiting::

    412 responses  38.5/s | kept 301 | dropped 87 (exact 12, near 75) | skipped 24 | queued 1,920

On a terminal the line is rewritten in place (``\\r``); into a file or a pipe each update is a
line of its own, so a log stays readable. Everything comes from the crawl's stats, so the line
costs nothing per page, but the requests waiting: the scheduler's own count where it keeps one
(a resumed crawl's queue is read back from the JOBDIR, which the stats never count as
enqueued), else enqueued less dequeued.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sized
from typing import IO, TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    # typing.Self requires Python 3.11
    from typing_extensions import Self


def progress_line(stats: dict[str, Any], rate: float, queued: int | None = None) -> str:
    """The line for a stats snapshot, a rate in responses per second and the requests waiting
    (None: the stats' enqueued less dequeued).

    >>> progress_line({"response_received_count": 12, "neardup/kept": 7,
    ...                "neardup/near_duplicate": 2, "neardup/skipped": 1,
    ...                "scheduler/enqueued": 30, "scheduler/dequeued": 13}, 3.25)
    '12 responses  3.2/s | kept 7 | dropped 2 (exact 0, near 2) | skipped 1 | queued 17'
    >>> progress_line({"neardup/frontier/waiting_for": "3/3 of crawl docs"}, 0.0)[-54:]
    'queued 0 | waiting for node 3/3 of crawl docs to start'
    """
    responses = stats.get("response_received_count", 0)
    kept = stats.get("neardup/kept", 0)
    exact = stats.get("neardup/exact_duplicate", 0)
    near = stats.get("neardup/near_duplicate", 0)
    contained = stats.get("neardup/contained", 0)
    skipped = stats.get("neardup/skipped", 0)
    if queued is None:
        queued = max(stats.get("scheduler/enqueued", 0) - stats.get("scheduler/dequeued", 0), 0)
    dropped = f"dropped {exact + near + contained:,} (exact {exact:,}, near {near:,}"
    dropped += f", contained {contained:,})" if contained else ")"
    line = (f"{responses:,} responses  {rate:.1f}/s | kept {kept:,} | {dropped} | "
            f"skipped {skipped:,}")  # fmt: skip
    already = stats.get("neardup/already_decided", 0)
    if already:
        line += f" | already decided {already:,}"
    line += f" | queued {queued:,}"
    waiting = stats.get("neardup/frontier/waiting_for")  # crawler.frontier.scheduler
    if waiting:
        line += f" | waiting for node {waiting} to start"
    return line


class ProgressLine:
    """Writes :func:`progress_line` to ``stream`` every ``interval`` seconds."""

    def __init__(
        self,
        stats: StatsCollector,
        interval: float,
        stream: IO[str],
        queued: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.stats = stats
        #: the requests waiting, or None where the scheduler does not count them
        self.queued = queued
        self.interval = interval
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._task: Any = None
        self._last = (time.monotonic(), 0)
        self._width = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("NEARDUP_PROGRESS", False):
            raise NotConfigured("NEARDUP_PROGRESS is False")
        interval = crawler.settings.getfloat("NEARDUP_PROGRESS_INTERVAL", 1.0)
        if interval <= 0:
            raise ValueError(f"NEARDUP_PROGRESS_INTERVAL must be > 0 seconds; got {interval}")
        assert crawler.stats is not None
        o = cls(crawler.stats, interval, sys.stderr, queued=lambda: _scheduler_size(crawler))
        crawler.signals.connect(o.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(o.spider_closed, signal=signals.spider_closed)
        return o

    def spider_opened(self) -> None:
        self._last = (time.monotonic(), 0)
        self._task = create_looping_call(self.show)
        self._task.start(self.interval, now=False)

    def spider_closed(self) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        self.show(final=True)

    def show(self, final: bool = False) -> None:
        stats = self.stats.get_stats()
        now, pages = time.monotonic(), stats.get("response_received_count", 0)
        then, before = self._last
        rate = (pages - before) / (now - then) if now > then else 0.0
        self._last = (now, pages)
        line = progress_line(stats, rate, self.queued())
        if self.tty:
            pad = " " * max(self._width - len(line), 0)
            self._width = len(line)
            self.stream.write(f"\r{line}{pad}" + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _scheduler_size(crawler: Crawler) -> int | None:
    """``len()`` of the crawl's scheduler, or None for one without it (the shared frontier's,
    whose queue is in Redis)."""
    scheduler = crawler.engine.scheduler if crawler.engine is not None else None
    return len(scheduler) if isinstance(scheduler, Sized) else None
