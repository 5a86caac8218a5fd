"""A site on several hosts with copies across them, for crawls on several nodes, and the node
processes that crawl it with the real ``neardup crawl`` command.

Each host is a loopback address of its own (127.0.0.2, 127.0.0.3, ...: distinct hosts to
Scrapy, and to the frontier's partition), chosen so that every node owns some. Every host has
its original articles, each of some 300 words drawn at random, and copies of other hosts'
articles: byte-identical mirrors, near copies (one word of 300 changed: resemblance about 0.97) and related pages (the first half of an article, the rest new: resemblance
about 1/3), each on a host of another node. Pages link within their host and across hosts; one
link leads nowhere (404). The server logs every request with the host it came to, its path and
its User-Agent, which names the node that sent it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from crawler.demo.server import serve_hosts
from crawler.frontier.partition import node_of_host

ROOT = Path(__file__).resolve().parents[2]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def hosts_for(nodes: int, per_node: int) -> list[str]:
    """``per_node`` loopback addresses owned by each of the ``nodes`` nodes, interleaved (node
    1's first, node 2's first, ...), so that neighbouring hosts belong to different nodes."""
    owned: dict[int, list[str]] = {n: [] for n in range(1, nodes + 1)}
    for i in range(2, 255):
        host = f"127.0.0.{i}"
        mine = owned[node_of_host(host, nodes)]
        if len(mine) < per_node:
            mine.append(host)
        if all(len(v) == per_node for v in owned.values()):
            break
    return [owned[n][k] for k in range(per_node) for n in range(1, nodes + 1)]


@dataclass(frozen=True)
class Page:
    path: str
    words: tuple[str, ...]
    #: what it is: "original", "mirror", "near", "related"
    kind: str
    #: (host index, path) of the article it copies, for a copy
    source: tuple[int, str] | None = None


class MirrorSite:
    """``articles`` originals on each of ``hosts``, and copies of them on other hosts."""

    def __init__(self, hosts: list[str], *, articles: int = 6, seed: int = 11,
                 delay: float = 0.0) -> None:  # fmt: skip
        self.hosts = hosts
        self.delay = delay
        rng = random.Random(seed)
        vocabulary = ["".join(rng.choice(_LETTERS) for _ in range(rng.randint(3, 9)))
                      for _ in range(5000)]  # fmt: skip
        self.pages: list[dict[str, Page]] = [{} for _ in hosts]
        n = len(hosts)
        #: each host's index page has words of its own, so that no two are alike
        self.index_words = [tuple(rng.choice(vocabulary) for _ in range(80)) for _ in hosts]
        for h in range(n):
            for a in range(articles):
                words = tuple(rng.choice(vocabulary) for _ in range(300))
                self.pages[h][f"/a{a}.html"] = Page(f"/a{a}.html", words, "original")
        for h in range(n):
            originals = [(path, page) for path, page in self.pages[h].items()]
            # copies go to the next hosts, which belong to other nodes (hosts_for interleaves)
            for k, (path, page) in enumerate(originals):
                target = (h + 1 + k % 2) % n
                if k < 2:
                    kind, words = "mirror", page.words
                elif k < 4:
                    edited = list(page.words)
                    edited[len(edited) // 2] = rng.choice(vocabulary)
                    kind, words = "near", tuple(edited)
                elif k < 5:
                    half = len(page.words) // 2
                    kind = "related"
                    words = page.words[:half] + tuple(rng.choice(vocabulary) for _ in range(half))
                else:
                    continue
                copy = f"/copy-{h}-{k}.html"
                self.pages[target][copy] = Page(copy, words, kind, (h, path))
        self.log: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.bases: list[str] = []

    # --- what the site holds ---------------------------------------------------------------

    def body(self, h: int, path: str) -> str | None:
        n = len(self.hosts)
        if path == "/":
            links = [f"/{p.lstrip('/')}" for p in self.pages[h]]
            links += [f"{self.bases[(h + 1) % n]}/", f"{self.bases[(h + 2) % n]}/"]
            if h == 0:
                links.append("/gone.html")
            return _html(f"host {h}", self.index_words[h], links)
        page = self.pages[h].get(path)
        if page is None:
            return None
        # the body of a mirror is its original's, byte for byte: links and all
        if page.kind == "mirror" and page.source is not None:
            return self.body(*page.source)
        return _html("article", page.words, ["/"])

    def groups(self) -> list[tuple[str, set[str]]]:
        """(kind, URLs) of each article with its copy: "mirror" and "near" pairs, of which a
        crawl keeps exactly one page; "related" pairs, of which it keeps both."""
        found = []
        for h, pages in enumerate(self.pages):
            for path, page in pages.items():
                if page.source is not None:
                    found.append((page.kind, {self.url(h, path), self.url(*page.source)}))
        return found

    def url(self, h: int, path: str) -> str:
        return f"{self.bases[h]}{path}"

    def page_urls(self) -> set[str]:
        """Every URL with a page a crawl from the hosts' index pages must decide."""
        urls = {self.url(h, "/") for h in range(len(self.hosts))}
        urls |= {self.url(h, path) for h, pages in enumerate(self.pages) for path in pages}
        return urls

    def decided_urls(self) -> set[str]:
        """Every URL such a crawl decides: the pages, and the link that leads nowhere."""
        return self.page_urls() | {self.url(0, "/gone.html")}

    def fetched_urls(self) -> set[str]:
        """Every URL such a crawl must fetch: those it decides and each host's robots.txt."""
        return self.decided_urls() | {self.url(h, "/robots.txt") for h in range(len(self.hosts))}

    def words_of(self, url: str) -> tuple[str, ...] | None:
        for h, base in enumerate(self.bases):
            if url.startswith(base + "/"):
                page = self.pages[h].get(url[len(base):])
                if page is None:
                    return None
                if page.kind == "mirror" and page.source is not None:
                    return self.pages[page.source[0]][page.source[1]].words
                return page.words
        return None

    def fetches(self) -> Counter[str]:
        with self.lock:
            return Counter(f"{self.bases[self.hosts.index(h)]}{path}" for h, path, _ in self.log)

    def agents_by_host(self) -> dict[str, set[str]]:
        by_host: dict[str, set[str]] = {}
        with self.lock:
            for host, _, agent in self.log:
                by_host.setdefault(host, set()).add(agent)
        return by_host

    # --- serving ---------------------------------------------------------------------------

    @contextmanager
    def serving(self) -> Iterator[MirrorSite]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host = self.server.server_address[0]
                with site.lock:
                    site.log.append((host, self.path, self.headers.get("User-Agent", "")))
                if site.delay:
                    time.sleep(site.delay)
                body = site.body(site.hosts.index(host), self.path)
                data = (body if body is not None else _html("gone", ["not here"], [])).encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # a killed node hangs up
                    self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        with serve_hosts(Handler, self.hosts) as bases:
            self.bases[:] = bases
            yield self


