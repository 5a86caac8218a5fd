"""The dedup and storage stages in Scrapy's real engine, crawling the demo site on 127.0.0.1.

Crawls run in a child process (``run_crawl``), one request at a time and breadth first, so the
order pages arrive in (and so which copy greedy clustering keeps) is the same on every run.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from crawler.cli.crawl import BREADTH_FIRST, PIPELINES
from crawler.demo import load_truth
from crawler.pipelines import (
    Contained,
    DedupPipeline,
    ExactDuplicate,
    Skipped,
    StoragePipeline,
)
from storage.log import FIELDS, read_log
from storage.store import Store
from storage.verify import verify_store
from tests.crawler.conftest import CrawlResult, run_crawl

ORDERED = {**BREADTH_FIRST, "CONCURRENT_REQUESTS": 1, "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
#: what each kind of page in TRUTH.json must become at the default threshold (0.9)
EXPECTED = {
    "original": "kept",
    "printable": "kept",  # exact resemblance ~0.71 to its original: below the threshold
    "exact_mirror": "exact_duplicate",
    "near_duplicate": "near_duplicate",
    "not_html": "skipped",
    "disallowed": "skipped",
}


def crawl_demo(base: str, store: Path, run: str, **settings: Any) -> CrawlResult:
    merged = {"ITEM_PIPELINES": PIPELINES, "NEARDUP_STORE": str(store), "NEARDUP_RUN_ID": run,
              **ORDERED, **settings}  # fmt: skip
    return run_crawl([base + "/"], merged)


def log_of(store: Path, run: str) -> list[dict[str, Any]]:
    return list(read_log(store / "logs", [run]))


def path(url: str | None, base: str) -> str | None:
    return None if url is None else url.removeprefix(base)


@pytest.fixture(scope="module")
def demo(demo_site: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("pipelines") / "store"
    result = crawl_demo(demo_site, store, "run-1")
    return {"base": demo_site, "store": store, "result": result, "log": log_of(store, "run-1")}


def test_decisions_match_the_truth(demo):
    base, truth = demo["base"], load_truth()["pages"]
    decided = {path(e["url"], base): e for e in demo["log"]}
    for page_path, page in truth.items():
        if page["kind"] == "robots_txt":
            assert page_path not in decided  # Scrapy's own request, not a page of the crawl
            continue
        entry = decided[page_path]
        assert entry["decision"] == EXPECTED[page["kind"]], page_path
        if page["kind"] in ("exact_mirror", "near_duplicate"):
            assert path(entry["duplicate_of"], base) == page["of"]
            assert entry["resemblance"] >= 0.9
        if page["kind"] == "not_html":
            assert entry["reason"] == "not_html"
        if page["kind"] == "disallowed":
            assert entry["reason"] == "robots_txt"
    assert set(decided) == set(truth) - {"/robots.txt"}


def test_every_fetched_url_has_exactly_one_log_line(demo):
    items = Counter(item.url for item in demo["result"].all_items)
    lines = Counter(e["url"] for e in demo["log"])
    assert lines == items
    assert set(lines.values()) == {1}
    for entry in demo["log"]:
        assert list(entry)[: len(FIELDS)] == list(FIELDS)  # the contract's keys, in order
        if entry["decision"] != "skipped":
            assert entry["tokens"] > 0 and entry["shingles"] > 0
            assert entry["cluster_id"] is not None and entry["doc_id"] is not None


def test_kept_pages_are_stored_once_as_fetched(demo):
    kept = [e["url"] for e in demo["log"] if e["decision"] == "kept"]
    items = {item.url: item for item in demo["result"].items}
    assert sorted(items) == sorted(kept)  # only kept pages leave the pipelines
    with Store.open(demo["store"], readonly=True) as store:
        pages = list(store.iter_pages())
        assert sorted(p.url for p in pages) == sorted(kept)
        for page in pages:
            item = items[page.url]
            assert page.body == item.body and page.status == item.status == 200
            assert ("Content-Type", "text/html") in page.headers
            assert store.find_url(page.url) == page.doc_id
        decisions = Counter(record.decision for _, record in store.documents())
    assert decisions == Counter(e["decision"] for e in demo["log"])


def test_the_store_verifies(demo):
    report = verify_store(demo["store"])
    assert report.ok, report.render()
    assert report.pages == report.warc_records == 21
    assert report.clusters == 21  # one per kept page: every dropped page joined one


def test_stats(demo):
    stats, log = demo["result"].stats, demo["log"]
    counts = Counter(e["decision"] for e in log)
    for decision in ("kept", "exact_duplicate", "near_duplicate"):
        assert stats[f"neardup/{decision}"] == counts[decision]
    assert stats["neardup/skipped"] == counts["skipped"] == 3
    assert stats["neardup/skipped/not_html"] == 2 and stats["neardup/skipped/robots_txt"] == 1
    assert stats["item_dropped_reasons_count/ExactDuplicate"] == 3
    assert stats["item_dropped_reasons_count/NearDuplicate"] == 4
    for part in ("canonicalise", "sketch", "index", "store"):
        assert stats[f"neardup/seconds/{part}"] > 0
    assert stats["neardup/commits"] >= 1
    assert stats["neardup/lmdb_map_growths"] == 0
    assert "neardup/already_decided" not in stats
    # spider-less signatures and no deprecated calls: the crawl raised no warning at all
    assert demo["result"].warnings == []


def test_drop_messages_name_the_match_and_the_resemblance(demo):
    base, truth = demo["base"], load_truth()["pages"]
    dropped = {path(item.url, base): message for item, message in demo["result"].dropped}
    for page_path, page in truth.items():
        if page["kind"] == "near_duplicate":
            message = dropped[page_path]
            assert message.startswith(f"NearDuplicate: near duplicate of {base}{page['of']} ")
            r = float(re.search(r"estimated resemblance (\d\.\d\d)", message).group(1))
            assert abs(r - page["resemblance"]) < 0.1  # 4 sd of MIN_100 at r = 0.95
        elif page["kind"] == "exact_mirror":
            assert dropped[page_path] == (
                f"ExactDuplicate: exact duplicate of {base}{page['of']} "
                "(resemblance 1.00: identical canonical text)"
            )


def test_a_repeated_crawl_finds_every_page_unchanged_and_stores_nothing_again(demo, tmp_path):
    before = verify_store(demo["store"])
    again = crawl_demo(demo["base"], demo["store"], "run-2")
    assert "neardup/already_decided" not in again.stats
    assert again.stats["neardup/change/unchanged"] == 31
    assert again.stats["neardup/decided"] == 28 and again.stats["neardup/skipped"] == 3
    lines = log_of(demo["store"], "run-2")
    assert len(lines) == 31 and {e["change"] for e in lines} == {"unchanged"}
    # each page keeps its decision and its cluster
    assert {e["url"]: (e["decision"], e["cluster_id"]) for e in lines} == {
        e["url"]: (e["decision"], e["cluster_id"]) for e in demo["log"]}
    after = verify_store(demo["store"])
    assert after.ok and after.warc_records == before.warc_records == 21
    assert after.documents == before.documents


def test_disabled_pipelines_are_not_configured():
    crawler = get_crawler(settings_dict={"NEARDUP_ENABLED": False})
    for stage in (DedupPipeline, StoragePipeline):
        with pytest.raises(NotConfigured, match="NEARDUP_ENABLED is False"):
            build_from_crawler(stage, crawler)


def test_the_dedup_stage_alone_keeps_an_index_without_pages(demo, tmp_path):
    store = tmp_path / "store"
    result = crawl_demo(demo["base"], store, "alone",
                        ITEM_PIPELINES={"crawler.pipelines.DedupPipeline": 300})  # fmt: skip
    alone = {e["url"]: e["decision"] for e in log_of(store, "alone")}
    assert alone == {e["url"]: e["decision"] for e in demo["log"]}
    assert result.stats["neardup/kept"] == 21
    report = verify_store(store)
    assert report.ok and report.documents == 31 and report.pages == 0 and report.clusters == 21


def test_the_stages_in_the_wrong_order_are_refused(tmp_path):
    # from_crawler runs in ITEM_PIPELINES order, as Scrapy builds them
    crawler = get_crawler(settings_dict={"NEARDUP_STORE": str(tmp_path / "store")})
    build_from_crawler(StoragePipeline, crawler)
    with pytest.raises(ValueError, match="DedupPipeline must come before StoragePipeline"):
        build_from_crawler(DedupPipeline, crawler)
    crawler = get_crawler(settings_dict={"NEARDUP_STORE": str(tmp_path / "store")})
    alone = build_from_crawler(StoragePipeline, crawler)
    with pytest.raises(ValueError, match="StoragePipeline needs crawler.pipelines.DedupPipeline"):
        alone.open_spider()
    assert not (tmp_path / "store").exists()


class DropBetween:
    """A user's pipeline between the stages: drops one kept page, fails on another (used by a
    child crawl)."""

    def process_item(self, item: Any) -> Any:
        if item.url.endswith("/club/about.html"):
            raise DropItem("a user's rule")
        if item.url.endswith("/club/history.html"):
            raise ValueError("a user's bug")
        return item


def test_kept_pages_lost_between_the_stages_are_decided_but_not_stored(demo_site, tmp_path):
    store = tmp_path / "store"
    pipelines = {**PIPELINES, "tests.crawler.test_pipelines.DropBetween": 350}
    result = crawl_demo(demo_site, store, "between", ITEM_PIPELINES=pipelines,
                        NEARDUP_BATCH_SIZE=4)  # fmt: skip
    entries = {e["url"].removeprefix(demo_site): e for e in log_of(store, "between")}
    for page, why in [("/club/about.html", "dropped after the dedup stage (DropItem)"),
                      ("/club/history.html", "failed after the dedup stage (ValueError)")]:  # fmt: skip
        assert entries[page]["decision"] == "kept"
        assert entries[page]["reason"] == f"not stored: {why}"
    # the lost pages held back no commit: batches of 4 went on committing
    assert result.stats["neardup/commits"] >= 31 // 4
    assert result.stats["neardup/kept_not_stored"] == 2
    # the mirror of history.html is still recognised as its copy
    assert entries["/mirror/club/history.html"]["duplicate_of"] == demo_site + "/club/history.html"
    report = verify_store(store)
    assert report.ok and report.pages == 19 and report.clusters == 21
    with Store.open(store, readonly=True) as opened:
        stored = {p.url.removeprefix(demo_site) for p in opened.iter_pages()}
    assert not stored & {"/club/about.html", "/club/history.html"}


def test_the_worker_process_and_the_inline_work_decide_alike(demo, tmp_path):
    store = tmp_path / "store"
    result = crawl_demo(demo["base"], store, "inline", NEARDUP_WORKER="inline")
    inline = log_of(store, "inline")
    fields = ("url", "decision", "doc_id", "cluster_id", "duplicate_of", "resemblance")

    def decisions(log: list[dict[str, Any]]) -> list[list[Any]]:
        # where a page lands in the WARC file varies by a byte or two: record ids are random
        return [[e.get(k) for k in fields] + ["page" in e] for e in log]

    assert decisions(inline) == decisions(demo["log"])
    for key in ("neardup/kept", "neardup/exact_duplicate", "neardup/near_duplicate",
                "neardup/skipped"):  # fmt: skip
        assert result.stats[key] == demo["result"].stats[key], key
    # both commit in batches; how many depends on the clock too (an idle batch commits)
    decided = len(inline)
    for each in (result, demo["result"]):
        assert 1 <= each.stats["neardup/commits"] < decided
    # the worker process reports its CPU; inline there is no worker
    assert demo["result"].stats["neardup/worker_cpu_seconds"] > 0
    assert "neardup/worker_cpu_seconds" not in result.stats


class BadUrlBefore:
    """A user's pipeline before the dedup stage that gives one page a URL the store cannot
    write (a lone surrogate) and another a status that is not a number, a bug the store meets
    while writing the page (used by child crawls)."""

    def process_item(self, item: Any) -> Any:
        if item.url.endswith("/guides/packing-list.html"):
            item.url += "\ud800"
        if item.url.endswith("/walks/wenlow-tarn.html") and os.environ.get("NEARDUP_TEST_BUG"):
            item.status = "two hundred"
        return item


def test_a_url_the_store_cannot_write_is_skipped_with_one_line(demo_site, tmp_path):
    store = tmp_path / "store"
    pipelines = {**PIPELINES, "tests.crawler.test_pipelines.BadUrlBefore": 250}
    result = crawl_demo(demo_site, store, "bad", ITEM_PIPELINES=pipelines)
    assert result.stats["finish_reason"] == "finished"
    # the guide and its mirror's copy
    assert result.stats["neardup/bad_url"] == 2 and "neardup/store_error" not in result.stats
    skipped = [m for _, m in result.dropped if m.startswith("Skipped: skipped (bad_url)")]
    assert len(skipped) == 2 and all("\n" not in m and "packing-list.html" in m for m in skipped)
    report = verify_store(store)
    assert report.ok, report.render()
    assert report.documents == 29  # every page but those two is decided


def test_a_bug_met_while_writing_stops_the_crawl_named_as_a_bug(demo_site, tmp_path, monkeypatch):
    """Not disguised as a store failure: the crawl stops (the batch may hold half the page),
    the one ERROR line names the page and the error, the log keeps the traceback."""
    monkeypatch.setenv("NEARDUP_TEST_BUG", "1")
    store = tmp_path / "store"
    pipelines = {**PIPELINES, "tests.crawler.test_pipelines.BadUrlBefore": 250}
    result = crawl_demo(demo_site, store, "bug", ITEM_PIPELINES=pipelines)
    assert result.stats["finish_reason"] == "neardup_internal_error"
    assert result.stats["neardup/internal_error"] == 1
    assert "neardup/store_error" not in result.stats
    errors = [line for line in result.log.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, errors
    assert "internal error while deciding " in errors[0] and "wenlow-tarn.html" in errors[0]
    # the status "two hundred" fails where the work first compares or converts it
    assert re.search(r"\((TypeError|ValueError): .*(int|str)", errors[0]), errors[0]
    assert "writing to the store failed" not in result.log
    assert "Traceback (most recent call last)" in result.log  # logged once, with the page
    failed = [message for _, message in result.dropped if message.startswith("StoreFailed")]
    assert failed and all("\n" not in message for message in failed)
    assert any(m.startswith("StoreFailed: not decided: internal error while deciding ")
               for m in failed)  # fmt: skip
    # the batch holding half of that page was aborted: the store is consistent without it
    report = verify_store(store)
    assert report.ok, report.render()
    with Store.open(store, readonly=True) as opened:
        assert opened.find_url(demo_site + "/walks/wenlow-tarn.html") is None


class KillTheWorker:
    """A pipeline before the dedup stage that kills the session's worker process with SIGKILL
    when one page passes (used by a child crawl)."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> KillTheWorker:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if item.url.endswith("/guides/packing-list.html"):
            from crawler.pipelines.session import DedupSession

            session = DedupSession.find(self.crawler)
            assert session is not None and session.in_worker
            os.kill(session._worker.proc.pid, signal.SIGKILL)
            session._worker.proc.wait()
        return item


