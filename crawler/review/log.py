"""What a crawl decided: its dedup logs, read and filtered, for ``neardup log`` and the report.

:func:`decisions` reads the dedup logs of a store, or of the stores of one distributed crawl
(every log, oldest first), filtered by a :class:`LogFilter`, each line both parsed and exactly
as written (:class:`LoggedDecision`), so a tool can pass the JSON Lines through byte for byte.
Everything here only reads: it works while a crawl writes.

**Runs and changes.** A store is crawled in runs (1 for the first crawl, 2 for the recrawl after
it, ...); each line names its run (``crawl_run``) and what changed for its URL since the
previous run (``change``: :data:`CHANGES`). A URL can have several lines in one run (decided,
then re-decided because the kept page of its cluster changed): together they are its state at
the end of that run (:class:`crawler.review.changes.RunState`; its decision is its last line's).
Such a later line says ``unchanged`` (nothing was fetched for it), but its URL's change in the
run is what its earlier line said: :func:`decisions` gives the line that change
(:attr:`LoggedDecision.change`) and filters by it, so a page that changed, was dropped as a copy
of a page that then went and was kept by a re-decision is all ``changed``.
Lines written before runs were logged have neither field and read as run 1, change ``new``.

**Several stores.** Each node of a distributed crawl keeps its own store, and each line names
its node (``I/K``) and its place in the whole crawl's order (``order``). Given several stores,
:func:`decisions` merges their lines in that order (:func:`crawl_order`): run, then ``order``,
then time for lines without one. Each store's own lines are already in that order (a node
takes its places in the order one after another), so the merge streams: it holds one line per
store, whatever the crawl's size.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Union

from crawler.review.url_forms import as_crawled
from storage.log import list_runs, read_log_lines
from storage.records import DECISIONS, DROPPED
from storage.store import Store

__all__ = [
    "CHANGES",
    "DECISION_GROUPS",
    "LogFilter",
    "LoggedDecision",
    "StoreLike",
    "change_of",
    "crawl_order",
    "crawl_run_of",
    "decisions",
    "latest_run",
    "logged_lines",
    "parse_since",
]

#: names a filter accepts besides the decisions themselves
DECISION_GROUPS: dict[str, tuple[str, ...]] = {"dropped": DROPPED}

#: what a line's ``change`` says happened to its URL since the previous run: not known to the
#: store before, the same content (a 304, or the same payload), other content, or no answer
#: (404, 410, no longer answering)
CHANGES = ("new", "unchanged", "changed", "gone")

#: a store given as an open :class:`Store` or as its directory
StoreLike = Union[Store, str, "os.PathLike[str]"]


def crawl_run_of(entry: dict[str, Any]) -> int:
    """The crawl run a log line belongs to: its ``crawl_run``, 1 for a line without one (a line
    written before runs were logged).

    >>> crawl_run_of({"crawl_run": 3}), crawl_run_of({}), crawl_run_of({"crawl_run": None})
    (3, 1, 1)
    """
    value = entry.get("crawl_run")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return 1


def change_of(entry: dict[str, Any]) -> str:
    """What changed for the line's URL since the previous run: its ``change``, ``new`` for a
    line without one (the store did not know the URL: a first crawl)."""
    value = entry.get("change")
    return value if isinstance(value, str) and value else "new"


@dataclass(frozen=True)
class LoggedDecision:
    """One line of a dedup log: parsed, and exactly as written."""

    #: the log it is in (its file's name without ``.jsonl``: one per process that wrote)
    log_id: str
    #: the line as it is in the file, without its newline
    line: str
    #: the decoded object
    entry: dict[str, Any]
    #: which of the stores read it comes from (0 when one store was read)
    store: int = 0
    #: its URL's change in the run as an earlier line of the run said it, where this line
    #: says ``unchanged`` (set by :func:`decisions`)
    said_before: str | None = None

    @property
    def url(self) -> str:
        return str(self.entry.get("url") or "")

    @property
    def decision(self) -> str:
        return str(self.entry.get("decision") or "")

    @property
    def time(self) -> float | None:
        value = self.entry.get("time")
        return float(value) if _is_number(value) else None

    @property
    def run(self) -> int:
        """The crawl run (:func:`crawl_run_of`)."""
        return crawl_run_of(self.entry)

    @property
    def change(self) -> str:
        """What changed for its URL since the previous run, as of this line: the line's own
        change (:func:`change_of`), or an earlier line's of the same run where this one says
        ``unchanged`` (a re-decision, or the full fetch of a page a re-decision kept)."""
        return self.said_before or change_of(self.entry)

    @property
    def redecided(self) -> bool:
        """Decided again because the kept page of its cluster changed or is gone."""
        return self.entry.get("redecided") is True

    @property
    def node(self) -> str | None:
        """The node of a distributed crawl that decided it (``I/K``), if the line says."""
        value = self.entry.get("node")
        return value if isinstance(value, str) and value else None

    @property
    def order(self) -> int | None:
        """Its place in the whole crawl's order of decisions, if the line says."""
        value = self.entry.get("order")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def crawl_order(logged: LoggedDecision) -> tuple[int, float, float]:
    """The key that puts lines of several stores in the crawl's global order: the run, then
    the line's ``order`` (lines without one after those with one), then its time."""
    order = logged.order
    when = logged.time
    return (logged.run, math.inf if order is None else order, 0.0 if when is None else when)


