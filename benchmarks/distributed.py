"""The distributed crawl's dedup index measured: a decision in Redis against one in LMDB, and
what a kept page costs Redis in memory.

    python -m benchmarks.distributed [--pages 1500] [--redis redis://127.0.0.1:6379/0] [--json]

**Pages.** Real HTML pages (Debian's documentation, :mod:`benchmarks.corpus`), and for a third
of them a copy: an exact copy, or an edited one (:mod:`benchmarks.edits`), shuffled in after
their originals (:func:`planted_pages`). Every page is canonicalised and sketched once
(MIN_100, the crawl's defaults), so both indexes are given the same sketches in the same order.

**A decision** is what the crawl's work process pays per page for the index: ``decide`` and
``apply`` on the store's :class:`~storage.lmdb_index.LmdbIndex`, in write batches of the crawl's
size (:data:`crawler.config` ``batch_size``, 64) whose commit is counted in the decision that
triggers it; :meth:`storage.redis_index.RedisIndex.assign` (watch, read, decide, write,
``EXEC``, which commits) against a ``redis-server`` on the loopback interface. The same pages,
the same run, one process each in turn; p50, p99 and mean in microseconds, and the ratio. Both
indexes must take the same decisions (the benchmark checks it).

**Memory** is Redis's own count (``INFO memory``, ``used_memory``) before and after the run,
divided by the pages kept; it includes the records of the dropped pages, which are part of what
a kept page brings with it in a crawl. Redis is started here (Debian's ``redis-server``, AOF
on, as the crawl runs it) unless ``--redis`` names one, which is then flushed.
"""

from __future__ import annotations

import argparse
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

__all__ = ["planted_pages", "sketched"]


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


def _redis_run(docs: list[tuple[str, Sketch, int]], url: str) -> dict[str, Any]:
    import redis

    from storage.redis_index import RedisIndex

    client = redis.Redis.from_url(url)
    client.flushall()
    before = int(client.info("memory")["used_memory"])
    index = RedisIndex(client, "bench:", node=1)
    clusterer = GreedyClusterer(index, DedupParams())
    times, assignments = [], []
    for name, sketch, content_hash in docs:
        began = time.perf_counter()
        assignments.append(index.assign(clusterer, name, sketch, content_hash).assignment)
        times.append(time.perf_counter() - began)
    after = int(client.info("memory")["used_memory"])
    keys = int(client.dbsize())
    client.close()
    return {"times": times, "assignments": assignments, "memory": after - before, "keys": keys}


def _start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    executable = shutil.which("redis-server")
    if executable is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [executable, "--bind", "127.0.0.1", "--port", str(port), "--appendonly", "yes",
         "--appendfsync", "always", "--save", "", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    import redis

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


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.corpus import html_corpus

    paths = html_corpus(min_pages=args.pages)[: args.pages]
    docs = sketched(planted_pages(paths))
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as tmp:
        folder = Path(tmp)
        process = None
        url = args.redis
        if url is None:
            process, url = _start_redis(folder)
        try:
            lmdb_times, lmdb_assignments = _lmdb_run(docs, folder, args.batch)
            redis_result = _redis_run(docs, url)
        finally:
            if process is not None:
                process.terminate()
                process.wait()
    if redis_result["assignments"] != lmdb_assignments:
        raise SystemExit("the two indexes decided differently: a bug")
    kept = sum(a.representative for a in lmdb_assignments)
    lmdb = _percentiles(lmdb_times)
    on_redis = _percentiles(redis_result["times"])
    return {
        "pages": len(docs),
        "kept": kept,
        "dropped": len(docs) - kept,
        "lmdb_us": lmdb,
        "redis_us": on_redis,
        "ratio": {k: round(on_redis[k] / lmdb[k], 2) for k in lmdb},
        "redis_bytes_per_kept_page": round(redis_result["memory"] / kept),
        "redis_keys": redis_result["keys"],
        "redis_memory": redis_result["memory"],
    }


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['pages']} pages, {result['kept']} kept, {result['dropped']} dropped "
        "(the same decisions on both indexes)",
        "",
        "| a decision (µs)  |    p50 |    p99 |   mean |",
        "|------------------|-------:|-------:|-------:|",
    ]
    for label, key in (("LMDB (local)", "lmdb_us"), ("Redis (loopback)", "redis_us")):
        row = result[key]
        lines.append(f"| {label:<16} | {row['p50']:>6} | {row['p99']:>6} | {row['mean']:>6} |")
    ratio = result["ratio"]
    lines.append(f"| Redis / LMDB     | {ratio['p50']:>5}x | {ratio['p99']:>5}x | {ratio['mean']:>5}x |")
    lines += [
        "",
        f"Redis memory: {result['redis_memory']:,} bytes in {result['redis_keys']:,} keys, "
        f"{result['redis_bytes_per_kept_page']:,} bytes per kept page",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=1500, help="real pages (copies are added)")
    parser.add_argument("--batch", type=int, default=64, help="LMDB decisions per commit")
    parser.add_argument("--redis", help="a redis:// URL to use (flushed!) instead of starting one")
    parser.add_argument("--json", action="store_true", help="print JSON, not the table")
    args = parser.parse_args(argv)
    result = benchmark(args)
    print(json.dumps(result, indent=2) if args.json else _table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
