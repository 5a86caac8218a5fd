"""What changed since the previous run, from the dedup log: the report's recrawl section.

A recrawl (run 2, 3, ... of a store) logs for every URL what changed since the previous run
(``new``, ``unchanged``, ``changed``, ``gone``: :data:`crawler.review.log.CHANGES`), the decision
and cluster the URL had at the end of that run, and for a changed page the resemblance of its
new content to its previous one. A URL can have more than one line in a run (decided, then
re-decided because the kept page of its cluster changed or is gone): its last line in the run is
its state at the end of it (:class:`RunState`), and that is what :class:`ChangeTally` counts and
lists, and what ``neardup explain`` shows for each run.

:class:`ChangeTally` is fed the lines in the crawl's order (:func:`crawler.review.log.decisions`)
and keeps the state of each URL of the latest run seen, a few fields each;
:meth:`~ChangeTally.result` adds them up into :class:`RunChanges`: the counts, the pages that
moved cluster, and the pages whose content changed most.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from crawler.review.log import CHANGES, LoggedDecision, change_of

__all__ = ["ChangeTally", "RunChanges", "RunState", "run_states"]


@dataclass(slots=True)
class RunState:
    """A URL's state at the end of one crawl run, from its lines in that run.

    Its decision and cluster are its last line's. What it was at the end of the previous run
    (``previous_decision``, ``previous_cluster_id``) is its first line's: a later line of the
    run (a re-decision, the full fetch of a page kept by one) names the state just before it.
    Its change is likewise its first line's, unless a later line found the content changed
    (the full fetch of a re-decided page, whose body differs). ``redecided``: some line of the
    run re-decided it.
    """

    url: str
    run: int
    decision: str
    change: str
    cluster_id: int | None
    previous_decision: str | None = None
    previous_cluster_id: int | None = None
    #: resemblance of its content to its content in the previous run (changed pages)
    change_resemblance: float | None = None
    redecided: bool = False
    reason: str | None = None
    time: float | None = None
    doc_id: int | None = None
    node: str | None = None
    #: which of the stores read holds it
    store: int = 0
    #: where the report explains it (its section's id), when it does; set by the report
    anchor: str | None = None

    @classmethod
    def of(cls, logged: LoggedDecision) -> RunState:
        """The state one line gives."""
        entry = logged.entry

        def number(key: str) -> float | None:
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                return None
            return float(value)

        def whole(key: str) -> int | None:
            value = entry.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        def text(key: str) -> str | None:
            value = entry.get(key)
            return value if isinstance(value, str) else None

        return cls(
            url=logged.url,
            run=logged.run,
            decision=logged.decision,
            change=logged.change,
            cluster_id=whole("cluster_id"),
            previous_decision=text("previous_decision"),
            previous_cluster_id=whole("previous_cluster_id"),
            change_resemblance=number("change_resemblance"),
            redecided=logged.redecided,
            reason=text("reason"),
            time=logged.time,
            doc_id=whole("doc_id"),
            node=logged.node,
            store=logged.store,
        )

    def then(self, logged: LoggedDecision) -> RunState:
        """The state after a later line of the same URL in the same run."""
        later = RunState.of(logged)
        if (later.decision, later.cluster_id) == (self.decision, self.cluster_id):
            later.reason = self.reason or later.reason  # it confirms why it is so
        later.previous_decision = self.previous_decision
        later.previous_cluster_id = self.previous_cluster_id
        if change_of(logged.entry) == "unchanged":  # the line's own word: nothing new came
            later.change, later.change_resemblance = self.change, self.change_resemblance
        later.redecided = later.redecided or self.redecided
        return later

    @property
    def moved(self) -> bool:
        """In another cluster than at the end of the previous run (both known)."""
        return (
            self.cluster_id is not None
            and self.previous_cluster_id is not None
            and self.cluster_id != self.previous_cluster_id
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "run": self.run,
            "decision": self.decision,
            "change": self.change,
            "cluster_id": self.cluster_id,
            "previous_decision": self.previous_decision,
            "previous_cluster_id": self.previous_cluster_id,
            "change_resemblance": self.change_resemblance,
            "redecided": self.redecided,
            "reason": self.reason,
            "time": self.time,
            "doc_id": self.doc_id,
            "node": self.node,
        }


def run_states(lines: Iterable[LoggedDecision]) -> dict[int, RunState]:
    """One URL's state at the end of each run, from its lines in the crawl's order."""
    states: dict[int, RunState] = {}
    for logged in lines:
        before = states.get(logged.run)
        states[logged.run] = RunState.of(logged) if before is None else before.then(logged)
    return states


@dataclass
class RunChanges:
    """The latest run against the one before it, each URL by its last line in the latest run."""

    run: int
    #: URLs decided in the latest run by change, every change of CHANGES present (0 or more)
    counts: dict[str, int]
    #: of those, URLs decided again for the kept page of their cluster
    redecided: int
    #: the pages in another cluster than at the end of the previous run, in the crawl's order
    #: of their first line (the first ``max_moved``), and how many there are
    moved: list[RunState]
    moved_total: int
    #: the changed pages least like their previous content, least first (the first
    #: ``top_changed``), and how many changed pages have a resemblance
    changed_most: list[RunState]
    changed_total: int
    #: False while the latest run has not finished (interrupted, or still crawling): its
    #: counts cover the URLs it decided so far, not the whole site
    finished: bool = True

    @property
    def previous(self) -> int:
        return self.run - 1

    @property
    def urls(self) -> int:
        return sum(self.counts.values())

    def pages(self) -> list[RunState]:
        """Every page the section lists (a page can be in both lists)."""
        return [*self.moved, *self.changed_most]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "previous_run": self.previous,
            "finished": self.finished,
            "urls": self.urls,
            "counts": dict(self.counts),
            "redecided": self.redecided,
            "moved_total": self.moved_total,
            "moved": [p.to_dict() for p in self.moved],
            "changed_total": self.changed_total,
            "changed_most": [p.to_dict() for p in self.changed_most],
        }


@dataclass
class ChangeTally:
    """The state of each URL at the end of the latest run, from lines fed in the crawl's order.

    Memory: one small record per URL of the latest run (the counts need each URL once, and a
    URL's last line can come late in the run).
    """

    latest: int | None = None
    #: every crawl run a line named
    runs: set[int] = field(default_factory=set)
    _last: dict[str, tuple[int, RunState]] = field(default_factory=dict)
    _seen: int = 0

    def add(self, logged: LoggedDecision) -> None:
        run = logged.run
        self.runs.add(run)
        if self.latest is None or run > self.latest:
            self.latest = run
            self._last = {}
        elif run < self.latest:
            return
        self._seen += 1
        before = self._last.get(logged.url)
        if before is None:
            self._last[logged.url] = (self._seen, RunState.of(logged))
        else:
            self._last[logged.url] = (before[0], before[1].then(logged))

    def result(self, *, top_changed: int = 20, max_moved: int = 100) -> RunChanges | None:
        """The latest run's changes; None when the logs hold one run only (or none)."""
        if self.latest is None or self.latest < 2:
            return None
        counts: Counter[str] = Counter({change: 0 for change in CHANGES})
        moved: list[tuple[int, RunState]] = []
        changed: list[tuple[float, int, RunState]] = []
        redecided = moved_total = 0
        for seen, page in self._last.values():
            counts[page.change] += 1
            redecided += page.redecided
            if page.moved:
                moved_total += 1
                moved.append((seen, page))
            if page.change == "changed" and page.change_resemblance is not None:
                changed.append((page.change_resemblance, seen, page))
        return RunChanges(
            run=self.latest,
            counts=dict(counts),
            redecided=redecided,
            moved=[p for _, p in heapq.nsmallest(max_moved, moved, key=lambda m: m[0])],
            moved_total=moved_total,
            changed_most=[p for *_, p in heapq.nsmallest(top_changed, changed,
                                                          key=lambda c: c[:2])],
            changed_total=len(changed),
        )  # fmt: skip


