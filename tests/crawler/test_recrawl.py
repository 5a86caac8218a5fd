"""The second crawl of a site is a recrawl: what the server sent, what changed, where each page's
cluster went, and the WARC records each run wrote, against the truth of a site that changes
(:mod:`tests.crawler.recrawl_site`). Real crawls by ``neardup crawl``, a real server that honours
validators, the records read back with warcio, and the store replayed by pywb."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.demo.build import read_articles
from crawler.demo.server import Exchange, Route, serve
from storage.log import read_log
from storage.pages import IDENTICAL_PAYLOAD, SERVER_NOT_MODIFIED, payload_digest
from storage.store import Store, url_key
from storage.verify import verify_store
from tests.crawler.recrawl_site import SitePage, html_page, recrawl_site, routes
from tests.crawler.replay import raw, replay
from tests.crawler.test_faults import ROOT, child_env

#: one request at a time and a small batch: the order, and what a kill leaves, are the same
#: from run to run
OPTIONS = ["--set", "crawl.concurrency=1", "--set", "crawl.autothrottle=false",
           "--set", "crawl.batch_size=2"]  # fmt: skip
EMPTY = payload_digest(b"")
PROFILES = {IDENTICAL_PAYLOAD: "identical-payload-digest", SERVER_NOT_MODIFIED: "server-not-modified"}


def neardup(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crawler.cli", *argv], check=False, cwd=ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=120)  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def warc_records(store: Path) -> list[dict[str, Any]]:
    """Every record of the store's WARC files but warcinfo, in the order written."""
    records = []
    for path in sorted((store / "pages").glob("pages-*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "warcinfo":
                    continue
                header = record.rec_headers.get_header
                records.append({
                    "type": record.rec_type, "url": header("WARC-Target-URI"),
                    "date": header("WARC-Date"),
                    "profile": PROFILES.get(header("WARC-Profile") or "", None),
                    "refers_to": header("WARC-Refers-To-Target-URI"),
                    "refers_to_date": header("WARC-Refers-To-Date"),
                    "digest": header("WARC-Payload-Digest"),
                    "status": record.http_headers.get_statuscode() if record.http_headers else None,
                })  # fmt: skip
    return records


def last_lines(store: Path, crawl_run: int) -> dict[str, dict[str, Any]]:
    """The last decision line of each URL in the store's crawl run ``crawl_run``."""
    lines: dict[str, dict[str, Any]] = {}
    for entry in read_log(store / "logs"):
        if entry.get("crawl_run", 1) == crawl_run:
            lines[entry["url"]] = entry
    return lines


class Site:
    """The changing site on one fixed port, crawled into one store, run after run."""

    def __init__(self, store: Path) -> None:
        self.pages = recrawl_site()
        self.store = store
        self.port = _port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.runs: list[dict[str, Any]] = []

    def crawl(self, version: int) -> dict[str, Any]:
        exchanges: list[Exchange] = []
        before = len(warc_records(self.store)) if self.store.exists() else 0
        with serve(routes(self.pages, version), port=self.port, exchanges=exchanges):
            proc = neardup("crawl", self.base + "/", "--store", str(self.store), "--json",
                           *OPTIONS)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
        run = {"summary": summary, "exchanges": exchanges,
               "records": warc_records(self.store)[before:],
               "lines": last_lines(self.store, summary["crawl_run"])}  # fmt: skip
        self.runs.append(run)
        return run

    def url(self, page: SitePage | str) -> str:
        return self.base + (page if isinstance(page, str) else page.path)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site crawled three times: version 1, then version 2, then version 2 again."""
    site = Site(tmp_path_factory.mktemp("recrawl") / "store")
    for version in (1, 2, 2):
        site.crawl(version)
        report = verify_store(site.store)
        assert report.ok, report.render()
    return site


def _check_second_run(site: Site, run: dict[str, Any], first: dict[str, Any]) -> None:
    """Every URL's change, decision and cluster against the site's truth."""
    lines = run["lines"]
    first_clusters = {line["cluster_id"] for line in first["lines"].values()}
    for page in site.pages:
        expect, line = page.second, lines[site.url(page)]
        where = f"{page.path}: {line}"
        assert (line["change"], line["decision"]) == (expect.change, expect.decision), where
        if expect.cluster is None:
            assert line["cluster_id"] is None, where
        elif expect.cluster == "same":
            assert line["cluster_id"] == first["lines"][site.url(page)]["cluster_id"], where
        elif expect.cluster == "new":
            assert line["cluster_id"] not in first_clusters, where
        else:
            other = expect.cluster.removeprefix("of:")
            assert line["cluster_id"] == lines[site.url(other)]["cluster_id"], where
    index = lines[site.url("/")]  # its links changed, nothing else: the same cluster, kept
    assert (index["change"], index["decision"]) == ("changed", "kept")
    assert index["cluster_id"] == first["lines"][site.url("/")]["cluster_id"]


def test_every_url_s_change_decision_and_cluster_after_the_site_changed(site):
    first, second = site.runs[0], site.runs[1]
    assert first["summary"]["crawl_run"] == 1 and second["summary"]["crawl_run"] == 2
    assert {line["change"] for line in first["lines"].values()} == {"new"}
    for page in site.pages:
        if page.first != "absent":
            assert first["lines"][site.url(page)]["decision"] == page.first, page.path
    _check_second_run(site, second, first)
    changes = second["summary"]["changes"]
    assert changes["gone"] == 2 and changes["new"] == 2 and changes["redecided"] == 2
    assert second["summary"]["run_resumed"] is False
    # the summary counts each URL once, by what changed for it (as its last line says)
    kinds = ("new", "unchanged", "changed", "gone")
    by_line = Counter(line["change"] for line in second["lines"].values())
    assert {k: changes[k] for k in kinds} == {k: by_line[k] for k in kinds}
    # the two orphans were decided again once, right after the page they duplicated
    redecided = [e for e in read_log(site.store / "logs") if e.get("redecided")]
    assert sorted(e["url"] for e in redecided) == sorted(
        site.url(p) for p in ("/follower.html", "/near-becomes.html"))
    assert all(e["reason"].startswith("re-decided: its kept page ") for e in redecided)
    edited = second["lines"][site.url("/edited.html")]
    assert 0.5 < edited["change_resemblance"] < 1  # a small edit: like what it was
    assert second["lines"][site.url("/replaced.html")]["change_resemblance"] < 0.3


def test_the_server_was_asked_with_the_validators_and_sent_bodies_only_where_needed(site):
    second = site.runs[1]
    by_path: dict[str, list[Exchange]] = {}
    for exchange in second["exchanges"]:
        by_path.setdefault(exchange.path, []).append(exchange)
    for page in site.pages:
        seen = by_path.get(page.path, [])
        assert seen, page.path
        expect = page.second
        if expect.conditional is not None:
            first = seen[0]
            asked = first.if_none_match is not None or first.if_modified_since is not None
            assert asked == expect.conditional, (page.path, first)
        if page.v1 is not None and page.v1.etag and expect.conditional:
            assert seen[0].if_none_match == page.v1.entity_tag(), page.path
        bodies = [e for e in seen if e.status == 200 and e.body_bytes > 0]
        if expect.full_body is True:
            assert bodies, page.path
        elif expect.full_body is False:
            assert not bodies and seen[0].status == 304, (page.path, seen)
        assert len(seen) <= 2, (page.path, seen)  # a 304, then the body of a page kept again
    third = site.runs[2]
    sent = sum(e.body_bytes for e in third["exchanges"])
    assert sent < 0.2 * sum(e.body_bytes for e in site.runs[0]["exchanges"])


def test_each_run_writes_responses_for_new_and_changed_kept_pages_and_revisits_for_the_rest(site):
    second = site.runs[1]
    records: dict[str, list[dict[str, Any]]] = {}
    for record in second["records"]:
        records.setdefault(record["url"], []).append(record)
    for page in site.pages:
        written = records.get(site.url(page), [])
        kinds = [r["profile"] or r["type"] for r in written]
        expected = [] if page.second.record is None else [page.second.record]
        assert kinds == expected, (page.path, written)
    for record in second["records"] + site.runs[0]["records"]:
        if record["type"] == "revisit":
            # resolvable by a replay tool: a target, a date, and never the empty body's digest
            assert record["refers_to"] and record["refers_to_date"], record
            assert record["digest"] != EMPTY and record["status"] == "200", record
    mirror = records[site.url("/mirror/original.html")][0]
    assert mirror["refers_to"] == site.url("/original.html")  # URL-agnostic: the original's
    # the first crawl wrote the mirror's revisit too
    assert [r["profile"] for r in site.runs[0]["records"] if r["type"] == "revisit"] == [
        "identical-payload-digest"]


def test_a_third_crawl_of_an_unchanged_site_writes_no_response_and_moves_nothing(site):
    second, third = site.runs[1], site.runs[2]
    assert [r for r in third["records"] if r["type"] == "response"] == []
    assert {line["change"] for line in third["lines"].values()} == {"unchanged"}
    assert {u: (e["decision"], e["cluster_id"]) for u, e in third["lines"].items()} == {
        u: (e["decision"], e["cluster_id"]) for u, e in second["lines"].items()}


def test_recluster_diff_after_a_recrawl_has_nothing_to_report(site):
    proc = neardup("recluster", "--store", str(site.store), "--diff", "--json")
    assert proc.returncode == 0, proc.stderr
    diff = json.loads(proc.stdout)
    assert diff["now_dropped"] == [] and diff["now_kept"] == []
    assert diff["compared"] == sum(1 for p in site.pages if p.v2 is not None) + 1


@pytest.mark.slow
def test_pywb_replays_every_kept_and_mirrored_page_as_its_latest_bytes(site, tmp_path):
    warcs = sorted((site.store / "pages").glob("pages-*.warc.gz"))
    latest = site.runs[-1]["lines"]
    table = routes(site.pages, 2)
    replayed = 0
    with replay(warcs, tmp_path) as base:
        for url, line in sorted(latest.items()):
            path = url.removeprefix(site.base)
            mirrored = line["decision"] == "exact_duplicate" and any(
                r["url"] == url for r in site.runs[-1]["records"])
            if line["decision"] != "kept" and not mirrored:
                continue
            status, body = raw(base, url)
            assert (status, body) == (200, table[path].body_bytes()), path
            replayed += 1
    assert replayed == 12 + 2  # the kept pages of the site's second version, and its mirrors


def _kill_after(proc: subprocess.Popen[str], store: Path, decisions: int) -> None:
    """SIGKILL the crawl once ``decisions`` lines of its run are in the log."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(_run_lines(store, 2))) >= decisions:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def _run_lines(store: Path, crawl_run: int) -> Iterator[dict[str, Any]]:
    if (store / "logs").is_dir():
        yield from (e for e in read_log(store / "logs") if e.get("crawl_run") == crawl_run)


@pytest.mark.slow
def test_a_recrawl_killed_mid_way_resumes_to_the_same_classification(tmp_path):
    site = Site(tmp_path / "store")
    site.crawl(1)
    slow = {path: _slowed(route) for path, route in routes(site.pages, 2).items()}
    with serve(slow, port=site.port):
        command = [sys.executable, "-m", "crawler.cli", "crawl", site.base + "/", "--store",
                   str(site.store), "--json", "--quiet", *OPTIONS]  # fmt: skip
        proc = subprocess.Popen(command, cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        _kill_after(proc, site.store, decisions=8)
    assert 0 < len(list(_run_lines(site.store, 2))) < 19, "the kill came too late or too soon"
    # the report says its counts are the killed run's part, not the site's
    report = neardup("report", "--store", str(site.store), "--json")
    assert report.returncode == 0, report.stderr
    facts = json.loads(report.stdout)["changes"]
    assert (facts["run"], facts["finished"]) == (2, False)
    html = site.store.parent / "report.html"
    assert neardup("report", "--store", str(site.store), "-o", str(html)).returncode == 0
    assert "Run 2 has not finished" in html.read_text(encoding="utf-8")
    resumed = site.crawl(2)  # the same command, once the kill is over
    assert resumed["summary"]["crawl_run"] == 2
    assert resumed["summary"]["already_decided"] > 0  # what the killed run committed
    assert resumed["summary"]["run_resumed"] is True  # its counts are this command's part
    resumed["lines"] = last_lines(site.store, 2)
    _check_second_run(site, resumed, site.runs[0])
    assert verify_store(site.store).ok


COPIES = ("/copy-1.html", "/copy-2.html")


class CopiesSite:
    """An index, a page and two copies of it on one port, crawled into one store: the copies
    answer 0.5 s after the page (or the page after them), the three asked for at once."""

    def __init__(self, tmp_path: Path) -> None:
        article = next(iter(read_articles().values()))
        self.v1 = html_page(article.title, article.paragraphs)
        self.v2 = html_page(article.title, article.paragraphs,
                            "<p>One sentence more for the members.</p>")  # fmt: skip
        self.index = html_page("Index", ("The pages.",), "".join(
            f'<a href="{path}">{path}</a>' for path in ("/page.html", *COPIES)))  # fmt: skip
        self.port = _port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.store = tmp_path / "store"

    def crawl(self, page: str | Route, copies: str | Route, late: str = "copies") -> dict[str, Any]:
        """One crawl of the site; a page given as a body answers 200 with an ETag."""
        slow = COPIES if late == "copies" else ("/page.html",)

        def route(page: str | Route) -> Route:
            return Route(body=page, etag="auto") if isinstance(page, str) else page

        table = {"/": Route(body=self.index, etag="auto"), "/page.html": route(page),
                 **{path: route(copies) for path in COPIES}}  # fmt: skip
        table = {path: replace(route, delay=0.5) if path in slow else route
                 for path, route in table.items()}  # fmt: skip
        with serve(table, port=self.port):
            proc = neardup("crawl", self.base + "/", "--store", str(self.store), "--json",
                           *OPTIONS, "--set", "crawl.concurrency=4")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    def lines(self, crawl_run: int) -> dict[str, list[dict[str, Any]]]:
        """The run's log lines of each path, in order."""
        by_path: dict[str, list[dict[str, Any]]] = {}
        for entry in read_log(self.store / "logs"):
            if entry.get("crawl_run") == crawl_run:
                by_path.setdefault(entry["url"].removeprefix(self.base), []).append(entry)
        return by_path


def _decisions(summary: dict[str, Any]) -> dict[str, int]:
    return {kind: n for kind, n in summary["decisions"].items() if n}


@pytest.mark.slow
@pytest.mark.parametrize("late", ["copies", "page"])
def test_copies_of_a_changed_page_are_decided_again_once_and_keep_that_decision(tmp_path, late):
    """Two identical copies of a page that changes a little: both are decided again right
    after it (one a near duplicate of it, the other an exact duplicate of the first copy).
    Their own requests, answered with 304s later in the run, change none of that; answered
    before the page, they are decided as unchanged first. Either way the summary counts four
    pages, each with its last decision."""
    site = CopiesSite(tmp_path)
    base, store = site.base, site.store
    site.crawl(site.v1, site.v1)  # the page kept, the copies its duplicates
    written_before = len(warc_records(store))
    summary = site.crawl(site.v2, site.v1, late=late)
    assert summary["decided"] == 4, summary
    assert _decisions(summary) == {"kept": 2, "exact_duplicate": 1, "near_duplicate": 1}, summary
    assert summary["changes"] == {"new": 0, "unchanged": 3, "changed": 1, "gone": 0,
                                  "redecided": 2}, summary  # fmt: skip
    second = site.lines(2)
    lines = [second[path] for path in COPIES]
    if late == "page":  # first as they were, unchanged
        assert [e[0]["change"] for e in lines] == ["unchanged"] * 2, second
        lines = [e[1:] for e in lines]
    # whichever copy the first crawl decided first is the near duplicate of the changed page
    first, other = sorted(lines, key=lambda e: e[0]["decision"] != "near_duplicate")
    assert [e["decision"] for e in first] == ["near_duplicate"], first
    assert [e["decision"] for e in other] == ["exact_duplicate"], other
    assert first[0]["redecided"] and other[0]["redecided"]
    assert other[0]["duplicate_of"] == first[0]["url"] and other[0]["resemblance"] == 1.0
    # no record of this run claims a copy's payload is the changed page's: a copy's revisit
    # refers to the page as the first crawl captured it, or there is none
    records = warc_records(store)
    first_run = {r["date"] for r in records[:written_before] if r["url"] == base + "/page.html"}
    claims = [r for r in records[written_before:] if r["url"] in {base + p for p in COPIES}
              and r["refers_to"] == base + "/page.html"]  # fmt: skip
    assert all(r["refers_to_date"] in first_run for r in claims), (first_run, claims)
    assert len(claims) == (2 if late == "page" else 0), claims
    assert verify_store(store).ok


@pytest.mark.slow
def test_copies_that_changed_with_their_page_are_decided_by_what_they_serve_now(tmp_path):
    """A change to every page (a template's): the copies, decided again from their old
    content right after the page, are decided once more when their own new bodies come, and
    end the run as exact duplicates of the page; the summary counts four pages."""
    site = CopiesSite(tmp_path)
    site.crawl(site.v1, site.v1)
    summary = site.crawl(site.v2, site.v2)
    assert summary["decided"] == 4, summary
    assert _decisions(summary) == {"kept": 2, "exact_duplicate": 2}, summary
    assert summary["changes"] == {"new": 0, "unchanged": 1, "changed": 3, "gone": 0,
                                  "redecided": 2}, summary  # fmt: skip
    second = site.lines(2)
    for path in COPIES:
        last = second[path][-1]
        assert (last["decision"], last["change"]) == ("exact_duplicate", "changed"), second[path]
        assert last["duplicate_of"] == site.base + "/page.html", last
    assert verify_store(site.store).ok
    # each copy is one more duplicate in a row in each run (the spider-trap budget), decided
    # twice in this one or not: the second of its cluster now, as it was the first before
    with Store.open(site.store, readonly=True) as store:
        for path in COPIES:
            state = store.history.get(url_key(site.base + path))
            assert state.duplicate_run == (second[path][-1]["cluster_id"], 2), path


@pytest.mark.slow
@pytest.mark.parametrize(("status", "late"), [(404, "copies"), (403, "copies"), (404, "page")])
def test_copies_that_went_with_their_page_are_skipped_and_none_is_kept(tmp_path, status, late):
    """A page and its two copies all go: a section taken off a site (404), or links a server
    refuses once their target went (Apache answers 403 for a symbolic link left dangling).
    The copies, decided again from their old content right after the page, one of them kept,
    are skipped when their own answers come: none is kept, none is left in a cluster, and
    the summary and ``neardup log --change`` count three pages that went."""
    site = CopiesSite(tmp_path)
    site.crawl(site.v1, site.v1)
    went = Route(status=status, body="not here")
    summary = site.crawl(went, went, late=late)
    change = "gone" if status == 404 else "changed"
    assert summary["decided"] == 4, summary
    assert _decisions(summary) == {"kept": 1, "skipped": 3}, summary
    changes = {**summary["changes"], "redecided": 0}
    assert changes == {"new": 0, "unchanged": 1, "changed": 0, "gone": 0, "redecided": 0,
                       change: 3}, summary  # fmt: skip
    second = site.lines(2)
    for path in ("/page.html", *COPIES):
        last = second[path][-1]
        assert (last["decision"], last["reason"], last["change"]) == (
            "skipped", f"http_{status}", change), second[path]
    with Store.open(site.store, readonly=True) as store:
        for path in ("/page.html", *COPIES):
            record = store.document(store.find_url(site.base + path))
            assert (record.decision, record.cluster_id, record.page) == ("skipped", None, None)
    assert verify_store(site.store).ok
    proc = neardup("log", "--store", str(site.store), "--run", "2", "--change", change, "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {json.loads(line)["url"] for line in proc.stdout.splitlines()}
    assert listed == {site.base + path for path in ("/page.html", *COPIES)}, proc.stdout


@pytest.mark.slow
def test_a_page_that_failed_once_is_fetched_whole_when_it_comes_back(tmp_path):
    """A kept page answers 404 in one run and comes back with the same bytes in the next: it is
    asked for without the validators of its first response (a 304 would confirm content the
    store no longer holds for it), kept again and archived. A page skipped for what it is
    (not HTML) is asked for whole each run too, and keeps its reason."""
    article = next(iter(read_articles().values()))
    page = html_page(article.title, article.paragraphs)
    index = html_page("Index", ("The pages.",), '<a href="/back.html">back</a>'
                                                '<a href="/notes.txt">notes</a>')  # fmt: skip
    text = (("Content-Type", "text/plain"),)
    port = _port()
    base, store = f"http://127.0.0.1:{port}", tmp_path / "store"
    runs = []
    for back in (Route(body=page, etag="auto"), Route(status=404, body="gone"),
                 Route(body=page, etag="auto")):  # fmt: skip
        table = {"/": Route(body=index, etag="auto"), "/back.html": back,
                 "/notes.txt": Route(headers=text, body="plain notes", etag="auto")}  # fmt: skip
        exchanges: list[Exchange] = []
        before = len(warc_records(store)) if store.exists() else 0
        with serve(table, port=port, exchanges=exchanges):
            proc = neardup("crawl", base + "/", "--store", str(store), "--json", *OPTIONS)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
        runs.append({"asked": {e.path: e for e in exchanges},
                     "lines": last_lines(store, summary["crawl_run"]),
                     "records": warc_records(store)[before:]})  # fmt: skip
    gone, back = runs[1], runs[2]
    assert gone["lines"][base + "/back.html"]["reason"] == "http_404"
    assert back["asked"]["/back.html"].if_none_match is None
    assert back["asked"]["/back.html"].status == 200
    line = back["lines"][base + "/back.html"]
    assert (line["decision"], line["change"]) == ("kept", "changed"), line
    assert [r["type"] for r in back["records"] if r["url"] == base + "/back.html"] == ["response"]
    for run in runs:
        notes = run["lines"][base + "/notes.txt"]
        assert (notes["decision"], notes["reason"]) == ("skipped", "not_html"), notes
        assert run["asked"]["/notes.txt"].if_none_match is None
    assert verify_store(store).ok


def test_an_exact_duplicate_names_the_page_it_is_identical_to_in_every_run(tmp_path):
    """A near copy of an article is kept first, the article joins its cluster, and a page
    identical to the article is an exact duplicate of the article, not of the cluster's
    representative: resemblance 1 and every sketch entry matching, in the run that decided
    it and in the next, where it is unchanged."""
    article = next(iter(read_articles().values()))
    near = html_page(article.title, article.paragraphs, "<p>One sentence more.</p>")
    same = html_page(article.title, article.paragraphs)
    paths = ("/near.html", "/article.html", "/same.html")
    index = html_page("Index", ("The pages.",), "".join(f'<a href="{p}">{p}</a>' for p in paths))
    table = {"/": Route(body=index, etag="auto"), "/near.html": Route(body=near, etag="auto"),
             "/article.html": Route(body=same, etag="auto"),
             "/same.html": Route(body=same, etag="auto")}  # fmt: skip
    port = _port()
    base, store = f"http://127.0.0.1:{port}", tmp_path / "store"
    for crawl_run, change in ((1, "new"), (2, "unchanged")):
        with serve(table, port=port):
            proc = neardup("crawl", base + "/", "--store", str(store), "--json", *OPTIONS)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = last_lines(store, crawl_run)
        assert lines[base + "/article.html"]["duplicate_of"] == base + "/near.html"
        line = lines[base + "/same.html"]
        assert (line["decision"], line["change"]) == ("exact_duplicate", change), line
        assert line["duplicate_of"] == base + "/article.html", line
        assert line["resemblance"] == 1.0 and line["matches"] == line["sample_size"] > 0, line


@pytest.mark.slow
def test_a_page_kept_again_after_its_original_went_changed_on_every_line_of_its_run(tmp_path):
    """A kept page becomes a copy of another kept page, which then answers 404: the copy is
    dropped as an exact duplicate, decided again and kept, and fetched in full. Those two later
    lines say ``unchanged`` (nothing new came for them), yet the URL changed in the run:
    ``neardup log --change changed`` lists all three lines, ``--change unchanged`` none."""
    first, second = list(read_articles().values())[:2]
    index = html_page("Index", ("The pages.",), '<a href="/copy.html">copy</a>'
                                                '<a href="/original.html">original</a>')  # fmt: skip
    original = html_page(second.title, second.paragraphs)
    port = _port()
    base, store = f"http://127.0.0.1:{port}", tmp_path / "store"
    for copy, went in ((html_page(first.title, first.paragraphs), False), (original, True)):
        table = {"/": Route(body=index, etag="auto"), "/copy.html": Route(body=copy, etag="auto"),
                 "/original.html": Route(status=404, body="gone") if went
                 else Route(body=original, etag="auto")}  # fmt: skip
        with serve(table, port=port):
            proc = neardup("crawl", base + "/", "--store", str(store), "--json", *OPTIONS)
        assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["changes"] == {"new": 0, "unchanged": 1, "changed": 1, "gone": 1,
                                  "redecided": 1}, summary  # fmt: skip
    written = [line for line in read_log(store / "logs")
               if line.get("crawl_run") == 2 and line["url"] == base + "/copy.html"]  # fmt: skip
    assert [(e["decision"], e["change"]) for e in written] == [
        ("exact_duplicate", "changed"), ("kept", "unchanged"), ("kept", "unchanged")], written

    def listed(change: str) -> list[dict[str, Any]]:
        proc = neardup("log", "--store", str(store), "--run", "2", "--change", change, "--json")
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]

    lines = [(e["time"], e["decision"]) for e in listed("changed") if e["url"] == base + "/copy.html"]
    assert lines == [(e["time"], e["decision"]) for e in written]
    assert [e["url"] for e in listed("unchanged")] == [base + "/"]
    proc = neardup("log", "--store", str(store), "--run", "2", "--change", "changed",
                   "--width", "200")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    column = [re.search(r"(\S+)( [\d.]+)?$", line).group(1)  # type: ignore[union-attr]
              for line in proc.stdout.splitlines() if "/copy.html" in line]  # fmt: skip
    assert column == ["changed", "re-decided", "changed"], proc.stdout
    # the report: the page changed, by as much as its first line of the run says, and is kept
    report = neardup("report", "--store", str(store), "--json")
    assert report.returncode == 0, report.stderr
    changes = json.loads(report.stdout)["changes"]
    assert changes["counts"] == {"new": 0, "unchanged": 1, "changed": 1, "gone": 1}, changes
    assert [(p["url"], p["change_resemblance"]) for p in changes["changed_most"]] == [
        (base + "/copy.html", written[0]["change_resemblance"])], changes


def test_a_recrawl_follows_links_no_deeper_than_max_depth(tmp_path):
    """With ``crawl.max_depth=1`` a crawl reads the start page and the pages it links to, not
    what those link to. A page of depth 1 that changed is read whole in the next run, and its
    links are still at depth 2: not followed, however many runs come."""
    first, second = list(read_articles().values())[:2]
    port = _port()
    base, store = f"http://127.0.0.1:{port}", tmp_path / "store"
    index = html_page("Index", ("The pages.",), '<a href="/near.html">near</a>')
    far = Route(body=html_page(second.title, second.paragraphs), etag="auto")
    asked: list[list[str]] = []
    for extra in ("", "<p>One paragraph more.</p>", "<p>And one more.</p>"):
        near = html_page(first.title, first.paragraphs, extra + '<a href="/far.html">far</a>')
        table = {"/": Route(body=index, etag="auto"), "/near.html": Route(body=near, etag="auto"),
                 "/far.html": far}  # fmt: skip
        exchanges: list[Exchange] = []
        with serve(table, port=port, exchanges=exchanges):
            proc = neardup("crawl", base + "/", "--store", str(store), "--json", *OPTIONS,
                           "--set", "crawl.max_depth=1")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        asked.append(sorted({e.path for e in exchanges} - {"/robots.txt"}))
        assert json.loads(proc.stdout)["changes"]["changed"] == (1 if extra else 0)
    assert asked == [["/", "/near.html"]] * 3, asked


def _slowed(route: Any) -> Any:
    return replace(route, delay=0.15)


def test_the_review_commands_say_what_changed(site):
    """After the second crawl (the third changed nothing): log filters by change, report
    counts the changes and lists what moved."""
    proc = neardup("log", "--store", str(site.store), "--run", "2", "--change", "changed", "--json")
    assert proc.returncode == 0, proc.stderr
    changed = {json.loads(line)["url"] for line in proc.stdout.splitlines()}
    expected = {site.url(p) for p in site.pages if p.second.change == "changed"} | {site.url("/")}
    assert changed == expected
    report = neardup("report", "--store", str(site.store), "--json")
    assert report.returncode == 0, report.stderr
    facts = json.loads(report.stdout)["changes"]
    assert facts["run"] == 3 and facts["counts"]["unchanged"] == len(site.runs[2]["lines"])
    assert facts["finished"] is True
