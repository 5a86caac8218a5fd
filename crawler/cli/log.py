"""``neardup log``: the decisions of a store's crawls (or of the nodes of one crawl) as a table,
filtered; or the JSON Lines."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crawler.cli.common import UserError, add_config_arguments, resolve_config
from crawler.review.log import (
    CHANGES,
    DECISION_GROUPS,
    LogFilter,
    LoggedDecision,
    decisions,
    latest_run,
    parse_since,
)
from crawler.review.stores import distinct, open_stores
from crawler.review.textdiff import truncate_middle, width_of
from crawler.review.url_forms import readable
from crawler.review.urls import common_origin, printed
from storage.errors import StoreError
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

A store crawled again is in its run 2, 3, ...: each decision of a recrawl says what changed for
its URL since the previous run (new, unchanged, changed, gone), shown in a change column with
the resemblance of a changed page to its previous content, and "re-decided" for a page decided
again because the kept page of its cluster changed or is gone. --run N shows one run (--run
last: the latest), --change C the pages that changed so. A URL decided, then re-decided in one
run has two rows, both with its change in the run; its last is its state at the end of it.

Several --store are the nodes of one distributed crawl: their decisions are merged in the
crawl's order and a node column says which node decided each.

--json writes the matching lines exactly as the log holds them (JSON Lines), for jq or pandas.
Reading works while a crawl is writing to the store.

examples:
  neardup log                                       everything in the default store
  neardup log --decision near_duplicate --since 1d  yesterday's near duplicates
  neardup log --decision dropped --url-contains /archive/ --limit 20
  neardup log --run last --change changed,gone      what the latest recrawl found changed
  neardup log --store node1 --store node2 --store node3   the nodes of one crawl
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
        "--store", metavar="DIR", action="append",
        help="store directory (default: 'store' in the config file); repeat it for the nodes "
        "of one distributed crawl",
    )  # fmt: skip
    parser.add_argument(
        "--decision", "-d", metavar="D", action="append", default=[],
        help="only this decision: " + ", ".join([*DECISIONS, *DECISION_GROUPS])
        + " (repeatable, or comma-separated)",
    )  # fmt: skip
    parser.add_argument(
        "--change", "-c", metavar="C", action="append", default=[],
        help="only pages that changed so since the previous run: " + ", ".join(CHANGES)
        + " (repeatable, or comma-separated)",
    )  # fmt: skip
    parser.add_argument(
        "--run", "-r", metavar="N", action="append", default=[], dest="runs",
        help="only the decisions of crawl run N (1 the first crawl, 2 the next, ...) or 'last' "
        "(repeatable, or comma-separated; default: every run)",
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


def _names(values: list[str]) -> list[str]:
    """A repeatable option's values, each possibly comma-separated."""
    return [n.strip() for value in values for n in value.split(",") if n.strip()]


def store_paths(args: argparse.Namespace) -> list[Path]:
    """The ``--store`` directories (the configuration's store without one), each once; several
    must be the stores of one crawl's nodes (the only look at their indexes: the log itself
    is read from the log files alone)."""
    try:
        paths = distinct(args.store or [resolve_config(args).store])
        if len(paths) > 1:
            with open_stores(paths):
                pass
    except (ValueError, StoreError) as exc:
        raise UserError(str(exc)) from None
    return paths


def build_filter(args: argparse.Namespace, stores: list[Path]) -> LogFilter:
    """The command line's filters, checked; a bad value is a UserError naming it."""
    since = None
    if args.since:
        try:
            since = parse_since(args.since)
        except ValueError as exc:
            raise UserError(f"--since: {exc}") from None
    if args.limit is not None and args.limit < 0:
        raise UserError(f"--limit must be 0 or more; got {args.limit}")
    try:
        decided = LogFilter(decisions=_names(args.decision))
    except ValueError as exc:
        raise UserError(f"--decision: {exc}") from None
    try:
        changes = LogFilter(changes=_names(args.change)).changes
    except ValueError as exc:
        raise UserError(f"--change: {exc}") from None
    return LogFilter(
        decisions=decided.decisions,
        changes=changes,
        runs=_runs(_names(args.runs), stores),
        url_contains=args.url_contains or None,
        since=since,
        limit=args.limit,
    )


