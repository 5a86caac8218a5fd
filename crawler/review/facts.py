"""What ``neardup report`` shows, collected from one store (or the stores of one distributed
crawl's nodes) as plain dataclasses.

:func:`collect` reads the stores once (opened read-only, so a report can be made while a crawl
is still writing; it then shows the committed state) and returns a :class:`ReportData`: counts
by decision and skip reason, the paper's cluster table, cluster sizes, the largest clusters, the
estimates the dedup log recorded, each dropped page as a :class:`DroppedView`, and, for a store
crawled more than once, what changed since the previous run
(:class:`~crawler.review.changes.RunChanges`). What a dropped page shows beyond its log line is
what ``neardup explain`` says about it: the :class:`~crawler.review.explain.Explanation` of
:func:`crawler.review.explain.explain`, with its :class:`~crawler.review.explain.Comparison`
(estimates, exact values, and the passages where the two texts differ), kept as it is; nothing
here gathers those facts a second way.

**Current documents.** A URL decided again (a page that changed in a recrawl, or was decided
again for the kept page of its cluster) gets a new document; the earlier ones stay in the store
as history. The report counts a URL's current document only (the one the store's URL table
names), and says how many earlier ones it left out.

**Several stores** are the nodes of one crawl: one summary over all of them, clusters across
them (a cluster id is the whole crawl's, because the nodes share one index, so the clusters are
read from the documents' cluster ids rather than from any node's index), each page with the node
that decided it.

Everything here is data: strings that came from the crawl (URLs, titles, reasons) are kept as
they are, and :mod:`crawler.review.report` renders them escaped. Tests check the numbers here
without parsing HTML; ``neardup report --json`` prints them (:meth:`ReportData.to_dict`).
"""

from __future__ import annotations

import heapq
import html
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.review.changes import ChangeTally, RunChanges
from crawler.review.log import LoggedDecision, crawl_run_of, decisions
from crawler.review.stores import open_stores
from dedup.curves import matches_needed
from dedup.index import ClusterInfo
from dedup.params import ContentArea
from dedup.summary import ClusterSummary
from storage.records import DROPPED

if TYPE_CHECKING:
    from crawler.review.explain import Comparison, Explanation
    from dedup.params import SketchParams
    from storage.records import DocumentRecord
    from storage.store import Store

__all__ = [
    "ClusterView",
    "DroppedView",
    "PageRow",
    "ReportData",
    "SCurve",
    "StoreView",
    "collect",
    "page_anchor",
    "page_title",
]

#: a document of the report: the number of its store (0 for the first or only one), its id
Ref = tuple[int, int]


@dataclass
class PageRow:
    """One decided page: its document record merged with its dedup-log line (if any)."""

    doc_id: int
    url: str
    decision: str
    time: float
    cluster_id: int | None = None
    reason: str | None = None
    detail: str | None = None
    duplicate_of: str | None = None
    resemblance: float | None = None
    containment: float | None = None
    matches: int | None = None
    sample_size: int | None = None
    #: the ``<title>`` of a stored page (None for pages without a stored copy)
    title: str | None = None
    #: the number of its store when the report covers several (None for one store)
    store: int | None = None
    #: the node that decided it (its log line's, else its store's name), several stores only
    node: str | None = None
    #: its place in the crawl's order, when its log line says
    order: int | None = None

    @property
    def anchor(self) -> str:
        """The id of its section in the report (a dropped page's explanation)."""
        return page_anchor(self.store, self.doc_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "url": self.url,
            "decision": self.decision,
            "time": self.time,
            "cluster_id": self.cluster_id,
            "reason": self.reason,
            "detail": self.detail,
            "duplicate_of": self.duplicate_of,
            "resemblance": self.resemblance,
            "containment": self.containment,
            "matches": self.matches,
            "sample_size": self.sample_size,
            "title": self.title,
            "node": self.node,
            "order": self.order,
        }


@dataclass
class ClusterView:
    cluster_id: int
    size: int
    identical: bool
    members: list[PageRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "size": self.size,
            "identical": self.identical,
            "members": [m.to_dict() for m in self.members],
        }


