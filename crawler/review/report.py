"""``neardup report``'s page: one self-contained HTML file about one store.

What it shows, top to bottom: a header (the store, the sketch parameters and threshold, the
crawl's time span); a summary table modelled on the paper's experiment (pages fetched, kept,
exact and near duplicates, skipped by reason; clusters, clusters of identical pages only, mixed
clusters); three plots (cluster sizes, the estimated resemblance of dropped pages with the
threshold marked, and the S-curve of the sketch size and threshold with the observed drops on
it); the largest clusters with their URLs; and, for each dropped page, what ``neardup explain``
says about it.

**Self-contained and inert.** The file loads nothing: CSS is inline, plots are inline SVG
(:mod:`crawler.review.plots`), there is no script, and a Content-Security-Policy ``<meta>`` forbids
every load but inline styles and ``data:`` images, so even a mistake here could not fetch
anything. Every string that came from the crawl (URLs, titles, canonical text, skip details)
goes through :func:`html.escape` on its way in, in one place (:func:`_e`): a crawled page
titled ``<script>…</script>`` is shown as text and never runs. Links to crawled pages are
made only for ``http``/``https`` URLs (never ``javascript:``), and clicking one is the reader's
choice; loading the report follows none.

Collecting (:func:`collect`) and rendering (:func:`render`) are separate, so tests can check
the numbers without parsing HTML. The store is opened read-only, so a report can be made while
a crawl is still writing (it then shows the committed state).
"""

from __future__ import annotations

import heapq
import html
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dedup.summary import ClusterSummary
from storage.records import DROPPED

if TYPE_CHECKING:
    from crawler.review.explain import Comparison, Explanation
    from dedup.index import ClusterInfo
    from dedup.params import SketchParams
    from storage.records import DocumentRecord
    from storage.store import Store

__all__ = [
    "CSP",
    "ClusterView",
    "DroppedView",
    "PageRow",
    "ReportData",
    "build_report",
    "collect",
    "page_title",
    "render",
]

#: nothing may load but inline styles and data: images (the page has neither scripts nor fonts)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

#: decisions that drop a page into another page's cluster

#: the paper's experiment (§1), for comparison beside the store's own table
PAPER = {
    "documents": "30 million",
    "duplicate_clusters": "3.6 million",
    "duplicate_documents": "12.3 million",
    "identical_clusters": "2.1 million",
    "identical_documents": "5.3 million",
    "mixed_clusters": "1.5 million",
    "mixed_documents": "7 million",
}

#: shared tokens shown on each side of a difference; longer shared passages are counted
CONTEXT = 12


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
    def exact_resemblance(self) -> float | None:
        c = self.explanation.comparison if self.explanation is not None else None
        return None if c is None else c.exact_resemblance


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

    @property
    def fetched(self) -> int:
        return sum(self.decisions.values())


# --- collecting ---------------------------------------------------------------------------------


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
            dropped.append(_explained(store, rows[d]))
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


def logged_threshold(entries: Iterable[dict[str, Any]]) -> float | None:
    """The threshold the crawl's near-duplicate reasons name, if they name exactly one.

    >>> logged_threshold([{"decision": "near_duplicate",
    ...                    "reason": "estimated resemblance 0.94 >= threshold 0.9"}])
    0.9
    >>> logged_threshold([]) is None
    True
    """
    found = {
        t
        for e in entries
        if e.get("decision") == "near_duplicate"
        and (t := _threshold_in(e.get("reason"))) is not None
    }
    return found.pop() if len(found) == 1 else None


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


def _explained(store: Store, row: PageRow) -> DroppedView:
    """What ``neardup explain`` says about a dropped page (whatever goes wrong, say so)."""
    from crawler.review.explain import explain

    try:
        return DroppedView(row, explain(store, row.url))
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


