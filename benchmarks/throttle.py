"""One slow page and many dead links behind it: does the slow page set the pace of the crawl?

    python -m benchmarks.throttle [--wait 2] [--dead 30] [--pages 20] [--repeats 3] [--json]

**The site** (:class:`SlowSite`, also the site of ``tests/crawler/test_throttle.py``): an index
linking a slow page first, then ``--pages`` fast pages that each link one more fast page; the
slow page answers after ``--wait`` seconds and links ``--dead`` dead links (404). Every page has
its own text, so the dedup stage keeps them all. The *fast twin* is the same site with the slow
page answering at once.

**The crawls**, each in a fresh process and a fresh store through :func:`benchmarks.crawl.run_crawl`
(``crawler.cli.crawl.crawl``, the function ``neardup crawl`` runs), with the built-in
configuration unless said otherwise:

* **fast twin, defaults**: the time the site costs without its slow page;
* **slow page, defaults**: the crawl the goal is about;
* **slow page, Scrapy's AutoThrottle** (``-s AUTOTHROTTLE_ENABLED=true``): for contrast, what
  the defaults did before :mod:`crawler.extensions.throttle`: the slow page's latency became the
  delay, and no 404 lowered it (``--stock-repeats`` runs, 1 by default: it is slow);
* **slow page, no throttle** (``crawl.autothrottle: false``): the crawl with fixed concurrency.

**The goal**: the slow-page crawl with the defaults takes at most 1.25 × (the fast twin's time
+ the slow page's wait); the ratio printed is slow / (fast + wait). The figures are medians of
``--repeats`` runs, the variants alternating, on a machine that others share.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawler.demo.server import Route

GOAL = 1.25
HTML = (("Content-Type", "text/html; charset=utf-8"),)
VARIANTS = ("fast", "slow", "stock", "off")
LABELS = {
    "fast": "fast twin, defaults",
    "slow": "slow page, defaults",
    "stock": "slow page, Scrapy's AutoThrottle",
    "off": "slow page, crawl.autothrottle: false",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SlowSite:
    """An index, ``pages`` fast pages (each linking one more), and ``/slow.html``, which answers
    after ``wait`` seconds and links ``dead`` URLs that answer 404.

    >>> site = SlowSite(wait=0.5, pages=2, dead=3)
    >>> site.alongside()
    ['/', '/p/1.html', '/p/2.html', '/p/1/more.html', '/p/2/more.html']
    >>> site.behind_slow()
    ['/gone/1.html', '/gone/2.html', '/gone/3.html']
    >>> site.routes()["/gone/1.html"].status, site.routes()["/slow.html"].delay
    (404, 0.5)
    """

    wait: float
    pages: int = 20
    dead: int = 30
    seed: int = 1

    def alongside(self) -> list[str]:
        """The pages a crawl reaches without the slow page's answer (robots.txt aside)."""
        fast = [f"/p/{i}.html" for i in range(1, self.pages + 1)]
        more = [f"/p/{i}/more.html" for i in range(1, self.pages + 1)]
        return ["/", *fast, *more]

    def behind_slow(self) -> list[str]:
        """The dead links, which only the slow page's answer reveals."""
        return [f"/gone/{j}.html" for j in range(1, self.dead + 1)]

    def routes(self) -> dict[str, Route]:
        words = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "tu")
                 for b in ("ban", "cor", "dil", "fen", "gol", "hum", "jas", "kir")]  # fmt: skip
        rng = random.Random(self.seed)

        def page(title: str, links: list[str]) -> Route:
            text = " ".join(rng.choice(words) for _ in range(150))
            items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
            body = (f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
                    f"<h1>{title}</h1><p>{text}</p><ul>{items}</ul></body></html>")  # fmt: skip
            return Route(headers=HTML, body=body)

        table: dict[str, Route] = {}
        index_links = ["/slow.html", *(f"/p/{i}.html" for i in range(1, self.pages + 1))]
        table["/"] = page("Index", index_links)
        for i in range(1, self.pages + 1):
            table[f"/p/{i}.html"] = page(f"Page {i}", [f"/p/{i}/more.html"])
            table[f"/p/{i}/more.html"] = page(f"More on {i}", [])
        slow = page("The slow page", self.behind_slow())
        table["/slow.html"] = Route(headers=HTML, body=slow.body, delay=self.wait)
        gone = "<!DOCTYPE html><html><body><h1>Not found</h1></body></html>"
        for path in self.behind_slow():
            table[path] = Route(status=404, headers=HTML, body=gone)
        table["/robots.txt"] = Route(headers=(("Content-Type", "text/plain"),),
                                     body="User-agent: *\nAllow: /\n")  # fmt: skip
        return table


# --- the benchmark -------------------------------------------------------------------------------


