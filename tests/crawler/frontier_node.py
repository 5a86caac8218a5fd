"""One node of a distributed test crawl, in its own process: Scrapy's real engine with the
shared frontier, a minimal link-following spider, and a pipeline that commits each page to a
JSON-lines file (written and fsynced) before it acknowledges the page's request.

    python -c "from tests.crawler.frontier_node import main; main()" SPEC.json

SPEC.json: ``start_urls``, ``settings`` (the frontier's among them; ``TEST_FAIL``: a URL whose
item the pipeline raises on), ``committed`` (the file), ``result`` (where the finish reason and
stats are written).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import scrapy

from crawler.frontier.scheduler import FrontierScheduler


class LinkSpider(scrapy.Spider):
    """Follows every link; yields the page's links first, then one item for the page."""

    name = "links"

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
        yield {"url": response.url}


class CommitThenAck:
    """Writes the page to the node's file, durably, then acknowledges its request."""

    def __init__(self, crawler, path: str, fail: str | None) -> None:
        self.crawler = crawler
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close_spider
        self.fail = fail

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        return cls(crawler, settings["TEST_COMMITTED"], settings.get("TEST_FAIL"))

    def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if item["url"] == self.fail:  # a pipeline that breaks on one page
            raise RuntimeError(f"cannot store {item['url']}")
        self.file.write(json.dumps(item) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())
        FrontierScheduler.of(self.crawler).ack_url(item["url"])
        return item

    def close_spider(self) -> None:
        self.file.close()


def main() -> None:
    from scrapy.crawler import AsyncCrawlerProcess

    spec = json.loads(Path(sys.argv[1]).read_text())
    settings = {
        **spec["settings"],
        "TEST_COMMITTED": spec["committed"],
        "SCHEDULER": "crawler.frontier.scheduler.FrontierScheduler",
        "SPIDER_MIDDLEWARES": {"crawler.frontier.middleware.FrontierSpiderMiddleware": 10},
        "ITEM_PIPELINES": {"tests.crawler.frontier_node.CommitThenAck": 100},
    }
    process = AsyncCrawlerProcess(settings)
    crawler = process.create_crawler(LinkSpider)
    reasons: list[str] = []
    crawler.signals.connect(
        lambda reason, **_: reasons.append(reason), signal=scrapy.signals.spider_closed, weak=False
    )
    process.crawl(crawler, start_urls=spec["start_urls"])
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, str))}
    Path(spec["result"]).write_text(json.dumps({"reasons": reasons, "stats": stats}))


if __name__ == "__main__":
    main()