def _html(title: str, words: tuple[str, ...] | list[str], links: list[str]) -> str:
    anchors = "".join(f'<li><a href="{link}">more</a></li>' for link in links)
    return (f"<!DOCTYPE html><html><head><title>{title}</title></head><body><main><p>"
            f"{' '.join(words)}</p></main><ul>{anchors}</ul></body></html>")  # fmt: skip


# --- the nodes ---------------------------------------------------------------------------------

#: the Scrapy settings of a test node: no waiting, no retries, a short settle, and a short
#: lease (what a node started again after a kill waits for)
NODE_SETTINGS = {
    "NEARDUP_THROTTLE_ENABLED": "False",
    "DOWNLOAD_DELAY": "0",
    "RETRY_ENABLED": "False",
    "DOWNLOAD_TIMEOUT": "10",
    "NEARDUP_FRONTIER_SETTLE": "0.5",
    "NEARDUP_FRONTIER_LEASE": "2",
}


def node_command(site: MirrorSite, redis_url: str, node: int, nodes: int, store: Path,
                 **settings: str) -> list[str]:  # fmt: skip
    """The command line of node ``node``: the real ``neardup crawl``, from every host's index
    (the start URLs are also the hosts the crawl may visit)."""
    command = [sys.executable, "-m", "crawler.cli", "crawl", *(f"{base}/" for base in site.bases),
               "--store", str(store), "--frontier", redis_url, "--node", f"{node}/{nodes}",
               "--quiet", "--json"]  # fmt: skip
    for name, value in {**NODE_SETTINGS, **settings}.items():
        command += ["-s", f"{name}={value}"]
    return command


def start_node(command: list[str], out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with out.open("ab") as sink:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)


def summary(out: Path) -> dict:
    """The last JSON summary a node printed into ``out``."""
    text = out.read_text()
    start = text.rfind("\n{")
    return json.loads(text[start + 1 if start >= 0 else 0:])