@dataclass
class DroppedView:
    """A dropped page with what ``explain`` says about it (or why it could not say)."""

    row: PageRow
    explanation: Explanation | None
    error: str | None = None

    @property
    def comparison(self) -> Comparison | None:
        return self.explanation.comparison if self.explanation is not None else None

    @property
    def reason(self) -> str:
        """Why it was dropped: the reason ``explain`` read from the log, else the row's."""
        ex = self.explanation
        return (ex.reason if ex is not None else None) or self.row.reason or ""

    @property
    def estimated_resemblance(self) -> float | None:
        """From the two sketches (``explain``); without a comparison, as the log recorded it."""
        c = self.comparison
        return self.row.resemblance if c is None else c.estimated_resemblance

    @property
    def exact_resemblance(self) -> float | None:
        c = self.comparison
        return None if c is None else c.exact_resemblance

    @property
    def matches(self) -> int | None:
        c = self.comparison
        return self.row.matches if c is None else c.matches

    @property
    def sample_size(self) -> int | None:
        c = self.comparison
        return self.row.sample_size if c is None else c.sample_size

    def to_dict(self) -> dict[str, Any]:
        ex = self.explanation
        return {
            "page": self.row.to_dict(),
            "reason": self.reason,
            "explanation": None if ex is None else ex.to_dict(),
            "error": self.error,
        }


@dataclass
class StoreView:
    """One store of the report, as its header lists it."""

    path: str
    #: the node its dedup log names (``I/K``), for a node of a distributed crawl
    node: str | None
    #: its current documents
    documents: int
    #: its dedup logs (one per process that wrote to it)
    logs: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "node": self.node, "documents": self.documents,
                "logs": self.logs}  # fmt: skip


