"""What the dedup stage drops a page with: one ``DropItem`` subclass per reason.

Scrapy counts drops by class name (``item_dropped_reasons_count/NearDuplicate``), and a
pipeline placed after ours can tell a duplicate from another drop by class. The session
(:mod:`crawler.pipelines.session`) raises them from the work's outcomes by name (:data:`DROPS`).
"""

from __future__ import annotations

from scrapy.exceptions import DropItem

__all__ = [
    "DROPS",
    "AlreadyDecided",
    "Contained",
    "DedupDrop",
    "ExactDuplicate",
    "NearDuplicate",
    "NodeStopping",
    "Skipped",
    "StoreFailed",
]


class DedupDrop(DropItem):
    """Base of every drop the dedup stage makes.

    It says what becomes of the page's links (:mod:`crawler.work.links`): ``follow_links``,
    and ``run``, the (cluster, count) of duplicates in a row along the link path that ends at
    this page, which the requests for its links carry on. :class:`~crawler.spiders.SiteSpider`
    reads both when it hears of the drop.
    """

    run: tuple[int, int] | None = None
    follow_links: bool = False

    @property
    def cluster_id(self) -> int | None:
        """The cluster the page was dropped into (None when it was not a copy)."""
        return self.run[0] if self.run is not None else None


class Skipped(DedupDrop):
    """The page cannot be compared (not HTML, empty, an HTTP error, ...); the message says why."""


class ExactDuplicate(DedupDrop):
    """The page's canonical token stream equals a stored page's."""


class NearDuplicate(DedupDrop):
    """The page's estimated resemblance to a cluster's representative reached the threshold."""


class Contained(DedupDrop):
    """The page is contained in a cluster's representative at least NEARDUP_CONTAINMENT."""


class AlreadyDecided(DedupDrop):
    """The store already holds a decision for this URL (a resumed or repeated crawl)."""


class StoreFailed(DedupDrop):
    """Writing to the store failed; the crawl is stopping and decides nothing more."""


class NodeStopping(DedupDrop):
    """A node of a distributed crawl lost its frontier (its Redis, or its lease on the node) and
    is stopping: the page is not decided and stays in flight for the node's next run."""


#: the drop of each outcome the work names (crawler.work.steps.Outcome.drop)
DROPS: dict[str, type[DedupDrop]] = {
    "skipped": Skipped,
    "exact_duplicate": ExactDuplicate,
    "near_duplicate": NearDuplicate,
    "contained": Contained,
    "already_decided": AlreadyDecided,
    "store_failed": StoreFailed,
}