@dataclass(frozen=True)
class LogFilter:
    """Which log lines :func:`decisions` yields; every condition given must hold.

    ``decisions`` names decisions (or ``dropped`` for all three kinds of duplicate), ``changes``
    names changes (:data:`CHANGES`); an unknown name is a ``ValueError`` that lists the known
    ones. ``url_contains`` matches case-blind, as typed or as the crawl writes URLs
    (:func:`crawler.review.url_forms.as_crawled`). ``since`` is seconds since the epoch (see
    :func:`parse_since`); ``limit`` stops after that many lines; ``runs`` keeps the lines of
    those crawl runs (numbers; :func:`latest_run` finds the latest); ``logs`` reads only the
    named logs.

    >>> LogFilter(decisions=("dropped",)).decisions == frozenset(DROPPED)
    True
    >>> LogFilter(changes=["changed", "gone"]).matches({"change": "gone"})
    True
    >>> LogFilter(runs=[2]).matches({"url": "http://a.test/"})  # a line without a run: run 1
    False
    """

    decisions: frozenset[str] | Iterable[str] = frozenset()
    url_contains: str | None = None
    since: float | None = None
    limit: int | None = None
    changes: frozenset[str] | Iterable[str] = frozenset()
    runs: frozenset[int] | Iterable[int] | None = None
    logs: tuple[str, ...] | None = None
    _url_forms: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names: set[str] = set()
        for name in self.decisions:
            if name in DECISION_GROUPS:
                names.update(DECISION_GROUPS[name])
            elif name in DECISIONS:
                names.add(name)
            else:
                known = ", ".join([*DECISIONS, *DECISION_GROUPS])
                raise ValueError(f"unknown decision {name!r} (known: {known})")
        object.__setattr__(self, "decisions", frozenset(names))
        changes = frozenset(self.changes)
        for name in sorted(changes - set(CHANGES)):
            raise ValueError(f"unknown change {name!r} (known: {', '.join(CHANGES)})")
        object.__setattr__(self, "changes", changes)
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise ValueError(f"limit must be a non-negative integer; got {self.limit!r}")
        if self.runs is not None:
            runs = frozenset(self.runs)
            for run in runs:
                if isinstance(run, bool) or not isinstance(run, int) or run < 1:
                    raise ValueError(f"a run is a number from 1; got {run!r}")
            object.__setattr__(self, "runs", runs)
        if self.logs is not None:
            object.__setattr__(self, "logs", tuple(self.logs))
        if self.url_contains:
            # as typed, and as the crawl writes URLs: café finds caf%C3%A9
            forms = {self.url_contains.casefold(), as_crawled(self.url_contains).casefold()}
            object.__setattr__(self, "_url_forms", tuple(forms))

    def matches(self, entry: dict[str, Any], change: str | None = None) -> bool:
        """Whether a line passes; ``change``: its URL's change in the run as of this line, when
        that is not the line's own (:attr:`LoggedDecision.change`)."""
        if self.decisions and entry.get("decision") not in self.decisions:
            return False
        if self.changes and (change or change_of(entry)) not in self.changes:
            return False
        if self.runs is not None and crawl_run_of(entry) not in self.runs:
            return False
        if self.url_contains:
            url = str(entry.get("url") or "").casefold()
            if not any(form in url for form in self._url_forms):
                return False
        if self.since is not None:
            when = entry.get("time")
            if not _is_number(when) or when < self.since:
                return False
        return True


def _logs_dir(store: StoreLike) -> Path:
    return (store.path if isinstance(store, Store) else Path(store)) / "logs"


def _read_lines(
    directory: Path, logs: Iterable[str] | None, store: int = 0
) -> Iterator[LoggedDecision]:
    """Every line of the logs in order, read by :func:`storage.log.read_log_lines`."""
    for log_id, line, entry in read_log_lines(directory, logs):
        yield LoggedDecision(log_id, line, entry, store)