def test_a_worker_that_dies_stops_the_crawl_instead_of_hanging_it(demo_site, tmp_path):
    store = tmp_path / "store"
    pipelines = {**PIPELINES, "tests.crawler.test_pipelines.KillTheWorker": 250}
    result = crawl_demo(demo_site, store, "killed", ITEM_PIPELINES=pipelines)
    assert result.stats["finish_reason"] == "neardup_store_error"
    assert result.stats["neardup/store_error"] == 1
    assert "the neardup worker process exited with status -9" in result.log
    failed = [message for _, message in result.dropped if message.startswith("StoreFailed")]
    assert failed and all("\n" not in message for message in failed)
    report = verify_store(store)  # what the worker committed before it died is whole
    assert report.ok, report.render()


# --- driven by hand, as a Scrapy user's own items would be -------------------------------------

ARTICLE = " ".join(f"w{i % 97}x{i}" for i in range(400))


def stages(tmp_path: Path, **settings: Any) -> tuple[DedupPipeline, StoragePipeline, Any]:
    store = str(tmp_path / "store")
    crawler = get_crawler(
        settings_dict={"NEARDUP_STORE": store, "NEARDUP_BATCH_SIZE": 2, **settings}
    )
    dedup = build_from_crawler(DedupPipeline, crawler)
    storage = build_from_crawler(StoragePipeline, crawler)
    dedup.open_spider()
    storage.open_spider()
    return dedup, storage, crawler


