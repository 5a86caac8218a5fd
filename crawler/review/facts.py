"""What ``neardup report`` shows, collected from one store as plain dataclasses.

:func:`collect` reads a store once (opened read-only, so a report can be made while a crawl is
still writing; it then shows the committed state) and returns a :class:`ReportData`: counts by
decision and skip reason, the paper's cluster table, cluster sizes, the largest clusters, the
estimates the dedup log recorded, and each dropped page as a :class:`DroppedView`. What a
dropped page shows beyond its log line is what ``neardup explain`` says about it: the
:class:`~crawler.review.explain.Explanation` of :func:`crawler.review.explain.explain`, with
its :class:`~crawler.review.explain.Comparison` (estimates, exact values, and the passages
where the two texts differ), kept as it is; nothing here gathers those facts a second way.

Everything here is data: strings that came from the crawl (URLs, titles, reasons) are kept as
they are, and :mod:`crawler.review.report` renders them escaped. Tests check the numbers here
without parsing HTML.
"""

from __future__ import annotations

import heapq
import html
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dedup.curves import matches_needed
from dedup.params import ContentArea
from dedup.summary import ClusterSummary
from storage.records import DROPPED

if TYPE_CHECKING:
    from crawler.review.explain import Comparison, Explanation
    from dedup.index import ClusterInfo
    from dedup.params import SketchParams
    from storage.records import DocumentRecord
    from storage.store import Store

__all__ = [
    "ClusterView",
    "DroppedView",
    "PageRow",
    "ReportData",
    "SCurve",
    "collect",
    "page_title",
]


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


