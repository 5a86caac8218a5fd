"""The duplicate budget: which pages' links a crawl follows, so that a spider trap ends.

A spider trap (an endless calendar, a session id in every URL) serves one page again and
again under new URLs. Each of those pages is dropped as a duplicate of the first, which is in
the store, and near-duplicate detection at crawl time exists to stop exactly that: Manku, Jain
and Das Sarma (WWW 2007) ignore a near-duplicate page *and its outgoing links*. Ignoring every
duplicate's links would also stop a crawl at a mirror of a site, or at a site's next release,
whose pages are each a copy of a *different* kept page and whose new pages are reachable only
through them. What tells the two apart is repetition: a trap is page after page of *one*
cluster along a link path.

So each request carries the **run** of the path that led to it: ``(cluster, count)``, the
cluster of the last page on the path and how many pages in a row, ending there, were dropped
into it; None after a page that was not a duplicate. A page's own run (:func:`run_after`):

* kept (or skipped, or left undecided): no run;
* dropped into cluster C after a run in C of ``n``: ``(C, n + 1)``;
* dropped into cluster C after anything else: ``(C, 1)``.

Its links are followed (:func:`follows_links`) unless its run's count exceeds the budget
(``crawl.duplicate_link_budget``, ``NEARDUP_DUPLICATE_BUDGET``): with budget 2, the links of
the first and second duplicate in a row are followed and the third's are not. A mirror's run
starts again at 1 on every page, so it is crawled to its end.

>>> run = None
>>> for cluster in (None, 7, 7, 7):
...     run = run_after(run, cluster)
...     print(run, follows_links(run, 2))
None True
(7, 1) True
(7, 2) True
(7, 3) False
>>> run_after((7, 2), 9), run_after((7, 2), None)
((9, 1), None)
"""

from __future__ import annotations

__all__ = ["DUPLICATE_DECISIONS", "Run", "follows_links", "run_after"]

#: (cluster id, duplicates of it in a row along the link path, ending at this page)
Run = tuple[int, int]

#: the decisions that drop a page as a copy of a cluster
DUPLICATE_DECISIONS = frozenset({"exact_duplicate", "near_duplicate", "contained"})


def run_after(parent: Run | None, cluster: int | None) -> Run | None:
    """The run of a page: its parent's ``parent``, then the page dropped into ``cluster``
    (None when it was not dropped as a duplicate)."""
    if cluster is None:
        return None
    if parent is not None and parent[0] == cluster:
        return (cluster, parent[1] + 1)
    return (cluster, 1)


def follows_links(run: Run | None, budget: int | None) -> bool:
    """True when the links of a page with ``run`` are followed (``budget`` None: always)."""
    return run is None or budget is None or run[1] <= budget
