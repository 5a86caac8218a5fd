"""How long a command takes to find a page from what ``neardup log`` prints, on a large store.

    python -m benchmarks.resolve [--urls 1000000] [--repeats 3] [--json]

Builds a store of ``--urls`` documents (URLs of one documentation host, a few releases deep, as
a real site's look) in a temporary directory, then times :func:`crawler.review.urls.resolve`
for each form a user gives: the full URL (one hash lookup), the path as log prints it, a unique
part, an ambiguous part and an unknown one (each of these reads every URL once). The peer, run
beside them in the same repeats, is :meth:`storage.store.Store.documents`, the store's full
scan that parses every record: the ratio says what reading only the URLs costs against it.
Figures are medians of ``--repeats`` runs on a shared, noisy machine; read the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from crawler.review.urls import UnknownURL, resolve
from storage.records import DocumentRecord
from storage.store import Store

HOST = "https://docs.example.org"


def url_of(n: int) -> str:
    return f"{HOST}/release-{n % 7}/section-{n // 1000}/page-{n}.html"


def build(path: str, count: int) -> None:
    with Store.open(path, map_size=1 << 31) as store:
        for start in range(0, count, 20_000):
            with store.batch():
                for n in range(start, min(start + 20_000, count)):
                    store.put_document(n, DocumentRecord(url_of(n), "kept", 0.0))


def timed(work: Callable[[], object]) -> float:
    began = time.perf_counter()
    try:
        work()
    except UnknownURL:  # the ambiguous and unknown forms end in their one-line error
        pass
    return time.perf_counter() - began


def benchmark(count: int, repeats: int) -> dict[str, Any]:
    last = count - 1
    forms = {
        "full URL": url_of(last),
        "path as log prints it": url_of(last)[len(HOST) :],
        "unique part": f"page-{last}.",
        "ambiguous part": "section-1/",
        "unknown": "no-such-page",
    }
    with tempfile.TemporaryDirectory(prefix="neardup-resolve-") as tmp:
        began = time.perf_counter()
        build(tmp, count)
        built = time.perf_counter() - began
        with Store.open(tmp, readonly=True) as store:
            works: dict[str, Callable[[], object]] = {
                name: (lambda text=text: resolve(store, text)) for name, text in forms.items()
            }
            works["peer: Store.documents()"] = lambda: sum(1 for _ in store.documents())
            times: dict[str, list[float]] = {name: [] for name in works}
            for _ in range(repeats):
                for name, work in works.items():
                    times[name].append(timed(work))
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"urls": count, "repeats": repeats, "build_seconds": round(built, 1),
            "seconds": medians, "forms": forms}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.resolve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--urls", type=int, default=1_000_000, help="documents in the store")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each (the median)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = benchmark(args.urls, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    peer = result["seconds"]["peer: Store.documents()"]
    print(f"store of {result['urls']:,} URLs (built in {result['build_seconds']} s); "
          f"median of {result['repeats']} runs")  # fmt: skip
    print(f"{'form':<26}{'seconds':>9}{'x peer':>8}")
    for name, seconds in result["seconds"].items():
        print(f"{name:<26}{seconds:>9.3f}{seconds / peer:>8.2f}")


if __name__ == "__main__":
    main()
