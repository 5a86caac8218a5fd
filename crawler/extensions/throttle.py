"""A Scrapy extension: AutoThrottle's idea with a delay that one slow response cannot set.

::

    EXTENSIONS = {"crawler.extensions.throttle.LatencyThrottle": 0}
    AUTOTHROTTLE_ENABLED = False  # Scrapy's own would fight ours over the same delays

**Why not Scrapy's AutoThrottle.** It sets a host's delay from each response alone (the larger of
latency / N and the mean of the old delay and latency / N) and lets no response whose status is
not 200 lower it. One page that answers after 20 s therefore sets the delay to 20 s, and when
the pages after it are dead links, however fast their 404s come back, nothing lowers it again:
the rest of the crawl goes at one request per 20 s.

**The rule here.** The target is AutoThrottle's: a server that needs ``latency`` seconds gets a
request every ``latency / AUTOTHROTTLE_TARGET_CONCURRENCY`` seconds, so that about that many
are in flight. But the latency is the *median* of the host's last ``NEARDUP_THROTTLE_WINDOW``
responses (5 by default), whatever their status. So:

* one slow response among fast ones does not move the delay at all, and no single response can
  move it further than to the next latency already in the window (one rank of the median);
* when the server really slows down, the delay follows once most of the window is slow (3 of 5
  responses), and it comes back down as soon as most of the window is fast again;
* a 404 or a redirect is a measure of the server's speed like a 200. A response that says the
  server is in trouble or asks for less (408, 429, any 5xx) is not: such answers often come
  back fast *because* the server is failing, so they may raise the delay but never lower it
  (the concern behind AutoThrottle's 200-only rule, kept where it applies);
* the delay stays within ``DOWNLOAD_DELAY`` (the floor, as under AutoThrottle) and
  ``AUTOTHROTTLE_MAX_DELAY``; a host starts at ``AUTOTHROTTLE_START_DELAY`` (not below the
  floor), and the window starts full of it, so the first responses are judged against it;
* a request with ``meta["autothrottle_dont_adjust_delay"] = True`` leaves the delay alone, as
  under AutoThrottle; ``AUTOTHROTTLE_DEBUG`` logs every adjustment.

**robots.txt's Crawl-delay.** Scrapy honours it nowhere; this extension does, as Heritrix and
Nutch do: a host whose robots.txt (the one Scrapy's RobotsTxtMiddleware fetches, read for our
user agent) asks for ``Crawl-delay: N`` gets at least N seconds between two requests, however
fast it answers, up to the ceiling (``AUTOTHROTTLE_MAX_DELAY``), exactly rather than
randomised around it (``RANDOMIZE_DOWNLOAD_DELAY`` would start some requests sooner). Scrapy
does not honour ``Retry-After``; neither does this extension. A slow page holds one of the host's
``CONCURRENT_REQUESTS_PER_DOMAIN`` transfers until it answers or ``DOWNLOAD_TIMEOUT`` passes,
while the other requests go on at the delay above.

Stats: ``neardup/throttle/delay/max`` (the longest delay set, seconds),
``neardup/throttle/latency/max`` (the slowest response seen, seconds), so a crawl's summary
shows whether a slow page set the pace, and ``neardup/throttle/crawl_delay/max`` (the
longest Crawl-delay honoured).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from statistics import median_high
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    # typing.Self requires Python 3.11
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: responses in the median unless NEARDUP_THROTTLE_WINDOW says otherwise
DEFAULT_WINDOW = 5


def says_slow_down(status: int) -> bool:
    """True for a status whose speed says nothing good about the server's load.

    >>> [says_slow_down(s) for s in (200, 301, 404, 408, 429, 500, 503)]
    [False, False, False, True, True, True, True]
    """
    return status in (408, 429) or status >= 500


@dataclass(frozen=True)
class ThrottleRule:
    """The parameters of the delay rule, checked once; :meth:`window` starts one host's state."""

    #: a host's delay before any response (AUTOTHROTTLE_START_DELAY, at least min_delay)
    start_delay: float = 0.0
    #: the floor (DOWNLOAD_DELAY)
    min_delay: float = 0.0
    #: the ceiling (AUTOTHROTTLE_MAX_DELAY)
    max_delay: float = 60.0
    #: requests the server should have in flight on average (AUTOTHROTTLE_TARGET_CONCURRENCY)
    target_concurrency: float = 1.0
    #: responses in the median (NEARDUP_THROTTLE_WINDOW)
    window_size: int = DEFAULT_WINDOW

    def __post_init__(self) -> None:
        for name in ("start_delay", "min_delay", "max_delay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0; got {value!r}")
        if self.max_delay < self.min_delay:
            raise ValueError(
                f"AUTOTHROTTLE_MAX_DELAY ({self.max_delay}) must not be below "
                f"DOWNLOAD_DELAY ({self.min_delay})"
            )
        if not self.target_concurrency > 0:
            raise ValueError(
                f"AUTOTHROTTLE_TARGET_CONCURRENCY must be > 0; got {self.target_concurrency!r}"
            )
        size = self.window_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"NEARDUP_THROTTLE_WINDOW must be an integer >= 1; got {size!r}")

    def clamp(self, delay: float) -> float:
        """``delay`` within the floor and the ceiling."""
        return min(max(delay, self.min_delay), self.max_delay)

    def window(self) -> LatencyWindow:
        """A new host's state: its window full of the start delay's latency."""
        return LatencyWindow(self)


