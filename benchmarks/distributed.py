"""The distributed crawl measured: a crawl on two nodes against one, a decision in Redis against
one in LMDB, and what a kept page costs Redis in memory.

    python -m benchmarks.distributed [--pages 1500] [--redis redis://127.0.0.1:6379/0] [--json]
        [--crawl-pages 800 --crawl-hosts 24 --latency 0,0.1 --crawl-repeats 3]

**A crawl on one node and on two** (:func:`crawl_benchmark`). The Handbook Digest
(:mod:`benchmarks.crawl_site`: real sentences, a third of its pages copies of others) spread over
``--crawl-hosts`` loopback addresses, each page on the host its path hashes to and every link
naming that host, each response held ``--latency`` seconds (a network's round trip; 0: none,
the crawl is then bound by this machine's CPU). The real ``neardup crawl`` with the crawl's
default settings, from the site's home page, crawls it as: one machine's crawl (its LMDB index),
one node of a distributed crawl (``--frontier --node 1/1``: the Redis index, one node), and two
nodes on this same 2-core machine (``--node 1/2``, ``--node 2/2``, started together). A run's
rate is the pages decided over the time from the server's first request to its last response:
what the crawl sustains, without the fixed cost of starting Scrapy and of the end of the crawl,
which the wall time of the commands (start to the last exit) includes. The peers in turn,
``--crawl-repeats`` times; medians. Two nodes on one machine share its two cores with each
other, the server and Redis, so the ratio shows what a second node adds when fetching waits
on the network, and what it cannot add when the CPU is already busy; on K machines each node
has its own.

**Pages.** Real HTML pages (Debian's documentation, :mod:`benchmarks.corpus`), and for a third
of them a copy: an exact copy, or an edited one (:mod:`benchmarks.edits`), shuffled in after
their originals (:func:`planted_pages`). Every page is canonicalised and sketched once
(MIN_100, the crawl's defaults), so both indexes are given the same sketches in the same order.

**A decision** is what the crawl's work process pays per page for the index: ``decide`` and
``apply`` on the store's :class:`~storage.lmdb_index.LmdbIndex`, in write batches of the crawl's
size (64) whose commit (``sync``) is counted in the decision that triggers it; and
:meth:`storage.redis_index.RedisIndex.assign` (watch, read, decide, write, ``EXEC``, which
commits) against a ``redis-server`` on the loopback interface, started here with the AOF on,
once with ``appendfsync always`` (every acknowledged decision on disk: the setting the
distributed crawl's guarantees need) and once with ``everysec``. The same pages, in the same
order, in the same run, one index after the other and the three in turn ``--repeats`` times
(the machine's load moves); the medians over the repeats of p50, p99 and mean in microseconds,
the ratios to LMDB, and the CPU time Redis itself spent per decision (``INFO cpu``), which bounds
how many decisions a second one Redis core serves for all the nodes together. Every index must
take the same decisions (the benchmark checks it).

**Memory** is Redis's own count (``INFO memory``, ``used_memory``) before and after a run. The
real pages are few for the index's 2**20 buckets, so most buckets hold one entry and the
figure per kept page is the sparse case's; two synthetic runs of ``--scale`` pages measure the
steady state, with ``bucket_bits`` chosen as for a crawl of that size (about 100 postings a
bucket): distinct pages (every page kept: the cost of a kept page) and near copies of one page
(every page but the first dropped: the cost of a dropped page). Each page's key is a URL of
usual length, since the index records every page's key.

``--redis URL`` uses that server instead (it is flushed) for the one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dedup.canonical import html_joined_tokens
from dedup.cluster import GreedyClusterer
from dedup.document import Sketcher
from dedup.params import DedupParams, SketchParams
from dedup.sketches import Sketch
from storage.redis_index import DEFAULT_BUCKET_BITS

__all__ = ["HostedSite", "crawl_benchmark", "planted_pages", "sketched"]


def planted_pages(paths: Sequence[Path], *, seed: int = 5) -> list[tuple[str, bytes]]:
    """``(name, html)`` of the pages at ``paths``, and a copy of every third: an exact copy or
    an edited one, alternately, each placed at a random point after its original."""
    from benchmarks.edits import edit_page

    rng = random.Random(seed)
    vocabulary = ["harbour", "lantern", "meadow", "quarry", "orchard", "beacon", "ferry"]
    pages: list[tuple[str, bytes]] = []
    for n, path in enumerate(paths):
        body = path.read_bytes()
        pages.append((f"page/{n}", body))
        if n % 3 == 0:
            if n // 3 % 2 == 0:
                copy, name = body, f"page/{n}/copy"
            else:
                copy, _ = edit_page(body, rng, vocabulary)
                name = f"page/{n}/edited"
            pages.insert(rng.randint(len(pages), len(pages) + 2 * (n + 1)), (name, copy))
    return pages


def sketched(
    pages: Sequence[tuple[str, bytes]], params: SketchParams | None = None
) -> list[tuple[str, Sketch, int]]:
    """``(name, sketch, content_hash)`` of each page with tokens, in order."""
    sketcher = Sketcher(params or SketchParams())
    out = []
    for name, html in pages:
        tokens = html_joined_tokens(html)
        if len(tokens):
            made = sketcher.sketch(tokens)
            out.append((name, made.sketch, made.content_hash))
    return out


def _percentiles(seconds: list[float]) -> dict[str, float]:
    micro = sorted(s * 1e6 for s in seconds)
    return {
        "p50": round(statistics.median(micro), 1),
        "p99": round(micro[min(len(micro) - 1, int(0.99 * len(micro)))], 1),
        "mean": round(statistics.fmean(micro), 1),
    }


def _url(name: str) -> str:
    """A key of a URL's usual length for a page name (the index records each page's key)."""
    return f"https://docs.example.org/manual/en/{name}/index.html"


def _lmdb_run(docs: list[tuple[str, Sketch, int]], folder: Path, batch: int) -> tuple[list, list]:
    from storage.store import Store

    params = DedupParams()
    times, assignments = [], []
    with Store.open(folder / "store") as store:
        clusterer = GreedyClusterer(store.index, params)
        for start in range(0, len(docs), batch):
            with store.batch():
                for i in range(start, min(start + batch, len(docs))):
                    _, sketch, content_hash = docs[i]
                    began = time.perf_counter()
                    decision = clusterer.decide(sketch, content_hash)
                    assignments.append(clusterer.apply(i + 1, sketch, content_hash, decision))
                    times.append(time.perf_counter() - began)
                began = time.perf_counter()
            times[-1] += time.perf_counter() - began  # the commit, paid by the batch's last page
    return times, assignments


def _redis_run(
    docs: list[tuple[str, Sketch, int]], url: str, bucket_bits: int = DEFAULT_BUCKET_BITS
) -> dict[str, Any]:
    """Every page through RedisIndex.assign; its times, assignments and Redis's own counts."""
    import redis

    from storage.redis_index import RedisIndex

    client = redis.Redis.from_url(url)
    client.flushall()
    memory_before, cpu_before = _memory(client), _cpu(client)
    index = RedisIndex(client, "neardup:{bench}:index:", node=1, bucket_bits=bucket_bits)
    clusterer = GreedyClusterer(index, DedupParams())
    times, assignments, retries = [], [], 0
    for name, sketch, content_hash in docs:
        began = time.perf_counter()
        decided = index.assign(clusterer, _url(name), sketch, content_hash)
        times.append(time.perf_counter() - began)
        assignments.append(decided.assignment)
        retries += decided.attempts - 1
    result = {
        "times": times,
        "assignments": assignments,
        "memory": _memory(client) - memory_before,
        "cpu": _cpu(client) - cpu_before,
        "keys": int(client.dbsize()),
        "retries": retries,
    }
    client.close()
    return result


