"""Speed of the dedup core on real HTML, beside the peers, in one run.

    python -m benchmarks.sketch [--repeats 5] [--pages N] [--json]

Measures, on Debian's Python and PostgreSQL documentation (installed by benchmarks.corpus):

* canonicalisation MB/s of HTML per core (bytes over CPU seconds; wall-clock MB/s beside it),
  BeautifulSoup (the reference) and the fast lexbor path, and lxml's parser alone for scale;
* tokens -> sketch for every sketch kind: shingles/s and documents/s;
* the same token streams through datasketch ``MinHash(num_perm=128)`` and rensa
  ``RMinHash(128)``, fed the same 4-word shingles (built from the tokens inside the timed region,
  as ours are), and the ratios.

Every figure is the median of ``--repeats`` runs; the machine is shared and noisy, so read the
ratios rather than the absolute numbers. The sketchers (ours and the peers) run in turn within
each repeat, so a burst of load elsewhere slows all of them alike, and the ratios compare runs
made side by side. The closing lines check the goals (:data:`GOALS`, :data:`GOAL_MB_S`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.corpus import html_corpus
from dedup.canonical import html_tokens
from dedup.html_text import FAST_IMPLEMENTATION
from dedup.document import Sketcher
from dedup.params import SketchParams

SHINGLE = 4
NUM_PERM = 128


#: the goals: documents/s from tokens to a MIN_128 sketch against each peer, and MB/s
GOALS = {
    f"datasketch MinHash({NUM_PERM})": 10.0,
    f"rensa RMinHash({NUM_PERM})": 2.0,
}
GOAL_MB_S = 50.0


def interleaved(works: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The median seconds of each work, running every work once per repeat, in turn."""
    times: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(repeats):
        for name, work in works.items():
            start = time.perf_counter()
            work()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(spent) for name, spent in times.items()}


def shingle_strings(tokens: Sequence[str], w: int = SHINGLE) -> list[str]:
    """The peers' input: each w-shingle as one string (a short document is one shingle)."""
    if len(tokens) < w:
        return [" ".join(tokens)] if tokens else []
    return [" ".join(tokens[i : i + w]) for i in range(len(tokens) - w + 1)]


def canonicalisation(pages: list[bytes], repeats: int, reference_pages: int) -> list[dict]:
    """MB/s of HTML per core: each engine over the pages, median of ``repeats`` passes, in CPU
    seconds (a pass that waits for a core shared with another job is not slower per core) and
    in wall seconds."""
    from lxml import etree

    parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, collect_ids=False)
    works = {
        "canonicalise HTML (reference)": (pages[:reference_pages], 1,
                                          lambda page: html_tokens(page, engine="reference")),
        f"canonicalise HTML (fast, {FAST_IMPLEMENTATION} walk)": (
            pages, repeats, lambda page: html_tokens(page, engine="fast")),
        "lxml HTML parse alone (no text)": (
            pages, repeats, lambda page: etree.fromstring(page, parser)),
    }
    rows = []
    for what, (subset, runs, canonicalise) in works.items():
        cpu, wall = [], []
        for _ in range(runs):
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            for page in subset:
                canonicalise(page)
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started_wall)
        size = sum(map(len, subset))
        rows.append({"what": what, "pages": len(subset),
                     "MB/s": size / statistics.median(cpu) / 1e6,
                     "wall MB/s": size / statistics.median(wall) / 1e6,
                     "docs/s": len(subset) / statistics.median(cpu)})
    return rows


def ours(streams: list[list[str]]) -> dict[str, Callable[[], object]]:
    kinds = {
        "min": SketchParams(kind="min", size=NUM_PERM, shingle_size=SHINGLE),
        "mod": SketchParams(kind="mod", modulus=16, shingle_size=SHINGLE),
        "minmod": SketchParams(kind="minmod", size=NUM_PERM, modulus=4, shingle_size=SHINGLE),
        "tiered": SketchParams(kind="tiered", shingle_size=SHINGLE),
        "permutation": SketchParams(kind="permutation", size=NUM_PERM, shingle_size=SHINGLE),
        "min, option A": SketchParams(kind="min", size=NUM_PERM, shingle_size=SHINGLE,
                                      option="A"),
    }
    works = {}
    for label, params in kinds.items():
        sketcher = Sketcher(params)
        sketcher.sketch_ids(sketcher.ids(streams[0]))  # build the tables before timing

        def work(sketcher: Sketcher = sketcher) -> None:
            for tokens in streams:
                sketcher.sketch_ids(sketcher.ids(tokens))

        works[f"neardup {label}"] = work
    return works


