"""Bad input through a real ``neardup crawl``: every page decided once, nothing kept twice,
the store consistent, and memory bounded.

The site (:mod:`tests.crawler.sites`) is what the open web serves a crawler: malformed HTML,
HTML 3,000 and 100,000 elements deep (the second refused as too deep), binary bytes labelled
text/html, empty and over-size bodies, a gzip bomb, wrong and missing charsets, redirect loops,
404 and 500, and a server that never answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler.demo.server import Route, serve
from storage.log import read_log
from storage.verify import verify_store
from tests.crawler.sites import BAD_SITE_SETTINGS, bad_cases, expected_items
from tests.crawler.test_faults import ROOT, child_env, kept_pages

#: runs the command and writes the process's peak resident set size (KiB on Linux) to argv[1]
MEASURED = (
    "import resource, sys\n"
    "from crawler.cli import main\n"
    "status = main(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as fh:\n"
    "    fh.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    "sys.exit(status)\n"
)
SCRAPY_SETTINGS = [f"-s{name}={value}" for name, value in BAD_SITE_SETTINGS.items()]
#: the headroom over a one-page crawl's peak that the bad site may use, in KiB (see below)
HEADROOM_KIB = 150 * 1024


def measured_crawl(base: str, store: Path, rss_file: Path) -> tuple[dict[str, Any], int]:
    proc = subprocess.run(
        [sys.executable, "-c", MEASURED, str(rss_file), "crawl", base + "/", "--store",
         str(store), "--json", "-sRETRY_ENABLED=false", *SCRAPY_SETTINGS],
        check=False, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout), int(rss_file.read_text())


@pytest.fixture(scope="module")
def bad(bad_site: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("bad")
    with serve({"/": Route(body="<html><body><p>one small page</p></body></html>")}) as tiny:
        _, baseline = measured_crawl(tiny, tmp / "tiny", tmp / "tiny.rss")
    summary, peak = measured_crawl(bad_site, tmp / "store", tmp / "bad.rss")
    log = list(read_log(tmp / "store" / "logs", [summary["run_id"]]))
    return {"base": bad_site, "store": tmp / "store", "summary": summary, "log": log,
            "peak": peak, "baseline": baseline}  # fmt: skip


def test_the_crawl_finishes_and_decides_every_page_once(bad):
    base = bad["base"]
    assert bad["summary"]["reason"] == "finished"
    paths = Counter(e["url"].removeprefix(base) for e in bad["log"])
    assert paths == Counter(expected_items(bad_cases()).keys())  # each page once, no other


def test_each_page_gets_its_reason(bad):
    base, cases = bad["base"], expected_items(bad_cases())
    for entry in bad["log"]:
        case = cases[entry["url"].removeprefix(base)]
        if case.reason is not None:
            assert (entry["decision"], entry["reason"]) == ("skipped", case.reason), entry
            assert entry["detail"]
        else:
            assert entry["decision"] == "kept", entry
            assert entry["tokens"] >= len(case.words)


def test_nothing_is_kept_twice_and_the_store_verifies(bad):
    kept = kept_pages(bad["store"])  # asserts no URL is stored twice
    assert set(kept) == {e["url"] for e in bad["log"] if e["decision"] == "kept"}
    report = verify_store(bad["store"])
    assert report.ok, report.render()
    assert report.documents == len(bad["log"])
    # the bomb and the over-size bodies were never stored, decompressed or not
    pages = bad["store"] / "pages"
    assert sum(f.stat().st_size for f in pages.iterdir()) < BAD_SITE_SETTINGS["DOWNLOAD_MAXSIZE"]


def test_memory_stays_bounded(bad):
    # The bound: a one-page crawl's own peak (Python, Scrapy, numpy, lxml: about 95 MiB) plus
    # 150 MiB. The most the bad site may legitimately make a crawler hold is a body at
    # DOWNLOAD_MAXSIZE (1.5 MB) and the tree of a large page: tens of MiB. The
    # gzip bomb let through (DOWNLOAD_MAXSIZE raised to 200 MB) takes over 2 GiB: 40 MB of
    # bytes, as much again as text, and 13 million tokens as Python strings.
    grown = bad["peak"] - bad["baseline"]
    assert grown < HEADROOM_KIB, f"peak {bad['peak']} KiB, one-page crawl {bad['baseline']} KiB"
