"""``neardup explain URL``: why a page was dropped (or kept), with both texts side by side."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import textwrap
import time

from crawler.cli.common import UserError, add_config_arguments
from crawler.review.changes import RunState
from crawler.review.explain import Explanation, UnknownURL, explain
from crawler.review.textdiff import side_by_side, truncate_middle, use_colour, width_of
from crawler.cli.log import store_paths
from crawler.review.stores import open_stores
from crawler.review.url_forms import readable
from crawler.review.urls import origin, printed, resolve
from storage.errors import StoreError

HELP = "why a page was dropped or kept: the page it duplicated, the numbers, the texts"
DESCRIPTION = """\
Explain the decision a store holds for one page. Name the page by its full URL; by its path
as neardup log prints it under "URLs on http://host" (on a store of several hosts: when only
one host has that path); by a cell log cut in the middle (/walks/mossop-…aterfalls.html); by
the start of its path (/walks/wenlow); or by any unique part of its URL (case-blind, as
neardup log --url-contains matches). When several pages match, the error lists them (the
first 10): give more of the URL.

For a dropped page (exact_duplicate, near_duplicate, contained): the page it duplicated; the
resemblance r(A,B) and the containments c(A,B) and c(B,A) (A: this page, B: the one it
duplicated), estimated from the two stored sketches as the crawl saw them and computed exactly
from the full shingle sets of the two canonical texts; how many sketch entries matched; and the
two canonical texts side by side, shared passages plain and differing ones marked: red (only
in A) and green (only in B) on a terminal, [-only in A-] and {+only in B+} otherwise, with a *
between the columns on lines that differ. Long shared passages are cut to --context words
around each difference; --full shows everything.

For a kept page: its cluster, and every page dropped into it with its estimated resemblance.

For a page crawled again (a recrawl: run 2, 3, ... of the store): what changed since the
previous run (new, unchanged, changed with the resemblance to its previous content, gone), the
decision and cluster it had at the end of that run, and its decision in each run.

Several --store are the nodes of one distributed crawl: the page is found in whichever store
holds it, its original (and a kept page's cluster) in any of them.

The canonical text of a dropped page is in the store only when the crawl kept it
(review.keep_text, on by default); without it the estimates are still shown. A kept page's
text is made again from its stored page. Works while a crawl is writing to the store.

examples:
  neardup explain http://127.0.0.1:8000/archive/mossop-beck-waterfalls.html --store demo
  neardup explain /archive/mossop-beck-waterfalls.html --store demo     the path log prints
  neardup explain mossop --store demo                              a unique part of the URL
  neardup explain https://example.org/print/page.html --full --color never | less
  neardup explain https://example.org/ --json | jq .comparison.exact
  neardup explain /walks/wenlow-tarn.html --store node1 --store node2     the nodes of a crawl
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url", metavar="URL",
        help="the page: its full URL, its path as neardup log prints it, or a unique part of it",
    )  # fmt: skip
    parser.add_argument(
        "--store", metavar="DIR", action="append",
        help="store directory (default: 'store' in the config file); repeat it for the nodes "
        "of one distributed crawl",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--context", "-C", metavar="N", type=int, default=12,
        help="shared words shown around each difference (default: 12)",
    )  # fmt: skip
    parser.add_argument(
        "--full", action="store_true", help="show the whole of both texts side by side"
    )
    parser.add_argument(
        "--no-text", action="store_true", help="only the numbers, not the texts"
    )
    parser.add_argument(
        "--color", "--colour", dest="color", choices=["auto", "always", "never"],
        default="auto",
        help="colour the differences: auto (on a terminal, unless NO_COLOR is set), "
        "always, never",
    )  # fmt: skip
    parser.add_argument(
        "--width", metavar="COLS", type=int,
        help="output width (default: the terminal's, 80 when not a terminal)",
    )  # fmt: skip
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    paths = store_paths(args)
    if args.context < 0:
        raise UserError(f"--context must be 0 or more; got {args.context}")
    try:
        with open_stores(paths) as stores:
            try:
                found = resolve(stores, args.url)
                assert found.store is not None
                others = [s for s in stores if s is not found.store]
                explained = explain(found.store, found.url, elsewhere=others)
            except UnknownURL as exc:
                raise UserError(str(exc)) from None
    except StoreError as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps(explained.to_dict(), indent=2, ensure_ascii=False))
        return 0
    width = max(args.width or shutil.get_terminal_size((80, 24)).columns, 40)
    print(
        render(
            explained,
            width=width,
            colour=use_colour(sys.stdout, args.color),
            context=None if args.full else args.context,
            texts=not args.no_text,
            store=" --store ".join(map(str, paths)),
        )
    )
    return 0