class LatencyWindow:
    """One host's last latencies and the delay they give.

    >>> w = ThrottleRule(window_size=3).window()
    >>> [w.observe(latency, 200) for latency in (0.1, 0.1, 20.0, 0.1, 0.1)]
    [0.0, 0.1, 0.1, 0.1, 0.1]
    >>> [w.observe(latency, 404) for latency in (20.0, 20.0, 0.2, 0.2)]
    [0.1, 20.0, 20.0, 0.2]
    """

    def __init__(self, rule: ThrottleRule) -> None:
        self.rule = rule
        start = max(rule.start_delay, rule.min_delay) * rule.target_concurrency
        self._latencies: deque[float] = deque([start] * rule.window_size, maxlen=rule.window_size)
        #: the host's own floor: its robots.txt's Crawl-delay (seconds), 0 for none
        self.crawl_delay = 0.0

    @property
    def latencies(self) -> tuple[float, ...]:
        """The window, oldest first."""
        return tuple(self._latencies)

    @property
    def latency(self) -> float:
        """The window's median (the higher middle one when the window is even)."""
        return median_high(self._latencies)

    @property
    def delay(self) -> float:
        """The delay the window gives: its median over the target concurrency, clamped, and
        at least the host's Crawl-delay (up to the ceiling).

        >>> w = ThrottleRule(max_delay=60.0).window()
        >>> w.crawl_delay = 10.0
        >>> w.observe(0.2, 200), w.observe(30.0, 200), w.observe(30.0, 200)
        (10.0, 10.0, 10.0)
        >>> w.crawl_delay = 600.0
        >>> w.delay
        60.0
        """
        latency = self.rule.clamp(self.latency / self.rule.target_concurrency)
        return max(latency, min(self.crawl_delay, self.rule.max_delay))

    def observe(self, latency: float, status: int) -> float:
        """Add one response's latency (seconds) and HTTP status; return the new delay."""
        if says_slow_down(status):
            latency = max(latency, self.latency)
        self._latencies.append(latency)
        return self.delay


