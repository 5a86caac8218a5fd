"""The report's plots: matplotlib figures as SVG strings to inline in one HTML file.

The report (:mod:`crawler.review.report`) must load nothing, so every plot is an ``<svg>`` element in
the page itself: text drawn as paths (no font to fetch), no XML prolog (HTML has none inside a
body), and every ``id`` prefixed with the plot's name, because several SVGs in one document
share one id namespace and matplotlib names its clip paths and markers alike in every figure.

**Trusted markup.** The report's template inserts these strings unescaped, so they are
:class:`markupsafe.Markup` and :func:`figure_svg` makes them safe to be: text is drawn as paths
and the comments in which matplotlib repeats each text are removed, so no string drawn on a
plot (a caption with a URL in it, one day) reaches the markup as text; attribute values are
matplotlib's own (styles, ids, paths), escaped by it. Only numbers and fixed words reach
these functions today.
The Agg backend is chosen before pyplot is imported, so no display is ever needed.

The S-curve's figure (:func:`s_curve_figure`) is also what ``neardup curve --plot`` saves;
its points come from :func:`dedup.curves.curve`.

>>> svg = s_curve_svg(100, 90, drops=[0.94, 0.98])
>>> svg.startswith("<svg") and "<?xml" not in svg and 'id="s-curve-' in svg
True
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from dedup.curves import curve

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "cluster_sizes_svg",
    "figure_svg",
    "resemblance_histogram_svg",
    "s_curve_figure",
    "s_curve_svg",
]

#: inches: three plots side by side fit a laptop screen at about 1280 px
_SIZE = (5.2, 3.4)
_BLUE, _RED, _GREY, _GREEN = "#1f5fa8", "#b03030", "#8a8a8a", "#2e7d4f"

_ID = re.compile(r'\bid="([^"]+)"')
#: the places an SVG refers to an id: (xlink:)href="#id" and url(#id)
_REF = re.compile(r'(\bhref="|\burl\()#([^")]+)')
#: the Dublin Core block matplotlib writes: names of vocabularies, no use in a page
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
#: the comments in which matplotlib repeats every text it draws as paths
_COMMENT = re.compile(r"\s*<!--.*?-->", re.DOTALL)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_svg(fig: Figure, name: str) -> Markup:
    """``fig`` as one inline ``<svg>`` element whose ids all start with ``name-``, as markup a
    template inserts as it is: no text in it but matplotlib's own attribute values.

    The figure is closed afterwards. Output is deterministic (no date, a fixed hash salt), so
    two reports of the same store are byte-identical. ``name`` is this module's own (a fixed
    word); it becomes ids and a label, so it must be one.

    >>> import matplotlib.figure
    >>> fig = matplotlib.figure.Figure()
    >>> _ = fig.subplots().set_title("</svg><script>alert(1)</script>")
    >>> svg = figure_svg(fig, "demo")
    >>> "script" in svg, "<!--" in svg, svg.count("<svg"), svg.count("</svg>")
    (False, False, 1, 1)
    """
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        raise ValueError(f"a plot name is lower-case letters, digits and '-'; got {name!r}")
    plt = _pyplot()
    buf = io.StringIO()
    try:
        with plt.rc_context({"svg.fonttype": "path", "svg.hashsalt": f"neardup-{name}"}):
            fig.savefig(buf, format="svg", metadata={"Date": None})
    finally:
        plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    if start < 0:
        raise ValueError("matplotlib wrote no <svg> element")
    text = _COMMENT.sub("", _METADATA.sub("", text[start:]))
    text = _ID.sub(lambda m: f'id="{name}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}#{name}-{m.group(2)}", text)
    # the figure scales with the page instead of keeping a fixed size in points
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)
    text = text.replace("<svg", f'<svg role="img" class="plot" aria-label="{name}"', 1).strip()
    return Markup(text)  # matplotlib's markup, its text removed above


def cluster_sizes_svg(sizes: Mapping[int, int]) -> str:
    """How many clusters have each size (singletons included), on a log scale of counts."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=_SIZE, dpi=100)
    if sizes:
        xs = sorted(sizes)
        ax.bar(xs, [sizes[x] for x in xs], color=[_GREY if x == 1 else _BLUE for x in xs],
               width=0.8)  # fmt: skip
        top = max(sizes.values())
        if top > 30 * max(1, min(sizes.values())):  # counts over orders of magnitude
            ax.set_yscale("log")
            ax.set_ylim(0.7, top * 2)
        else:
            ax.yaxis.get_major_locator().set_params(integer=True)
        if len(xs) <= 12:
            ax.set_xticks(xs)
        else:
            ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlim(0.3, max(xs) + 0.7)
    else:
        ax.text(0.5, 0.5, "no clusters", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("cluster size (documents)")
    ax.set_ylabel("clusters")
    ax.set_title("Cluster sizes (grey: singletons)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return figure_svg(fig, "cluster-sizes")


def resemblance_histogram_svg(
    near: Sequence[float], exact: int, threshold: float, containment: float | None = None
) -> str:
    """Estimated resemblance of the dropped pages, the threshold marked.

    ``near``: the estimates of near duplicates (and contained pages); ``exact``: how many exact
    duplicates were dropped, drawn at 1.0 (identical canonical text).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=_SIZE, dpi=100)
    bins = [i / 50 for i in range(51)]
    values = [float(v) for v in near if v is not None and not math.isnan(v)]
    low = min([threshold, *values]) if values else threshold
    ax.hist([values, [1.0] * exact], bins=bins, stacked=True, color=[_BLUE, _GREY],
            label=["near duplicates (estimate)", "exact duplicates"])  # fmt: skip
    ax.axvline(threshold, color=_RED, linestyle="--", linewidth=1.5,
               label=f"threshold {threshold:g}")  # fmt: skip
    if containment is not None:
        ax.axvline(containment, color=_GREEN, linestyle=":", linewidth=1.5,
                   label=f"containment rule {containment:g}")  # fmt: skip
    left = max(0.0, math.floor(low * 10) / 10 - 0.1)
    ax.set_xlim(left, 1.02)
    step = 0.05 if 1 - left <= 0.3 else 0.1
    ax.set_xticks([round(left + i * step, 2) for i in range(round((1 - left) / step) + 1)])
    ax.set_xlabel("estimated resemblance to the page it duplicates")
    ax.set_ylabel("dropped pages")
    ax.set_title("Dropped pages by estimated resemblance")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return figure_svg(fig, "resemblance")


def s_curve_svg(
    s: int, k: int, drops: Sequence[float], exact: Sequence[float] = (), *, note: str = ""
) -> Markup:
    """The report's S-curve (:func:`s_curve_figure` zoomed to r ≥ 0.5) as inline SVG."""
    return figure_svg(s_curve_figure(s, k, drops, exact, note=note), "s-curve")


def s_curve_figure(
    s: int,
    k: int,
    drops: Sequence[float] = (),
    exact: Sequence[float] = (),
    *,
    note: str = "",
    low: float = 0.5,
    size: tuple[float, float] = _SIZE,
    dpi: int = 100,
    steps: int = 400,
) -> Figure:
    """Lecture Figure 12.3 for these ``s`` and ``k``: P[at least k of s entries match | r].

    The observed drops are overlaid: ``drops`` (estimated resemblances) as ticks along the top,
    where the pages ended up (dropped, probability 1); ``exact`` (their exact resemblances,
    when known) as points on the curve: the chance that a pair that alike is dropped. ``low``
    is where the r axis starts; the curve's ``steps + 1`` points and the exact points all
    come from :func:`dedup.curves.curve`.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=size, dpi=dpi)
    rs, ps = zip(*curve(s, k, steps=steps))
    ax.plot(rs, ps, color=_BLUE, linewidth=2, label=f"P[at least {k} of {s} match]")
    ax.axvline(k / s, color=_RED, linestyle="--", linewidth=1, label=f"K/S = {k / s:.2f}")
    estimates = [float(v) for v in drops if v is not None and not math.isnan(v)]
    if estimates:
        ax.plot(estimates, [1.04] * len(estimates), linestyle="none", marker="v", color=_RED,
                markersize=6, alpha=0.7, label="dropped (estimate)", clip_on=False)  # fmt: skip
    exacts = curve(s, k, [v for v in exact if v is not None and not math.isnan(v)])
    if exacts:
        ax.plot(*zip(*exacts), linestyle="none", marker="o", markerfacecolor="none",
                markeredgecolor=_GREEN, markersize=7, label="dropped (exact r)")  # fmt: skip
    ax.set_xlim(low, 1.0)
    ax.set_ylim(-0.02, 1.08)
    ax.set_xlabel("resemblance r of the two documents")
    ax.set_ylabel("chance the pair is dropped")
    ax.set_title(f"The S-curve, S = {s}, K = {k}" + (f" ({note})" if note else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", fontsize="small")
    fig.tight_layout()
    return fig