# --- the report ---------------------------------------------------------------------------------


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _value(value: float | None) -> str:
    return f"{'n/a':>9}" if value is None else f"{value:>9.4f}"


def render(
    e: Explanation,
    *,
    width: int = 80,
    colour: bool = False,
    context: int | None = 12,
    texts: bool = True,
    store: str = "STORE",
) -> str:
    """The human form of an explanation."""
    page = e.page
    log = e.log or {}
    latest = e.latest
    # when its line of the latest run was written: a recrawl confirms an unchanged page's
    # decision (its record keeps the time it was first made)
    decided = _when(page.time if latest is None or latest.time is None else latest.time)
    if latest is not None:
        decided += f", run {latest.run}" + (f", node {latest.node}" if latest.node else "")
    lines = [page.url]
    if e.store is not None:
        lines.append(f"  store         {e.store}")
    if page.decision == "skipped":
        detail = log.get("detail")
        what = f"skipped ({log.get('reason') or 'reason not logged'})"
        lines += [
            f"  decision      {what}{': ' + detail if detail else ''}",
            f"  decided       {decided}",
            *_runs(e),
            "  A skipped page is not compared with anything.",
        ]
    elif e.dropped:
        lines.append(f"  decision      {page.decision} (dropped)")
        if e.reason:
            lines.append(f"  why           {e.reason}")
        lines += [f"  decided       {decided}", *_runs(e)]
        if e.original is not None:
            elsewhere = f" in store {e.original_store}" if e.original_store else ""
            lines.append(
                f"  duplicate of  {e.original.url} ({e.original.decision}){elsewhere}"
            )
        lines += _comparison(e)
    else:
        stored = f": stored at {page.page}" if page.page else ": not in the page store"
        lines += [f"  decision      {page.decision}{stored}", f"  decided       {decided}"]
        if e.reason:
            lines.append(f"  note          {e.reason}")
        lines += _runs(e)
        lines += _cluster(e, width, store)
    lines += [f"note: {n}" for n in e.notes]
    c = e.comparison
    if e.original is not None and c is not None and c.has_exact:
        lines += ["", _text_summary(e)]
    lines = _fit(lines, width)
    if e.original is not None and c is not None and c.has_exact:
        if texts and c.differences:
            lines.append("")
            assert page.tokens is not None and e.original.tokens is not None
            lines.append(
                side_by_side(
                    page.tokens,
                    e.original.tokens,
                    width=width,
                    colour=colour,
                    context=context,
                    unit=e.params.unit,
                    titles=_titles(page.url, e.original.url),
                )
            )
            lines += _fit(_legend(colour, context).splitlines(), width)
    return "\n".join(lines)


def _runs(e: Explanation) -> list[str]:
    """For a page of a recrawl (run 2 or later): what changed since the previous run, what it
    was then, and its decision in each run it was decided in."""
    latest = e.latest
    if latest is None or latest.run < 2:
        return []
    before = latest.run - 1
    change = {
        "new": f"new in run {latest.run} (the store did not know it)",
        "unchanged": f"unchanged since run {before}",
        "changed": f"changed since run {before}",
        "gone": f"gone since run {before} (no page now)",
    }.get(latest.change, latest.change)
    if latest.change == "changed" and latest.change_resemblance is not None:
        change += f": resemblance {latest.change_resemblance:.2f} to its previous content"
    if latest.redecided:
        change += "; decided again, for the kept page of its cluster"
    lines = [f"  change        {change}"]
    if e.previous_decision is not None:
        was = e.previous_decision
        cluster = e.previous_cluster_id
        if cluster is not None:
            now = e.page.cluster_id
            moved = f" (now {now})" if now is not None and now != cluster else ""
            was += f", cluster {cluster}{moved}"
        lines.append(f"  previously    run {before}: {was}")
    if len(e.history) > 1:
        lines.append("  runs          " + "; ".join(_run_cell(h) for h in e.history))
    return lines


def _run_cell(h: RunState) -> str:
    """One run in the ``runs`` line: ``2: kept (changed, cluster 4)``."""
    said = [h.change] if h.change != "new" or h.run > 1 else []
    if h.redecided:
        said.append("re-decided")
    if h.cluster_id is not None:
        said.append(f"cluster {h.cluster_id}")
    return f"{h.run}: {h.decision}" + (f" ({', '.join(said)})" if said else "")


_LABELLED = re.compile(r"^  [a-z][a-z ]{11}  \S")


