"""``neardup report``: one self-contained HTML page about a store, or the stores of one crawl's
nodes (see :mod:`crawler.review.report`); or its facts as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from crawler.cli.common import UserError, add_config_arguments, resolve_config
from crawler.cli.log import store_paths
from storage.errors import StoreError

HELP = "write one self-contained HTML report on a store: summary, plots, clusters, drops"
DESCRIPTION = """\
Write one HTML file about a store that opens in any browser and loads nothing (no network,
no script): a summary table modelled on the paper's experiment (pages fetched, kept, exact and
near duplicates, skipped by reason; clusters, identical-only and mixed clusters), plots (cluster
sizes, the estimated resemblance of dropped pages with the threshold marked, the S-curve of the
sketch size and threshold with the observed drops on it), the largest clusters with their URLs,
and for each dropped page what `neardup explain` says about it.

A store crawled again (a recrawl) gets a section "What changed since the previous run": how
many URLs of the latest run are new, unchanged, changed or gone (and how many were decided
again because the kept page of their cluster changed or is gone), the pages that moved cluster,
and the pages whose content changed most (the least resemblance to their previous content).

Several --store are the nodes of one distributed crawl: one report over all of them (one
summary, clusters across the nodes), each page with the node that decided it.

--json prints the facts the page is made of as one JSON object (to stdout, or to -o FILE).

The sketch parameters are the store's own. The threshold is not recorded in a store: it is
--threshold, else the one the dedup log's reasons name ("... >= threshold 0.9"), else the
configuration's dedup.threshold (--config, --set). Explaining a dropped page reads the dedup
log, so --max-dropped bounds the time a report of a large crawl takes.

examples:
  neardup report --store neardup-demo-store -o report.html
  neardup report --top 20 --max-dropped 2000
  neardup report --store node1 --store node2 --store node3 -o crawl.html
  neardup report --json | jq .changes.counts
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="DIR", action="append",
        help="store directory (default: 'store' in the config file); repeat it for the nodes "
        "of one distributed crawl",
    )  # fmt: skip
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="the file to write (default: report.html, or stdout with --json; - for stdout)",
    )
    parser.add_argument(
        "--json", action="store_true", help="the report's facts as one JSON object, not HTML"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        help="the crawl's resemblance threshold (default: as logged, else dedup.threshold)",
    )
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="largest clusters listed (default: 10)"
    )
    parser.add_argument(
        "--max-dropped",
        type=int,
        default=200,
        metavar="N",
        help="dropped pages explained, in crawl order (default: 200)",
    )
    parser.add_argument(
        "--top-changed", type=int, default=20, metavar="N",
        help="after a recrawl: the pages whose content changed most listed (default: 20)",
    )  # fmt: skip
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    add_config_arguments(parser)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from crawler.review.facts import collect
    from crawler.review.report import render

    config = resolve_config(args)
    stores = store_paths(args)
    if args.threshold is not None and not 0 <= args.threshold <= 1:
        raise UserError(f"--threshold must be in [0, 1]; got {args.threshold}")
    for name, value in (("--top", args.top), ("--max-dropped", args.max_dropped),
                        ("--top-changed", args.top_changed)):  # fmt: skip
        if value < 0:
            raise UserError(f"{name} must be at least 0; got {value}")
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc="explaining dropped pages", unit=" pages", file=sys.stderr, leave=False)

    def progress(done: int, total: int) -> None:
        assert bar is not None
        bar.total = total
        bar.update(1)

    try:
        data = collect(
            stores if len(stores) > 1 else stores[0],
            threshold=args.threshold,
            configured=config.dedup.threshold,
            containment=config.dedup.containment,
            top_clusters=args.top,
            max_dropped=args.max_dropped,
            top_changed=args.top_changed,
            on_explained=progress if bar is not None else None,
        )
    except (StoreError, OSError) as exc:
        raise UserError(str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    output = args.output or ("-" if args.json else "report.html")
    if args.json:
        text = json.dumps(data.to_dict(), indent=2, ensure_ascii=False) + "\n"
    else:
        text = render(data)
    if output == "-":
        sys.stdout.write(text)
        return 0
    _write_atomically(Path(output), text)
    what = "facts" if args.json else "report"
    print(
        f"{what} on {data.fetched:,} pages ({data.decisions['kept']:,} kept, "
        f"{data.dropped_total:,} dropped) written to {output}"
    )
    return 0


def _write_atomically(path: Path, text: str) -> None:
    """Write beside the target, then rename: a reader never sees half a report."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