def _memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def _cpu(client: Any) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def _start_redis(folder: Path, fsync: str) -> tuple[subprocess.Popen[bytes], str]:
    """Debian's redis-server on a free loopback port, AOF on with ``appendfsync fsync``."""
    import socket

    import redis

    executable = shutil.which("redis-server")
    if executable is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = folder / f"redis-{fsync}"
    data.mkdir()
    process = subprocess.Popen(
        [executable, "--bind", "127.0.0.1", "--port", str(port), "--appendonly", "yes",
         "--appendfsync", fsync, "--save", "", "--dir", str(data)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 20
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return process, url
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.05)


def synthetic_pages(
    count: int, *, copies: bool = False, seed: int = 7
) -> list[tuple[str, Sketch, int]]:
    """``count`` pages: MIN_100 sketches of random shingle ids, all distinct (every page kept),
    or with ``copies`` a first page and near copies of it (every later page dropped)."""
    import numpy as np

    from dedup.sketches import MinSketch

    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, 400, np.uint64)
    pages = []
    for i in range(count):
        ids = rng.integers(0, 2**64, 400, np.uint64)
        if copies:
            ids = base.copy()
            ids[:8] = rng.integers(0, 2**64, 8, np.uint64)  # 8 of 400 shingles changed
        pages.append((f"site{i % 5000}/page-{i}", MinSketch.from_ids(ids, 100),
                      int(rng.integers(0, 2**63))))  # fmt: skip
    return pages