def _runs(names: list[str], stores: list[Path]) -> frozenset[int] | None:
    """``--run``'s values as run numbers ('last': the latest run of the stores' logs)."""
    if not names:
        return None
    runs: set[int] = set()
    for name in names:
        if name.lower() == "last":
            latest = latest_run(stores)
            runs.add(1 if latest is None else latest)
            continue
        try:
            number = int(name)
        except ValueError:
            number = 0
        if number < 1:
            raise UserError(
                f"--run: a crawl run is a number from 1 (1 the first crawl) or 'last'; got {name!r}"
            )
        runs.add(number)
    return frozenset(runs)


def run(args: argparse.Namespace) -> int:
    stores = store_paths(args)
    for store in stores:
        if not (store / "index").is_dir() and not (store / "logs").is_dir():
            raise UserError(f"no store at {store} (give one with --store DIR)")
    filters = build_filter(args, stores)
    # one more than asked, to say whether the limit cut anything off
    probe = replace(filters, limit=None if filters.limit is None else filters.limit + 1)
    try:
        if args.json:
            return _write_json(decisions(stores, filters))
        rows = list(decisions(stores, probe))
    except ValueError as exc:  # a damaged log line: name file and line
        raise UserError(str(exc)) from None
    more = filters.limit is not None and len(rows) > filters.limit
    rows = rows[: filters.limit] if filters.limit is not None else rows
    if not rows:
        print(_nothing(stores, args))
        return 0
    width = args.width or shutil.get_terminal_size((80, 24)).columns
    names = [str(s) for s in stores] if len(stores) > 1 else None
    print(render(rows, max(width, 60), more=more, stores=names))
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


def _nothing(stores: list[Path], args: argparse.Namespace) -> str:
    named = str(stores[0]) if len(stores) == 1 else ", ".join(map(str, stores))
    logs = [log for store in stores for log in _logs(store)]
    if not logs:
        if len(stores) > 1:
            return f"None of the stores {named} has a dedup log yet: crawl into them first."
        return f"The store {named} has no dedup log yet: crawl into it first (neardup crawl URL)."
    asked = [
        f"{name} {value}"
        for name, value in (
            ("--decision", ",".join(args.decision)),
            ("--change", ",".join(args.change)),
            ("--run", ",".join(args.runs)),
            ("--url-contains", args.url_contains),
            ("--since", args.since),
            ("--limit", args.limit),
        )
        if value not in (None, "", [])
    ]
    if not asked:
        return f"The dedup logs of {named} hold no decisions yet."
    return (
        f"No decisions in {named} match {' '.join(asked)}. "
        "Loosen a filter, or see them all with: neardup log"
    )


def _logs(store: Path) -> list[Path]:
    return sorted((store / "logs").glob("*.jsonl")) if (store / "logs").is_dir() else []


# --- the table ----------------------------------------------------------------------------------


def _common_origin(rows: list[LoggedDecision]) -> str | None:
    """The scheme and host every URL in the table shares (pages and the pages they duplicated),
    if there is one: said once above the table, and the rows print the rest (the form
    :func:`crawler.review.urls.resolve` takes back)."""
    duplicated = [d for r in rows if isinstance(d := r.entry.get("duplicate_of"), str)]
    return common_origin([*(r.url for r in rows), *duplicated])


def _relative(url: str | None, host: str | None) -> str:
    return readable(printed(url, host)) if url else ""


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


#: the change column's widest cell: "changed 0.62" (with the resemblance to the old content)
_CHANGE_WIDTH = len("changed 0.00")


def _change(row: LoggedDecision) -> str:
    """The change column: what changed since the previous run; a changed page with its
    resemblance to its previous content; a page decided again for its kept page."""
    if row.redecided:
        return "re-decided"
    value = row.entry.get("change_resemblance")
    if row.change == "changed" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"changed {value:.2f}"
    return row.change


def _node(row: LoggedDecision, stores: Sequence[str] | None) -> str:
    """The node column: the line's node; a line without one, its store's directory name."""
    if row.node is not None:
        return row.node
    return Path(stores[row.store]).name if stores else ""