def through(dedup: DedupPipeline, storage: StoragePipeline, item: dict[str, Any]) -> Any:
    return storage.process_item(dedup.process_item(item))


def test_plain_dict_items_with_html_or_text(tmp_path):
    dedup, storage, crawler = stages(tmp_path, NEARDUP_CONTAINMENT=0.8)
    html = f"<html><body><p>{ARTICLE}</p></body></html>"
    assert through(dedup, storage, {"url": "http://a.test/1", "html": html})["url"]
    with pytest.raises(ExactDuplicate, match=r"^exact duplicate of http://a\.test/1 "):
        through(dedup, storage, {"url": "http://a.test/2", "text": ARTICLE.upper()})
    half = " ".join(ARTICLE.split()[:200])
    with pytest.raises(Contained) as caught:
        through(dedup, storage, {"url": "http://a.test/3", "text": half})
    message = str(caught.value)
    assert message.startswith("contained in http://a.test/1 (estimated containment ")
    assert float(re.search(r"containment (\d\.\d\d)", message).group(1)) >= 0.8
    assert caught.value.log_level == "INFO"
    with pytest.raises(Skipped, match=r"^skipped \(empty\): no text after canonicalisation$"):
        through(dedup, storage, {"url": "http://a.test/4", "html": "<p><!-- nothing --></p>"})
    storage.close_spider()
    dedup.close_spider()
    stats = crawler.stats
    assert stats.get_value("neardup/contained") == 1 and stats.get_value("neardup/kept") == 1
    assert stats.get_value("neardup/skipped") == stats.get_value("neardup/skipped/empty") == 1
    report = verify_store(tmp_path / "store")
    assert report.ok and report.pages == 1 and report.documents == 4


