"""What a step of the crawl's work gives back, as plain data that crosses the worker's pipe.

:class:`Outcome` is what one step made of a page (the drop to raise, the stats to count, whether
its links are followed), :class:`Failure` why the work stopped, :class:`Tally` what the run
decided and committed. :mod:`crawler.work.steps` makes them; the session
(:mod:`crawler.pipelines.session`) reads them on the event-loop thread. Like the steps, this
module imports nothing of Scrapy.
"""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from storage.errors import StoreError, StoreWriteError

__all__ = ["STORE_FAILURES", "Failure", "Outcome", "Tally"]

#: what the store raises when it cannot be read or written (see crawler.work.steps)
STORE_FAILURES = (OSError, lmdb.Error, StoreError)


@dataclass
class Tally:
    """What this run decided and committed (the command's end summary reads it): a decision
    is counted once the batch holding it has committed, so a summary never counts a page the
    store does not have."""

    decisions: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    already_decided: int = 0
    commits: int = 0
    #: decisions made but lost with a batch that could not commit (decided again next run)
    not_committed: int = 0
    #: what changed since the store's last run: new, unchanged, changed, gone, and the pages
    #: decided again because the kept page they duplicated changed (redecided)
    changes: Counter[str] = field(default_factory=Counter)
    #: the crawl run was begun by an earlier process (killed or stopped): the counts are this
    #: process's part of it
    run_resumed: bool = False


@dataclass(frozen=True)
class Failure:
    """Why the work stopped: ``kind`` is "store" (the store could not be written), "bug" (an
    error in the code) or "worker" (the worker process went away); ``line`` says it in one
    line, ``details`` (the traceback) says where."""

    kind: str
    line: str
    details: str = ""

    @classmethod
    def of(cls, exc: BaseException, url: str | None, store: str | None = None) -> Failure:
        """The failure an exception raised in a step means (:mod:`crawler.work.steps`,
        *Failures*); a store failure is said as its cause and its place in ``store``
        (:class:`~storage.errors.StoreWriteError`)."""
        details = "".join(traceback.format_exception(exc)).rstrip()
        if isinstance(exc, StoreError):
            return cls("store", _one_line(str(exc)), details)
        if isinstance(exc, STORE_FAILURES):
            root = Path(store) if store is not None else Path(".")
            where = root / "index" if isinstance(exc, lmdb.Error) else root
            return cls("store", _one_line(str(StoreWriteError.of(exc, where))), details)
        where = f" while deciding {url}" if url else ""
        what = f"{type(exc).__name__}: {_one_line(str(exc)) or 'no message'}"
        return cls("bug", f"internal error{where} ({what})", details)

    @property
    def drop_message(self) -> str:
        """The one-line message of the drop of the page whose step failed."""
        if self.kind == "store":
            return f"not decided: the store failed ({self.line})"
        return f"not decided: {self.line}"


@dataclass(frozen=True)
class Outcome:
    """What a step made of a page, as plain data (it crosses the pipe from the worker).

    ``drop`` names the ``DropItem`` subclass to raise (``crawler.pipelines.DROPS``), with its
    ``message`` and log level, and whether the page's links are followed; None passes the item
    on. ``counts`` are the ``neardup/`` stats to
    add one to (counted on the event-loop thread, where Scrapy's stats live). ``failure`` says
    that the work stopped, and why: the crawl is stopped.
    """

    drop: str | None = None
    message: str = ""
    level: str | None = None
    counts: tuple[str, ...] = ()
    #: the WARC bytes of a page stored in this step (``neardup/stored_bytes``)
    stored_bytes: int = 0
    failure: Failure | None = None
    #: a dropped page's run along its link path, and whether its links are followed
    #: (:mod:`crawler.work.links`); a page passed on has its links followed
    run: tuple[int, int] | None = None
    follow_links: bool = False
    #: URLs to fetch in full: pages kept by a re-decision whose bodies the store lacks
    fetch: tuple[str, ...] = ()


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."