def _fit(lines: list[str], width: int) -> list[str]:
    """Wrap the prose lines to ``width``, continuing under their text (a label's value, a
    note's text); a URL is never broken, so one longer than a line stays whole."""
    out = []
    for line in lines:
        if width_of(line) <= width:
            out.append(line)
            continue
        if _LABELLED.match(line):
            hang = 16
        elif line.startswith("note: "):
            hang = 6
        else:
            hang = len(line) - len(line.lstrip())
        out += textwrap.wrap(line, width, subsequent_indent=" " * hang,
                             break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return out


def _comparison(e: Explanation) -> list[str]:
    c = e.comparison
    if c is None:
        return []
    header = f"{'':<22}{'estimate':>9}{'exact':>9}"
    rows = [
        ("resemblance r(A,B)", c.estimated_resemblance, c.exact_resemblance),
        ("containment c(A,B)", c.estimated_containment_a_in_b, c.exact_containment_a_in_b),
        ("containment c(B,A)", c.estimated_containment_b_in_a, c.exact_containment_b_in_a),
    ]
    out = ["", "  A = this page, B = the page it duplicated", f"  {header}"]
    out += [f"  {name:<22}{_value(est)}{_value(ex)}" for name, est, ex in rows]
    if c.matches is not None:
        out.append(f"  {c.matches} of {c.sample_size} sketch entries matched")
        out.append(f"  sketch: {e.params.describe()}")
        out.append(f"  content area: {e.area.describe()}")
    if c.has_exact:
        a, b = e.page, e.original
        assert b is not None and a.tokens is not None and b.tokens is not None
        partial = " (of the kept part of the text)" if c.exact_partial else ""
        out.append(
            f"  {c.shared_shingles:,} shingles shared{partial}; A has {len(a.tokens):,} tokens, "
            f"B {len(b.tokens):,}"
        )
    return out


def _text_summary(e: Explanation) -> str:
    c = e.comparison
    assert c is not None and e.page.tokens is not None and e.original is not None
    assert e.original.tokens is not None
    only_a = sum(p.a_end - p.a_start for p in c.differences)
    only_b = sum(p.b_end - p.b_start for p in c.differences)
    noun = {"word": "words", "char": "characters", "line": "lines"}[e.params.unit]
    if not c.differences:
        return f"The canonical texts are identical ({len(e.page.tokens):,} {noun})."
    passages = len(c.differences)
    return (
        f"The canonical texts: {c.shared_tokens:,} {noun} shared, {only_a:,} only in A and "
        f"{only_b:,} only in B, in {passages} differing passage{'s' if passages != 1 else ''}."
    )


def _titles(a: str, b: str) -> tuple[str, str]:
    """Column titles; paths only when both pages are on one host (else both look alike)."""
    host = origin(a)
    if host and host == origin(b):
        a, b = printed(a, host), printed(b, host)
    return f"A: {readable(a)}", f"B: {readable(b)}"


def _legend(colour: bool, context: int | None) -> str:
    marks = (
        "red: only in A, green: only in B"
        if colour
        else "[-...-] only in A, {+...+} only in B, * a line with a difference"
    )
    if context is None:
        return marks
    return f"{marks}\nshared passages cut to {context} words around each difference (--full: all)"


def _cluster(e: Explanation, width: int, store: str) -> list[str]:
    cluster = e.cluster
    if cluster is None:
        return ["  (not in any cluster)"]
    dropped = [m for m in cluster.members if m.decision != "kept"]
    pages = f"{cluster.size} page{'s' if cluster.size != 1 else ''}"
    same = " with identical text" if cluster.identical and cluster.size > 1 else ""
    out = [f"  cluster       {cluster.cluster_id}: {pages}{same}"]
    if (cluster.first_store is not None or cluster.first_doc != e.page.doc_id) and (
        cluster.first_url
    ):
        elsewhere = f" (store {cluster.first_store})" if cluster.first_store else ""
        out.append(f"  first page    {cluster.first_url}{elsewhere}")
    if not dropped:
        out.append("  No page has been dropped into its cluster.")
        return out
    out += ["", f"  pages dropped into it ({len(dropped)}):"]
    url_width = max(width - 2 - 9 - 2 - 5 - 2, 20)
    out.append(f"  {'decision':<9}  {'res.':>5}  URL")
    for m in dropped:
        r = "" if m.resemblance is None else f"{m.resemblance:.2f}"
        label = {"exact_duplicate": "exact dup", "near_duplicate": "near dup"}.get(
            m.decision, m.decision
        )
        out.append(f"  {label:<9}  {r:>5}  {truncate_middle(m.url, url_width)}")
    out += [
        "",
        "  res.: estimated resemblance to this page (from the sketches). For one of them:",
        f"  neardup explain URL --store {store}",
    ]
    return out