def test_another_spider_s_responses_are_judged_by_their_status_type_and_charset(tmp_path):
    """Items of a user's own spider (url, status, headers, body) meet the rule our spider's
    responses meet: an error status or a body that is not HTML is skipped with its reason and
    counted, and the body is decoded with the charset its headers name."""
    dedup, storage, crawler = stages(tmp_path)
    page = f"<html><body><p>{ARTICLE}</p></body></html>"
    html = {"Content-Type": "text/html"}
    for url, item, reason in [
        ("/missing", {"status": 404, "headers": html, "body": page}, "http_404"),
        ("/style.css", {"headers": {"Content-Type": "text/css"}, "body": "p { color: red }"},
         "not_html"),
        ("/image", {"headers": [("Content-Type", "image/png")], "body": b"\x89PNG\r\n\x1a\n"},
         "not_html"),
        ("/words", {"tokens": ARTICLE}, "bad_tokens"),
        ("/ok", {"status": "OK", "body": page}, "bad_status"),
    ]:
        with pytest.raises(Skipped, match=rf"^skipped \({reason}\): "):
            through(dedup, storage, {"url": f"http://b.test{url}", **item})
    # the same page in UTF-8, then in windows-1251 as its Content-Type says: the same text
    russian = "<html><body><p>" + " ".join(f"слово{i} текст{i % 7}" for i in range(300)) + "</p>"
    utf8 = {"Content-Type": "text/html; charset=utf-8"}
    assert through(dedup, storage, {"url": "http://b.test/utf8", "headers": utf8,
                                    "body": russian.encode("utf-8")})  # fmt: skip
    cp1251 = {"Content-Type": "text/html; charset=windows-1251"}
    with pytest.raises(ExactDuplicate, match=r"^exact duplicate of http://b\.test/utf8 "):
        through(dedup, storage, {"url": "http://b.test/cp1251", "headers": cp1251,
                                 "body": russian.encode("windows-1251")})  # fmt: skip
    storage.close_spider()
    dedup.close_spider()
    stats = crawler.stats
    assert stats.get_value("neardup/skipped") == 5
    assert stats.get_value("neardup/skipped/not_html") == 2
    for reason in ("http_404", "bad_tokens", "bad_status"):
        assert stats.get_value(f"neardup/skipped/{reason}") == 1, reason
    assert verify_store(tmp_path / "store").ok


