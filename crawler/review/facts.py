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
from collections.abc import Callable, Container, Iterable, Iterator
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
        manifest = store.manifest
        clusters = _scan_clusters(store.index.clusters(), top_clusters)
        members = {c: store.index.members(c) for c in clusters.largest}
        listed = {d for ids in members.values() for d in ids}
        docs = _scan_documents(store.documents(), listed, max_dropped)
        log = _scan_log(_log(store), docs.shown)
        threshold, source, notes = _threshold(threshold, configured, log.thresholds)
        if not log.runs and docs.decisions:
            notes = ["the store has no dedup log: skip reasons and estimates are unknown", *notes]

        # titles only for the pages of the largest clusters: one WARC record each
        titles = {d: _title(store, docs.shown[d]) for d in listed if d in docs.shown}
        rows = {
            d: _row(d, record, log.entries.get(d, {}), titles.get(d))
            for d, record in docs.shown.items()
        }
        largest = [
            _cluster_view(store.index.cluster(c), members[c], rows) for c in clusters.largest
        ]
        dropped = _explain_all(store, [rows[d] for d in docs.dropped], log.entries, on_explained)
        return ReportData(
            store=str(Path(path)),
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
            largest=largest,
            dropped=dropped,
            dropped_total=docs.dropped_total,
            skipped_pages=[rows[d] for d in docs.skipped],
            near_estimates=log.near_estimates,
            near_exact=[
                r
                for v in dropped
                if v.row.decision != "exact_duplicate" and (r := v.exact_resemblance) is not None
            ],
            sample_sizes=log.sample_sizes,
            notes=notes,
        )


# --- the three passes: each reads one part of the store once, and returns what it found -------


@dataclass
class _Clusters:
    summary: ClusterSummary
    #: cluster size → number of clusters of that size
    sizes: Counter[int]
    #: the largest clusters of two or more, biggest first, then oldest
    largest: list[int]


def _scan_clusters(clusters: Iterable[ClusterInfo], top: int) -> _Clusters:
    """The paper's table, the size distribution and the ``top`` largest clusters, in one pass."""
    summary = ClusterSummary()
    sizes: Counter[int] = Counter()
    heap: list[tuple[int, int]] = []  # a min-heap of (size, -cluster id)
    for info in clusters:
        summary.add_cluster(info)
        sizes[info.size] += 1
        if info.size > 1 and top:
            item = (info.size, -info.cluster_id)
            if len(heap) < top:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
    return _Clusters(summary, sizes, [-neg for _, neg in sorted(heap, reverse=True)])


@dataclass
class _Documents:
    #: documents by decision
    decisions: Counter[str] = field(default_factory=Counter)
    first_time: float | None = None
    last_time: float | None = None
    #: the records of the pages the report lists, by doc id
    shown: dict[int, DocumentRecord] = field(default_factory=dict)
    #: the first dropped and skipped pages, in crawl order
    dropped: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    dropped_total: int = 0


def _scan_documents(
    documents: Iterable[tuple[int, DocumentRecord]], listed: set[int], limit: int
) -> _Documents:
    """Every decision and the time span; the records of the ``listed`` pages and of the first
    ``limit`` dropped and skipped pages."""
    found = _Documents()
    for doc_id, record in documents:
        found.decisions[record.decision] += 1
        t = record.time
        found.first_time = t if found.first_time is None else min(found.first_time, t)
        found.last_time = t if found.last_time is None else max(found.last_time, t)
        show = doc_id in listed
        if record.decision in DROPPED:
            found.dropped_total += 1
            if len(found.dropped) < limit:
                found.dropped.append(doc_id)
                show = True
        elif record.decision == "skipped" and len(found.skipped) < limit:
            found.skipped.append(doc_id)
            show = True
        if show:
            found.shown[doc_id] = record
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
    #: the last log line of each page shown, by doc id
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)


def _scan_log(entries: Iterable[dict[str, Any]], shown: Container[int]) -> _Log:
    """Skip reasons, the estimates that dropped pages, and the log lines of the pages shown."""
    found = _Log()
    skipped: set[int] = set()
    for entry in entries:
        found.runs.add(str(entry.get("run")))
        decision, logged_id = entry.get("decision"), _int(entry.get("doc_id"))
        if decision == "skipped" and logged_id is not None and logged_id not in skipped:
            skipped.add(logged_id)
            found.skip_reasons[str(entry.get("reason") or "unknown")] += 1
        elif decision in ("near_duplicate", "contained"):
            estimate = _number(entry.get("resemblance"))
            if estimate is not None:
                found.near_estimates.append(estimate)
            size = _int(entry.get("sample_size"))
            if size:
                found.sample_sizes[size] += 1
            threshold = _threshold_in(entry.get("reason"))
            if threshold is not None:
                found.thresholds.add(threshold)
        if logged_id is not None and logged_id in shown:
            found.entries[logged_id] = entry
    found.skipped_logged = len(skipped)
    return found


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


def _cluster_view(info: ClusterInfo, members: list[int], rows: dict[int, PageRow]) -> ClusterView:
    return ClusterView(info.cluster_id, info.size, info.identical,
                       [rows[d] for d in members if d in rows])  # fmt: skip


def _explain_all(
    store: Store,
    rows: list[PageRow],
    entries: dict[int, dict[str, Any]],
    on_explained: Callable[[int, int], None] | None,
) -> list[DroppedView]:
    views: list[DroppedView] = []
    for row in rows:
        views.append(_explained(store, row, entries.get(row.doc_id)))
        if on_explained is not None:
            on_explained(len(views), len(rows))
    return views


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


def _row(
    doc_id: int, record: DocumentRecord, entry: dict[str, Any], title: str | None = None
) -> PageRow:
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
        title=title,
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


def _title(store: Store, record: DocumentRecord) -> str | None:
    """The title of a stored page (one WARC record read), for the pages the report lists."""
    if record.page is None:
        return None
    try:
        return page_title(store.read_page(record.page)[3])
    except Exception:  # noqa: BLE001 - a damaged WARC record costs a title, not the report
        return None
