"""``neardup log``: the decisions of a store's crawls as a table, filtered; or the JSON Lines."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from crawler.cli.common import UserError, add_config_arguments, resolve_config
from crawler.review.log import DECISION_GROUPS, LogFilter, LoggedDecision, decisions, parse_since
from crawler.review.textdiff import truncate_middle, width_of
from crawler.review.urls import common_origin, printed
from storage.records import DECISIONS

HELP = "list the decisions of a store's crawls (kept, dropped and why), filtered"
DESCRIPTION = """\
List the decisions recorded in a store's dedup logs, every run, oldest first: one row per page
with when it was decided, the decision, its URL, the page it duplicated (or why it was skipped)
and the estimated resemblance. URLs are cut in the middle to fit the terminal (80 columns when
the output is not one); when every URL shares one scheme and host, that is said once above the
table and the rows show paths.

Decisions: kept, exact_duplicate, near_duplicate, contained, skipped; "dropped" means the three
kinds of duplicate. --since takes an ISO date or time (2025-01-02, 2025-01-02T15:30, local time
unless it ends in Z or an offset) or an age: 30m, 2h, 1d, 1w.

--json writes the matching lines exactly as the log holds them (JSON Lines), for jq or pandas.
Reading works while a crawl is writing to the store.

examples:
  neardup log                                       everything in the default store
  neardup log --decision near_duplicate --since 1d  yesterday's near duplicates
  neardup log --decision dropped --url-contains /archive/ --limit 20
  neardup log --json | jq -r 'select(.resemblance >= 0.95) | .url'
  neardup log --json > decisions.jsonl        for pandas: pd.read_json(path, lines=True)
then, for one page: neardup explain PATH, with PATH as the table prints it (or a part of it)
"""

#: how the table names decisions (short enough for 80 columns)
LABELS = {
    "kept": "kept",
    "exact_duplicate": "exact dup",
    "near_duplicate": "near dup",
    "contained": "contained",
    "skipped": "skipped",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="DIR", help="store directory (default: 'store' in the config file)"
    )
    parser.add_argument(
        "--decision", "-d", metavar="D", action="append", default=[],
        help="only this decision: " + ", ".join([*DECISIONS, *DECISION_GROUPS])
        + " (repeatable, or comma-separated)",
    )  # fmt: skip
    parser.add_argument(
        "--url-contains", "-u", metavar="S", help="only URLs containing S (case-blind)"
    )
    parser.add_argument(
        "--since", metavar="T", help="only decisions at or after T: 2025-01-02, 2h, 30m, 1d ..."
    )
    parser.add_argument(
        "--limit", "-n", metavar="N", type=int, help="at most N decisions (the first N)"
    )
    parser.add_argument(
        "--json", action="store_true", help="the log lines themselves (JSON Lines), unchanged"
    )
    parser.add_argument(
        "--width", metavar="COLS", type=int,
        help="table width (default: the terminal's, 80 when not a terminal)",
    )  # fmt: skip
    add_config_arguments(parser)


def build_filter(args: argparse.Namespace) -> LogFilter:
    """The command line's filters, checked; a bad value is a UserError naming it."""
    names = [n.strip() for value in args.decision for n in value.split(",") if n.strip()]
    since = None
    if args.since:
        try:
            since = parse_since(args.since)
        except ValueError as exc:
            raise UserError(f"--since: {exc}") from None
    if args.limit is not None and args.limit < 0:
        raise UserError(f"--limit must be 0 or more; got {args.limit}")
    try:
        return LogFilter(
            decisions=names, url_contains=args.url_contains or None, since=since, limit=args.limit
        )
    except ValueError as exc:
        raise UserError(f"--decision: {exc}") from None


def run(args: argparse.Namespace) -> int:
    store = Path(args.store or resolve_config(args).store)
    if not (store / "index").is_dir() and not (store / "logs").is_dir():
        raise UserError(f"no store at {store} (give one with --store DIR)")
    filters = build_filter(args)
    # one more than asked, to say whether the limit cut anything off
    probe = LogFilter(
        decisions=filters.decisions,
        url_contains=filters.url_contains,
        since=filters.since,
        limit=None if filters.limit is None else filters.limit + 1,
    )
    try:
        if args.json:
            return _write_json(decisions(store, filters))
        rows = list(decisions(store, probe))
    except ValueError as exc:  # a damaged log line: name file and line
        raise UserError(str(exc)) from None
    more = filters.limit is not None and len(rows) > filters.limit
    rows = rows[: filters.limit] if filters.limit is not None else rows
    if not rows:
        print(_nothing(store, args))
        return 0
    width = args.width or shutil.get_terminal_size((80, 24)).columns
    print(render(rows, max(width, 60), more=more))
    return 0


def _write_json(found: Iterable[LoggedDecision]) -> int:
    """The lines as bytes, exactly as in the log (whatever the terminal's encoding)."""
    sys.stdout.flush()
    out = getattr(sys.stdout, "buffer", None)
    count = 0
    for logged in found:
        if out is not None:
            out.write(logged.line.encode("utf-8") + b"\n")
        else:
            sys.stdout.write(logged.line + "\n")
        count += 1
    if out is not None:
        out.flush()
    if count == 0:
        print("neardup log: no decisions match", file=sys.stderr)
    return 0


