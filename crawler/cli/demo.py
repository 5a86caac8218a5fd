"""``neardup demo``: the main job, offline: crawl the bundled site and show every decision.

The bundled site (:mod:`crawler.demo`) is served on 127.0.0.1 on a free port and crawled
into a fresh store exactly as ``neardup crawl`` would crawl any site, with the built-in
defaults (not ./config.yaml, so the demo always shows the same thing), one request at a time so
that each original is met before its copies. Then each page's decision is printed and checked
against ``TRUTH.json``, which says what every page of the site is.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crawler.cli.common import UserError

HELP = "crawl the bundled demo site (offline) and show what was kept and dropped, and why"
DESCRIPTION = """\
Serve the bundled demo site (a walking club's: articles on one template, exact mirrors, near
duplicates, printable versions, an image, a PDF and a page robots.txt forbids) on 127.0.0.1,
crawl it into a fresh store, and print every page's decision: kept, exact_duplicate,
near_duplicate or skipped, the page it duplicates and the estimated resemblance. The decisions
are then checked against the site's TRUTH.json. Takes a few seconds; needs no network.

The store (default ./neardup-demo-store) is replaced if an earlier demo made it; any other
existing, non-empty directory (a store of your own crawls too) is left alone and is an error.

examples:
  neardup demo
  neardup demo --store /tmp/demo --json
