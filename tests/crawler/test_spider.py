"""The spider, its settings, the demo site and the test server, with real crawls on 127.0.0.1.

Each crawl runs Scrapy's real engine in a child process (see conftest.py); module-scoped
fixtures crawl each site once and several tests read the result.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest
from scrapy.exceptions import DropItem
from scrapy.settings import Settings
from w3lib.url import canonicalize_url

from crawler.config import Config, config_from_dict
from crawler.demo import SITE_DIR, load_truth
from crawler.demo import build as demo_build
from crawler.items import PageItem
from crawler.demo.server import Route, serve
from crawler.settings import neardup_defaults, scrapy_settings
from crawler.spiders.site import AllowedHost, SiteSpider, _patterns
from dedup.canonical import html_tokens
from dedup.estimators import exact_resemblance
from dedup.shingles import shingles
from tests.crawler.conftest import CrawlError, CrawlResult, run_crawl
from tests.crawler.sites import BAD_SITE_SETTINGS, bad_cases, bad_routes, expected_items

CRAWLED_KINDS = {"original", "exact_mirror", "near_duplicate", "printable", "not_html"}


def _path(url: str, base: str) -> str:
    assert url.startswith(base), url
    return url[len(base) :]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class DropEverything:
    """A pipeline for the tests: drops every item, as a dedup pipeline drops duplicates."""

    def process_item(self, item: PageItem) -> PageItem:
        raise DropItem(f"test drop of {item.url}", log_level="INFO")


# --- settings -------------------------------------------------------------------------------------


def test_neardup_defaults_are_the_mapped_default_config():
    mapped = scrapy_settings(Config())
    ours = {k: v for k, v in mapped.items() if k.startswith("NEARDUP_")}
    assert ours == neardup_defaults()
    assert ours["NEARDUP_SKETCH"] == Config().sketch.to_dict()
    assert mapped["TELNETCONSOLE_ENABLED"] is False
    assert mapped["LOG_LEVEL"] == "INFO"


def test_the_quiet_log_formatter_names_any_item_by_its_url():
    """A dropped item is logged by its URL, not whole with its body: our items, and the dicts
    of a user's own spider."""
    from scrapy import Spider

    from crawler.settings import QuietLogFormatter

    body = "<p>" + "a long page " * 500 + "</p>"
    for item, named in [({"url": "http://a.test/1", "body": body}, "<dict http://a.test/1>"),
                        (PageItem(url="http://a.test/2", body=body.encode()),
                         "<PageItem http://a.test/2>")]:  # fmt: skip
        said = QuietLogFormatter().dropped(item, DropItem("a copy", log_level="INFO"), None,
                                           Spider("s"))
        assert said["args"]["item"] == named


def test_config_maps_onto_scrapy_settings():
    config = config_from_dict(
        {
            "store": "elsewhere",
            "sketch": {"unit": "char", "size": 50},
            "dedup": {"threshold": 0.8, "containment": 0.7, "canonicaliser": "reference"},
            "crawl": {
                "concurrency": 3, "autothrottle": False, "download_delay": 0.25,
                "robots_txt": False, "max_page_bytes": 1000, "timeout": 7.5,
                "user_agent": "tester", "max_depth": 2, "max_pages": 9,
                "include": ["a"], "exclude": ["b"], "allowed_domains": ["x.example:81"],
                "batch_size": 5, "batch_seconds": 0.5,
            },
        }
    )  # fmt: skip
    s = scrapy_settings(config)
    assert (s["CONCURRENT_REQUESTS"], s["CONCURRENT_REQUESTS_PER_DOMAIN"]) == (3, 3)
    assert s["AUTOTHROTTLE_ENABLED"] is False and s["DOWNLOAD_DELAY"] == 0.25
    assert s["NEARDUP_THROTTLE_ENABLED"] is False
    assert s["ROBOTSTXT_OBEY"] is False
    assert (s["DOWNLOAD_MAXSIZE"], s["DOWNLOAD_WARNSIZE"]) == (1000, 500)
    assert (s["DOWNLOAD_TIMEOUT"], s["USER_AGENT"], s["DEPTH_LIMIT"]) == (7.5, "tester", 2)
    assert s["NEARDUP_MAX_PAGES"] == 9 and s["NEARDUP_STORE"] == "elsewhere"
    assert (s["NEARDUP_THRESHOLD"], s["NEARDUP_CONTAINMENT"]) == (0.8, 0.7)
    assert s["NEARDUP_CANONICALISER"] == "reference"
    assert s["NEARDUP_SKETCH"]["unit"] == "char" and s["NEARDUP_SKETCH"]["size"] == 50
    assert (s["NEARDUP_INCLUDE"], s["NEARDUP_EXCLUDE"]) == (["a"], ["b"])
    assert s["NEARDUP_ALLOWED_DOMAINS"] == ["x.example:81"]
    assert (s["NEARDUP_BATCH_SIZE"], s["NEARDUP_BATCH_SECONDS"]) == (5, 0.5)