@dataclass
class ReportData:
    store: str
    params: SketchParams
    threshold: float
    containment: float | None
    #: where the threshold came from, for the header ("the configuration", "--threshold")
    threshold_source: str
    generated: float
    first_time: float | None
    last_time: float | None
    #: the dedup logs read (their ids: one per process that wrote)
    runs: list[str]
    #: documents by decision (the store's record), and skipped pages by the log's reason
    decisions: Counter[str]
    skipped: Counter[str]
    summary: ClusterSummary
    #: cluster size → number of clusters of that size
    sizes: Counter[int]
    largest: list[ClusterView]
    dropped: list[DroppedView]
    dropped_total: int
    #: the first skipped pages (as many as dropped pages are shown), with reason and detail
    skipped_pages: list[PageRow]
    #: estimated resemblance of each dropped near duplicate (and contained page)
    near_estimates: list[float]
    #: exact resemblance of the dropped pages ``explain`` could compute
    near_exact: list[float]
    #: the sample sizes (matches out of how many entries) the log recorded for near duplicates
    sample_sizes: Counter[int]
    notes: list[str] = field(default_factory=list)
    #: which part of each page was compared (the store's content area)
    area: ContentArea = field(default_factory=ContentArea)
    #: the stores read: one, or the nodes of one crawl
    stores: list[StoreView] = field(default_factory=list)
    #: the crawl runs the dedup logs name (1 for a first crawl, 2 for the recrawl after, ...)
    crawl_runs: list[int] = field(default_factory=list)
    #: what changed since the previous run (None unless the logs hold more than one run)
    changes: RunChanges | None = None
    #: documents the report leaves out: earlier decisions of URLs decided again since
    retired: int = 0

    @property
    def fetched(self) -> int:
        return sum(self.decisions.values())

    @property
    def several(self) -> bool:
        """Whether the report covers several stores (the nodes of one crawl)."""
        return len(self.stores) > 1

    @property
    def curve(self) -> SCurve:
        """The S-curve of this store's sketches and threshold (see :class:`SCurve`)."""
        if self.params.kind in ("min", "permutation", "minmod") or not self.sample_sizes:
            s, note = self.params.size, ""
        else:
            typical = sorted(self.sample_sizes.elements())[self.sample_sizes.total() // 2]
            s, note = max(1, typical), "median sample"
        return SCurve(s, matches_needed(self.threshold, s), note)

    def to_dict(self) -> dict[str, Any]:
        """Everything collected, as JSON-ready data (``neardup report --json``)."""
        curve = self.curve
        return {
            "store": self.store,
            "stores": [s.to_dict() for s in self.stores],
            "parameters": self.params.to_dict(),
            "canonical": self.area.to_dict(),
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "containment": self.containment,
            "generated": self.generated,
            "first_time": self.first_time,
            "last_time": self.last_time,
            "logs": list(self.runs),
            "crawl_runs": list(self.crawl_runs),
            "fetched": self.fetched,
            "decisions": dict(self.decisions),
            "skipped": dict(self.skipped),
            "retired": self.retired,
            "summary": self.summary.to_dict(),
            "sizes": {str(size): n for size, n in sorted(self.sizes.items())},
            "largest": [c.to_dict() for c in self.largest],
            "dropped_total": self.dropped_total,
            "dropped": [v.to_dict() for v in self.dropped],
            "skipped_pages": [r.to_dict() for r in self.skipped_pages],
            "near_estimates": list(self.near_estimates),
            "near_exact": list(self.near_exact),
            "sample_sizes": {str(size): n for size, n in sorted(self.sample_sizes.items())},
            "curve": {"s": curve.s, "k": curve.k, "note": curve.note},
            "changes": None if self.changes is None else self.changes.to_dict(),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SCurve:
    """The S-curve the report draws: the chance that at least ``k`` of ``s`` entries match.

    ``s`` is the sketch size, or for MOD_m-like sketches (whose samples vary) the median
    sample the log recorded, which ``note`` then says; ``k`` is
    :func:`dedup.curves.matches_needed` of the threshold.
    """

    s: int
    k: int
    note: str = ""


def collect(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    threshold: float | None = None,
    configured: float = 0.9,
    containment: float | None = None,
    top_clusters: int = 10,
    max_dropped: int = 200,
    top_changed: int = 20,
    max_moved: int = 100,
    now: float | None = None,
    on_explained: Callable[[int, int], None] | None = None,
) -> ReportData:
    """Read everything the report shows from the store at ``path`` (opened read-only), or
    from the stores of one crawl's nodes (a sequence of paths).

    The threshold is not recorded in a store. ``threshold`` (``--threshold``) wins; else the
    one the dedup log's near-duplicate reasons name, if they all name one; else ``configured``
    (the configuration's ``dedup.threshold``).

    Memory stays bounded by what is shown, whatever the crawl's size, but for two things
    that need every item once: a store crawled more than once keeps one small record per URL
    of its latest run (to count each URL by its last line there), and several stores keep the
    size of every cluster (read from the documents). The clusters, the documents and the log
    are each streamed once, and only the rows of the pages listed (the ``top_clusters``
    largest clusters, the first ``max_dropped`` dropped and skipped pages, the ``top_changed``
    pages that changed most and the first ``max_moved`` that moved cluster) are kept whole.
    ``on_explained(done, total)`` is called after each dropped page is explained (the slow
    part: each explanation canonicalises the original again).
    """
    if top_clusters < 0 or max_dropped < 0 or top_changed < 0 or max_moved < 0:
        raise ValueError("top_clusters, max_dropped, top_changed and max_moved must be >= 0")
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    with open_stores(paths) as stores:
        several = len(stores) > 1
        manifest = stores[0].manifest
        if several:
            clusters = _scan_document_clusters(stores, top_clusters)
            largest = set(clusters.largest)
            docs = _scan_documents(stores, lambda ref, r: r.cluster_id in largest, max_dropped)
        else:
            clusters = _scan_clusters(stores[0].index.clusters(), top_clusters)
            listed = {(0, d) for c in clusters.largest for d in stores[0].index.members(c)}
            docs = _scan_documents(stores, lambda ref, r: ref in listed, max_dropped)
        log = _scan_log(stores, docs.shown, docs.near)
        if several:  # each store's first pages, and of those the crawl's first
            docs.dropped = _first(docs.dropped, docs, log, max_dropped)
            docs.skipped = _first(docs.skipped, docs, log, max_dropped)
        threshold, source, notes = _threshold(threshold, configured, log.thresholds)
        if not log.runs and docs.decisions:
            notes = ["the store has no dedup log: skip reasons and estimates are unknown", *notes]
        if docs.retired:
            notes.append(
                f"{docs.retired:,} earlier decision(s) of URLs decided again since are left out: "
                "each URL counts by its current document"
            )

        names = [str(Path(p)) for p in paths]
        nodes = [log.nodes.get(n) or (Path(names[n]).name if several else None)
                 for n in range(len(stores))]  # fmt: skip
        members = _members(docs, clusters.largest)
        # titles only for the pages of the largest clusters: one WARC record each
        titles = {ref: _title(stores[ref[0]], docs.shown[ref])
                  for refs in members.values() for ref in refs}  # fmt: skip
        rows = {
            ref: _row(ref, record, log.entries.get(ref, {}), titles.get(ref),
                      several, nodes[ref[0]])
            for ref, record in docs.shown.items()
        }  # fmt: skip
        largest_views = [
            _cluster_view(clusters.infos[c], members.get(c, []), rows, several)
            for c in clusters.largest
        ]
        dropped = _explain_all(stores, [rows[r] for r in docs.dropped], log.entries, on_explained)
        changes = log.changes.result(top_changed=top_changed, max_moved=max_moved)
        if changes is not None:
            changes.finished = not any(_unfinished(store, changes.run) for store in stores)
            explained = {v.row.anchor for v in dropped}
            for page in changes.pages():
                if page.node is None and several:
                    page.node = nodes[page.store]
                if page.doc_id is not None:
                    anchor = page_anchor(page.store if several else None, page.doc_id)
                    page.anchor = anchor if anchor in explained else None
        return ReportData(
            store=", ".join(names),
            params=manifest.sketch,
            area=manifest.canonical,
            threshold=threshold,
            containment=containment,
            threshold_source=source,
            generated=time.time() if now is None else now,
            first_time=docs.first_time,
            last_time=docs.last_time,
            runs=sorted(log.runs),
            decisions=docs.decisions,
            skipped=_skip_reasons(log, docs.decisions["skipped"]),
            summary=clusters.summary,
            sizes=clusters.sizes,
            largest=largest_views,
            dropped=dropped,
            dropped_total=docs.dropped_total,
            skipped_pages=[rows[r] for r in docs.skipped],
            near_estimates=log.near_estimates,
            near_exact=[
                r
                for v in dropped
                if v.row.decision != "exact_duplicate" and (r := v.exact_resemblance) is not None
            ],
            sample_sizes=log.sample_sizes,
            notes=notes,
            stores=[
                StoreView(names[n], nodes[n] if several else log.nodes.get(n),
                          docs.per_store[n], log.logs_per_store[n])
                for n in range(len(stores))
            ],  # fmt: skip
            crawl_runs=sorted(log.changes.runs),
            changes=changes,
            retired=docs.retired,
        )


# --- the three passes: each reads one part of the stores once, and returns what it found ------


@dataclass
class _Clusters:
    summary: ClusterSummary
    #: cluster size → number of clusters of that size
    sizes: Counter[int]
    #: the largest clusters of two or more, biggest first, then oldest
    largest: list[int]
    #: what the largest clusters are
    infos: dict[int, ClusterInfo]


def _scan_clusters(clusters: Iterable[ClusterInfo], top: int) -> _Clusters:
    """The paper's table, the size distribution and the ``top`` largest clusters, in one pass."""
    summary = ClusterSummary()
    sizes: Counter[int] = Counter()
    heap: list[tuple[int, int]] = []  # a min-heap of (size, -cluster id)
    infos: dict[int, ClusterInfo] = {}
    for info in clusters:
        summary.add_cluster(info)
        sizes[info.size] += 1
        if info.size > 1 and top:
            item = (info.size, -info.cluster_id)
            if len(heap) < top:
                heapq.heappush(heap, item)
                infos[info.cluster_id] = info
            elif item > heap[0]:
                dropped = heapq.heapreplace(heap, item)
                infos.pop(-dropped[1], None)
                infos[info.cluster_id] = info
    largest = [-neg for _, neg in sorted(heap, reverse=True)]
    return _Clusters(summary, sizes, largest, {c: infos[c] for c in largest})


def _scan_document_clusters(stores: Sequence[Store], top: int) -> _Clusters:
    """:func:`_scan_clusters` of the clusters the current documents of several stores make:
    each cluster id's size, and whether its members share one canonical text."""
    seen: dict[int, list[Any]] = {}  # cluster id -> [size, first doc, content hash, identical]
    for store in stores:
        for doc_id, record in store.current_documents():
            cluster = record.cluster_id
            if cluster is None:
                continue
            info = seen.get(cluster)
            if info is None:
                seen[cluster] = [1, doc_id, record.content_hash, record.content_hash is not None]
            else:
                info[0] += 1
                info[3] = info[3] and record.content_hash == info[2]
    return _scan_clusters(
        (ClusterInfo(c, first, size, same) for c, (size, first, _, same) in sorted(seen.items())),
        top,
    )


@dataclass
class _Documents:
    #: current documents by decision
    decisions: Counter[str] = field(default_factory=Counter)
    first_time: float | None = None
    last_time: float | None = None
    #: the records of the pages the report lists
    shown: dict[Ref, DocumentRecord] = field(default_factory=dict)
    #: the first dropped and skipped pages of each store, in its order
    dropped: list[Ref] = field(default_factory=list)
    skipped: list[Ref] = field(default_factory=list)
    dropped_total: int = 0
    #: documents that are no longer their URL's current one
    retired: int = 0
    #: current documents of each store
    per_store: list[int] = field(default_factory=list)
    #: the current near duplicates (and contained pages): their estimates are the report's
    near: set[Ref] = field(default_factory=set)


def _scan_documents(
    stores: Sequence[Store], listed: Callable[[Ref, DocumentRecord], bool], limit: int
) -> _Documents:
    """Every current decision and the time span; the records of the ``listed`` pages and of
    the first ``limit`` dropped and skipped pages."""
    found = _Documents()
    for number, store in enumerate(stores):
        found.per_store.append(0)
        for doc_id, record in store.current_documents():
            found.per_store[number] += 1
            ref = (number, doc_id)
            found.decisions[record.decision] += 1
            t = record.time
            found.first_time = t if found.first_time is None else min(found.first_time, t)
            found.last_time = t if found.last_time is None else max(found.last_time, t)
            show = listed(ref, record)
            if record.decision in ("near_duplicate", "contained"):
                found.near.add(ref)
            if record.decision in DROPPED:
                found.dropped_total += 1
                if len(found.dropped) < limit:
                    found.dropped.append(ref)
                    show = True
            elif record.decision == "skipped" and len(found.skipped) < limit:
                found.skipped.append(ref)
                show = True
            if show:
                found.shown[ref] = record
        found.retired += store.stats()["documents"] - found.per_store[number]
    return found


@dataclass
class _Log:
    runs: set[str] = field(default_factory=set)
    #: skipped pages by the reason of their first log line
    skip_reasons: Counter[str] = field(default_factory=Counter)
    skipped_logged: int = 0
    #: estimated resemblance of each dropped near duplicate (and contained page)
    near_estimates: list[float] = field(default_factory=list)
    sample_sizes: Counter[int] = field(default_factory=Counter)
    #: the thresholds the near-duplicate reasons name
    thresholds: set[float] = field(default_factory=set)
    #: the last log line of each page shown
    entries: dict[Ref, dict[str, Any]] = field(default_factory=dict)
    #: what changed in the latest run (and which runs there are)
    changes: ChangeTally = field(default_factory=ChangeTally)
    #: the node each store's lines name (by store number), and how many logs each has
    nodes: dict[int, str] = field(default_factory=dict)
    logs_per_store: list[int] = field(default_factory=list)


def _scan_log(
    stores: Sequence[Store], shown: dict[Ref, DocumentRecord], near: set[Ref]
) -> _Log:
    """Skip reasons, the estimates that dropped the ``near`` pages, what changed in the latest
    run, and the log lines of the pages shown; the stores' lines in the crawl's order."""
    found = _Log()
    logs: list[set[str]] = [set() for _ in stores]
    skipped: set[Ref] = set()
    # a page's last near line: a recrawl logs an unchanged page's decision again, run after
    # run, and a page decided again has a new document
    estimates: dict[Ref, tuple[float | None, int | None]] = {}
    for logged in _lines(stores):
        entry = logged.entry
        logs[logged.store].add(logged.log_id)
        found.changes.add(logged)
        if logged.node is not None:
            found.nodes.setdefault(logged.store, logged.node)
        decision, logged_id = entry.get("decision"), _int(entry.get("doc_id"))
        ref = None if logged_id is None else (logged.store, logged_id)
        if decision == "skipped" and ref is not None and ref not in skipped:
            skipped.add(ref)
            found.skip_reasons[str(entry.get("reason") or "unknown")] += 1
        elif decision in ("near_duplicate", "contained"):
            if ref in near:
                estimates[ref] = (_number(entry.get("resemblance")), _int(entry.get("sample_size")))
            threshold = _threshold_in(entry.get("reason"))
            if threshold is not None:
                found.thresholds.add(threshold)
        if ref is not None and ref in shown:
            found.entries[ref] = entry
    for estimate, size in estimates.values():
        if estimate is not None:
            found.near_estimates.append(estimate)
        if size:
            found.sample_sizes[size] += 1
    found.skipped_logged = len(skipped)
    found.runs = set().union(*logs)
    found.logs_per_store = [len(ids) for ids in logs]
    return found


def _lines(stores: Sequence[Store]) -> Iterable[LoggedDecision]:
    """The stores' dedup logs, streamed; an unreadable log ends them (the report says less)."""
    try:
        yield from decisions(stores)
    except (OSError, ValueError):
        return


# --- what the passes' findings add up to ----------------------------------------------------


def _skip_reasons(log: _Log, skipped: int) -> Counter[str]:
    """Skipped pages by reason; those the log has no line for, as unknown."""
    reasons = Counter(log.skip_reasons)
    if skipped > log.skipped_logged:
        reasons["unknown (no log line)"] += skipped - log.skipped_logged
    return reasons


def _threshold(
    given: float | None, configured: float, logged: set[float]
) -> tuple[float, str, list[str]]:
    """The threshold the report draws, where it came from, and a note if the log disagrees."""
    found = next(iter(logged)) if len(logged) == 1 else None
    if given is not None:
        if found is not None and found != given:
            return given, "--threshold", [f"the dedup log says the crawl used threshold {found:g}"]
        return given, "--threshold", []
    if found is not None:
        return found, "the dedup log", []
    return configured, "the configuration; the dedup log names none", []


def _first(refs: list[Ref], docs: _Documents, log: _Log, limit: int) -> list[Ref]:
    """The first ``limit`` of several stores' pages in the crawl's order (their log lines'
    run and ``order``, then the time of their decision)."""

    def key(ref: Ref) -> tuple[int, float, float]:
        entry = log.entries.get(ref, {})
        order = _int(entry.get("order"))
        return (crawl_run_of(entry), math.inf if order is None else order, docs.shown[ref].time)

    return sorted(refs, key=key)[:limit]


def _members(docs: _Documents, largest: list[int]) -> dict[int, list[Ref]]:
    """The members of the largest clusters among the pages shown, in the stores' order."""
    wanted = set(largest)
    members: dict[int, list[Ref]] = {}
    for ref, record in docs.shown.items():
        if record.cluster_id in wanted:
            members.setdefault(record.cluster_id, []).append(ref)
    return members


def _cluster_view(
    info: ClusterInfo, members: list[Ref], rows: dict[Ref, PageRow], several: bool
) -> ClusterView:
    listed = [rows[ref] for ref in members if ref in rows]
    if several:  # a cluster across nodes: its pages in the crawl's order
        listed.sort(key=lambda r: (r.order is None, r.order or 0, r.time))
    else:
        listed.sort(key=lambda r: r.doc_id)
    return ClusterView(info.cluster_id, info.size, info.identical, listed)


def _explain_all(
    stores: Sequence[Store],
    rows: list[PageRow],
    entries: dict[Ref, dict[str, Any]],
    on_explained: Callable[[int, int], None] | None,
) -> list[DroppedView]:
    views: list[DroppedView] = []
    for row in rows:
        number = row.store or 0
        views.append(_explained(stores, number, row, entries.get((number, row.doc_id))))
        if on_explained is not None:
            on_explained(len(views), len(rows))
    return views


_LOGGED_THRESHOLD = re.compile(r">= threshold ([0-9.]+)$")


def _threshold_in(reason: Any) -> float | None:
    """The threshold a near-duplicate reason names ("... >= threshold 0.9"), if any."""
    match = _LOGGED_THRESHOLD.search(reason) if isinstance(reason, str) else None
    try:
        return float(match.group(1)) if match else None
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def page_anchor(store: int | None, doc_id: int) -> str:
    """The id of a page's section in the report: ``doc-7``; of several stores' pages, with the
    store's number: ``doc-2-7``."""
    return f"doc-{doc_id}" if store is None else f"doc-{store + 1}-{doc_id}"


def _row(
    ref: Ref,
    record: DocumentRecord,
    entry: dict[str, Any],
    title: str | None = None,
    several: bool = False,
    node: str | None = None,
) -> PageRow:
    def text(key: str) -> str | None:
        value = entry.get(key)
        return value if isinstance(value, str) else None

    number, doc_id = ref
    return PageRow(
        doc_id=doc_id,
        url=record.url,
        decision=record.decision,
        time=record.time,
        cluster_id=record.cluster_id,
        reason=text("reason"),
        detail=text("detail"),
        duplicate_of=text("duplicate_of"),
        resemblance=_number(entry.get("resemblance")),
        containment=_number(entry.get("containment")),
        matches=_int(entry.get("matches")),
        sample_size=_int(entry.get("sample_size")),
        title=title,
        store=number if several else None,
        node=(text("node") or node) if several else text("node"),
        order=_int(entry.get("order")),
    )


def _explained(
    stores: Sequence[Store], number: int, row: PageRow, log: dict[str, Any] | None
) -> DroppedView:
    """What ``neardup explain`` says about a dropped page (whatever goes wrong, say so), given
    its dedup-log line, which the report has read already. Across several stores the original
    is looked for in all of them; the page's cluster is left out (the report lists clusters
    itself, and gathering one across stores reads every document)."""
    from crawler.review.explain import explain

    store = stores[number]
    others = [s for s in stores if s is not store]
    try:
        return DroppedView(row, explain(store, row.url, log=log, elsewhere=others,
                                        cluster=not others))  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - one page's explanation must not sink the report
        return DroppedView(row, None, f"{type(exc).__name__}: {exc}")


_TITLE = re.compile(rb"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)


def page_title(body: bytes, limit: int = 160) -> str | None:
    """The text of a page's first ``<title>``, entities decoded, whitespace collapsed.

    ``<title>`` holds text only (HTML parses it as RCDATA), so a regular expression finds it
    as a browser would. The result is crawled text: escape it before showing it.

    >>> page_title(b"<html><title>Tarn &amp; fell\\n walks</title>")
    'Tarn & fell walks'
    >>> page_title(b"<title><script>alert(1)</script></title>")
    '<script>alert(1)</script>'
    >>> page_title(b"<p>no title</p>") is None
    True
    """
    match = _TITLE.search(body[:200_000])
    if match is None:
        return None
    text = " ".join(html.unescape(match.group(1).decode("utf-8", "replace")).split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _title(store: Store, record: DocumentRecord) -> str | None:
    """The title of a stored page (one WARC record read), for the pages the report lists."""
    if record.page is None:
        return None
    try:
        return page_title(store.read_page(record.page)[3])
    except Exception:  # noqa: BLE001 - a damaged WARC record costs a title, not the report
        return None


def _unfinished(store: Any, crawl_run: int) -> bool:
    """Whether ``crawl_run`` is the store's last run and has not finished."""
    run = store.history.run()
    return run is not None and run.number == crawl_run and not run.finished