"""

DEFAULT_STORE = "neardup-demo-store"
#: written into a store the demo made: only such a store is ever replaced
DEMO_MARK = "made-by-neardup-demo"

#: what each kind of page in TRUTH.json must become
EXPECTED = {
    "original": "kept",
    "printable": "kept",
    "exact_mirror": "exact_duplicate",
    "near_duplicate": "near_duplicate",
    "not_html": "skipped",
    "disallowed": "skipped",
}
EXPECTED_REASON = {"not_html": "not_html", "disallowed": "robots_txt"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="DIR", default=DEFAULT_STORE,
        help=f"store directory, replaced if it is a store (default: {DEFAULT_STORE})",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress line")


def run(args: argparse.Namespace) -> int:
    from crawler.cli.crawl import crawl
    from crawler.config import Config, apply_overrides
    from crawler.demo import SITE_DIR, load_truth
    from crawler.demo.server import serve
    from storage.log import read_log

    store = Path(args.store)
    fresh_store(store)
    store.mkdir(parents=True, exist_ok=True)
    (store / DEMO_MARK).write_text("neardup demo replaces this store on its next run\n")
    config = apply_overrides(
        Config(),
        {"crawl.concurrency": 1, "crawl.autothrottle": False, "crawl.download_delay": 0.0},
    )
    config = replace(config, store=str(store))
    with serve(SITE_DIR) as base:
        outcome = crawl(config, [base + "/"], progress=not (args.quiet or args.json))
    entries = list(read_log(outcome.store / "logs", [outcome.run_id]))
    truth = load_truth()["pages"]
    rows = [_row(e, base, truth) for e in entries]
    mismatches = check_against_truth(rows, truth)
    report = {
        "site": base,
        "store": str(outcome.store),
        "log": str(outcome.log),
        "seconds": round(outcome.seconds, 3),
        "pages": rows,
        "matches_truth": not mismatches,
        "mismatches": mismatches,
        "crawl": outcome.to_dict(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report, outcome.render()))
    if outcome.exit_status:
        return outcome.exit_status
    return 0 if not mismatches else 1


def fresh_store(path: Path) -> None:
    """Make way for a new store at ``path``: remove an earlier demo's, refuse anything else.

    A store of the user's own crawls is never removed, even when named by mistake.
    """
    if not path.exists():
        return
    if not path.is_dir():
        raise UserError(f"--store {path} exists and is not a directory")
    if (path / DEMO_MARK).is_file():
        shutil.rmtree(path)
    elif (path / "index").exists() or (path / "manifest.json").exists():
        raise UserError(
            f"--store {path} is a neardup store the demo did not make; name another directory"
        )
    elif any(path.iterdir()):
        raise UserError(f"--store {path} exists and is not a neardup store; name another directory")


def _path(url: str | None, base: str) -> str | None:
    if url is None:
        return None
    if not url.startswith(base):
        return url
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _row(entry: dict[str, Any], base: str, truth: dict[str, Any]) -> dict[str, Any]:
    path = _path(entry["url"], base) or ""
    known = truth.get(path, {})
    return {
        "path": path,
        "decision": entry["decision"],
        "reason": entry.get("reason"),
        "detail": entry.get("detail"),
        "duplicate_of": _path(entry.get("duplicate_of"), base),
        "resemblance": entry.get("resemblance"),
        "kind": known.get("kind"),
        "of": known.get("of"),
        "true_resemblance": known.get("resemblance"),
        "change": known.get("change"),
    }


def check_against_truth(rows: list[dict[str, Any]], truth: dict[str, Any]) -> list[str]:
    """One line per page whose decision is not the one TRUTH.json implies (empty: all agree)."""
    problems = []
    by_path: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_path.setdefault(row["path"], []).append(row)
    for path, page in truth.items():
        want = EXPECTED.get(page["kind"])
        if want is None:  # robots.txt itself: fetched by Scrapy, not a page of the crawl
            continue
        got = by_path.get(path, [])
        if len(got) != 1:
            problems.append(f"{path}: {len(got)} decisions, expected one ({want})")
            continue
        row = got[0]
        if row["decision"] != want:
            problems.append(f"{path}: {row['decision']}, expected {want} ({page['kind']})")
        elif want in ("exact_duplicate", "near_duplicate") and row["duplicate_of"] != page["of"]:
            problems.append(f"{path}: duplicate of {row['duplicate_of']}, expected {page['of']}")
        elif page["kind"] in EXPECTED_REASON and row["reason"] != EXPECTED_REASON[page["kind"]]:
            problems.append(
                f"{path}: skipped as {row['reason']}, expected {EXPECTED_REASON[page['kind']]}"
            )
    for path in by_path:
        if path not in truth:
            problems.append(f"{path}: decided, but TRUTH.json does not list it")
    return problems


def render(report: dict[str, Any], summary: str) -> str:
    rows = report["pages"]
    width = max([len(r["path"]) for r in rows] + [4])
    dup_width = max([len(r["duplicate_of"] or "") for r in rows] + [12])
    lines = [
        f"The demo site, served on {report['site']}, crawled one page at a time:",
        "",
        f"{'path':<{width}}  {'decision':<15}  {'duplicate of':<{dup_width}}  resemblance",
    ]
    for r in rows:
        note = ""
        if r["decision"] in ("exact_duplicate", "near_duplicate", "contained"):
            note = f"{r['resemblance']:.2f}"
            if r["true_resemblance"] is not None and r["decision"] != "exact_duplicate":
                note += f" (exact {r['true_resemblance']:.2f}: {r['change']})"
            elif r["change"]:
                note += f" ({r['change']})"
        elif r["decision"] == "skipped":
            note = f"{r['reason']}: {r['detail']}" if r["detail"] else str(r["reason"])
        elif r["kind"] == "printable":
            note = f"kept: exact resemblance {r['true_resemblance']:.2f} to {r['of']}"
        lines.append(
            f"{r['path']:<{width}}  {r['decision']:<15}  {r['duplicate_of'] or '':<{dup_width}}  "
            f"{note}".rstrip()
        )
    lines += ["", summary, ""]
    total = len(rows)
    if report["matches_truth"]:
        printable = [r["true_resemblance"] for r in rows if r["kind"] == "printable"]
        why = (
            f" (printable versions resemble theirs at most {max(printable):.2f}, below the "
            "threshold, so they are kept too)"
            if printable
            else ""
        )
        lines.append(
            f"TRUTH.json agrees: all {total} decisions are what the site's truth says: every "
            "exact mirror dropped as an exact duplicate, every near duplicate dropped, every "
            f"original kept{why}."
        )
    else:
        lines.append(f"TRUTH.json disagrees on {len(report['mismatches'])} page(s):")
        lines += [f"  {m}" for m in report["mismatches"]]
    store = report["store"]
    lines += [
        "",
        "next:",
        f"  neardup verify --store {store}        check the store's integrity",
        f"  neardup recluster --store {store} -o clusters.jsonl --threshold 0.7",
        "                                        cluster the kept pages again, more loosely",
        "  neardup crawl https://example.org/ --store my-store   crawl a site of your own",
    ]
    return "\n".join(lines)