def test_a_store_the_worker_cannot_open_with_these_settings_is_said_with_its_reason(demo):
    """In a Scrapy project, a threshold below the one the store's index serves stops the crawl
    at once, and the one ERROR line says why the worker could not open the store."""
    result = crawl_demo(demo["base"], demo["store"], "lower", NEARDUP_THRESHOLD=0.8)
    errors = [line for line in result.log.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, errors
    assert errors[0].endswith(
        "neardup: the store failed: the worker could not open the store: this index holds the "
        "part of each representative that finds clusters at resemblance 0.9 or more; threshold "
        "0.8 needs more of it: cluster into a new store (or re-cluster this one with neardup "
        "recluster --store); stopping the crawl"), errors[0]
    assert verify_store(demo["store"]).ok


def test_bad_settings_are_named(tmp_path):
    for name, value, words in [
        ("NEARDUP_THRESHOLD", 2, "dedup.threshold must be a number in [0, 1]"),
        ("NEARDUP_BATCH_SIZE", 0, "NEARDUP_BATCH_SIZE must be at least 1"),
        ("NEARDUP_SKETCH", {"kind": "nope"}, "sketch.kind must be one of"),
        ("NEARDUP_DUPLICATE_BUDGET", "lots", "NEARDUP_DUPLICATE_BUDGET must be a whole number"),
        ("NEARDUP_THRESHOLD", "abc", "NEARDUP_THRESHOLD must be a number; got 'abc'"),
        ("NEARDUP_CAP", "1.5", "NEARDUP_CAP must be a whole number; got '1.5'"),
    ]:
        crawler = get_crawler(settings_dict={"NEARDUP_STORE": str(tmp_path), name: value})
        with pytest.raises(ValueError, match=re.escape(words)):
            build_from_crawler(DedupPipeline, crawler)


def test_a_page_crosses_to_the_worker_unchanged():
    from crawler.work.page import PageView

    for tokens in (["a", "rose"], ["a\x00b", "c"], [""], [], None):
        page = PageView("http://a.test/", tokens, "empty", "detail", 404, [("A", "b")], b"x",
                        "text", 1.5, 0.25, (7, 2), 3)  # fmt: skip
        wire = pickle.loads(pickle.dumps(page.to_wire()))
        assert PageView.from_wire(wire) == page, tokens
