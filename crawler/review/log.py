"""What a crawl decided: its dedup logs, read and filtered, for ``neardup log`` and the report.

:func:`decisions` reads the store's dedup logs (every run, oldest first), filtered by a
:class:`LogFilter`, each line both parsed and exactly as written (:class:`LoggedDecision`), so a
tool can pass the JSON Lines through byte for byte. Everything here only reads: it works while a
crawl writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from storage.log import read_log_lines
from storage.records import DECISIONS, DROPPED
from storage.store import Store

__all__ = [
    "DECISION_GROUPS",
    "LogFilter",
    "LoggedDecision",
    "decisions",
    "logged_lines",
    "parse_since",
]

#: names a filter accepts besides the decisions themselves
DECISION_GROUPS: dict[str, tuple[str, ...]] = {"dropped": DROPPED}


@dataclass(frozen=True)
class LoggedDecision:
    """One line of a dedup log: parsed, and exactly as written."""

    #: the run (the log file's name without ``.jsonl``)
    run: str
    #: the line as it is in the file, without its newline
    line: str
    #: the decoded object, with a ``run`` key added (as :func:`storage.log.read_log` adds it)
    entry: dict[str, Any]

    @property
    def url(self) -> str:
        return str(self.entry.get("url") or "")

    @property
    def decision(self) -> str:
        return str(self.entry.get("decision") or "")

    @property
    def time(self) -> float | None:
        value = self.entry.get("time")
        return float(value) if isinstance(value, (int, float)) else None


@dataclass(frozen=True)
class LogFilter:
    """Which log lines :func:`decisions` yields; every condition given must hold.

    ``decisions`` names decisions (or ``dropped`` for all three kinds of duplicate); an unknown
    name is a ``ValueError`` that lists the known ones. ``url_contains`` matches case-blind.
    ``since`` is seconds since the epoch (see :func:`parse_since`); ``limit`` stops after that
    many lines; ``runs`` restricts to named runs.

    >>> LogFilter(decisions=("dropped",)).decisions == frozenset(DROPPED)
    True
    """

    decisions: frozenset[str] | Iterable[str] = frozenset()
    url_contains: str | None = None
    since: float | None = None
    limit: int | None = None
    runs: tuple[str, ...] | None = None

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
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise ValueError(f"limit must be a non-negative integer; got {self.limit!r}")
        if self.runs is not None:
            object.__setattr__(self, "runs", tuple(self.runs))

    def matches(self, entry: dict[str, Any]) -> bool:
        if self.decisions and entry.get("decision") not in self.decisions:
            return False
        if self.url_contains and self.url_contains.casefold() not in str(
            entry.get("url") or ""
        ).casefold():
            return False
        if self.since is not None:
            when = entry.get("time")
            if not isinstance(when, (int, float)) or when < self.since:
                return False
        return True


def _logs_dir(store: Store | str | os.PathLike[str]) -> Path:
    return (store.path if isinstance(store, Store) else Path(store)) / "logs"


def _read_lines(directory: Path, runs: Iterable[str] | None) -> Iterator[LoggedDecision]:
    """Every line of the runs' logs in order, read by :func:`storage.log.read_log_lines`."""
    for run, line, entry in read_log_lines(directory, runs):
        yield LoggedDecision(run, line, entry)


def decisions(
    store: Store | str | os.PathLike[str], filters: LogFilter | None = None
) -> Iterator[LoggedDecision]:
    """The logged decisions of a store (an open :class:`Store` or its directory) that pass
    ``filters``, every run oldest first, each run's lines in the order they were written.

    Reads only the log files, never the index, so it runs beside a crawl that is writing (a
    line being written is not yet complete and is not read). A store without logs yields
    nothing. For pandas: ``pd.DataFrame(d.entry for d in decisions(path))``.
    """
    filters = filters or LogFilter()
    if filters.limit == 0:
        return
    count = 0
    for logged in _read_lines(_logs_dir(store), filters.runs):
        if filters.matches(logged.entry):
            yield logged
            count += 1
            if filters.limit is not None and count >= filters.limit:
                return


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


def logged_lines(store: Store | str | os.PathLike[str]) -> Iterator[LoggedDecision]:
    """Every line of every run's dedup log, oldest run first, unfiltered."""
    return _read_lines(_logs_dir(store), None)
