"""Real crawls for tests: Scrapy's real engine against a real server on 127.0.0.1.

A Twisted reactor cannot be restarted, so each crawl runs in a child Python process
(``AsyncCrawlerProcess``, exactly as the command line runs it) and sends back, pickled, the items
that left the pipelines, the items they dropped, the final stats, the log and every warning the
crawl raised. Tests then assert on plain data. A crawl is bounded by a timeout, so a hung crawl
fails its test instead of hanging the run.

Use the ``run_crawl`` fixture (or import :func:`run_crawl`)::

    def test_something(run_crawl, demo_site):
        result = run_crawl([demo_site + "/"], {"ITEM_PIPELINES": {...}})
        assert result.stats["neardup/skipped/not_html"] == 2
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crawler.config import Config
from crawler.demo import SITE_DIR
from crawler.items import PageItem
from crawler.demo.server import serve
from crawler.settings import scrapy_settings
from tests.crawler.sites import bad_routes

ROOT = Path(__file__).resolve().parents[2]

#: what every test crawl changes from a production crawl: no waiting, no retries
TEST_SETTINGS: dict[str, Any] = {
    "AUTOTHROTTLE_ENABLED": False,
    "NEARDUP_THROTTLE_ENABLED": False,
    "DOWNLOAD_DELAY": 0,
    "RETRY_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 10,
    "CONCURRENT_REQUESTS": 8,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    "LOG_LEVEL": "INFO",
}


class CrawlError(AssertionError):
    """The crawl itself failed (raised, or the child process died); the message says how."""


@dataclass
class CrawlResult:
    """What a crawl produced, as plain data."""

    #: items that passed every pipeline (Scrapy's item_scraped signal), in order
    items: list[PageItem]
    #: items a pipeline dropped: (item, "ExceptionClass: message")
    dropped: list[tuple[PageItem, str]]
    stats: dict[str, Any]
    #: the crawl's log at its LOG_LEVEL, one record a line
    log: str
    #: every Python warning raised during the crawl, as "Category: message (file:line)"
    warnings: list[str] = field(default_factory=list)
    #: the traceback, when the crawl raised (run_crawl raises CrawlError then)
    error: str | None = None

    @property
    def all_items(self) -> list[PageItem]:
        """Scraped and dropped items together: one per URL the spider scheduled."""
        return self.items + [item for item, _ in self.dropped]

    def by_url(self) -> dict[str, PageItem]:
        out: dict[str, PageItem] = {}
        for item in self.all_items:
            assert item.url not in out, f"two items for {item.url}"
            out[item.url] = item
        return out


def run_crawl(
    start_urls: list[str],
    settings: dict[str, Any] | None = None,
    *,
    config: Config | None = None,
    spider_kwargs: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> CrawlResult:
    """Crawl ``start_urls`` with :class:`~crawler.spiders.SiteSpider` in a child process.

    Settings, lowest priority first: ``scrapy_settings(config)`` (default config),
    :data:`TEST_SETTINGS`, then ``settings``. No pipelines unless ``ITEM_PIPELINES`` is given.
    """
    merged = {**scrapy_settings(config or Config()), **TEST_SETTINGS, **(settings or {})}
    spec = {"start_urls": list(start_urls), "settings": merged, "kwargs": spider_kwargs or {}}
    with tempfile.TemporaryDirectory(prefix="neardup-crawl-") as tmp:
        spec_path, out_path = Path(tmp, "spec.pickle"), Path(tmp, "result.pickle")
        spec_path.write_bytes(pickle.dumps(spec))
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path}
        code = "from tests.crawler.conftest import _child_main; _child_main()"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code, str(spec_path), str(out_path)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise CrawlError(f"crawl did not finish in {timeout} s: {exc.stderr!r}") from None
        if proc.returncode != 0 or not out_path.exists():
            raise CrawlError(f"crawl process failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        result: CrawlResult = pickle.loads(out_path.read_bytes())
    if result.error is not None:
        raise CrawlError(f"crawl raised:\n{result.error}")
    return result


def _child_main() -> None:
    """The child process: run one crawl, pickle a CrawlResult to argv[2]."""
    import io
    import logging
    import traceback
    import warnings

    caught: list[str] = []

    def record(message: Any, category: type[Warning], filename: str, lineno: int, *_: Any) -> None:
        caught.append(f"{category.__name__}: {message} ({filename}:{lineno})")

    warnings.simplefilter("always")
    warnings.showwarning = record

    from scrapy import signals
    from scrapy.crawler import AsyncCrawlerProcess

    from crawler.spiders import SiteSpider

    spec = pickle.loads(Path(sys.argv[1]).read_bytes())
    settings = spec["settings"]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(settings.get("LOG_LEVEL", "INFO"))
    logging.getLogger().addHandler(handler)

    # our handler, not Scrapy's stderr one, so that the log comes back with the result
    process = AsyncCrawlerProcess({**settings, "LOG_INSTALL_ROOT_HANDLER": False})
    logging.getLogger().setLevel(settings.get("LOG_LEVEL", "INFO"))
    crawler = process.create_crawler(SiteSpider)
    items: list[PageItem] = []
    dropped: list[tuple[PageItem, str]] = []

    def scraped(item: PageItem, **_: Any) -> None:
        items.append(item)

    def was_dropped(item: PageItem, exception: BaseException, **_: Any) -> None:
        dropped.append((item, f"{type(exception).__name__}: {exception}"))

    # weak=False: the dispatcher would otherwise forget these local functions at once
    crawler.signals.connect(scraped, signal=signals.item_scraped, weak=False)
    crawler.signals.connect(was_dropped, signal=signals.item_dropped, weak=False)
    task = process.crawl(crawler, start_urls=spec["start_urls"], **spec["kwargs"])
    process.start(install_signal_handlers=False)
    error = None
    if task.done() and not task.cancelled() and task.exception() is not None:
        error = "".join(traceback.format_exception(task.exception()))
    try:
        stats = dict(crawler.stats.get_stats())
    except RuntimeError:  # the crawl failed before it started: no stats
        stats = {}
    result = CrawlResult(items, dropped, stats, stream.getvalue(), caught, error)
    Path(sys.argv[2]).write_bytes(pickle.dumps(result))


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(name="run_crawl")
def run_crawl_fixture() -> Any:
    """:func:`run_crawl` itself, for tests that prefer fixtures to imports."""
    return run_crawl


@pytest.fixture(scope="session")
def demo_site() -> Iterator[str]:
    """Base URL (no trailing slash) of the bundled demo site served on 127.0.0.1."""
    with serve(SITE_DIR) as base:
        yield base


@pytest.fixture(scope="module")
def bad_site() -> Iterator[str]:
    """Base URL of a site of bad input (see :mod:`tests.crawler.sites`)."""
    with serve(bad_routes()) as base:
        yield base


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every test of a worker that needs one (a JVM start each
    saved): two cores, and a failed task tried three times before its job fails."""
    pytest.importorskip("pyspark")
    from crawler.recluster.spark import spark_session

    session, made = spark_session("local[2,3]")
    yield session
    if made:
        session.stop()