# --- a crawl on one node and on two ------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
#: the crawls compared: (name, nodes; None for one machine's crawl without Redis)
CRAWL_PEERS: tuple[tuple[str, int | None], ...] = (
    ("one machine (LMDB)", None), ("1 node (Redis)", 1), ("2 nodes (Redis)", 2),
)  # fmt: skip


class HostedSite:
    """``site``'s pages spread over ``hosts`` loopback addresses (127.0.0.2, ...): a page is
    served by the host its path hashes to (BLAKE2b), and every site link in it names that
    host, so a crawl goes from host to host. Each response waits ``latency`` seconds."""

    def __init__(self, site: Any, hosts: int, latency: float) -> None:
        import hashlib

        self.site = site
        self.latency = latency
        self.hosts = [f"127.0.0.{i}" for i in range(2, 2 + hosts)]
        self.home: dict[str, int] = {}
        for page in site.pages:
            digest = hashlib.blake2b(page.path.encode(), digest_size=8).digest()
            self.home[page.path] = int.from_bytes(digest, "big") % hosts
        self.bases: list[str] = []
        self.served: dict[tuple[int, str], bytes] = {}
        self.first = self.last = 0.0

    def start_url(self) -> str:
        return f"{self.bases[self.home['/']]}/"

    def reset(self) -> None:
        self.first = self.last = 0.0

    def _rewritten(self, data: bytes) -> bytes:
        import re

        def absolute(match: re.Match[bytes]) -> bytes:
            path = match.group(2).decode()
            where = self.home.get(path.split("#")[0].split("?")[0])
            if where is None:
                return match.group(0)
            return match.group(1) + self.bases[where].encode() + match.group(2)

        return re.sub(rb'(href=")(/[^"]*)', absolute, data)

    def __enter__(self) -> HostedSite:
        from http.server import BaseHTTPRequestHandler

        from crawler.demo.server import serve_hosts

        hosted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                now = time.monotonic()
                hosted.first = hosted.first or now
                if hosted.latency:
                    time.sleep(hosted.latency)
                host = hosted.hosts.index(self.server.server_address[0])
                data = hosted.served.get((host, self.path))
                if self.path == "/robots.txt":
                    from benchmarks.crawl_site import ROBOTS

                    data = ROBOTS
                self.send_response(200 if data is not None else 404)
                kind = "text/plain" if self.path == "/robots.txt" else "text/html; charset=utf-8"
                self.send_header("Content-Type", kind)
                body = data if data is not None else b"<p>not here</p>"
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass
                hosted.last = time.monotonic()

            def log_message(self, *args: Any) -> None:
                pass

        self._serving = contextlib.ExitStack()
        self.bases = self._serving.enter_context(serve_hosts(Handler, self.hosts))
        for page in self.site.pages:
            if page.kind != "robots_txt":
                self.served[(self.home[page.path], page.path)] = self._rewritten(page.data)
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.close()


