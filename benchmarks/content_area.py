"""Content areas: canonicaliser speed per mode, and pages of one template.

    python -m benchmarks.content_area [--repeats 3] [--pages N] [--jobs J] [--json]

On Debian's documentation packages (benchmarks.corpus: Python's and PostgreSQL's, Sphinx and
DocBook, and Apache's and SQLite's manuals: ~3,300 real pages on a handful of site templates),
it measures:

* **speed**: the fast canonicaliser's MB/s of HTML per core (bytes over CPU seconds) for each
  content area (``all``, ``main``, ``include``, ``exclude``), beside Resiliparse's plain-text
  extraction (built on lexbor too) with and without its main-content mode, tokenised the same
  way, in the same run; the median of ``--repeats``, and the ratios;
* **template pages**: every page clustered (MIN_100 of 4-word shingles, thresholds 0.9, 0.7 and
  0.5, Broder's greedy clustering, as ``neardup recluster`` does) with ``all``, with ``main``
  and with Resiliparse's main content. A dropped page whose main content shares less than half
  of its 4-word shingles with the page it was dropped for is a *different page of one
  template*; the table counts them. After the real pages come true copies of 40 of them,
  which every area must still drop: *mirrors* (the same bytes), *versions* (one sentence added to the content), and
  *re-templated* copies (the same main content in another site's navigation and footer).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import random
import re
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.corpus import EXTRA_PACKAGES, PACKAGES, html_corpus
from crawler.recluster.inputs import SourceDocument
from crawler.recluster.run import recluster
from dedup.canonical import decode_html, document_tokens, html_joined_tokens, text_tokens
from dedup.cluster import DROPPED
from dedup.content_area import STANDARDS_MODE, resolve
from dedup.params import ContentArea, DedupParams, SketchParams

AREAS = {
    "all": ContentArea(),
    "main": ContentArea("main"),
    "include": ContentArea(include=["div.body", "div.sect1", "div.chapter", "h1"]),
    "exclude": ContentArea(
        exclude=["div.sphinxsidebar", "div.related", ".navheader", ".navfooter"]
    ),
}
SHINGLE = 4
THRESHOLDS = (0.9, 0.7, 0.5)
COPIES = 40
DIFFERENT = 0.5  # main-content resemblance below this: a different page, not a copy

_OTHER_TEMPLATE = (
    "<!DOCTYPE html><html><head><title>Mirror</title></head><body>"
    "<nav><ul>{links}</ul></nav><div class='sidebar'>{side}</div>"
    "<main>{content}</main><footer>{foot}</footer></body></html>"
)


def _resiliparse() -> Callable[[bytes, bool], str] | None:
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree
    except ImportError:
        return None

    def extract(data: bytes, main: bool) -> str:
        return str(extract_plain_text(HTMLTree.parse_from_bytes(data), main_content=main))

    return extract


# -- speed ----------------------------------------------------------------------------------------


def _timed(pages: Sequence[bytes], run: Callable[[bytes], object]) -> tuple[float, float]:
    """(MB per CPU second, MB per wall second) of ``run`` over ``pages``."""
    size = sum(map(len, pages)) / 1e6
    cpu, wall = time.process_time(), time.perf_counter()
    for page in pages:
        run(page)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return size / max(cpu, 1e-9), size / max(wall, 1e-9)


def speed(pages: Sequence[bytes], repeats: int) -> dict[str, dict[str, float]]:
    runs: dict[str, Callable[[bytes], object]] = {
        f"neardup {name}": (lambda data, a=area: html_joined_tokens(data, area=a))
        for name, area in AREAS.items()
    }
    extract = _resiliparse()
    if extract is not None:
        runs["resiliparse plain text"] = lambda data: text_tokens(extract(data, False))
        runs["resiliparse main content"] = lambda data: text_tokens(extract(data, True))
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():  # in turn, so load elsewhere slows all alike
            figures[name].append(_timed(pages, run))
    return {
        name: {"mb_per_cpu_s": statistics.median(c for c, _ in values),
               "mb_per_wall_s": statistics.median(w for _, w in values)}
        for name, values in figures.items()
    }  # fmt: skip


# -- template pages -------------------------------------------------------------------------------


def _main_html(data: bytes) -> str:
    """The main content's HTML (as ``main`` chooses it), for re-templated copies."""
    from selectolax.lexbor import LexborHTMLParser

    # decoded as the canonicaliser decodes it (a Korean manual page is EUC-KR), then UTF-8
    tree = LexborHTMLParser(STANDARDS_MODE + decode_html(data).encode("utf-8"))
    roots, _ = resolve(ContentArea("main"), tree.css, lambda n: int(n.mem_id), lambda n: n.parent)
    return "".join(root.html or "" for root in roots or [])


def _copies(pages: list[tuple[str, bytes]], rng: random.Random) -> list[tuple[str, bytes, str]]:
    """(id, bytes, id of the original) of true copies of pages with 200+ main-content words."""
    main = ContentArea("main")
    long = [(i, d) for i, d in pages if document_tokens(d, area=main).count >= 200]
    chosen = rng.sample(long, min(COPIES, len(long)))
    words = "home about products services blog careers contact press help privacy terms".split()
    out = []
    for k, (doc_id, data) in enumerate(chosen):
        out.append((f"mirror/{doc_id}", data, doc_id))
        opening = re.search(rb'role="main"[^>]*>|<body[^>]*>', data)
        if opening is not None:
            at = opening.end()
            added = b"<p>This page was last reviewed for the current release.</p>"
            out.append((f"version/{doc_id}", data[:at] + added + data[at:], doc_id))
        links = "".join(f"<li><a href='/{w}{k}'>{w.title()} {k}</a></li>" for w in words * 3)
        side = " ".join(rng.choice(words) for _ in range(60))
        foot = "Copyright the mirror operators. All rights reserved. " * 3
        page = _OTHER_TEMPLATE.format(links=links, side=side, content=_main_html(data), foot=foot)
        out.append((f"retemplated/{doc_id}", page.encode("utf-8"), doc_id))
    return out