def _nothing(store: Path, args: argparse.Namespace) -> str:
    logs = sorted((store / "logs").glob("*.jsonl")) if (store / "logs").is_dir() else []
    if not logs:
        return f"The store {store} has no dedup log yet: crawl into it first (neardup crawl URL)."
    asked = [
        f"{name} {value}"
        for name, value in (
            ("--decision", ",".join(args.decision)),
            ("--url-contains", args.url_contains),
            ("--since", args.since),
            ("--limit", args.limit),
        )
        if value not in (None, "", [])
    ]
    if not asked:
        return f"The dedup logs of {store} hold no decisions yet."
    return (
        f"No decisions in {store} match {' '.join(asked)}. "
        "Loosen a filter, or see them all with: neardup log"
    )


# --- the table ----------------------------------------------------------------------------------


def _common_origin(rows: list[LoggedDecision]) -> str | None:
    """The scheme and host every URL in the table shares (pages and the pages they duplicated),
    if there is one: said once above the table, and the rows print the rest (the form
    :func:`crawler.review.urls.resolve` takes back)."""
    duplicated = [d for r in rows if isinstance(d := r.entry.get("duplicate_of"), str)]
    return common_origin([*(r.url for r in rows), *duplicated])


def _relative(url: str | None, host: str | None) -> str:
    return printed(url, host) if url else ""


def _time_format(rows: list[LoggedDecision]) -> tuple[str, str | None]:
    """The time column's format, and the day it leaves out (when every row is of one day)."""
    days = {time.strftime("%Y-%m-%d", time.localtime(r.time)) for r in rows if r.time is not None}
    if len(days) == 1:
        return "%H:%M:%S", days.pop()
    years = {day[:4] for day in days}
    if years <= {str(time.localtime().tm_year)}:
        return "%m-%d %H:%M:%S", None
    return "%Y-%m-%d %H:%M:%S", None


def _second_column(entry: dict[str, Any], origin: str | None) -> str:
    if entry.get("decision") == "skipped":
        reason = entry.get("reason") or "unknown"
        return f"({reason})"
    if entry.get("decision") == "kept" and str(entry.get("reason") or "").startswith("not stored"):
        return "(not stored)"
    return _relative(entry.get("duplicate_of"), origin)


def _resemblance(entry: dict[str, Any]) -> str:
    value = entry.get("resemblance")
    if isinstance(value, (int, float)) and entry.get("decision") != "kept":
        return f"{value:.2f}"
    return ""


def render(rows: list[LoggedDecision], width: int = 80, *, more: bool = False) -> str:
    """The rows as a table ``width`` columns wide, URLs cut in the middle to fit."""
    origin = _common_origin(rows)
    fmt, day = _time_format(rows)
    cells = [
        (
            "" if r.time is None else time.strftime(fmt, time.localtime(r.time)),
            LABELS.get(r.decision, r.decision),
            _relative(r.url, origin),
            _second_column(r.entry, origin),
            _resemblance(r.entry),
        )
        for r in rows
    ]
    head = ("time", "decision", "URL", "duplicate of", "res.")
    # time as wide as its format; decision and resemblance always as wide as they can get
    fixed = [max(width_of(c[0]) for c in [head, *cells]), max(map(len, LABELS.values())), 4]
    room = width - sum(fixed) - 2 * 4  # four gaps of two spaces
    url_w, dup_w = _split(
        room,
        max(width_of(c[2]) for c in [head, *cells]),
        max(width_of(c[3]) for c in [head, *cells]),
    )
    lines = []
    said = [f"decided on {day} (local time)" if day else "", f"URLs on {origin}" if origin else ""]
    if any(said):
        lines.append("; ".join(x for x in said if x))
    for n, c in enumerate([head, *cells]):
        parts = [
            _pad(c[0], fixed[0]),
            _pad(c[1], fixed[1]),
            _pad(truncate_middle(c[2], url_w), url_w),
            _pad(truncate_middle(c[3], dup_w), dup_w),
            c[4].rjust(fixed[2]),
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in (fixed[0], fixed[1], url_w, dup_w, fixed[2])))
    shown = len(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.decision] = counts.get(r.decision, 0) + 1
    summary = ", ".join(f"{LABELS.get(k, k)} {v:,}" for k, v in counts.items())
    noun = "decision" if shown == 1 else "decisions"
    lines.append(f"{shown:,} {noun}: {summary}")
    if more:
        lines.append("more decisions match: raise --limit to see them")
    return "\n".join(lines)


def _split(room: int, url_need: int, dup_need: int) -> tuple[int, int]:
    """Share ``room`` between the two URL columns: each gets what it needs if both fit,
    else the shorter need is met up to half and the rest goes to the other."""
    room = max(room, 20)
    if url_need + dup_need <= room:
        return url_need, dup_need
    half = room // 2
    if dup_need <= half:
        return room - dup_need, dup_need
    if url_need <= half:
        return url_need, room - url_need
    dup = room * 9 // 20  # the page's own URL matters a little more
    return room - dup, dup


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - width_of(text))