def _crawl_run(hosted: HostedSite, nodes: int | None, redis_url: str, folder: Path,
               timeout: float) -> dict[str, Any]:  # fmt: skip
    """One crawl of the hosted site by ``nodes`` nodes (None: one machine's crawl), each node
    a ``neardup crawl`` process with a fresh store; pages decided, kept, span and wall time."""
    import os
    import uuid

    import redis

    if nodes is not None:
        redis.Redis.from_url(redis_url).flushall()
    hosted.reset()
    run = folder / uuid.uuid4().hex[:8]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    base = [sys.executable, "-m", "crawler.cli", "crawl", hosted.start_url(), "--quiet", "--json",
            "-s", "NEARDUP_ALLOWED_DOMAINS=" + ",".join(hosted.hosts)]  # fmt: skip
    commands = []
    for node in range(1, (nodes or 1) + 1):
        command = [*base, "--store", str(run / f"store-{node}")]
        if nodes is not None:
            command += ["--frontier", redis_url, "--node", f"{node}/{nodes}"]
        commands.append(command)
    started = time.monotonic()
    processes = [subprocess.Popen(c, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for c in commands]  # fmt: skip
    summaries = []
    for process in processes:
        out, err = process.communicate(timeout=timeout)
        if process.returncode != 0:
            raise SystemExit(f"a crawl failed ({process.returncode}): {err[-2000:]}")
        summaries.append(json.loads(out))
    wall = time.monotonic() - started
    shutil.rmtree(run, ignore_errors=True)
    decided = sum(s["decided"] for s in summaries)
    span = hosted.last - hosted.first
    return {
        "decided": decided,
        "kept": sum(s["decisions"]["kept"] for s in summaries),
        "per_node": [s["decided"] for s in summaries],
        "span": span,
        "pages_per_second": decided / span if span > 0 else 0.0,
        "wall": wall,
    }


def crawl_benchmark(args: argparse.Namespace, redis_url: str, folder: Path) -> dict[str, Any]:
    """Every peer of :data:`CRAWL_PEERS` at every latency, in turn, ``crawl_repeats`` times."""
    from benchmarks.crawl_site import build_site

    site = build_site(pages=args.crawl_pages, seed=5)
    latencies = [float(v) for v in str(args.latency).split(",") if v.strip()]
    result: dict[str, Any] = {"pages": len(site.html_pages), "hosts": args.crawl_hosts,
                              "text": site.text_source, "rows": []}  # fmt: skip
    for latency in latencies:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in CRAWL_PEERS}
        with HostedSite(site, args.crawl_hosts, latency) as hosted:
            for _ in range(args.crawl_repeats):
                for name, nodes in CRAWL_PEERS:
                    runs[name].append(_crawl_run(hosted, nodes, redis_url, folder, 900))
        for name, nodes in CRAWL_PEERS:
            done = runs[name]
            result["rows"].append({
                "latency": latency,
                "crawl": name,
                "nodes": nodes,
                "decided": statistics.median(r["decided"] for r in done),
                "kept": statistics.median(r["kept"] for r in done),
                "per_node": done[-1]["per_node"],
                "pages_per_second": round(statistics.median(r["pages_per_second"] for r in done), 1),
                "span": round(statistics.median(r["span"] for r in done), 2),
                "wall": round(statistics.median(r["wall"] for r in done), 2),
            })  # fmt: skip
        one = next(r for r in result["rows"] if r["latency"] == latency and r["nodes"] == 1)
        for row in result["rows"]:
            if row["latency"] == latency:
                rate = one["pages_per_second"]
                row["ratio_to_one_node"] = round(row["pages_per_second"] / rate, 2) if rate else None
    return result