@dataclass
class ClusterView:
    cluster_id: int
    size: int
    identical: bool
    members: list[PageRow]


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

    @property
    def fetched(self) -> int:
        return sum(self.decisions.values())

    @property
    def curve(self) -> SCurve:
        """The S-curve of this store's sketches and threshold (see :class:`SCurve`)."""
        if self.params.kind in ("min", "permutation", "minmod") or not self.sample_sizes:
            s, note = self.params.size, ""
        else:
            typical = sorted(self.sample_sizes.elements())[self.sample_sizes.total() // 2]
            s, note = max(1, typical), "median sample"
        return SCurve(s, matches_needed(self.threshold, s), note)


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
    path: str | Path,
    *,
    threshold: float | None = None,
    configured: float = 0.9,
    containment: float | None = None,
    top_clusters: int = 10,
    max_dropped: int = 200,
    now: float | None = None,
    on_explained: Callable[[int, int], None] | None = None,
) -> ReportData:
    """Read everything the report shows from the store at ``path`` (opened read-only).

    The threshold is not recorded in a store. ``threshold`` (``--threshold``) wins; else the
    one the dedup log's near-duplicate reasons name, if they all name one; else ``configured``
    (the configuration's ``dedup.threshold``).

    Memory stays bounded by what is shown, whatever the crawl's size: the clusters, the
    documents and the log are each streamed once, and only the rows of the pages listed (the
    ``top_clusters`` largest clusters, the first ``max_dropped`` dropped and skipped pages)
    are kept whole. ``on_explained(done, total)`` is called after each dropped page is
    explained (the slow part: each explanation reads the dedup log and canonicalises the
    original again).
    """
    from storage.store import Store

    if top_clusters < 0 or max_dropped < 0:
        raise ValueError("top_clusters and max_dropped must be >= 0")
    with Store.open(path, readonly=True) as store:
        # 1. the clusters: the paper's table, the size distribution and the largest, one pass
        sizes: Counter[int] = Counter()
        top: list[tuple[int, int]] = []  # a min-heap of (size, -cluster id)

        def clusters() -> Iterator[ClusterInfo]:
            for info in store.index.clusters():
                sizes[info.size] += 1
                if info.size > 1 and top_clusters:
                    item = (info.size, -info.cluster_id)
                    if len(top) < top_clusters:
                        heapq.heappush(top, item)
                    elif item > top[0]:
                        heapq.heapreplace(top, item)
                yield info

        summary = ClusterSummary.from_clusters(clusters())
        largest_ids = [-neg for _, neg in sorted(top, reverse=True)]  # biggest, then oldest
        members = {c: store.index.members(c) for c in largest_ids}
        wanted = {d for ids in members.values() for d in ids}

        # 2. the documents: every decision, the time span, the pages to show
        decisions: Counter[str] = Counter()
        first = last = None
        records: dict[int, DocumentRecord] = {}
        dropped_ids: list[int] = []
        skipped_ids: list[int] = []
        dropped_total = 0
        for doc_id, record in store.documents():
            decisions[record.decision] += 1
            first = record.time if first is None else min(first, record.time)
            last = record.time if last is None else max(last, record.time)
            keep = doc_id in wanted
            if record.decision in DROPPED:
                dropped_total += 1
                if len(dropped_ids) < max_dropped:
                    dropped_ids.append(doc_id)
                    keep = True
            elif record.decision == "skipped" and len(skipped_ids) < max_dropped:
                skipped_ids.append(doc_id)
                keep = True
            if keep:
                records[doc_id] = record

        # 3. the dedup log: skip reasons, the estimates that dropped pages, the shown lines
        skipped: Counter[str] = Counter()
        skipped_logged: set[int] = set()
        near_estimates: list[float] = []
        sample_sizes: Counter[int] = Counter()
        thresholds: set[float] = set()
        entries: dict[int, dict[str, Any]] = {}
        runs: set[str] = set()
        for entry in _log(store):
            runs.add(str(entry.get("run")))
            decision, logged_id = entry.get("decision"), _int(entry.get("doc_id"))
            if decision == "skipped" and logged_id is not None and logged_id not in skipped_logged:
                skipped_logged.add(logged_id)
                skipped[str(entry.get("reason") or "unknown")] += 1
            elif decision in ("near_duplicate", "contained"):
                estimate = _number(entry.get("resemblance"))
                if estimate is not None:
                    near_estimates.append(estimate)
                size = _int(entry.get("sample_size"))
                if size:
                    sample_sizes[size] += 1
                found = _threshold_in(entry.get("reason"))
                if found is not None:
                    thresholds.add(found)
            if logged_id is not None and logged_id in records:
                entries[logged_id] = entry
        unlogged = decisions["skipped"] - len(skipped_logged)
        if unlogged > 0:
            skipped["unknown (no log line)"] += unlogged

        notes: list[str] = []
        if not runs and decisions:
            notes.append("the store has no dedup log: skip reasons and estimates are unknown")
        logged = thresholds.pop() if len(thresholds) == 1 else None
        if threshold is not None:
            source = "--threshold"
            if logged is not None and logged != threshold:
                notes.append(f"the dedup log says the crawl used threshold {logged:g}")
        elif logged is not None:
            threshold, source = logged, "the dedup log"
        else:
            threshold, source = configured, "the configuration; the dedup log names none"

        rows = {d: _row(d, r, entries.get(d, {})) for d, r in records.items()}
        largest = []
        for cluster_id in largest_ids:
            info = store.index.cluster(cluster_id)
            shown = [rows[d] for d in members[cluster_id] if d in rows]
            for row in shown:  # titles only for the pages listed: one WARC record each
                _add_title(store, records[row.doc_id], row)
            largest.append(ClusterView(cluster_id, info.size, info.identical, shown))

        dropped = []
        for d in dropped_ids:
            dropped.append(_explained(store, rows[d], entries.get(d)))
            if on_explained is not None:
                on_explained(len(dropped), len(dropped_ids))
        near_exact = [
            r
            for v in dropped
            if v.row.decision != "exact_duplicate" and (r := v.exact_resemblance) is not None
        ]
        return ReportData(
            store=str(Path(path)),
            params=store.params,
            area=store.manifest.canonical,
            threshold=threshold,
            containment=containment,
            threshold_source=source,
            generated=time.time() if now is None else now,
            first_time=first,
            last_time=last,
            runs=sorted(runs),
            decisions=decisions,
            skipped=skipped,
            summary=summary,
            sizes=sizes,
            largest=largest,
            dropped=dropped,
            dropped_total=dropped_total,
            skipped_pages=[rows[d] for d in skipped_ids],
            near_estimates=near_estimates,
            near_exact=near_exact,
            sample_sizes=sample_sizes,
            notes=notes,
        )


def _log(store: Store) -> Iterator[dict[str, Any]]:
    """The store's dedup log, streamed; an unreadable log ends it (the report says less)."""
    try:
        yield from store.read_log()
    except (OSError, ValueError):
        return


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


def _row(doc_id: int, record: DocumentRecord, entry: dict[str, Any]) -> PageRow:
    def text(key: str) -> str | None:
        value = entry.get(key)
        return value if isinstance(value, str) else None

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
    )


def _explained(store: Store, row: PageRow, log: dict[str, Any] | None) -> DroppedView:
    """What ``neardup explain`` says about a dropped page (whatever goes wrong, say so), given
    its dedup-log line, which the report has read already."""
    from crawler.review.explain import explain

    try:
        return DroppedView(row, explain(store, row.url, log=log))
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


def _add_title(store: Store, record: DocumentRecord, row: PageRow) -> None:
    if record.page is None:
        return
    try:
        row.title = page_title(store.read_page(record.page)[3])
    except Exception:  # noqa: BLE001 - a damaged WARC record costs a title, not the report
        row.title = None
