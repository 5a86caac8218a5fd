"""The throttle (crawler.extensions.throttle): one slow response does not set the crawl's pace.

The rule is fed latencies and checked; then ``neardup crawl`` with the defaults crawls a real
site on 127.0.0.1 with one slow page and many dead links behind it, and its twin with
``crawl.autothrottle: false``. Speed itself is for ``benchmarks/throttle.py``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrapy.core.downloader import Slot
from scrapy.exceptions import NotConfigured
from scrapy.extensions.throttle import AutoThrottle
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from benchmarks.throttle import SlowSite
from crawler.cli.crawl import CrawlOutcome
from crawler.demo.server import Exchange, Route, serve
from crawler.extensions.throttle import LatencyThrottle, ThrottleRule
from tests.crawler.test_faults import ROOT, child_env

FAST, SLOW = 0.01, 20.0


def feed(rule: ThrottleRule, latencies: list[float], status: int = 200) -> list[float]:
    window = rule.window()
    return [window.observe(latency, status) for latency in latencies]


# --- the rule -------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [3, 5, 9])
@pytest.mark.parametrize("slow", [2.0, SLOW, 1000.0])
def test_one_slow_response_among_fast_ones_leaves_the_delay_alone(size, slow):
    delays = feed(ThrottleRule(window_size=size), [FAST] * 10 + [slow] + [FAST] * 10)
    assert max(delays) == FAST


def test_the_delay_follows_a_server_that_really_slows_down_and_comes_back():
    rule = ThrottleRule()  # the default window of 5
    window = rule.window()
    for _ in range(10):
        window.observe(FAST, 200)
    # two slow answers of five are a minority; the third makes the slowness the server's
    assert [window.observe(SLOW, 200) for _ in range(4)] == [FAST, FAST, SLOW, SLOW]
    # and dead links, answered fast, bring the delay back as soon as they are the majority
    assert [window.observe(FAST, 404) for _ in range(4)] == [SLOW, SLOW, FAST, FAST]


def test_a_server_in_trouble_is_not_taken_for_a_fast_one():
    window = ThrottleRule().window()
    for _ in range(5):
        window.observe(SLOW, 200)
    # fast 503s, 429s and 500s come from a failing server: they never lower the delay
    for status in (503, 429, 500, 408):
        assert [window.observe(FAST, status) for _ in range(6)] == [SLOW] * 6
    # slow ones still raise it
    assert feed(ThrottleRule(), [SLOW] * 3, 503)[-1] == SLOW


def test_floor_ceiling_start_and_target_concurrency():
    rule = ThrottleRule(start_delay=1.0, min_delay=0.5, max_delay=2.0)
    assert rule.window().delay == 1.0  # a new host starts at the start delay...
    assert feed(rule, [FAST] * 3) == [1.0, 1.0, 0.5]  # ...judged against it, floored
    assert feed(rule, [SLOW] * 3)[-1] == 2.0  # and capped
    # a server answering in 2 s gets a request every 0.5 s with 4 in flight
    assert feed(ThrottleRule(target_concurrency=4.0), [2.0] * 3)[-1] == 0.5
    # the start delay is never below the floor
    assert ThrottleRule(start_delay=0.0, min_delay=0.3).window().delay == 0.3


@given(
    size=st.integers(3, 9),  # a window of 1 or 2 is led by its last response
    history=st.lists(st.floats(0, 100), max_size=30),
    latency=st.floats(0, 1e6),
    status=st.sampled_from([200, 301, 404, 429, 503]),
)
def test_one_response_moves_the_delay_by_at_most_one_rank_of_the_window(
    size, history, latency, status
):
    window = ThrottleRule(window_size=size, max_delay=1e9).window()
    for value in history:
        window.observe(value, 200)
    ranked = sorted(window.latencies)
    middle = len(ranked) // 2  # the median's rank (the higher middle one)
    before = window.delay
    after = window.observe(latency, status)
    assert ranked[middle - 1] <= after <= ranked[middle + 1]
    if status in (429, 503):
        assert after >= before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window_size": 0}, "NEARDUP_THROTTLE_WINDOW must be an integer >= 1; got 0"),
        ({"target_concurrency": 0.0}, "AUTOTHROTTLE_TARGET_CONCURRENCY must be > 0"),
        ({"min_delay": 3.0, "max_delay": 2.0}, "must not be below DOWNLOAD_DELAY"),
        ({"start_delay": -1.0}, "start_delay must be a number of seconds >= 0"),
    ],
)
def test_bad_parameters_are_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ThrottleRule(**kwargs)


def test_scrapy_autothrottle_lets_one_slow_response_set_the_pace():
    """The problem this extension solves, on Scrapy's own rule (a real AutoThrottle and Slot):
    after one slow 200, fast 404s never bring the delay down."""
    throttle = AutoThrottle.from_crawler(get_crawler(settings_dict={"AUTOTHROTTLE_ENABLED": True}))
    throttle.mindelay, throttle.maxdelay = 0.0, 60.0  # what its spider_opened handler reads
    slot = Slot(concurrency=8, delay=0.0, jitter=0.0)
    answers = [(FAST, 200)] * 5 + [(SLOW, 200)] + [(FAST, 404)] * 20
    for latency, status in answers:
        throttle._adjust_delay(slot, latency, Response("http://x.example/", status=status))
    assert slot.delay == SLOW
    # ours, on the same answers
    window = ThrottleRule().window()
    assert [window.observe(latency, status) for latency, status in answers][-1] == FAST


# --- the extension's settings ---------------------------------------------------------------------


def test_the_extension_reads_scrapy_autothrottle_settings():
    crawler = get_crawler(settings_dict={
        "DOWNLOAD_DELAY": 0.25, "AUTOTHROTTLE_START_DELAY": 2.0, "AUTOTHROTTLE_MAX_DELAY": 9.0,
        "AUTOTHROTTLE_TARGET_CONCURRENCY": 2.0, "NEARDUP_THROTTLE_WINDOW": 7,
    })  # fmt: skip
    rule = LatencyThrottle.from_crawler(crawler).rule
    assert rule == ThrottleRule(start_delay=2.0, min_delay=0.25, max_delay=9.0,
                                target_concurrency=2.0, window_size=7)  # fmt: skip


def test_the_extension_steps_aside_for_scrapy_autothrottle_and_when_off():
    with pytest.raises(NotConfigured, match="AUTOTHROTTLE_ENABLED is on"):
        LatencyThrottle.from_crawler(get_crawler(settings_dict={"AUTOTHROTTLE_ENABLED": True}))
    with pytest.raises(NotConfigured) as off:
        LatencyThrottle.from_crawler(get_crawler(settings_dict={"NEARDUP_THROTTLE_ENABLED": False}))
    assert off.value.args == ()  # off on purpose: no "Disabled ..." warning in the log
    with pytest.raises(ValueError, match="NEARDUP_THROTTLE_WINDOW"):
        LatencyThrottle.from_crawler(get_crawler(settings_dict={"NEARDUP_THROTTLE_WINDOW": 0}))


# --- a real crawl: one slow page, dead links behind it --------------------------------------------

#: the slow page's wait: long against loopback responses (milliseconds), short for a test
WAIT = 3.0
SITE = SlowSite(wait=WAIT, pages=10, dead=40)


def crawl_site(tmp_path: Any, *options: str) -> tuple[dict[str, Any], list[str], str]:
    """``neardup crawl`` of :data:`SITE` with the given options: its JSON summary, the paths
    the server was asked for in arrival order, and stderr."""
    requests: list[str] = []
    with serve(SITE.routes(), request_log=requests) as base:
        proc = subprocess.run(
            [sys.executable, "-m", "crawler.cli", "crawl", base + "/", "--store",
             str(tmp_path / "store"), "--json", *options],
            check=False, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), requests, proc.stderr


def check_the_crawl(summary: dict[str, Any], requests: list[str]) -> None:
    assert summary["reason"] == "finished"
    # every page decided: all kept (each has its own text), every dead link skipped as a 404
    assert summary["decisions"]["kept"] == len(SITE.alongside()) + 1
    assert summary["skipped"] == {"http_404": SITE.dead}
    pages = [p for p in requests if p != "/robots.txt"]
    assert sorted(pages) == sorted([*SITE.alongside(), "/slow.html", *SITE.behind_slow()])
    # The crawl went on while the slow page was pending: every page that does not need its
    # answer was asked for before the first link only that answer reveals. With a throttle or a
    # concurrency that waited for the slow page, the dead links would come before the pages of
    # depth 2. 21 loopback pages take far less than the 3 s the slow page waits.
    first_behind = min(pages.index(p) for p in SITE.behind_slow())
    assert max(pages.index(p) for p in SITE.alongside()) < first_behind


def test_a_slow_page_does_not_set_the_pace_with_the_defaults(tmp_path):
    summary, requests, stderr = crawl_site(tmp_path)
    check_the_crawl(summary, requests)
    stats = summary["stats"]
    # the throttle measured the slow page...
    assert stats["neardup/throttle/latency/max"] >= WAIT
    # ...and never let it set the delay: Scrapy's AutoThrottle makes it WAIT here, and keeps
    # it for every dead link after. Ours is the median of the last 5 latencies, of which only
    # one is slow; half the wait would need 3 loopback answers of 1.5 s in a row.
    assert stats["neardup/throttle/delay/max"] < WAIT / 2
    assert "WARNING" not in stderr and "Traceback" not in stderr


@pytest.mark.slow
def test_the_same_crawl_with_the_throttle_off(tmp_path):
    summary, requests, stderr = crawl_site(tmp_path, "--set", "crawl.autothrottle=false")
    check_the_crawl(summary, requests)
    assert not any(key.startswith("neardup/throttle/") for key in summary["stats"])
    assert "WARNING" not in stderr and "Traceback" not in stderr


# --- robots.txt's Crawl-delay ----------------------------------------------------------------------

#: pages of the Crawl-delay site besides its start page
DELAYED_PAGES = 4


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["*", "neardup", "otherbot"])
def test_a_host_s_crawl_delay_is_honoured_with_the_defaults(tmp_path, agent):
    """A host whose robots.txt asks for ``Crawl-delay: 1`` from our user agent (or from every
    one) gets one request a second, however fast it answers; one that asks it of another
    robot is crawled as fast as the throttle lets it."""
    pages = [f"/page-{n}.html" for n in range(DELAYED_PAGES)]
    links = "".join(f'<a href="{p}">{p}</a> ' for p in pages)
    text = (("Content-Type", "text/plain"),)
    table = {"/robots.txt": Route(body=f"User-agent: {agent}\nCrawl-delay: 1\n", headers=text),
             "/": Route(body=f"<html><body><p>The pages.</p>{links}</body></html>"),
             **{p: Route(body=f"<html><body><p>Page {p} of the site.</p></body></html>")
                for p in pages}}  # fmt: skip
    exchanges: list[Exchange] = []
    with serve(table, exchanges=exchanges) as base:
        proc = subprocess.run(
            [sys.executable, "-m", "crawler.cli", "crawl", base + "/", "--store",
             str(tmp_path / "store"), "--json"],
            check=False, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)["stats"]
    arrived = [e.arrived for e in exchanges if e.path != "/robots.txt"]
    assert len(arrived) == DELAYED_PAGES + 1
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrived)]
    if agent == "otherbot":
        assert "neardup/throttle/crawl_delay/max" not in stats
        assert max(gaps) < 0.5, gaps
    else:
        assert stats["neardup/throttle/crawl_delay/max"] == 1.0
        assert min(gaps) >= 0.95, gaps


def test_the_summary_says_a_robots_txt_delay_set_the_pace(tmp_path):
    outcome = CrawlOutcome(tmp_path, "run", tmp_path / "log", tmp_path / "scrapy.log", [],
                           reason="finished", stats={"neardup/throttle/crawl_delay/max": 10.0})
    lines = [line for line in outcome.render().splitlines() if "robots.txt delay" in line]
    said = "  robots.txt delay       10s   between two requests to a host that asks for it"
    assert lines == [said + " (the longest asked)"]
    assert "robots.txt delay" not in CrawlOutcome(tmp_path, "run", tmp_path / "log",
                                                  tmp_path / "scrapy.log", []).render()