def _crawl_table(found: dict[str, Any]) -> list[str]:
    lines = [
        f"a crawl of {found['pages']} pages on {found['hosts']} hosts ({found['text']}); "
        "medians",
        "",
        "| latency | crawl              | pages | kept | pages/s | x 1 node | crawling s | wall s |",
        "|--------:|--------------------|------:|-----:|--------:|---------:|-----------:|-------:|",
    ]
    for row in found["rows"]:
        lines.append(
            f"| {row['latency'] * 1000:>5.0f}ms | {row['crawl']:<18} | {row['decided']:>5.0f} "
            f"| {row['kept']:>4.0f} | {row['pages_per_second']:>7} | {row['ratio_to_one_node']:>7}x "
            f"| {row['span']:>10} | {row['wall']:>6} |"
        )
    return lines


def _median_of(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(row[key] for row in rows), 1) for key in rows[0]}


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.corpus import html_corpus
    from dedup.cluster import indexed_count

    paths = html_corpus(min_pages=args.pages)[: args.pages]
    docs = sketched(planted_pages(paths))
    runs: dict[str, Any] = {}
    lmdb_rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as tmp:
        folder = Path(tmp)
        servers = {}
        try:
            for fsync in ("always", "everysec") if args.redis is None else ("always",):
                servers[fsync] = _start_redis(folder, fsync) if args.redis is None else (
                    None, args.redis)
            # the peers in turn, several times over: the machine's load moves between them
            for repeat in range(args.repeats):
                store = folder / f"lmdb-{repeat}"
                lmdb_times, lmdb_assignments = _lmdb_run(docs, store, args.batch)
                lmdb_rows.append(_percentiles(lmdb_times))
                for fsync, (_, url) in servers.items():
                    found = _redis_run(docs, url)
                    if found["assignments"] != lmdb_assignments:
                        raise SystemExit("the two indexes decided differently: a bug")
                    rows = runs.get(fsync, {}).get("rows", [])
                    found["rows"] = [*rows, _percentiles(found["times"])]
                    runs[fsync] = found
            if args.crawl_pages:
                _, url = servers["always"]
                runs["crawl"] = crawl_benchmark(args, url, folder)
            if args.scale:
                _, url = servers["always"]
                # buckets about as full (some 100 postings) as a crawl of that size fills them
                postings = args.scale * indexed_count(100, DedupParams().threshold)
                bits = max(4, (postings // 100).bit_length() - 1)
                for run, copies in (("scale", False), ("copies", True)):
                    runs[run] = _redis_run(synthetic_pages(args.scale, copies=copies), url, bits)
                    runs[run]["bucket_bits"] = bits
        finally:
            for process, _ in servers.values():
                if process is not None:
                    process.terminate()
                    process.wait()
    kept = sum(a.representative for a in lmdb_assignments)
    lmdb = _median_of(lmdb_rows)
    result: dict[str, Any] = {
        "pages": len(docs),
        "kept": kept,
        "dropped": len(docs) - kept,
        "repeats": args.repeats,
        "given": args.redis is not None,
        "lmdb_us": lmdb,
    }
    if "crawl" in runs:
        result["crawl"] = runs.pop("crawl")
    for run, found in runs.items():
        times = _median_of(found["rows"]) if "rows" in found else _percentiles(found["times"])
        pages = len(found["times"])
        # per kept page, and for the run of copies (one page kept) per dropped page
        per = {"scale": pages, "copies": pages - 1}.get(run, kept)
        result[run] = {
            "pages": pages,
            "us": times,
            "ratio": {k: round(times[k] / lmdb[k], 1) for k in lmdb},
            "bytes_per_page": round(found["memory"] / per),
            "keys": found["keys"],
            "memory": found["memory"],
            "redis_cpu_us_per_decision": round(found["cpu"] / pages * 1e6, 1),
            "retries": found["retries"],
            **({"bucket_bits": found["bucket_bits"]} if "bucket_bits" in found else {}),
        }
    return result


def _table(result: dict[str, Any]) -> str:
    lines = [*_crawl_table(result["crawl"]), ""] if "crawl" in result else []
    lines += [
        (f"{result['pages']} real pages, {result['kept']} kept, {result['dropped']} dropped "
         f"(the same decisions on every index); medians of {result['repeats']} runs"),
        "",
        "| a decision (µs)                  |    p50 |    p99 |   mean | Redis CPU |",
        "|----------------------------------|-------:|-------:|-------:|----------:|",
    ]
    row = result["lmdb_us"]
    lines.append(f"| {'LMDB, local, batches of 64':<32} | {row['p50']:>6} | {row['p99']:>6} "
                 f"| {row['mean']:>6} |         - |")  # fmt: skip
    labels = {
        "always": "Redis, the given server" if result["given"] else "Redis, AOF fsync always",
        "everysec": "Redis, AOF fsync everysec",
        "scale": "Redis, always, distinct pages",
        "copies": "Redis, always, near copies",
    }
    for run in ("always", "everysec", "scale", "copies"):
        if run not in result:
            continue
        found = result[run]
        row = found["us"]
        lines.append(f"| {labels[run]:<32} | {row['p50']:>6} | {row['p99']:>6} | {row['mean']:>6} "
                     f"| {found['redis_cpu_us_per_decision']:>9} |")  # fmt: skip
    lines += ["", "| Redis / LMDB                     |    p50 |    p99 |   mean |",
              "|----------------------------------|-------:|-------:|-------:|"]  # fmt: skip
    for run in ("always", "everysec"):
        if run in result:
            ratio = result[run]["ratio"]
            lines.append(f"| {labels[run]:<32} | {ratio['p50']:>5}x | {ratio['p99']:>5}x "
                         f"| {ratio['mean']:>5}x |")  # fmt: skip
    lines += [
        "",
        "| Redis memory                              |  pages |   keys | bytes per page |",
        "|-------------------------------------------|-------:|-------:|---------------:|",
    ]
    for run, label in (("always", "real pages, per kept page"),
                       ("scale", "distinct pages, per kept page"),
                       ("copies", "near copies, per dropped page")):  # fmt: skip
        if run in result:
            found = result[run]
            if "bucket_bits" in found:
                label += f" ({found['bucket_bits']} bits)"
            lines.append(f"| {label:<41} | {found['pages']:>6} | {found['keys']:>6} "
                         f"| {found['bytes_per_page']:>14,} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=1500, help="real pages (copies are added)")
    parser.add_argument("--batch", type=int, default=64, help="LMDB decisions per commit")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each peer (medians)")
    parser.add_argument("--scale", type=int, default=20000,
                        help="distinct synthetic pages for memory at full buckets (0: skip)")
    parser.add_argument("--redis", help="a redis:// URL to use (flushed!) instead of starting one")
    parser.add_argument("--crawl-pages", type=int, default=800,
                        help="pages of the site crawled by one node and two (0: skip the crawls)")
    parser.add_argument("--crawl-hosts", type=int, default=24, help="hosts the site is spread over")
    parser.add_argument("--latency", default="0,0.1",
                        help="seconds each response waits, comma-separated: a row for each")
    parser.add_argument("--crawl-repeats", type=int, default=3, help="crawls of each peer (medians)")
    parser.add_argument("--json", action="store_true", help="print JSON, not the table")
    args = parser.parse_args(argv)
    result = benchmark(args)
    print(json.dumps(result, indent=2) if args.json else _table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
