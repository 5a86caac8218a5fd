"""What changed since the previous run, from the dedup log: the report's recrawl section.

A recrawl (run 2, 3, ... of a store) logs for every URL what changed since the previous run
(``new``, ``unchanged``, ``changed``, ``gone``: :data:`crawler.review.log.CHANGES`), the decision
and cluster the URL had at the end of that run, and for a changed page the resemblance of its
new content to its previous one. A URL can have more than one line in a run (decided, then
re-decided because the kept page of its cluster changed or is gone): its last line in the run is
its state at the end of it, and that is what :class:`ChangeTally` counts and lists.

:class:`ChangeTally` is fed the lines in the crawl's order (:func:`crawler.review.log.decisions`)
and keeps the last line of each URL of the latest run seen, a few fields each; :meth:`~ChangeTally.result`
adds them up into :class:`RunChanges`: the counts, the pages that moved cluster, and the pages
whose content changed most.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crawler.review.log import CHANGES, LoggedDecision

__all__ = ["ChangeTally", "ChangedPage", "RunChanges"]


@dataclass(slots=True)
class ChangedPage:
    """A URL's last line in the latest run, as the report lists it."""

    url: str
    #: which of the report's stores holds it, and its document there
    store: int
    doc_id: int | None
    node: str | None
    change: str
    decision: str
    cluster_id: int | None
    previous_decision: str | None
    previous_cluster_id: int | None
    #: resemblance of its content to its content in the previous run (changed pages)
    change_resemblance: float | None
    #: decided again in this run because the kept page of its cluster changed or is gone
    redecided: bool
    reason: str | None
    #: where the report explains it (its section's id), when it does; set by the report
    anchor: str | None = None

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
            "doc_id": self.doc_id,
            "node": self.node,
            "change": self.change,
            "decision": self.decision,
            "cluster_id": self.cluster_id,
            "previous_decision": self.previous_decision,
            "previous_cluster_id": self.previous_cluster_id,
            "change_resemblance": self.change_resemblance,
            "redecided": self.redecided,
            "reason": self.reason,
        }


@dataclass
class RunChanges:
    """The latest run against the one before it, each URL by its last line in the latest run."""

    run: int
    #: URLs decided in the latest run by change, every change of CHANGES present (0 or more)
    counts: dict[str, int]
    #: of those, URLs decided again for the kept page of their cluster
    redecided: int
    #: the pages in another cluster than at the end of the previous run, in the crawl's order
    #: (the first ``max_moved``), and how many there are
    moved: list[ChangedPage]
    moved_total: int
    #: the changed pages least like their previous content, least first (the first
    #: ``top_changed``), and how many changed pages have a resemblance
    changed_most: list[ChangedPage]
    changed_total: int

    @property
    def previous(self) -> int:
        return self.run - 1

    @property
    def urls(self) -> int:
        return sum(self.counts.values())

    def pages(self) -> list[ChangedPage]:
        """Every page the section lists (a page can be in both lists)."""
        return [*self.moved, *self.changed_most]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "previous_run": self.previous,
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
    """The last line of each URL in the latest run, from lines fed in the crawl's order.

    Memory: one small record per URL of the latest run (the counts need each URL once, and a
    URL's last line can come late in the run).
    """

    latest: int | None = None
    #: every crawl run a line named
    runs: set[int] = field(default_factory=set)
    _last: dict[str, tuple[int, ChangedPage]] = field(default_factory=dict)
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
        url = logged.url
        before = self._last.get(url)
        page = _page(logged)
        if before is not None and before[1].redecided:
            page.redecided = True  # re-decided in this run, whatever its last line says
        self._last[url] = (self._seen, page)

    def result(self, *, top_changed: int = 20, max_moved: int = 100) -> RunChanges | None:
        """The latest run's changes; None when the logs hold one run only (or none)."""
        if self.latest is None or self.latest < 2:
            return None
        counts: Counter[str] = Counter({change: 0 for change in CHANGES})
        moved: list[tuple[int, ChangedPage]] = []
        changed: list[tuple[float, int, ChangedPage]] = []
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


def _page(logged: LoggedDecision) -> ChangedPage:
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

    return ChangedPage(
        url=logged.url,
        store=logged.store,
        doc_id=whole("doc_id"),
        node=logged.node,
        change=logged.change,
        decision=logged.decision,
        cluster_id=whole("cluster_id"),
        previous_decision=text("previous_decision"),
        previous_cluster_id=whole("previous_cluster_id"),
        change_resemblance=number("change_resemblance"),
        redecided=logged.redecided,
        reason=text("reason"),
    )
