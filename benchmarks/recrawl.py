"""The second crawl of a site against its first, in one run: what conditional requests save.

    python -m benchmarks.recrawl [--site real|synthetic] [--pages 2000] [--changed 0.1]
                                 [--repeats 3] [--json]

**The site** is served on 127.0.0.1 by :func:`crawler.demo.server.serve`, whose file server
sends ``ETag`` and ``Last-Modified`` and answers a matching conditional request with 304, as a
real web server does. Two sites:

* ``real`` (the default): real documentation sites as they are published, the HTML trees of
  the corpus's Debian packages (:data:`SITE_PACKAGES`: Python's Sphinx pages, PostgreSQL's
  DocBook pages, SQLite's manual, about 2,460 pages) side by side under one host, with a
  front page linking each one's index, crawled from the front page and its pages' own links
  up to ``--pages`` URLs (``crawl.max_pages``). Real pages have their own sizes (a few KB to a
  few hundred) and their own links, so what a recrawl saves against what a first crawl costs
  is a real site's, not a template's;
* ``synthetic``: :func:`benchmarks.crawl_site.build_site`'s ``--pages`` pages (real sentences
  from Debian's documentation on one template of about 4 KB, a third of the pages copies of
  others), for a site whose every page is the same size.

*MB down* is what Scrapy downloaded (``downloader/response_bytes``: status lines, headers and
bodies), *MB bodies* the bodies alone, as the server counts them.

**The crawls**, each ``neardup crawl`` in a process of its own, on one store:

* **first**: the store's first crawl;
* **recrawl, unchanged**: the same command on the same store (its next crawl run): every URL the
  store knows is requested with its validators;
* **recrawl, N% changed**: after another first crawl, ``--changed`` of the pages get a
  sentence more (new bytes, a new modification time): of the synthetic site's articles, of the
  real site's HTML pages the first crawl compared, a paragraph added after the first one of the
  body; then the recrawl;
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
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import PACKAGES, corpus_dir, html_corpus
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


#: the sentence a changed real page gets, as a paragraph of its own
REVISION = "<p>This page was revised since the last crawl, and says so here.</p>"


def change_real_pages(site_dir: Path, first: dict[str, Any], fraction: float,
                      rng: random.Random) -> int:  # fmt: skip
    """Add a paragraph to ``fraction`` of the HTML pages the first crawl compared (its dedup
    log's lines that are not ``skipped``), after the first paragraph of the body."""
    base = first["start_urls"][0].rstrip("/")
    urls = set()
    with open(first["log"], encoding="utf-8") as log:
        for line in log:
            entry = json.loads(line)
            if entry["decision"] != "skipped" and entry["url"].startswith(base + "/"):
                urls.add(entry["url"])
    paths = []
    for url in sorted(urls):
        relative = url[len(base) + 1:].split("#", 1)[0].split("?", 1)[0]
        path = site_dir / (relative + "index.html" if not relative or relative.endswith("/")
                           else relative)  # fmt: skip
        if path.is_file():
            paths.append(path)
    chosen = rng.sample(paths, max(1, round(fraction * len(paths))))
    for path in chosen:
        data = path.read_bytes()
        body = data.find(b"<body")
        end = data.find(b"</p>", body) if body >= 0 else -1
        at = end + len(b"</p>") if end >= 0 else data.rfind(b"</body>")
        if at < 0:
            at = len(data)
        path.write_bytes(data[:at] + REVISION.encode("ascii") + data[at:])
    return len(chosen)


class SyntheticSite:
    """:func:`benchmarks.crawl_site.build_site`'s site (module doc)."""

    def __init__(self, pages: int) -> None:
        self.site = build_site(pages=pages, seed=1)
        self.options: list[str] = []

    def write(self, work: Path) -> Path:
        return self.site.write(work)

    def summary(self) -> dict[str, Any]:
        return {"name": "synthetic", **self.site.summary()}

    def change(self, site_dir: Path, first: dict[str, Any], fraction: float, seed: int) -> int:
        return change_articles(site_dir, fraction, random.Random(seed))


#: the real site's manuals: the corpus's Python and PostgreSQL, and SQLite's, for over 2,000 pages
SITE_PACKAGES = (*PACKAGES, "sqlite3-doc")


class RealSite:
    """The corpus packages' documentation trees under one host, crawled up to ``pages`` URLs
    (module doc)."""

    def __init__(self, pages: int) -> None:
        html_corpus(packages=SITE_PACKAGES)  # installed if need be
        self.roots = {package: _html_root(package) for package in SITE_PACKAGES}
        self.pages = pages
        self.options = ["--set", f"crawl.max_pages={pages}"]
        self._files: list[Path] = []

    def write(self, work: Path) -> Path:
        """Copy each tree, as it is, into ``work/site/<package>/`` beside a front page."""
        site = work / "site"
        site.mkdir()
        links = []
        for package, root in self.roots.items():
            shutil.copytree(root, site / package, ignore_dangling_symlinks=True)
            links.append(f'<li><a href="{package}/index.html">{package}</a></li>')
        (site / "index.html").write_text(
            "<!DOCTYPE html><html><head><title>Documentation</title></head><body>"
            f"<h1>Documentation</h1><p>The manuals of this site.</p><ul>{''.join(links)}</ul>"
            "</body></html>", "utf-8")  # fmt: skip
        self._files = [p for p in site.rglob("*.html") if p.is_file()]
        return site

    def summary(self) -> dict[str, Any]:
        return {
            "name": "real",
            "packages": list(self.roots),
            "pages": len(self._files),
            "megabytes": round(sum(p.stat().st_size for p in self._files) / 1e6, 2),
            "max_pages": self.pages,
        }

    def change(self, site_dir: Path, first: dict[str, Any], fraction: float, seed: int) -> int:
        return change_real_pages(site_dir, first, fraction, random.Random(seed))


def _html_root(package: str) -> Path:
    """The folder of a documentation package's HTML tree (the one holding its index.html)."""
    docs = corpus_dir() / package / "usr" / "share" / "doc"
    found = sorted(docs.glob("*/html/index.html")) or sorted(docs.glob("*/index.html"))
    found = [p for p in found if not p.parent.is_symlink() and not p.is_symlink()]
    if not found:
        raise RuntimeError(f"no HTML tree with an index.html in the corpus package {package}")
    return found[0].parent


SITES = {"real": RealSite, "synthetic": SyntheticSite}


def round_once(work: Path, site: Any, site_dir: Path, port: int, changed: float,
               seed: int) -> dict:  # fmt: skip
    rows: dict[str, dict[str, Any]] = {}
    seen: list = []
    options = site.options
    with serve(site_dir, port=port, exchanges=seen) as base:
        store = work / f"store-{seed}"
        rows["first"] = crawl(base, store, seen, *options)
        rows["recrawl, unchanged"] = crawl(base, store, seen, *options)
        rows["recrawl, no validators"] = crawl(base, store, seen, *options, "--set",
                                               "crawl.conditional_requests=false")  # fmt: skip
    changed_dir = work / f"changed-{seed}"
    subprocess.run(["cp", "-a", str(site_dir), str(changed_dir)], check=True)
    with serve(changed_dir, port=port, exchanges=seen) as base:
        store = work / f"store-changed-{seed}"
        first = crawl(base, store, seen, *options)
        n = site.change(changed_dir, first, changed, seed)
        rows[f"recrawl, {changed:.0%} changed"] = crawl(base, store, seen, *options) | {
            "pages_changed": n}
    shutil.rmtree(changed_dir)
    return rows


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    site = SITES[args.site](args.pages)
    with tempfile.TemporaryDirectory(prefix="neardup-recrawl-") as tmp:
        work = Path(tmp)
        site_dir = site.write(work)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        summary = site.summary()
        rounds = [round_once(work, site, site_dir, port, args.changed, seed)
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
    return {"site": summary, "repeats": args.repeats, "rows": table, "goals": goals}


def render(results: dict[str, Any]) -> str:
    site = results["site"]
    lines = [
        f"site: {site['name']}, {site['pages']:,} HTML pages ({site['megabytes']} MB)"
        + (f", crawled up to {site['max_pages']:,} URLs" if site.get("max_pages") else "")
        + f", medians of {results['repeats']} rounds",
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
    parser.add_argument("--site", choices=sorted(SITES), default="real",
                        help="real documentation sites (default) or the synthetic one")
    parser.add_argument("--pages", type=int, default=2000,
                        help="the synthetic site's pages; the most URLs of the real site crawled")
    parser.add_argument("--changed", type=float, default=0.1, help="fraction of pages changed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = benchmark(args)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
