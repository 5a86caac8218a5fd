"""A store kept by one node of a distributed crawl: which node it is, and each document's place
in the whole crawl's order.

Each node of a crawl on several machines keeps its own store (``docs/distributed.md``). Its
cluster index is not the store's LMDB index but the crawl's, in Redis
(``storage.redis_index``), so the store says so once, in its ``meta`` database
(:class:`CrawlNode`): ``neardup verify`` then checks its documents and pages and expects no
local clusters, and a crawl of the store with another node, another crawl or none is refused,
since its decisions were made against clusters only that crawl's index holds.

A node's documents are numbered by the store (0, 1, 2, ... as in any store); their place in
the crawl's one order of decisions, the order number Redis gave each decision, is kept beside
them in the ``orders`` database (doc id → order), so that the stores of all nodes can be read
back in that order (re-clustering them, merging their logs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["CrawlNode"]


@dataclass(frozen=True)
class CrawlNode:
    """Node ``node`` of ``nodes`` of the distributed crawl named ``crawl``.

    >>> CrawlNode("c1", 2, 3).label
    '2/3'
    >>> CrawlNode.from_bytes(CrawlNode("c1", 2, 3).to_bytes())
    CrawlNode(crawl='c1', node=2, nodes=3)
    """

    crawl: str
    node: int
    nodes: int

    def __post_init__(self) -> None:
        if not 1 <= self.node <= self.nodes:
            raise ValueError(f"node {self.node} of {self.nodes}: must be between 1 and {self.nodes}")

    @property
    def label(self) -> str:
        """``I/K``, as ``--node`` takes it and each decision line records it."""
        return f"{self.node}/{self.nodes}"

    def describe(self) -> str:
        return f"node {self.label} of the distributed crawl {self.crawl!r}"

    def to_bytes(self) -> bytes:
        return json.dumps({"crawl": self.crawl, "node": self.node, "nodes": self.nodes},
                          sort_keys=True).encode("utf-8")  # fmt: skip

    @classmethod
    def from_bytes(cls, data: bytes) -> CrawlNode:
        value = json.loads(data)
        return cls(str(value["crawl"]), int(value["node"]), int(value["nodes"]))
