"""The second crawl of a site against its first, in one run: what conditional requests save.

    python -m benchmarks.recrawl [--pages 2000] [--changed 0.1] [--repeats 3] [--json]

**The site** is :func:`benchmarks.crawl_site.build_site`'s (real sentences from Debian's
documentation on one template, a third of the pages copies of others), written to a temporary
directory and served on 127.0.0.1 by :func:`crawler.demo.server.serve`, whose file server
sends ``ETag`` and ``Last-Modified`` and answers a matching conditional request with 304, as a
real web server does.

*MB down* is what Scrapy downloaded (``downloader/response_bytes``: status lines, headers and
bodies), *MB bodies* the bodies alone, as the server counts them.

**The crawls**, each ``neardup crawl`` in a process of its own, on one store:

* **first**: the store's first crawl;
* **recrawl, unchanged**: the same command on the same store (its next crawl run): every URL the
  store knows is requested with its validators;
* **recrawl, N% changed**: after another first crawl, ``--changed`` of the articles get a
  sentence more (new bytes, a new modification time), then the recrawl;
* **recrawl, no validators** (``crawl.conditional_requests: false``): the unchanged recrawl
  with every body sent again, for what the validators save beyond the payload digest.

Each row is the median of ``--repeats`` rounds. **The goals** (issue of the recrawl): an
unchanged recrawl downloads at most 2% of the first crawl's bytes and takes at most 0.3× its
wall time.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.crawl_site import build_site
from crawler.demo.server import serve

REPO = Path(__file__).resolve().parent.parent
GOAL_BYTES = 0.02
GOAL_WALL = 0.3
#: the crawl as the crawl benchmark runs it: the config's concurrency, no throttle
OPTIONS = ["--set", "crawl.autothrottle=false"]


def crawl(base: str, store: Path, exchanges: list, *options: str) -> dict[str, Any]:
    """One ``neardup crawl`` in a process of its own: its JSON summary, its wall time and the
    body bytes the server sent it (``exchanges``, the server's record, is emptied first)."""
    exchanges.clear()
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "crawler.cli", "crawl", base + "/", "--store", str(store),
         "--json", *OPTIONS, *options],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the crawl failed:\n{proc.stderr[-3000:]}")
    summary: dict[str, Any] = json.loads(proc.stdout)
    summary["wall"] = time.perf_counter() - started
    summary["body_bytes"] = sum(e.body_bytes for e in exchanges)
    return summary


def change_articles(site_dir: Path, fraction: float, rng: random.Random) -> int:
    """Add a sentence to ``fraction`` of the article pages (new bytes, new mtime)."""
    articles = sorted(p for p in site_dir.rglob("*.html") if "/articles/" in p.as_posix())
    chosen = rng.sample(articles, max(1, round(fraction * len(articles))))
    for path in chosen:
        text = path.read_text("utf-8")
        path.write_text(text.replace("</main>", "<p>This page was revised.</p></main>", 1),
                        "utf-8")  # fmt: skip
    return len(chosen)


def round_once(work: Path, site_dir: Path, port: int, changed: float, seed: int) -> dict:
    rows: dict[str, dict[str, Any]] = {}
    seen: list = []
    with serve(site_dir, port=port, exchanges=seen) as base:
        store = work / f"store-{seed}"
        rows["first"] = crawl(base, store, seen)
        rows["recrawl, unchanged"] = crawl(base, store, seen)
        rows["recrawl, no validators"] = crawl(base, store, seen, "--set",
                                               "crawl.conditional_requests=false")  # fmt: skip
    changed_dir = work / f"changed-{seed}"
    subprocess.run(["cp", "-a", str(site_dir), str(changed_dir)], check=True)
    with serve(changed_dir, port=port, exchanges=seen) as base:
        store = work / f"store-changed-{seed}"
        crawl(base, store, seen)
        n = change_articles(changed_dir, changed, random.Random(seed))
        rows[f"recrawl, {changed:.0%} changed"] = crawl(base, store, seen) | {
            "articles_changed": n}
    return rows


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    site = build_site(pages=args.pages, seed=1)
    with tempfile.TemporaryDirectory(prefix="neardup-recrawl-") as tmp:
        work = Path(tmp)
        site_dir = site.write(work)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        rounds = [round_once(work, site_dir, port, args.changed, seed)
                  for seed in range(args.repeats)]  # fmt: skip
    names = list(rounds[0])
    table = {}
    for name in names:
        runs = [r[name] for r in rounds]
        table[name] = {
            "wall": statistics.median(r["wall"] for r in runs),
            "bytes": statistics.median(r["response_bytes"] for r in runs),
            "body_bytes": statistics.median(r["body_bytes"] for r in runs),
            "responses": statistics.median(r["responses"] for r in runs),
            "changes": runs[0]["changes"],
            "decisions": runs[0]["decisions"],
        }
    first = table["first"]
    for row in table.values():
        row["bytes_ratio"] = row["bytes"] / first["bytes"]
        row["body_ratio"] = row["body_bytes"] / first["body_bytes"]
        row["wall_ratio"] = row["wall"] / first["wall"]
    unchanged = table["recrawl, unchanged"]
    goals = {
        f"unchanged recrawl downloads <= {GOAL_BYTES:.0%} of the first crawl's bytes":
            unchanged["bytes_ratio"] <= GOAL_BYTES,
        f"unchanged recrawl takes <= {GOAL_WALL}x the first crawl's wall time":
            unchanged["wall_ratio"] <= GOAL_WALL,
    }  # fmt: skip
    return {"site": site.summary(), "repeats": args.repeats, "rows": table, "goals": goals}


def render(results: dict[str, Any]) -> str:
    site = results["site"]
    lines = [
        f"site: {site['pages']:,} pages ({site['megabytes']} MB), medians of "
        f"{results['repeats']} rounds",
        "",
        f"{'crawl':<26}{'wall s':>8}{'x first':>9}{'MB down':>9}{'x first':>9}"
        f"{'MB bodies':>10}{'x first':>9}{'responses':>11}   unchanged/changed/gone/new",
    ]
    for name, row in results["rows"].items():
        c = row["changes"]
        lines.append(
            f"{name:<26}{row['wall']:>8.1f}{row['wall_ratio']:>9.3f}{row['bytes'] / 1e6:>9.2f}"
            f"{row['bytes_ratio']:>9.3f}{row['body_bytes'] / 1e6:>10.2f}{row['body_ratio']:>9.3f}"
            f"{row['responses']:>11,.0f}   "
            f"{c.get('unchanged', 0)}/{c.get('changed', 0)}/{c.get('gone', 0)}/{c.get('new', 0)}"
        )
    lines.append("")
    lines += [f"{'met' if met else 'NOT MET'}: {goal}" for goal, met in results["goals"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--changed", type=float, default=0.1, help="fraction of articles changed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = benchmark(args)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