def _crawl(variant: str, base: str, work: Path, name: str, timeout: float) -> dict[str, Any]:
    from benchmarks.crawl import run_crawl

    overrides = {"crawl.autothrottle": False} if variant == "off" else {}
    settings = {"AUTOTHROTTLE_ENABLED": True} if variant == "stock" else {}
    result = run_crawl("with", base + "/", work, name, overrides, timeout, settings)
    result.pop("log_lines", None)
    return result


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from crawler.demo.server import serve

    slow_site = SlowSite(wait=args.wait, pages=args.pages, dead=args.dead)
    fast_site = SlowSite(wait=0.0, pages=args.pages, dead=args.dead)
    # Scrapy's AutoThrottle fetches the dead links one wait apart: leave it room
    timeout = 120 + 3 * args.wait * (args.dead + 2)
    results: dict[str, Any] = {
        "site": {"wait": args.wait, "pages": len(slow_site.alongside()), "dead": args.dead},
        "repeats": args.repeats,
        "stock_repeats": args.stock_repeats,
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    work = Path(tempfile.mkdtemp(prefix="neardup-bench-throttle-"))
    try:
        with serve(slow_site.routes()) as slow, serve(fast_site.routes()) as fast:
            for repeat in range(args.repeats):
                order = list(VARIANTS if repeat % 2 == 0 else VARIANTS[::-1])
                if repeat >= args.stock_repeats:
                    order.remove("stock")
                for variant in order:
                    base = fast if variant == "fast" else slow
                    result = _crawl(variant, base, work, f"{variant}-{repeat}", timeout)
                    log(f"run {repeat + 1}/{args.repeats} {variant:>5}: "
                        f"{result['seconds']:.2f} s, {result['responses']} responses")  # fmt: skip
                    runs[variant].append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    crawls: dict[str, Any] = {}
    for variant, rs in runs.items():
        if not rs:
            continue
        crawls[variant] = {
            "seconds": round(statistics.median(r["seconds"] for r in rs), 3),
            "runs_seconds": [round(r["seconds"], 3) for r in rs],
            "responses": sorted({r["responses"] for r in rs}),
            "skipped": rs[0]["skipped"],
            "delay_max": max((r["stats"].get("neardup/throttle/delay/max", 0.0) for r in rs)),
            "latency_max": max((r["stats"].get("neardup/throttle/latency/max", 0.0) for r in rs)),
        }
    results["crawls"] = crawls
    budget = crawls["fast"]["seconds"] + args.wait
    results["goal"] = {
        "budget_seconds": round(budget, 3),
        "bound_seconds": round(GOAL * budget, 3),
        "ratio": round(crawls["slow"]["seconds"] / budget, 3),
        "met": crawls["slow"]["seconds"] <= GOAL * budget,
    }
    if "stock" in crawls:
        results["goal"]["stock_ratio"] = round(crawls["stock"]["seconds"] / budget, 3)
    results["goal"]["off_ratio"] = round(crawls["off"]["seconds"] / budget, 3)
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    return results


def render(results: dict[str, Any]) -> str:
    site, goal = results["site"], results["goal"]
    lines = [
        f"site: {site['pages']} fast pages (index included), one page answering after "
        f"{site['wait']} s, {site['dead']} dead links (404) behind it; robots.txt",
        f"crawls: crawler.cli.crawl.crawl (as neardup crawl), fresh process and store each; "
        f"median of {results['repeats']} runs (Scrapy's AutoThrottle: "
        f"{min(results['stock_repeats'], results['repeats'])}); load average "
        f"{results['load_average_at_start']} at start, {results['load_average_at_end']} at end "
        f"({os.cpu_count()} cores)",
        "",
        f"{'':40}{'wall s':>8}{'ratio':>8}{'delay max':>11}{'latency max':>13}   runs: wall s",
    ]
    budget = goal["budget_seconds"]
    for variant, row in results["crawls"].items():
        runs = "  ".join(f"{s:.2f}" for s in row["runs_seconds"])
        delay = f"{row['delay_max']:.3f}" if row["delay_max"] else "-"
        latency = f"{row['latency_max']:.3f}" if row["latency_max"] else "-"
        lines.append(f"{LABELS[variant]:40}{row['seconds']:8.2f}{row['seconds'] / budget:8.2f}"
                     f"{delay:>11}{latency:>13}   {runs}")  # fmt: skip
    verdict = "met" if goal["met"] else "MISSED"
    lines += [
        "",
        "ratio: wall time / (fast twin + the slow page's wait); delay and latency max: the",
        "throttle's stats (neardup/throttle/...), in seconds, for the crawls it ran",
        f"goal: slow page with the defaults <= {GOAL} x ({results['crawls']['fast']['seconds']:.2f}"
        f" + {site['wait']}) = {goal['bound_seconds']:.2f} s; took "
        f"{results['crawls']['slow']['seconds']:.2f} s, ratio {goal['ratio']:.3f}: {verdict}",
    ]
    if "stock_ratio" in goal:
        lines.append(f"Scrapy's AutoThrottle on the same site: ratio {goal['stock_ratio']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.throttle", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--wait", type=float, default=2.0, help="seconds the slow page waits")
    parser.add_argument("--dead", type=int, default=30, help="dead links behind the slow page")
    parser.add_argument("--pages", type=int, default=20, help="fast pages linked from the index")
    parser.add_argument("--repeats", type=int, default=3, help="crawls per variant")
    parser.add_argument(
        "--stock-repeats", type=int, default=1,
        help="crawls with Scrapy's AutoThrottle (each takes about dead x wait)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.wait <= 0 or args.dead < 1 or args.pages < 1:
        parser.error("--repeats, --wait, --dead and --pages must be positive")
    results = benchmark(args)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