def _shingles(tokens: list[str]) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + SHINGLE]) for i in range(max(1, len(tokens) - SHINGLE + 1))}


def _resemblance(a: set[Any], b: set[Any]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _cluster(
    sources: list[SourceDocument], area: ContentArea | None, threshold: float, jobs: int
) -> list[dict]:
    out = io.StringIO()
    recluster(iter(sources), SketchParams(), DedupParams(threshold=threshold), out=out,
              jobs=jobs, area=area)  # fmt: skip
    return [json.loads(line) for line in out.getvalue().splitlines()]


def templates(pages: list[tuple[str, bytes]], jobs: int, seed: int = 1) -> dict[str, Any]:
    copies = _copies(pages, random.Random(seed))
    everything = [(i, d) for i, d in pages] + [(i, d) for i, d, _ in copies]
    main = ContentArea("main")
    main_shingles = {i: _shingles(document_tokens(d, area=main).tokens()) for i, d in everything}
    methods: dict[str, tuple[list[SourceDocument], ContentArea | None]] = {
        "all": ([SourceDocument(i, "html", d) for i, d in everything], None),
        "main": ([SourceDocument(i, "html", d) for i, d in everything], main),
    }
    extract = _resiliparse()
    if extract is not None:
        methods["resiliparse main"] = (
            [SourceDocument(i, "text", extract(d, True)) for i, d in everything], None)
    originals = {i for i, _ in pages}
    results: dict[str, Any] = {"pages": len(pages), "copies": len(copies)}
    for (name, (sources, area)), threshold in itertools.product(methods.items(), THRESHOLDS):
        lines = _cluster(sources, area, threshold, jobs)
        first = {}
        for line in lines:
            if line["representative"]:
                first[line["cluster"]] = line["id"]
        dropped = [line for line in lines if line["decision"] in DROPPED]
        real = [line for line in dropped if line["id"] in originals]
        different = [
            line for line in real
            if _resemblance(main_shingles[line["id"]], main_shingles[first[line["cluster"]]])
            < DIFFERENT
        ]  # fmt: skip
        kept_copy = {line["id"] for line in lines if line["id"] not in originals}
        kept_copy -= {line["id"] for line in dropped}
        by_kind: dict[str, dict[str, int]] = {}
        for copy_id, _, original in copies:
            kind = copy_id.split("/", 1)[0]
            entry = by_kind.setdefault(kind, {"made": 0, "dropped": 0})
            entry["made"] += 1
            entry["dropped"] += copy_id not in kept_copy
        results[f"{name} @ {threshold}"] = {
            "dropped_real_pages": len(real),
            "different_pages_dropped": len(different),
            "copies": by_kind,
        }
    return results


def _print(speeds: dict[str, dict[str, float]], template: dict[str, Any], size: float) -> None:
    print(f"canonicaliser speed on {size:.1f} MB of real HTML (median; MB/s per core, wall)")
    base = speeds.get("resiliparse main content")
    for name, figure in speeds.items():
        ratio = f"  {figure['mb_per_cpu_s'] / base['mb_per_cpu_s']:5.2f}x" if base else ""
        print(f"  {name:<28}{figure['mb_per_cpu_s']:8.1f}{figure['mb_per_wall_s']:8.1f}{ratio}")
    if base:
        print("  (ratio: against Resiliparse's main-content extraction, tokenised alike)")
    print()
    print(f"{template['pages']} real pages, then {template['copies']} true copies of 40 of "
          "them; MIN_100 of 4-word shingles, greedy clustering")  # fmt: skip
    print(f"  {'area @ threshold':<24}{'dropped':>9}{'different':>11}   true copies dropped")
    for threshold, name in itertools.product(THRESHOLDS, ("all", "main", "resiliparse main")):
        key = f"{name} @ {threshold}"
        if key not in template:
            continue
        r = template[key]
        copies = ", ".join(f"{k} {v['dropped']}/{v['made']}" for k, v in r["copies"].items())
        print(f"  {key:<24}{r['dropped_real_pages']:>9}{r['different_pages_dropped']:>11}   "
              f"{copies}")  # fmt: skip
    print(f"  (different: the main content shares < {DIFFERENT:.0%} of its 4-word shingles with "
          "the page it was dropped for)")


def _pages(limit: int | None, packages: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    paths: list[Path] = html_corpus(min_pages=1, packages=packages)
    for path in paths[:limit] if limit else paths:
        yield str(path.relative_to(path.parents[len(path.parents) - 4])), path.read_bytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pages", type=int, default=None, help="only the first N pages")
    parser.add_argument("--speed-pages", type=int, default=300,
                        help="pages in the speed sample (default 300)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--packages", nargs="+", default=[*PACKAGES, *EXTRA_PACKAGES],
                        help="Debian documentation packages (default: %(default)s)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    pages = list(_pages(args.pages, args.packages))
    sample = [d for _, d in pages[:: max(1, len(pages) // args.speed_pages)]]
    speeds = speed(sample, args.repeats)
    template = templates(pages, args.jobs)
    if args.json:
        print(json.dumps({"speed": speeds, "templates": template}, indent=2))
    else:
        _print(speeds, template, sum(map(len, sample)) / 1e6)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