def test_command_line_settings_win_over_the_config_file():
    settings = Settings()
    settings.setdict(scrapy_settings(Config()), priority="project")
    settings.set("NEARDUP_THRESHOLD", "0.5", priority="cmdline")
    settings.set("DOWNLOAD_TIMEOUT", "3", priority="cmdline")
    assert settings.getfloat("NEARDUP_THRESHOLD") == 0.5
    assert settings.getfloat("DOWNLOAD_TIMEOUT") == 3.0
    assert settings.getbool("ROBOTSTXT_OBEY") is True


def test_bad_spider_input_is_a_clear_error():
    with pytest.raises(ValueError, match="start URL"):
        SiteSpider()
    with pytest.raises(ValueError, match=r"NEARDUP_EXCLUDE: bad regular expression '\('"):
        _patterns(Settings({"NEARDUP_EXCLUDE": ["("]}), "NEARDUP_EXCLUDE")
    with pytest.raises(ValueError, match="host or host:port"):
        AllowedHost.parse(":80")


def test_a_bad_setting_stops_the_crawl_before_any_request():
    with pytest.raises(CrawlError, match=r"NEARDUP_SKETCH unit must be one of .*'sentence'"):
        run_crawl(["http://127.0.0.1:9/"], {"NEARDUP_SKETCH": {"unit": "sentence"}})


def test_allowed_hosts_respect_ports_and_subdomains():
    start = AllowedHost.of_url("http://127.0.0.1:8000/start")
    assert start.allows("http://127.0.0.1:8000/other")
    assert not start.allows("http://127.0.0.1:8001/other")
    assert not start.allows("http://127.0.0.2:8000/other")
    anyport = AllowedHost.of_url("http://example.org/")
    assert anyport.port is None and anyport.allows("https://example.org:8443/")
    assert AllowedHost.parse("https://Example.ORG:443/path").allows("https://example.org/x")
    assert not AllowedHost.parse("example.org:443").allows("http://example.org/x")


# --- the test server ------------------------------------------------------------------------------