def peers(streams: list[list[str]]) -> dict[str, Callable[[], object]]:
    works: dict[str, Callable[[], object]] = {}
    try:
        from datasketch import MinHash
    except ImportError:
        MinHash = None
    if MinHash is not None:
        template = MinHash(num_perm=NUM_PERM, seed=1)
        # Reuse the permutations, as a careful datasketch user does: making them is not hashing.
        extra = {"scheme": template.scheme} if hasattr(template, "scheme") else {}

        def datasketch_work() -> None:
            for tokens in streams:
                m = MinHash(num_perm=NUM_PERM, seed=1, permutations=template.permutations, **extra)
                m.update_batch([s.encode("utf-8") for s in shingle_strings(tokens)])

        works[f"datasketch MinHash({NUM_PERM})"] = datasketch_work
    try:
        from rensa import RMinHash
    except ImportError:
        RMinHash = None
    if RMinHash is not None:

        def rensa_work() -> None:
            for tokens in streams:
                m = RMinHash(num_perm=NUM_PERM, seed=1)
                m.update(shingle_strings(tokens))
                m.digest()

        works[f"rensa RMinHash({NUM_PERM})"] = rensa_work
    return works


def sketching(streams: list[list[str]], repeats: int) -> list[dict]:
    """Ours and the peers, timed in turn within each repeat."""
    shingles = sum(max(len(t) - SHINGLE + 1, 1 if t else 0) for t in streams)
    seconds = interleaved({**ours(streams), **peers(streams)}, repeats)
    return [{"what": name, "docs/s": len(streams) / spent, "shingles/s": shingles / spent}
            for name, spent in seconds.items()]


def render(rows: list[dict[str, Any]]) -> str:
    cols = ["what", "pages", "MB/s", "wall MB/s", "docs/s", "shingles/s"]
    cols = [c for c in cols if any(c in r for r in rows)]
    out = [" | ".join(cols), " | ".join("---" for _ in cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(f"{v:,.1f}" if isinstance(v, float) else str(v))
        out.append(" | ".join(cells))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", type=int, default=0, help="use only the first N pages")
    parser.add_argument("--reference-pages", type=int, default=200,
                        help="pages for the (slow) BeautifulSoup measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    paths = html_corpus()
    if args.pages:
        paths = paths[: args.pages]
    pages = [p.read_bytes() for p in paths]
    print(f"corpus: {len(pages)} pages, {sum(map(len, pages)) / 1e6:.1f} MB; "
          f"median of {args.repeats} runs", flush=True)
    rows = canonicalisation(pages, args.repeats, args.reference_pages)
    streams = [html_tokens(p) for p in pages]
    streams = [t for t in streams if t]
    rows += sketching(streams, args.repeats)

    by = {r["what"]: r for r in rows}
    mine = by["neardup min"]["docs/s"]
    ratios = {}
    goals = {}
    for peer, goal in GOALS.items():
        if peer in by:
            name = f"neardup MIN_{NUM_PERM} / {peer}"
            ratios[name] = mine / by[peer]["docs/s"]
            goals[f"{name} >= {goal:g}x"] = ratios[name] >= goal
    fast = by[f"canonicalise HTML (fast, {FAST_IMPLEMENTATION} walk)"]["MB/s"]
    ratios["fast / reference canonicaliser"] = fast / by["canonicalise HTML (reference)"]["MB/s"]
    goals[f"fast canonicaliser >= {GOAL_MB_S:g} MB/s per core"] = fast >= GOAL_MB_S

    if args.json:
        print(json.dumps({"rows": rows, "ratios": ratios, "goals": goals}, indent=2))
        return 0
    print(render(rows))
    print()
    for name, value in ratios.items():
        print(f"{name}: {value:.1f}x")
    print()
    for name, met in goals.items():
        print(f"goal {name}: {'met' if met else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