# --- rendering ----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """The one way anything reaches the page: as escaped text."""
    return html.escape("" if value is None else str(value), quote=True)


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(first: float | None, last: float | None) -> str:
    if first is None or last is None:
        return "no pages decided"
    seconds = last - first
    length = f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
    if seconds >= 7200:
        length = f"{seconds / 3600:.1f} h"
    return f"{_when(first)} to {_when(last)} ({length})"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _url(url: str | None, *, anchor: str | None = None) -> str:
    """A crawled URL as escaped text; linked when it is http(s), or to ``#anchor``."""
    if not url:
        return "–"
    if anchor is not None:
        return f'<a class="url" href="#{_e(anchor)}">{_e(url)}</a>'
    if urlsplit(url).scheme.lower() in ("http", "https"):
        return f'<a class="url" href="{_e(url)}" rel="noreferrer noopener">{_e(url)}</a>'
    return f'<span class="url">{_e(url)}</span>'


_STYLE = """
:root { --ink: #1d232b; --muted: #5b6673; --line: #d9dee4; --band: #f3f5f8; --blue: #1f5fa8;
  --red: #b03030; --green: #2e7d4f; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: #fff; }
main { max-width: 1280px; margin: 0 auto; padding: 1.2rem 1.5rem 3rem; }
header { border-bottom: 2px solid var(--line); margin-bottom: 1rem; }
h1 { font-size: 1.6rem; margin: 0.2rem 0 0.4rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 0.6rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.02rem; margin: 1.1rem 0 0.3rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 0.15rem 1rem;
  margin: 0.4rem 0 1rem; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 0.3rem 0 0.8rem; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { background: var(--band); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td.n { white-space: nowrap; }
tr.sub td:first-child { padding-left: 1.8rem; color: var(--muted); }
tr.sub2 td:first-child { padding-left: 3rem; color: var(--muted); }
.wide { width: 100%; table-layout: fixed; }
.url { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.86rem;
  overflow-wrap: anywhere; color: var(--blue); text-decoration: none; }
a.url:hover { text-decoration: underline; }
.title { color: var(--muted); font-size: 0.88rem; overflow-wrap: anywhere; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 1rem; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 0.5rem; }
figcaption { font-size: 0.86rem; color: var(--muted); margin-top: 0.3rem; }
svg.plot { width: 100%; height: auto; display: block; }
.note { color: var(--muted); font-size: 0.9rem; }
.tag { display: inline-block; padding: 0 0.45rem; border-radius: 9px; font-size: 0.8rem;
  background: var(--band); border: 1px solid var(--line); white-space: nowrap; }
.tag.kept { border-color: var(--green); color: var(--green); }
.tag.exact_duplicate, .tag.near_duplicate, .tag.contained { border-color: var(--red);
  color: var(--red); }
section.page { border: 1px solid var(--line); border-radius: 6px; padding: 0.4rem 0.9rem 0.6rem;
  margin: 0.8rem 0; }
section.page:target { outline: 3px solid var(--blue); }
details { margin: 0.3rem 0; }
summary { cursor: pointer; color: var(--blue); }
.texts { display: grid; grid-template-columns: 1fr 1fr; gap: 0.8rem; }
.text { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.82rem;
  white-space: pre-wrap; overflow-wrap: anywhere; background: var(--band); padding: 0.5rem;
  border-radius: 4px; max-height: 22rem; overflow: auto; margin: 0; }
del { background: #f7d4d4; text-decoration: line-through; }
ins { background: #cfead7; text-decoration: none; }
@media (max-width: 800px) { .texts { grid-template-columns: 1fr; } }
"""


def render(data: ReportData, plots: dict[str, str] | None = None) -> str:
    """The report as one HTML document. ``plots`` (name → inline SVG) defaults to drawing them."""
    if plots is None:
        plots = draw_plots(data)
    title = f"neardup report: {data.store}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_e(title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body><main>",
        _header(data),
        _summary(data),
        _plots(data, plots),
        _largest(data),
        _dropped(data),
        _skipped(data),
        "</main></body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def draw_plots(data: ReportData) -> dict[str, str]:
    """The three plots of the report, as inline SVG strings."""
    from crawler.review.plots import cluster_sizes_svg, resemblance_histogram_svg, s_curve_svg
    from dedup.curves import matches_needed

    s, note = _curve_size(data)
    k = matches_needed(data.threshold, s)
    return {
        "sizes": cluster_sizes_svg(data.sizes),
        "resemblance": resemblance_histogram_svg(
            data.near_estimates,
            data.decisions["exact_duplicate"],
            data.threshold,
            data.containment,
        ),
        "curve": s_curve_svg(s, k, data.near_estimates, data.near_exact, note=note),
    }


