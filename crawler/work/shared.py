"""The decisions of one node of a distributed crawl: the crawl's cluster index, in Redis.

On a single machine the work decides each page against the store's LMDB index. A node of a
crawl on several machines (``neardup crawl ... --frontier URL --node I/K``) decides it with the
same :class:`~dedup.cluster.GreedyClusterer` against the crawl's
:class:`~storage.redis_index.RedisIndex`, in one Redis transaction per decision, which also
gives the decision its place in the crawl's one order; the node's store then keeps the page,
its document (with the crawl's cluster id) and that place (:mod:`storage.nodes`), as a single
machine's store keeps its own.

:class:`SharedIndex` is the work's side of it (:mod:`crawler.work.steps` calls it): the index
opened under the crawl's key prefix with the parameters every node must share
(:func:`index_params`), the URL of a decision any node made, an order number for a page
decided without the index (one skipped), and Redis's failures turned into store failures,
which stop the crawl with one line: its pages in flight stay in flight and come back when the
node is started again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from crawler.frontier import defaults
from crawler.frontier.connection import client, shown
from storage.errors import StoreError
from storage.manifest import Manifest
from storage.nodes import CrawlNode
from storage.redis_index import GlobalDecision, RedisIndex

if TYPE_CHECKING:
    from crawler.work.settings import SessionSettings
    from dedup.cluster import GreedyClusterer
    from dedup.params import ContentArea, DedupParams, SketchParams
    from dedup.sketches import Sketch

__all__ = ["SharedIndex", "SharedIndexError", "index_params"]

#: URLs of decisions kept at hand (what a node's duplicates name)
_URL_CACHE = 4096


class SharedIndexError(StoreError):
    """The crawl's Redis index could not be read or written (Redis down past the retries,
    out of memory, refusing the password): the work stops as for a store failure."""


def index_params(sketch: SketchParams, area: ContentArea, dedup: DedupParams) -> dict[str, Any]:
    """What every node's decisions depend on, as the index records it for the first node and
    checks for every other: the sketch (the store manifest's compared values: kind, size,
    shingling, Rabin polynomial, canonicaliser version, content area) and the dedup rule."""
    manifest = Manifest.for_params(sketch, area=area)
    return {
        "sketch": manifest.compared(),
        "dedup": {"threshold": dedup.threshold, "containment": dedup.containment,
                  "representative": dedup.representative, "canonicaliser": dedup.canonicaliser,
                  "cap": dedup.cap},  # fmt: skip
    }


class SharedIndex:
    """The crawl's index in the Redis at ``url``, as node ``node`` decides against it; Redis
    commands are retried ``retries`` times (NEARDUP_FRONTIER_RETRIES), as the scheduler's."""

    def __init__(
        self, url: str, node: CrawlNode, params: dict[str, Any], retries: int = defaults.RETRIES
    ) -> None:
        self.url = url
        self.node = node
        self._client = client(url, retries)
        self._urls: OrderedDict[int, str | None] = OrderedDict()
        with self._failures():
            self.index = RedisIndex(
                self._client, defaults.keys(node.crawl)["index"], node=node.node, params=params
            )

    @classmethod
    def open(cls, config: SessionSettings) -> SharedIndex:
        assert config.frontier is not None and config.crawl_node is not None
        params = index_params(config.sketch, config.area, config.dedup)
        return cls(config.frontier, config.crawl_node, params, config.frontier_retries)

    def assign(
        self, clusterer: GreedyClusterer, url: str, sketch: Sketch, content_hash: int
    ) -> GlobalDecision:
        """Decide the page and record the decision in the crawl's index (or find the decision
        recorded for its URL before: :meth:`storage.redis_index.RedisIndex.assign`)."""
        with self._failures():
            decided = self.index.assign(clusterer, url, sketch, content_hash)
        self._urls[decided.order] = url
        self._trim()
        return decided

    def take_order(self) -> int:
        """The next place in the crawl's order, for a page decided without the index."""
        with self._failures():
            return self.index.take_order()

    def url_of(self, order: int | None) -> str | None:
        """The URL of the page decided at ``order``, on any node (None for none)."""
        if order is None:
            return None
        if order in self._urls:
            self._urls.move_to_end(order)
            return self._urls[order]
        with self._failures():
            found = self.index.document(order)
        url = found.key if found is not None else None
        self._urls[order] = url
        self._trim()
        return url

    def close(self) -> None:
        self._client.close()

    def _trim(self) -> None:
        while len(self._urls) > _URL_CACHE:
            self._urls.popitem(last=False)

    @contextmanager
    def _failures(self) -> Iterator[None]:
        import redis

        try:
            yield
        except redis.RedisError as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            raise SharedIndexError(
                f"the crawl's Redis index at {shown(self.url)} failed ({text})"
            ) from exc