def _get(url: str, timeout: float = 5) -> tuple[int, Message, bytes]:
    """Status, headers (case-insensitive) and body, whatever the status."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_server_serves_routes_and_records_requests():
    log: list[str] = []
    routes = {
        "/": "<p>home</p>",
        "/teapot": Route(status=418, headers=(("X-Test", "yes"),), body=b"short and stout"),
        "/away": Route(redirect="/"),
    }
    with serve(routes, request_log=log) as base:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base)
        assert _get(base + "/")[::2] == (200, b"<p>home</p>")
        status, headers, body = _get(base + "/teapot?q=1")
        assert (status, headers["X-Test"], body) == (418, "yes", b"short and stout")
        assert _get(base + "/nothing")[0] == 404
        assert _get(base + "/away")[2] == b"<p>home</p>"  # urllib follows the 302
    assert log == ["/", "/teapot?q=1", "/nothing", "/away", "/"]
    with pytest.raises(ValueError, match="start with '/'"):
        with serve({"nope": "x"}):
            pass
    with pytest.raises(ValueError, match="status"):
        Route(status=99)


def test_server_serves_a_directory(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.html").write_text("<p>inside</p>")
    with serve(tmp_path) as base:
        status, headers, body = _get(base + "/sub/")
        assert (status, body) == (200, b"<p>inside</p>")
        assert headers["Content-Type"].startswith("text/html")
        assert _get(base + "/missing.html")[0] == 404
        # one connection for a page and its 304, kept alive as a real server keeps it
        host, port = base.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", "/sub/index.html")
        page = connection.getresponse()
        assert (page.status, page.read()) == (200, b"<p>inside</p>")
        sock = connection.sock
        assert sock is not None  # still open
        validator = {"If-None-Match": page.headers["ETag"]}
        connection.request("GET", "/sub/index.html", headers=validator)
        again = connection.getresponse()
        assert (again.status, again.read()) == (304, b"")
        assert connection.sock is sock  # not reopened
        connection.close()


def test_a_stalled_request_does_not_hold_up_the_server():
    outcome: list[BaseException] = []

    def fetch(url: str) -> None:
        try:
            _get(url, timeout=0.3)
        except OSError as exc:
            outcome.append(exc)

    with serve({"/stall": Route(stall=True), "/": "ok"}) as base:
        worker = threading.Thread(target=fetch, args=(base + "/stall",))
        worker.start()
        worker.join(5)
        assert len(outcome) == 1  # the client timed out: no answer came
        assert _get(base + "/")[2] == b"ok"  # other requests are still served
        started = time.monotonic()
    assert time.monotonic() - started < 2  # and stopping does not wait for the stalled one


# --- the demo site --------------------------------------------------------------------------------


def test_demo_site_is_what_build_makes_and_meets_its_targets():
    assert demo_build.main(["--check"]) == 0  # site/ and TRUTH.json are current
    truth = load_truth()
    pages = truth["pages"]
    kinds = [entry["kind"] for entry in pages.values()]
    assert 25 <= sum(k != "robots_txt" for k in kinds) <= 40
    for kind in CRAWLED_KINDS | {"disallowed", "robots_txt"}:
        assert kind in kinds
    assert truth["most_alike_distinct_pages"]["resemblance"] <= demo_build.DISTINCT_MAX
    for path, entry in pages.items():
        if entry["kind"] == "near_duplicate":
            assert entry["resemblance"] >= demo_build.NEAR_MIN, path
        if entry["kind"] == "exact_mirror":
            assert entry["resemblance"] == 1.0, path
    for article in demo_build.read_articles().values():
        if article.path.startswith(("walks/", "guides/", "club/")) and "index" not in article.path:
            assert 250 <= sum(len(p.split()) for p in article.paragraphs) <= 600, article.path


@pytest.fixture(scope="module")
def demo_crawl() -> tuple[str, CrawlResult, list[str]]:
    requests: list[str] = []
    with serve(SITE_DIR, request_log=requests) as base:
        result = run_crawl([base + "/"])
    return base, result, requests


def test_demo_crawl_yields_one_item_per_page(demo_crawl):
    base, result, requests = demo_crawl
    pages = load_truth()["pages"]
    items = {_path(url, base): item for url, item in result.by_url().items()}
    crawlable = {path for path, entry in pages.items() if entry["kind"] in CRAWLED_KINDS}
    disallowed = {path for path, entry in pages.items() if entry["kind"] == "disallowed"}
    assert set(items) == crawlable | disallowed
    assert result.stats["finish_reason"] == "finished"
    assert result.warnings == []
    # each page fetched exactly once; robots.txt once; the forbidden page never
    assert sorted(requests) == sorted(crawlable | {"/robots.txt"})


def test_requests_that_wait_for_robots_txt_together_all_obey_it():
    """Many requests for one host before its robots.txt has arrived (the start URLs; every
    known URL at the start of a recrawl): each waits for it and each obeys it, not the first
    alone."""
    requests: list[str] = []
    private = [f"/private/{name}.html" for name in ("committee-minutes", "a", "b", "c", "d")]
    with serve(SITE_DIR, request_log=requests) as base:
        result = run_crawl([base + "/", *(base + path for path in private)],
                           {"DEPTH_LIMIT": 0})  # fmt: skip
    assert not [path for path in requests if path.startswith("/private/")], requests
    assert result.stats["neardup/skipped/robots_txt"] == len(private)
    assert requests.count("/robots.txt") == 1


def test_demo_crawl_skips_with_reasons(demo_crawl):
    base, result, _ = demo_crawl
    pages = load_truth()["pages"]
    for url, item in result.by_url().items():
        kind = pages[_path(url, base)]["kind"]
        expected = {"not_html": "not_html", "disallowed": "robots_txt"}.get(kind)
        assert item.skip_reason == expected, url
        assert bool(item.tokens) == (expected is None), url
    assert result.stats["neardup/skipped/not_html"] == 2
    assert result.stats["neardup/skipped/robots_txt"] == 1
    assert result.stats["neardup/links/offsite"] >= 1  # the mirror host's links are not followed
    assert "Skipped " + base + "/media/ashgill-trail-map.png: not_html" in result.log


def test_demo_crawl_items_carry_the_page(demo_crawl):
    base, result, _ = demo_crawl
    items = {_path(url, base): item for url, item in result.by_url().items()}
    home = items["/"]
    assert (home.status, home.depth) == (200, 0)
    assert home.body == (SITE_DIR / "index.html").read_bytes()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in home.headers)
    assert ("Content-Type", "text/html") in home.headers
    assert home.fetched_at > 1e9 and home.canonicalise_seconds > 0
    assert items["/sitemap.html"].depth == 1
    assert items["/mirror/walks/wenlow-tarn.html"].depth == 2
    # the crawl's tokens are the canonicaliser's tokens of the file (no second decoding path)
    for path, item in items.items():
        if item.tokens:
            file = SITE_DIR / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
            assert item.tokens.tokens() == html_tokens(file.read_bytes()), path


def test_demo_crawl_agrees_with_the_truth(demo_crawl):
    base, result, _ = demo_crawl
    items = {_path(url, base): item for url, item in result.by_url().items()}
    for path, entry in load_truth()["pages"].items():
        if "of" not in entry:
            continue
        copy = shingles(items[path].tokens.tokens(), 4, "B")
        original = shingles(items[entry["of"]].tokens.tokens(), 4, "B")
        assert round(exact_resemblance(copy, original), 4) == entry["resemblance"], path


# --- bad input ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_crawl() -> tuple[str, CrawlResult, list[str], int]:
    requests: list[str] = []
    closed = _closed_port()
    with serve(bad_routes(), request_log=requests) as base:
        started = time.monotonic()
        result = run_crawl(
            [base + "/", f"http://127.0.0.1:{closed}/", "not a url"], BAD_SITE_SETTINGS
        )
        assert time.monotonic() - started < 20
    return base, result, requests, closed


def test_bad_input_yields_exactly_one_item_per_url(bad_crawl):
    base, result, requests, closed = bad_crawl
    expected = expected_items(bad_cases())
    urls = sorted(result.by_url())  # by_url asserts that no URL has two items
    local = sorted(_path(u, base) for u in urls if u.startswith(base))
    assert local == sorted(expected)
    assert sorted(set(urls) - {base + p for p in local}) == sorted(
        [f"http://127.0.0.1:{closed}/", "not a url"]
    )
    assert result.stats["finish_reason"] == "finished"
    assert result.warnings == []
    assert "/private/secret.html" not in requests
    assert max(len(r) for r in requests) < 2083


@pytest.mark.parametrize("case", expected_items(bad_cases()).values(), ids=lambda c: c.path)
def test_bad_input_item(bad_crawl, case):
    base, result, _, _ = bad_crawl
    item = result.by_url()[base + (case.item_path or case.path)]
    assert item.skip_reason == case.reason, item.skip_detail
    if case.reason is None:
        assert set(case.words) <= set(item.tokens), item.tokens.tokens()[:20]
        assert item.skip_detail is None
    else:
        assert not item.tokens
        assert item.skip_detail and "\n" not in item.skip_detail
        assert result.stats[f"neardup/skipped/{case.reason}"] >= 1


def test_bad_input_failures_and_details(bad_crawl):
    base, result, _, closed = bad_crawl
    items = result.by_url()
    assert items[f"http://127.0.0.1:{closed}/"].skip_reason == "connection_error"
    assert items["not a url"].skip_reason == "bad_url"
    assert items[base + "/stall.html"].skip_detail.startswith("Getting ")
    assert "DOWNLOAD_MAXSIZE (1500000 bytes)" in items[base + "/too-large.html"].skip_detail
    assert "during decompression" in items[base + "/bomb.html"].skip_detail
    assert items[base + "/loop-a"].skip_detail.endswith("/loop-b -> " + base + "/loop-a")
    assert items[base + "/offsite-redirect"].skip_detail.endswith("which is offsite")
    assert items[base + "/missing.html"].status == 404
    # a decompressed body: its headers describe the body the item carries
    gzipped = dict(items[base + "/gzipped.html"].headers)
    assert "Content-Encoding" not in gzipped
    assert gzipped["Content-Length"] == str(len(items[base + "/gzipped.html"].body))
    assert result.stats["neardup/links/offsite"] >= 1  # the link to another port
    assert result.stats["neardup/links/too_long"] == 1
    errors = [line for line in result.log.splitlines() if line.startswith(("ERROR", "CRITICAL"))]
    # only Scrapy's own robots.txt fetch of the closed port is an error
    assert all("robotstxt" in line and str(closed) in line for line in errors), errors


# --- scope: pages, depth, include/exclude, ports --------------------------------------------------


def test_max_pages_schedules_exactly_that_many(demo_site):
    result = run_crawl(
        [demo_site + "/"],
        {
            "NEARDUP_MAX_PAGES": 5,
            "ITEM_PIPELINES": {"tests.crawler.test_spider.DropEverything": 100},
        },
    )
    assert result.items == [] and len(result.dropped) == 5
    assert all(reason.startswith("DropItem: test drop of") for _, reason in result.dropped)
    assert result.stats["neardup/links/max_pages"] > 0
    assert result.warnings == []
    # dropped items are logged by URL, not with their bodies and tokens
    assert "Dropped: test drop of" in result.log and "<PageItem http" in result.log
    assert "<!DOCTYPE" not in result.log


def _index_links(base: str) -> set[str]:
    html = (SITE_DIR / "index.html").read_text()
    return {canonicalize_url(base + href) for href in re.findall(r'href="(/[^"]*)"', html)}


def test_depth_limit(demo_site):
    result = run_crawl([demo_site + "/"], {"DEPTH_LIMIT": 1})
    items = result.by_url()
    assert set(items) == _index_links(demo_site) | {demo_site + "/"}
    assert max(item.depth for item in items.values()) == 1


def test_include_and_exclude(demo_site):
    result = run_crawl(
        [demo_site + "/"],
        {"NEARDUP_INCLUDE": [r"/walks/"], "NEARDUP_EXCLUDE": [r"wenlow"]},
    )
    paths = {_path(url, demo_site) for url in result.by_url()}
    # "/" is a start URL (always fetched); from it only walks pages are followed, not Wenlow's
    assert paths == {
        "/", "/walks/", "/walks/harrow-fell-ridge.html", "/walks/mossop-beck-waterfalls.html",
    }  # fmt: skip
    assert result.stats["neardup/links/excluded"] >= 1
    assert result.stats["neardup/links/not_included"] >= 1


def test_allowed_domains_with_ports():
    log_b: list[str] = []
    log_c: list[str] = []
    with serve({"/b.html": "<p>page b</p>"}, request_log=log_b) as b, serve(
        {"/c.html": "<p>page c</p>"}, request_log=log_c
    ) as c:
        page = f'<p>links <a href="{b}/b.html">b</a> <a href="{c}/c.html">c</a></p>'
        with serve({"/": page}) as a:
            result = run_crawl(
                [a + "/"], {"NEARDUP_ALLOWED_DOMAINS": [a.split("//")[1], b.split("//")[1]]}
            )
    assert set(result.by_url()) == {a + "/", b + "/b.html"}
    assert log_c == [] and "/b.html" in log_b
    assert result.stats["neardup/links/offsite"] == 1