@dataclass(frozen=True)
class _Column:
    head: str
    cells: list[str]
    #: "url": shares what is left; "right": a number, right-aligned
    kind: str = ""
    width: int = 0


def render(
    rows: list[LoggedDecision],
    width: int = 80,
    *,
    more: bool = False,
    stores: Sequence[str] | None = None,
) -> str:
    """The rows as a table ``width`` columns wide, URLs cut in the middle to fit.

    Columns beyond today's appear when the rows need them: ``run`` when they span several
    crawl runs, ``node`` when they name nodes (or come from several ``stores``: their
    directories), ``change`` when some are of a recrawl (run 2 or later: in a first crawl
    every page is new).
    """
    origin = _common_origin(rows)
    fmt, day = _time_format(rows)
    times = ["" if r.time is None else time.strftime(fmt, time.localtime(r.time)) for r in rows]
    columns = [_Column("time", times)]
    if len({r.run for r in rows}) > 1:
        columns.append(_Column("run", [str(r.run) for r in rows], "right"))
    if stores or any(r.node is not None for r in rows):
        columns.append(_Column("node", [_node(r, stores) for r in rows]))
    columns += [
        _Column("decision", [LABELS.get(r.decision, r.decision) for r in rows],
                width=max(map(len, LABELS.values()))),
        _Column("URL", [_relative(r.url, origin) for r in rows], "url"),
        _Column("duplicate of", [_second_column(r.entry, origin) for r in rows], "url"),
        _Column("res.", [_resemblance(r.entry) for r in rows], "right", width=4),
    ]  # fmt: skip
    changes = any(r.run > 1 for r in rows)  # a first crawl's pages are all new: said once
    if changes:
        columns.append(_Column("change", [_change(r) for r in rows], width=_CHANGE_WIDTH))
    # fixed columns as wide as their widest cell (or their set width); the URLs share the rest
    widths = [
        0 if c.kind == "url" else max(c.width, *(width_of(x) for x in [c.head, *c.cells]))
        for c in columns
    ]
    room = width - sum(widths) - 2 * (len(columns) - 1)
    url_w, dup_w = _split(
        room, *(max(width_of(x) for x in [c.head, *c.cells]) for c in columns if c.kind == "url")
    )
    widths = [w if c.kind != "url" else (url_w if c.head == "URL" else dup_w)
              for c, w in zip(columns, widths)]  # fmt: skip
    lines = []
    said = [f"decided on {day} (local time)" if day else "", f"URLs on {origin}" if origin else ""]
    if any(said):
        lines.append("; ".join(x for x in said if x))
    for n in range(-1, len(rows)):
        parts = []
        for c, w in zip(columns, widths):
            text = c.head if n < 0 else c.cells[n]
            if c.kind == "url":
                parts.append(_pad(truncate_middle(text, w), w))
            elif c.kind == "right":
                parts.append(text.rjust(w))
            else:
                parts.append(_pad(text, w))
        lines.append("  ".join(parts).rstrip())
        if n < 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(_summary(rows))
    if changes:
        lines.append(_change_summary(rows))
    if more:
        lines.append("more decisions match: raise --limit to see them")
    return "\n".join(lines)


def _summary(rows: list[LoggedDecision]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.decision] = counts.get(r.decision, 0) + 1
    summary = ", ".join(f"{LABELS.get(k, k)} {v:,}" for k, v in counts.items())
    noun = "decision" if len(rows) == 1 else "decisions"
    return f"{len(rows):,} {noun}: {summary}"


def _change_summary(rows: list[LoggedDecision]) -> str:
    """The rows by change (:attr:`LoggedDecision.change`), in the order of :data:`CHANGES`, and
    the re-decided ones apart."""
    counts = dict.fromkeys(CHANGES, 0)
    redecided = 0
    for r in rows:
        if r.redecided:
            redecided += 1
        else:
            counts[r.change] = counts.get(r.change, 0) + 1
    parts = [f"{name} {count:,}" for name, count in counts.items() if count]
    if redecided:
        parts.append(f"re-decided {redecided:,}")
    return "changes: " + ", ".join(parts)


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
