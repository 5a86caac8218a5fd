"""Spider traps end on their own, with the default settings, and a mirror is still crawled.

The site is the demo site (30 real pages, each with its known decision in TRUTH.json) with
three things added, each reached from the home page:

* an endless calendar: ``/calendar/YYYY-MM.html``, every month the same text but for the month,
  each linking to the month before and after;
* endless session ids: ``/s/<id>/home.html``, the same page whatever the id, linking to two
  new ids;
* a mirror of the whole site under ``/copy/`` (every page, its links rewritten to stay in the
  copy), with one new page found only through it.

Crawls run as users run them (``neardup crawl``, a child process) against a server this process
starts on 127.0.0.1; the server answers any month and any session id, so only the crawl can end
the traps.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crawler.demo import SITE_DIR, load_truth
from crawler.demo.build import body_html, page_html, read_articles
from storage.log import read_log
from storage.verify import verify_store
from tests.crawler.test_faults import ROOT, child_env

HTML = "text/html; charset=utf-8"
CALENDAR = re.compile(r"^/calendar/(\d{4})-(\d{2})\.html$")
SESSION = re.compile(r"^/s/[0-9a-z]+/home\.html$")
MONTHS = ("January February March April May June July August September October November "
          "December").split()  # fmt: skip
NEW_PAGE = "/copy/walks/new-walk.html"


def _text(paragraph: int, first: int, count: int = 4) -> tuple[str, ...]:
    """Real text no demo page has whole: one paragraph from each of ``count`` articles."""
    articles = [a for a in read_articles().values() if len(a.paragraphs) > paragraph]
    return tuple(a.paragraphs[paragraph] for a in articles[first : first + count])


def calendar_page(year: int, month: int) -> bytes:
    before = (year, month - 1) if month > 1 else (year - 1, 12)
    after = (year, month + 1) if month < 12 else (year + 1, 1)
    earlier, later = (f"/calendar/{y:04d}-{m:02d}.html" for y, m in (before, after))
    links = (f'<p><a href="{earlier}">Previous month</a> '
             f'<a href="{later}">Next month</a></p>')  # fmt: skip
    title = f"Club calendar: {MONTHS[month - 1]} {year}"
    return page_html(title, body_html(_text(1, 0)) + links).encode()


def session_page() -> bytes:
    new = [uuid.uuid4().hex[:12] for _ in range(2)]
    links = (f'<p><a href="/s/{new[0]}/home.html">Members home</a> '
             f'<a href="/s/{new[1]}/home.html">Refresh</a></p>')  # fmt: skip
    return page_html("Members home", body_html(_text(2, 4)) + links).encode()


def new_page() -> bytes:
    return page_html("A new walk", body_html(_text(0, 8))).encode()


def _copied(data: bytes) -> bytes:
    """A page of the site as the mirror serves it: its links kept inside the mirror."""
    return data.replace(b'href="/', b'href="/copy/')


class TrapSite(BaseHTTPRequestHandler):
    """The demo site, its traps and its mirror (module doc); paths asked for are recorded."""

    requests: list[str]

    def do_GET(self) -> None:
        self.requests.append(self.path)
        body = self._body(self.path.split("?", 1)[0])
        if body is None:
            self.send_response(404)
            body = b"<html><body><p>not here</p></body></html>"
            kind = HTML
        else:
            body, kind = body
            self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self, path: str) -> tuple[bytes, str] | None:
        if (month := CALENDAR.match(path)) and 1 <= int(month.group(2)) <= 12:
            return calendar_page(int(month.group(1)), int(month.group(2))), HTML
        if SESSION.match(path):
            return session_page(), HTML
        if path == NEW_PAGE:
            return new_page(), HTML
        copy = path.startswith("/copy/")
        file = _site_file(path.removeprefix("/copy") if copy else path)
        if file is None or (copy and (file.suffix != ".html" or "private" in file.parts)):
            return None  # the mirror copies the pages robots.txt lets a crawler see
        data = file.read_bytes()
        kind = {".html": HTML, ".txt": "text/plain", ".png": "image/png",
                ".pdf": "application/pdf"}.get(file.suffix, "application/octet-stream")  # fmt: skip
        if file.suffix != ".html":
            return data, kind
        if path == "/":  # the home page leads into the traps
            entries = (b'<p><a href="/calendar/2024-06.html">Club calendar</a> '
                       b'<a href="/s/start/home.html">Members</a></p></body>')  # fmt: skip
            data = data.replace(b"</body>", entries, 1)
        if path == "/sitemap.html":  # and the site map into the mirror
            data = data.replace(b"</body>", b'<p><a href="/copy/">The site, mirrored</a></p>'
                                b"</body>", 1)  # fmt: skip
        if copy:
            data = _copied(data)
            if path == "/copy/walks/winter-night-walk.html":
                data = data.replace(b"</body>", f'<p><a href="{NEW_PAGE}">A new walk</a></p>'
                                    "</body>".encode(), 1)  # fmt: skip
        return data, kind

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass


def _site_file(path: str) -> Path | None:
    relative = path.lstrip("/")
    file = SITE_DIR / (relative + "index.html" if path.endswith("/") else relative)
    return file if file.is_file() and SITE_DIR in file.resolve().parents else None


@pytest.fixture
def trap_site() -> Iterator[tuple[str, list[str]]]:
    requests: list[str] = []
    handler = type("Handler", (TrapSite,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


def crawl(base: str, store: Path, *options: str, timeout: float = 90) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "crawler.cli", "crawl", base + "/", "--store",
                           str(store), "--json", *options], check=False, cwd=ROOT,
                          env=child_env(), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def trap_requests(requests: list[str]) -> list[str]:
    return [p for p in requests if p.startswith(("/calendar/", "/s/"))]


def decisions(store: Path, base: str) -> dict[str, dict[str, Any]]:
    return {e["url"].removeprefix(base): e for e in read_log(store / "logs")}


def test_traps_end_by_themselves_with_the_defaults(trap_site, tmp_path):
    base, requests = trap_site
    store = tmp_path / "store"
    summary = crawl(base, store)  # no option: the built-in defaults
    assert summary["reason"] == "finished"
    traps = trap_requests(requests)
    assert 0 < len(traps) <= 40, len(traps)  # the crawl fetched 37,736 and went on
    assert summary["links_not_followed"]["duplicate_budget"] > 0
    decided = decisions(store, base)
    # every real page is kept: itself, or (8 requests at a time, a copy may come first) one of
    # its copies, in the site's own mirror or in /copy/; the mirror-only page is found
    truth = load_truth()["pages"]
    kept = {e["cluster_id"]: p for p, e in decided.items() if e["decision"] == "kept"}
    for path, page in truth.items():
        if page["kind"] in ("original", "printable"):
            held = kept[decided[path]["cluster_id"]].removeprefix("/copy")
            assert held == path or truth[held].get("of") == path, (path, held)
    assert decided[NEW_PAGE]["decision"] == "kept"
    real = sum(p["kind"] in ("original", "printable") for p in truth.values())
    assert summary["decisions"]["kept"] == real + 1 + 2  # the new page, each trap's first
    # the mirror was crawled to its end, each page of it in the cluster of the page it copies
    # (which of the two is kept is the one decided first: the count above says one of them)
    copies = {p: p.removeprefix("/copy") for p in decided if p.startswith("/copy/")}
    del copies[NEW_PAGE]
    assert len(copies) >= 25
    assert all(decided[p]["cluster_id"] == decided[o]["cluster_id"] for p, o in copies.items())
    # each trap kept once; the pages whose links were held back say so in their log line
    trap_lines = [e for p, e in decided.items() if p.startswith(("/calendar/", "/s/"))]
    assert sum(e["decision"] == "kept" for e in trap_lines) == 2
    held = [e for e in trap_lines if e.get("links_not_followed")]
    assert held and all(e["decision"] != "kept" for e in held)
    assert sum(e["links_not_followed"] for e in held) == (
        summary["links_not_followed"]["duplicate_budget"]
    )
    assert verify_store(store).ok


@pytest.mark.slow
def test_a_budget_of_0_follows_no_duplicate_s_links_and_none_lets_the_traps_run(
    trap_site, tmp_path
):
    """The budget is what ends the traps, and what lets the crawl through the mirror."""
    base, requests = trap_site
    none = crawl(base, tmp_path / "zero", "--set", "crawl.duplicate_link_budget=0")
    decided = decisions(tmp_path / "zero", base)
    assert none["reason"] == "finished" and NEW_PAGE not in decided
    assert len(trap_requests(requests)) <= 6  # each trap's first page and its two links
    requests.clear()
    unbounded = crawl(base, tmp_path / "unbounded", "--set", "crawl.duplicate_link_budget=null",
                      "--set", "crawl.max_pages=200")  # fmt: skip
    assert unbounded["links_not_followed"]["duplicate_budget"] == 0
    # only max_pages stopped it: the traps took what the site did not
    assert len(trap_requests(requests)) >= 200 - 2 * 31 - 2


@pytest.mark.slow
def test_inline_work_and_a_repeated_crawl_stop_at_the_traps_too(trap_site, tmp_path):
    """The work on Scrapy's own thread gives the same drops; the next crawls of the store
    (recrawls, which request every URL the store knows) continue each trap page's run where
    the last left it, so each adds only the few session pages its new ids make."""
    base, requests = trap_site
    store = tmp_path / "store"
    first = crawl(base, store, "-s", "NEARDUP_WORKER=inline")
    assert first["reason"] == "finished" and len(trap_requests(requests)) <= 40
    assert first["links_not_followed"]["duplicate_budget"] > 0
    first_traps = len(trap_requests(requests))
    known = first["decided"]
    for _ in range(2):  # a recrawl, then another
        requests.clear()
        again = crawl(base, store)
        assert again["reason"] == "finished" and again["crawl_run"] > 1
        # every URL the store knows is requested again, once; the only new pages are the
        # session pages the kept entry page's new ids lead to, within the budget again
        assert len(requests) == len(set(requests))
        assert 0 < again["changes"]["new"] <= first_traps
        # (the pages decided again when the entry page they duplicate changed its links are
        # decided once: their own requests find them decided)
        assert again["decided"] == known + again["changes"]["new"]
        assert again["changes"]["redecided"] > 0
        known = again["decided"]


@pytest.mark.slow
def test_a_directory_linked_to_its_parent_ends_by_itself_with_the_defaults(tmp_path):
    """A directory that links to its parent through a symbolic link serves the site again at
    every depth; its short listings of / differ by their titles, so each is kept and no
    duplicate run grows. crawl.max_path_repeats ends it: with the defaults every real page is
    kept and no path repeats itself three times; without the path limits only
    crawl.max_pages stops the crawl (docs/crawling.md)."""
    from crawler.demo.server import serve

    docs = tmp_path / "site" / "docs"
    docs.mkdir(parents=True)
    truth = load_truth()["pages"]
    originals = [p for p, page in truth.items() if page["kind"] == "original"][:8]
    for n, path in enumerate(originals):
        (docs / f"page-{n}.html").write_bytes((SITE_DIR / path.lstrip("/")).read_bytes())
    (docs / "up").symlink_to("..")
    requests: list[str] = []
    with serve(tmp_path / "site", request_log=requests) as base:
        summary = crawl(base, tmp_path / "defaults")
        followed = list(requests)
        requests.clear()
        trapped = crawl(base, tmp_path / "unlimited", "--set", "crawl.max_path_repeats=0",
                        "--set", "crawl.max_path_segments=0", "--set", "crawl.max_pages=150")
    assert summary["reason"] == "finished" and summary["links_not_followed"]["max_pages"] == 0
    assert summary["links_not_followed"]["repeated_path"] > 0
    assert "/docs/up/docs/up/" in followed
    assert not [p for p in followed if "/docs/up/docs/up/docs/up/" in p]
    kept = {p for p, e in decisions(tmp_path / "defaults", base).items()
            if e["decision"] == "kept"}  # fmt: skip
    assert {f"/docs/page-{n}.html" for n in range(len(originals))} <= kept
    assert verify_store(tmp_path / "defaults").ok
    # the path limits are what end it: without them, only crawl.max_pages does
    assert trapped["decided"] == 150 and trapped["links_not_followed"]["max_pages"] > 0
    assert sum("/docs/up/docs/up/docs/up/" in p for p in requests) > 10
