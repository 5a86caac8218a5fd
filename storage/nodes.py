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
back in that order (re-clustering them, merging their logs): :func:`in_crawl_order`, after
:func:`check_one_crawl` has made sure the stores are the nodes of one crawl.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage.errors import StoreError, StoreMismatchError

if TYPE_CHECKING:
    from storage.records import DocumentRecord

__all__ = ["CrawlNode", "check_one_crawl", "in_crawl_order"]


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


def check_one_crawl(stores: Sequence[Any]) -> None:
    """Several open stores read as one crawl must be the stores of its nodes: each a node's,
    all of one crawl and its count of nodes, no node twice. One store is read as it is.
    :class:`~storage.errors.StoreMismatchError`, naming the store that does not fit, otherwise.
    """
    if len(stores) < 2:
        return
    first: tuple[Any, CrawlNode] | None = None
    holders: dict[int, Any] = {}
    for store in stores:
        node = store.crawl_node
        if node is None:
            raise StoreMismatchError(
                f"store {store.path} holds a single-machine crawl: several stores are read as "
                "the nodes of one distributed crawl"
            )
        if first is None:
            first = (store, node)
        elif (node.crawl, node.nodes) != (first[1].crawl, first[1].nodes):
            raise StoreMismatchError(
                f"store {store.path} is {node.describe()} and store {first[0].path} is "
                f"{first[1].describe()}: they are not the nodes of one crawl"
            )
        if node.node in holders:
            raise StoreMismatchError(
                f"stores {holders[node.node].path} and {store.path} are both node {node.label} "
                f"of the crawl {node.crawl!r}: give each node's store once"
            )
        holders[node.node] = store


def in_crawl_order(stores: Sequence[Any]) -> Iterator[tuple[int, int, DocumentRecord]]:
    """``(k, doc_id, record)`` of the current documents of the open ``stores`` (``k`` the
    store's place in ``stores``), in the crawl's order of decisions, the order greedy
    clustering is defined by.

    A single machine's store: its document id order, as it decided them. The stores of a
    distributed crawl's nodes: by the place each document has in the crawl's order, which the
    document ids of a node's store follow only until the node is restarted (see
    :meth:`storage.store.Store.orders`); the places are read and sorted first (a few bytes a
    document), the records as they are yielded. A node's document without a place, or two
    documents with one place, is a :class:`~storage.errors.StoreError` before any is yielded.
    """
    import numpy as np

    if len(stores) == 1 and stores[0].crawl_node is None:
        for doc_id, record in stores[0].current_documents():
            yield 0, doc_id, record
        return
    orders, owners, ids = [], [], []
    for k, store in enumerate(stores):
        places = array("q")  # order, doc id, order, doc id, ...
        for doc_id, record in store.current_documents():
            order = store.order_of(doc_id)
            if order is None:
                raise StoreError(
                    f"store {store.path}: document {doc_id} ({record.url}) has no place in the "
                    "crawl's order (neardup verify --store says more)"
                )
            places.extend((order, doc_id))
        found = np.frombuffer(places, dtype=np.int64).reshape(-1, 2)
        orders.append(found[:, 0])
        ids.append(found[:, 1])
        owners.append(np.full(len(found), k, dtype=np.int32))
    order = np.concatenate(orders)
    owner, doc_ids = np.concatenate(owners), np.concatenate(ids)
    ranked = np.argsort(order, kind="stable")
    sorted_orders = order[ranked]
    shared = np.flatnonzero(sorted_orders[1:] == sorted_orders[:-1])
    if len(shared):
        a, b = ranked[shared[0]], ranked[shared[0] + 1]
        raise StoreError(
            f"document {doc_ids[a]} of store {stores[owner[a]].path} and document {doc_ids[b]} "
            f"of store {stores[owner[b]].path} share the place {order[a]} in the crawl's order"
        )
    for at in ranked:
        k, doc_id = int(owner[at]), int(doc_ids[at])
        record = stores[k].document(doc_id)
        assert record is not None, f"document {doc_id} was listed, so it is recorded"
        yield k, doc_id, record
