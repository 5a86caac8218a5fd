"""The crawl's worker process starts without Scrapy: its startup is paid on every crawl."""

from __future__ import annotations

import subprocess
import sys

from tests.crawler.test_faults import ROOT


def test_the_worker_module_imports_neither_scrapy_nor_the_spider():
    probe = (
        "import sys, crawler.work.process; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('scrapy', 'twisted', 'itemadapter') or m in ('crawler.review.explain', 'crawler.settings', "
        "'crawler.spiders.site')); print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"