def _as_list(stores: StoreLike | Sequence[StoreLike]) -> list[StoreLike]:
    if isinstance(stores, (Store, str, os.PathLike)):
        return [stores]
    return list(stores)


def decisions(
    stores: StoreLike | Sequence[StoreLike], filters: LogFilter | None = None
) -> Iterator[LoggedDecision]:
    """The logged decisions of a store (an open :class:`Store` or its directory), or of several
    (the nodes of one crawl), that pass ``filters``.

    One store: every log oldest first, each log's lines in the order they were written.
    Several: their lines merged in the crawl's order (:func:`crawl_order`), each line's
    ``store`` saying which it came from. Reads only the log files, never the index, so it runs
    beside a crawl that is writing (a line being written is not yet complete and is not read).
    A store without logs yields nothing. For pandas:
    ``pd.DataFrame(d.entry for d in decisions(path))``.
    """
    filters = filters or LogFilter()
    if filters.limit == 0:
        return
    count = 0
    for logged in _with_earlier_changes(_merged(_as_list(stores), filters.logs)):
        if filters.matches(logged.entry, logged.said_before):
            yield logged
            count += 1
            if filters.limit is not None and count >= filters.limit:
                return


def _with_earlier_changes(lines: Iterable[LoggedDecision]) -> Iterator[LoggedDecision]:
    """The lines in the crawl's order, a line that says ``unchanged`` given its URL's change as
    an earlier line of its run said it (:attr:`LoggedDecision.said_before`), as
    :meth:`crawler.review.changes.RunState.then` reads a run.

    Only a page dropped as a duplicate is decided again later in its run (its kept page
    changed or went), and no page in a first crawl: the lines remembered are the dropped pages
    of a recrawl that were new or changed, and only those of the run being read.
    """
    run = 0
    said: dict[str, str] = {}
    for logged in lines:
        if logged.run != run:
            run, said = logged.run, {}
        own = change_of(logged.entry)
        if own == "unchanged":
            earlier = said.get(logged.url)
            yield logged if earlier is None else replace(logged, said_before=earlier)
            continue
        if run > 1 and logged.decision in DROPPED:
            said[logged.url] = own
        else:
            said.pop(logged.url, None)
        yield logged


def _merged(stores: list[StoreLike], logs: Iterable[str] | None) -> Iterator[LoggedDecision]:
    streams = [_read_lines(_logs_dir(s), logs, n) for n, s in enumerate(stores)]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=crawl_order)


def latest_run(stores: StoreLike | Sequence[StoreLike]) -> int | None:
    """The latest crawl run the stores' logs hold (None without a line).

    Logs are named by when their process started and runs follow one another, so the latest
    run is in each store's newest log that holds a line: only those are read.
    """
    latest: int | None = None
    for store in _as_list(stores):
        directory = _logs_dir(store)
        for log_id in reversed(list_runs(directory)):
            runs = [logged.run for logged in _read_lines(directory, [log_id])]
            if runs:
                latest = max(runs) if latest is None else max(latest, *runs)
                break
    return latest


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: datetime | None = None) -> float:
    """Seconds since the epoch for ``--since``: an ISO date or time, or an age like ``2h``.

    Ages: a number and one of ``s``, ``m``, ``h``, ``d``, ``w`` (seconds to weeks) before
    ``now``. Dates and times: ISO 8601 (``2025-01-02``, ``2025-01-02T03:04``, ``2025-01-02
    03:04:05+01:00``, a final ``Z`` for UTC); without an offset they are local time.

    >>> now = datetime(2025, 1, 2, 12, 0, tzinfo=timezone.utc)
    >>> parse_since("2h", now) == (now - timedelta(hours=2)).timestamp()
    True
    >>> parse_since("2025-01-02T10:00Z") == parse_since("2h", now)
    True
    >>> parse_since("yesterday")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot read 'yesterday' as a time: give an ISO date or time (2025-01-02, ...
    """
    match = _RELATIVE.match(text)
    if match:
        number, unit = float(match.group(1)), match.group(2).lower()
        now = now or datetime.now(timezone.utc)
        return (now - timedelta(seconds=number * _SECONDS[unit])).timestamp()
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"cannot read {text!r} as a time: give an ISO date or time (2025-01-02, "
            "2025-01-02T15:30) or an age (30m, 2h, 1d, 1w)"
        ) from None
    return when.timestamp()  # a naive datetime is local time


def logged_lines(store: StoreLike) -> Iterator[LoggedDecision]:
    """Every line of every log of one store, oldest log first, unfiltered."""
    return _read_lines(_logs_dir(store), None)