class LatencyThrottle:
    """Sets each download slot's delay from :class:`LatencyWindow` (see the module docstring)."""

    def __init__(self, crawler: Crawler, rule: ThrottleRule, debug: bool = False) -> None:
        self.crawler = crawler
        self.rule = rule
        self.debug = debug
        #: the name robots.txt rules are read for, as Scrapy's RobotsTxtMiddleware reads them
        settings = crawler.settings
        self.robots_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        #: slot key -> (the Slot object last seen under it, the host's window)
        self._hosts: dict[str, tuple[Slot, LatencyWindow]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("NEARDUP_THROTTLE_ENABLED", True):
            raise NotConfigured  # silent, as Scrapy's AutoThrottle when it is off
        if settings.getbool("AUTOTHROTTLE_ENABLED"):
            raise NotConfigured("AUTOTHROTTLE_ENABLED is on, so Scrapy's AutoThrottle sets delays")
        floor = settings.getfloat("DOWNLOAD_DELAY")
        rule = ThrottleRule(
            start_delay=max(floor, settings.getfloat("AUTOTHROTTLE_START_DELAY")),
            min_delay=floor,
            max_delay=settings.getfloat("AUTOTHROTTLE_MAX_DELAY"),
            target_concurrency=settings.getfloat("AUTOTHROTTLE_TARGET_CONCURRENCY"),
            window_size=settings.getint("NEARDUP_THROTTLE_WINDOW", DEFAULT_WINDOW),
        )
        o = cls(crawler, rule, debug=settings.getbool("AUTOTHROTTLE_DEBUG"))
        crawler.signals.connect(
            o.request_reached_downloader, signal=signals.request_reached_downloader
        )
        crawler.signals.connect(o.response_downloaded, signal=signals.response_downloaded)
        return o

    def _host(self, request: Request) -> tuple[Slot, LatencyWindow] | None:
        """The request's slot and its host's window; a slot new under its key (a new host, or
        one Scrapy dropped when idle and made again) gets the window's delay."""
        key = request.meta.get("download_slot")
        engine = self.crawler.engine
        slot = engine.downloader.slots.get(key) if key is not None and engine else None
        if slot is None:
            return None
        known = self._hosts.get(key)
        window = known[1] if known is not None else self.rule.window()
        if known is None or known[0] is not slot:
            slot.delay = window.delay
            if window.crawl_delay:  # a host's Crawl-delay holds in every slot made for it
                slot.randomize_delay = False
            self._hosts[key] = (slot, window)
        return slot, window

    def request_reached_downloader(self, request: Request, **_: Any) -> None:
        # sent once the slot exists and before its queue is processed: the first request of a
        # new host already waits the start delay
        self._host(request)

    def response_downloaded(self, response: Response, request: Request, **_: Any) -> None:
        latency = request.meta.get("download_latency")
        if latency is None or request.meta.get("autothrottle_dont_adjust_delay", False) is True:
            return
        host = self._host(request)
        if host is None:
            return
        slot, window = host
        if _is_robots_txt(request) and response.status == 200:
            self._read_crawl_delay(response, slot, window)
        before = slot.delay
        slot.delay = window.observe(latency, response.status)
        stats = self.crawler.stats
        if stats is not None:
            stats.max_value("neardup/throttle/delay/max", slot.delay)
            stats.max_value("neardup/throttle/latency/max", latency)
        if self.debug:
            logger.info(
                "slot: %(slot)s | status: %(status)d | latency: %(latency)5d ms | "
                "median: %(median)5d ms | delay: %(delay)5d ms (%(change)+d)",
                {
                    "slot": request.meta.get("download_slot"),
                    "status": response.status,
                    "latency": latency * 1000,
                    "median": window.latency * 1000,
                    "delay": slot.delay * 1000,
                    "change": (slot.delay - before) * 1000,
                },
            )

    def _read_crawl_delay(self, robots: Response, slot: Slot, window: LatencyWindow) -> None:
        """Take the host's Crawl-delay from its robots.txt: the window's floor, kept exactly."""
        from protego import Protego  # Scrapy's robots.txt parser

        text = robots.body.decode("utf-8", "ignore")
        asked = Protego.parse(text).crawl_delay(self.robots_agent)
        if not asked or asked <= 0:
            return
        window.crawl_delay = float(asked)
        slot.randomize_delay = False  # never sooner than asked
        honoured = min(window.crawl_delay, self.rule.max_delay)
        logger.info("robots.txt of %s asks for a Crawl-delay of %g s: %s", robots.url, asked,
                    "honoured" if honoured == asked else f"{honoured:g} s, the ceiling "
                    "(AUTOTHROTTLE_MAX_DELAY)")  # fmt: skip
        if self.crawler.stats is not None:
            self.crawler.stats.max_value("neardup/throttle/crawl_delay/max", honoured)


def _is_robots_txt(request: Request) -> bool:
    """True for the robots.txt request of Scrapy's RobotsTxtMiddleware."""
    unguarded = bool(request.meta.get("dont_obey_robotstxt"))
    return unguarded and urlsplit(request.url).path == "/robots.txt"