def _curve_size(data: ReportData) -> tuple[int, str]:
    """S for the S-curve: the sketch size, or for MOD_m-like sketches the typical sample."""
    if data.params.kind in ("min", "permutation", "minmod") or not data.sample_sizes:
        return data.params.size, ""
    typical = sorted(data.sample_sizes.elements())[data.sample_sizes.total() // 2]
    return max(1, typical), "median sample"


def _header(data: ReportData) -> str:
    p = data.params
    rule = f"threshold {data.threshold:g} (from {_e(data.threshold_source)})"
    if data.containment is not None:
        rule += f", containment {data.containment:g}"
    runs = ", ".join(data.runs) if data.runs else "–"
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in data.notes)
    return f"""<header>
<h1>neardup report</h1>
<dl class="meta">
<dt>store</dt><dd class="url">{_e(data.store)}</dd>
<dt>sketch</dt><dd>{_e(p.describe())}</dd>
<dt>dedup rule</dt><dd>{rule}</dd>
<dt>crawl time span</dt><dd>{_e(_span(data.first_time, data.last_time))}</dd>
<dt>runs</dt><dd>{_e(runs)}</dd>
<dt>report made</dt><dd>{_e(_when(data.generated))}</dd>
</dl>{notes}
</header>"""


def _tr(label: str, *cells: Any, cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    tds = "".join(f'<td class="n">{_e(c)}</td>' for c in cells)
    return f"<tr{klass}><td>{_e(label)}</td>{tds}</tr>"


def _n(value: int) -> str:
    return f"{value:,}"


def _summary(data: ReportData) -> str:
    d, s = data.decisions, data.summary
    pages = [
        _tr("pages fetched (decided)", _n(data.fetched)),
        _tr("kept (stored)", _n(d["kept"]), cls="sub"),
        _tr("exact duplicates dropped", _n(d["exact_duplicate"]), cls="sub"),
        _tr("near duplicates dropped", _n(d["near_duplicate"]), cls="sub"),
    ]
    if d["contained"] or data.containment is not None:
        pages.append(_tr("contained pages dropped", _n(d["contained"]), cls="sub"))
    pages.append(_tr("skipped", _n(d["skipped"]), cls="sub"))
    for reason, n in sorted(data.skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        pages.append(_tr(reason, _n(n), cls="sub2"))
    clusters = [
        _tr("all clustered documents", _n(s.clusters), _n(s.documents), "–"),
        _tr("singletons", _n(s.singletons), _n(s.singletons), "–", cls="sub"),
        _tr("clusters of 2 or more", _n(s.duplicate_clusters), _n(s.duplicate_documents),
            f"{PAPER['duplicate_clusters']} / {PAPER['duplicate_documents']}", cls="sub"),
        _tr("identical pages only", _n(s.identical_clusters), _n(s.identical_documents),
            f"{PAPER['identical_clusters']} / {PAPER['identical_documents']}", cls="sub2"),
        _tr("mixed (near duplicates)", _n(s.mixed_clusters), _n(s.mixed_documents),
            f"{PAPER['mixed_clusters']} / {PAPER['mixed_documents']}", cls="sub2"),
    ]  # fmt: skip
    return f"""<h2 id="summary">Summary</h2>
<div class="plots">
<div><table id="pages-table">
<tr><th>pages</th><th class="n">count</th></tr>
{"".join(pages)}
</table></div>
<div><table id="clusters-table">
<tr><th>clusters</th><th class="n">clusters</th><th class="n">documents</th>
<th class="n">Broder 1997</th></tr>
{"".join(clusters)}
</table>
<p class="note">As in the paper's experiment (§1: {PAPER["documents"]} documents clustered at
50% resemblance, last column as clusters / documents): a cluster has two or more members;
"identical" clusters hold copies of one canonical text only, "mixed" ones near duplicates
too. Clustered documents are the kept and the dropped pages; skipped pages are in no
cluster.</p></div>
</div>"""


def _plots(data: ReportData, plots: dict[str, str]) -> str:
    s, note = _curve_size(data)
    from dedup.curves import matches_needed

    k = matches_needed(data.threshold, s)
    exact = len(data.near_exact)
    return f"""<h2 id="plots">Plots</h2>
<div class="plots">
<figure>{plots.get("sizes", "")}<figcaption>Clusters by number of members; a crawl keeps
one page per cluster.</figcaption></figure>
<figure>{plots.get("resemblance", "")}<figcaption>{_n(len(data.near_estimates))} near
duplicate(s) by the estimate that dropped them, {_n(data.decisions["exact_duplicate"])} exact
duplicate(s) at 1.0; the dashed line is the threshold {data.threshold:g}.</figcaption></figure>
<figure>{plots.get("curve", "")}<figcaption>Lecture Figure 12.3 for this store: the chance
that at least {k} of {s} sketch entries{" (" + _e(note) + ")" if note else ""} match, by
resemblance. Triangles: the estimates of the pages dropped; circles: their exact resemblance
({_n(exact)} known), on the curve.</figcaption></figure>
</div>"""


def _tag(decision: str) -> str:
    return f'<span class="tag {_e(decision)}">{_e(decision.replace("_", " "))}</span>'


def _page_cell(row: PageRow, *, anchor: bool = False) -> str:
    link = _url(row.url, anchor=f"doc-{row.doc_id}" if anchor else None)
    title = f'<div class="title">{_e(row.title)}</div>' if row.title else ""
    return f"{link}{title}"


def _largest(data: ReportData) -> str:
    if not data.largest:
        return (
            '<h2 id="clusters">Largest clusters</h2>'
            '<p class="note">No cluster has two or more members.</p>'
        )
    blocks = []
    for c in data.largest:
        kind = "identical pages only" if c.identical else "mixed"
        rows = []
        for m in c.members:
            dropped = m.decision in DROPPED
            r = "1.00" if m.decision == "exact_duplicate" else _fmt(m.resemblance)
            rows.append(
                f"<tr><td>{_page_cell(m, anchor=dropped)}</td><td>{_tag(m.decision)}</td>"
                f'<td class="n">{"–" if m.decision == "kept" else r}</td></tr>'
            )
        missing = c.size - len(c.members)
        more = f'<p class="note">{missing} member(s) not recorded.</p>' if missing else ""
        blocks.append(f"""<h3 id="cluster-{c.cluster_id}">Cluster {c.cluster_id}: {c.size} pages,
{kind}</h3>
<table class="wide"><colgroup><col><col style="width:11rem"><col style="width:8rem"></colgroup>
<tr><th>page</th><th>decision</th><th class="n">resemblance</th></tr>
{"".join(rows)}
</table>{more}""")
    return '<h2 id="clusters">Largest clusters</h2>\n' + "\n".join(blocks)


def _fact_rows(view: DroppedView) -> list[tuple[str, str]]:
    """(label, HTML) rows: the facts ``neardup explain`` gives about a dropped page."""
    row, ex = view.row, view.explanation
    reason = (ex.reason if ex is not None else None) or row.reason or ""
    rows = [("decision", f"{_tag(row.decision)} {_e(reason)}")]
    if ex is None:
        sample = f"{row.matches} of {row.sample_size}" if row.sample_size else "–"
        return rows + [
            ("duplicate of", _url(row.duplicate_of)),
            ("estimated resemblance (log)", _e(_fmt(row.resemblance, 4))),
            ("matching sketch entries", _e(sample)),
            ("explain", f'<span class="note">{_e(view.error)}</span>'),
        ]
    original, c = ex.original, ex.comparison
    if original is not None:
        rows.append(("duplicate of", f"{_url(original.url)} {_tag(original.decision)}"))
    else:
        rows.append(("duplicate of", _url(row.duplicate_of)))
    if c is not None:
        est, exact = c.estimated_resemblance, c.exact_resemblance
        sample = f"{c.matches} of {c.sample_size}" if c.sample_size else "–"
        partial = " (of the kept prefix of a cut text)" if c.exact_partial else ""
        rows += [
            ("resemblance (estimated / exact)",
             f"{_e(_fmt(est, 4))} / {_e(_fmt(exact, 4))}{_e(partial)}"),
            ("matching sketch entries", _e(sample)),
            ("containment in the original",
             _pair(c.estimated_containment_a_in_b, c.exact_containment_a_in_b)),
            ("containment of the original",
             _pair(c.estimated_containment_b_in_a, c.exact_containment_b_in_a)),
        ]  # fmt: skip
        if c.shared_shingles is not None:
            rows.append(("shared shingles", _e(f"{c.shared_shingles:,}")))
    sizes = [f"{p.tokens and len(p.tokens) or '–'} tokens, {p.shingles or '–'} shingles"
             for p in (ex.page, original) if p is not None]  # fmt: skip
    rows.append(("this page / the original", _e(" / ".join(sizes))))
    rows += [("note", f'<span class="note">{_e(n)}</span>') for n in ex.notes]
    return rows


def _pair(estimated: float | None, exact: float | None) -> str:
    return f"{_e(_fmt(estimated, 4))} / {_e(_fmt(exact, 4))}"


def _dropped(data: ReportData) -> str:
    head = '<h2 id="dropped">Dropped pages</h2>'
    if not data.dropped_total:
        return head + '<p class="note">No page was dropped.</p>'
    intro = (
        f'<p class="note">{_n(data.dropped_total)} page(s) dropped; each with what '
        "<code>neardup explain</code> says about it."
    )
    if data.dropped_total > len(data.dropped):
        intro += f" The first {_n(len(data.dropped))} are shown (--max-dropped)."
    intro += (
        " Containment in the original: how much of this page's shingles the original holds;"
        " containment of the original: the other way round. Estimates come from the sketches,"
        " exact values from the two canonical texts.</p>"
    )
    rows = []
    for view in data.dropped:
        row, c = view.row, _comparison(view)
        est = c.estimated_resemblance if c is not None else row.resemblance
        exact = c.exact_resemblance if c is not None else None
        matches = row.matches if c is None else c.matches
        size = row.sample_size if c is None else c.sample_size
        sample = f"{matches} of {size}" if size else "–"
        rows.append(
            f"<tr><td>{_url(row.url, anchor=f'doc-{row.doc_id}')}</td><td>{_tag(row.decision)}</td>"
            f'<td>{_url(row.duplicate_of)}</td><td class="n">{_pair(est, exact)}</td>'
            f'<td class="n">{_e(sample)}</td></tr>'
        )
    overview = f"""<table class="wide" id="dropped-table"><colgroup><col><col style="width:10rem">
<col><col style="width:11rem"><col style="width:8.5rem"></colgroup>
<tr><th>page</th><th>decision</th><th>duplicate of</th><th class="n">resemblance
(est. / exact)</th><th class="n">matching entries</th></tr>
{"".join(rows)}
</table>"""
    parts = [head, intro, overview]
    for view in data.dropped:
        parts.append(_dropped_page(view))
    return "\n".join(parts)


def _comparison(view: DroppedView) -> Comparison | None:
    return view.explanation.comparison if view.explanation is not None else None


def _skipped(data: ReportData) -> str:
    head = '<h2 id="skipped">Skipped pages</h2>'
    total = data.decisions["skipped"]
    if not total:
        return head + '<p class="note">No page was skipped.</p>'
    rows = [
        f"<tr><td>{_url(r.url)}</td><td>{_e(r.reason or 'unknown')}</td>"
        f"<td>{_e(r.detail or '')}</td></tr>"
        for r in data.skipped_pages
    ]
    more = ""
    if total > len(rows):
        more = f'<p class="note">The first {_n(len(rows))} of {_n(total)} are shown.</p>'
    return f"""{head}
<p class="note">Pages the crawl could not compare: they are in no cluster and not stored.</p>
<table class="wide"><colgroup><col><col style="width:10rem"><col style="width:30%"></colgroup>
<tr><th>page</th><th>reason</th><th>detail</th></tr>
{"".join(rows)}
</table>{more}"""


def _dropped_page(view: DroppedView) -> str:
    row = view.row
    lines = "".join(f"<tr><th>{_e(label)}</th><td>{value}</td></tr>"
                    for label, value in _fact_rows(view))  # fmt: skip
    return f"""<section class="page" id="doc-{row.doc_id}">
<h3>{_url(row.url)}</h3>
<table class="wide facts"><colgroup><col style="width:17rem"><col></colgroup>
{lines}
</table>{_texts(view)}
</section>"""


def _texts(view: DroppedView) -> str:
    """The two canonical texts side by side, what differs marked, long shared runs counted."""
    ex = view.explanation
    if ex is None or ex.original is None:
        return ""
    a, b = ex.page.tokens, ex.original.tokens
    if a is None or b is None:
        return ""
    unit = ex.params.unit
    left, right, differ = aligned(a, b, unit)
    if not differ:
        body = f'<p class="note">identical canonical texts: the same {len(a):,} tokens.</p>'
        return f"<details><summary>canonical texts</summary>{body}</details>"
    return f"""<details><summary>canonical texts, differences marked (left: this page, right:
the original; <del>only here</del>, <ins>only in the original</ins>)</summary>
<div class="texts"><pre class="text">{left}</pre><pre class="text">{right}</pre></div>
</details>"""


def aligned(
    a: Sequence[str], b: Sequence[str], unit: str = "word", context: int = CONTEXT
) -> tuple[str, str, bool]:
    """``a`` and ``b`` as escaped HTML, aligned as ``neardup explain`` aligns them
    (:func:`crawler.review.textdiff.passages`): tokens only in ``a`` in ``<del>``, only in ``b`` in
    ``<ins>``, shared runs longer than ``2·context`` cut to ``context`` tokens on each side.
    The third value says whether they differ at all.

    >>> aligned("a rose is a rose".split(), "a rose is a <b>".split())
    ('a rose is a <del>rose</del>', 'a rose is a <ins>&lt;b&gt;</ins>', True)
    >>> aligned(list("abc"), list("abc"), "char")
    ('abc', 'abc', False)
    """
    from crawler.review.textdiff import passages
    from dedup.canonical import SEPARATORS

    sep = SEPARATORS[unit]
    found = passages(a, b, unit)
    left: list[str] = []
    right: list[str] = []
    for n, p in enumerate(found):
        if p.shared:
            length = p.a_end - p.a_start
            before = context if n > 0 else 0
            after = context if n < len(found) - 1 else 0
            if length > before + after + context:
                skipped = f'<span class="note">… {length - before - after:,} shared …</span>'
                head = sep.join(a[p.a_start : p.a_start + before])
                tail = sep.join(a[p.a_end - after : p.a_end])
                text = sep.join(x for x in (_e(head), skipped, _e(tail)) if x)
                left.append(text)
                right.append(text)
            else:
                left.append(_e(p.a_text))
                right.append(_e(p.b_text))
            continue
        if p.a_text:
            left.append(f"<del>{_e(p.a_text)}</del>")
        if p.b_text:
            right.append(f"<ins>{_e(p.b_text)}</ins>")
    differ = any(not p.shared for p in found)
    return sep.join(left), sep.join(right), differ


def build_report(path: str | Path, **options: Any) -> str:
    """:func:`collect` then :func:`render`: the HTML of the report on the store at ``path``."""
    return render(collect(path, **options))
