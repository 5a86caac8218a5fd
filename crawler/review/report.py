"""``neardup report``'s page: one self-contained HTML file about one store.

What it shows, top to bottom: a header (the store, the sketch parameters and threshold, the
crawl's time span); a summary table modelled on the paper's experiment (pages fetched, kept,
exact and near duplicates, skipped by reason; clusters, clusters of identical pages only, mixed
clusters); after a recrawl, what changed since the previous run (URLs new, unchanged, changed,
gone and decided again; the pages that moved cluster; the pages whose content changed most);
three plots (cluster sizes, the estimated resemblance of dropped pages with the threshold
marked, and the S-curve of the sketch size and threshold with the observed drops on it); the
largest clusters with their URLs; and, for each dropped page, what ``neardup explain`` says
about it. Over the stores of several nodes, the header lists them and each page says its node.

Collecting and rendering are apart: :func:`crawler.review.facts.collect` reads the store into
plain dataclasses (the per-page facts are ``explain``'s own), and :func:`render` fills the
jinja2 templates in ``templates/`` with them (``report.html.j2``, which includes
``dropped.html.j2`` for each dropped page, ``macros.html.j2`` and the style sheet
``report.css``).

**Self-contained and inert.** The file loads nothing: the style sheet is inlined, plots are
inline SVG (:mod:`crawler.review.plots`), there is no script, and a Content-Security-Policy
``<meta>`` forbids every load but inline styles and ``data:`` images, so even a mistake here
could not fetch anything. The templates are rendered with autoescaping on, so every value that
came from the crawl (URLs, titles, canonical text, skip details) is escaped by jinja2 on its
way in: a crawled page titled ``<script>…</script>`` is shown as text and never runs. The plots
are the one piece of markup inserted as it is, and :func:`crawler.review.plots.figure_svg`
leaves no text in them. Links to crawled pages are made only for ``http``/``https`` URLs
(never ``javascript:``), and clicking one is the reader's choice; loading the report follows
none.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from markupsafe import Markup

from crawler.review.facts import DroppedView, ReportData, collect
from crawler.review.textdiff import Passage, cut_context, passages
from crawler.review.url_forms import readable
from dedup.canonical import SEPARATORS
from storage.records import DROPPED

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "CONTEXT",
    "CSP",
    "Columns",
    "aligned",
    "build_report",
    "diff_columns",
    "draw_plots",
    "environment",
    "render",
]

#: nothing may load but inline styles and data: images (the page has neither scripts nor fonts)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

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


def render(data: ReportData, plots: dict[str, str] | None = None) -> str:
    """The report as one HTML document.

    ``plots`` (name → inline SVG) defaults to drawing them (:func:`draw_plots`). They are
    inserted as markup, unescaped: pass only what :mod:`crawler.review.plots` made.
    """
    if plots is None:
        plots = draw_plots(data)
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            data=data,
            plots={name: Markup(svg) for name, svg in plots.items()},  # trusted: see the docstring
            csp=CSP,
            paper=PAPER,
            dropped=DROPPED,
        )
    )


def build_report(path: str | Path, **options: Any) -> str:
    """:func:`~crawler.review.facts.collect` then :func:`render`: the report on ``path``."""
    return render(collect(path, **options))


def draw_plots(data: ReportData) -> dict[str, str]:
    """The three plots of the report, as inline SVG markup."""
    from crawler.review.plots import cluster_sizes_svg, resemblance_histogram_svg, s_curve_svg

    curve = data.curve
    return {
        "sizes": cluster_sizes_svg(data.sizes),
        "resemblance": resemblance_histogram_svg(
            data.near_estimates,
            data.decisions["exact_duplicate"],
            data.threshold,
            data.containment,
        ),
        "curve": s_curve_svg(
            curve.s, curve.k, data.near_estimates, data.near_exact, note=curve.note
        ),
    }


# --- the template environment -------------------------------------------------------------------


@functools.cache
def environment() -> jinja2.Environment:
    """The report's jinja2 environment: its templates, autoescaping on, the filters they use.

    Autoescaping is on for every template but the style sheet (``report.css``, included as
    it is; static text is never escaped anyway). Undefined names are errors, not blanks.
    """
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("crawler.review", "templates"),
        autoescape=jinja2.select_autoescape(
            enabled_extensions=("html", "html.j2"), disabled_extensions=("css",), default=True
        ),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(n=_n, fmt=_fmt, g=_g, when=_when, readable=readable)
    env.tests["web"] = _is_web
    env.globals.update(span=_span, diff_columns=_view_columns)
    return env


def _n(value: int) -> str:
    return f"{value:,}"


def _g(value: float) -> str:
    return f"{value:g}"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


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


def _is_web(url: str) -> bool:
    """Whether a crawled URL may be a link: http(s) only, never ``javascript:``/``data:``."""
    try:
        return urlsplit(url).scheme.lower() in ("http", "https")
    except ValueError:  # an unparsable URL is shown, not linked
        return False


# --- the two canonical texts, side by side ------------------------------------------------------


@dataclass(frozen=True)
class Columns:
    """Two aligned texts as the report shows them: each side's pieces ``(text, mark)``, joined
    by ``sep``; ``mark`` is None (shared), ``del`` (only on the left), ``ins`` (only on the
    right) or ``elided`` (a cut shared passage; ``text`` is then its token count)."""

    left: list[tuple[Any, str | None]]
    right: list[tuple[Any, str | None]]
    sep: str
    differ: bool
    #: tokens on the left
    tokens: int


def diff_columns(
    a: Sequence[str],
    b: Sequence[str],
    unit: str = "word",
    context: int = CONTEXT,
    known: Sequence[Passage] | None = None,
) -> Columns:
    """``a`` and ``b`` aligned as ``neardup explain`` aligns them, cut as its terminal view
    cuts them (:func:`crawler.review.textdiff.cut_context`). ``known``: the differences
    ``explain`` found (:attr:`Comparison.differences <crawler.review.explain.Comparison>`),
    so the texts are not aligned a second time.

    >>> diff_columns("a rose is".split(), "a rose was".split()).right
    [('a rose', None), ('was', 'ins')]
    """
    found = passages(a, b, unit, known)
    left: list[tuple[Any, str | None]] = []
    right: list[tuple[Any, str | None]] = []
    for p in cut_context(found, a, b, context, unit):
        if p.elided:
            left.append((p.a_end - p.a_start, "elided"))
            right.append((p.a_end - p.a_start, "elided"))
        elif p.shared:
            left.append((p.a_text, None))
            right.append((p.b_text, None))
        else:
            if p.a_text:
                left.append((p.a_text, "del"))
            if p.b_text:
                right.append((p.b_text, "ins"))
    differ = any(not p.shared for p in found)
    return Columns(left, right, SEPARATORS[unit], differ, len(a))


def _view_columns(view: DroppedView) -> Columns | None:
    """A dropped page's text beside its original's, from ``explain``'s facts (None without
    both texts)."""
    ex = view.explanation
    if ex is None or ex.original is None or ex.page.tokens is None or ex.original.tokens is None:
        return None
    c = ex.comparison
    known = c.differences if c is not None and c.has_exact else None
    return diff_columns(ex.page.tokens, ex.original.tokens, ex.params.unit, known=known)


def aligned(
    a: Sequence[str], b: Sequence[str], unit: str = "word", context: int = CONTEXT
) -> tuple[Markup, Markup, bool]:
    """``a`` and ``b`` as the report's HTML columns (:func:`diff_columns`, rendered by the
    templates' ``column`` macro): tokens only in ``a`` in ``<del>``, only in ``b`` in
    ``<ins>``, every token escaped. The third value says whether they differ at all.

    >>> aligned("a rose is a rose".split(), "a rose is a <b>".split())
    (Markup('a rose is a <del>rose</del>'), Markup('a rose is a <ins>&lt;b&gt;</ins>'), True)
    >>> aligned(list("abc"), list("abc"), "char")
    (Markup('abc'), Markup('abc'), False)
    """
    columns = diff_columns(a, b, unit, context)
    column = environment().get_template("macros.html.j2").module.column  # type: ignore[attr-defined]
    return column(columns.left, columns.sep), column(columns.right, columns.sep), columns.differ
