"""The shared frontier's defaults and Redis key templates, in one place (as scrapy-redis keeps
its own in ``defaults.py``): no other module spells a key.

Every key of a crawl starts with :data:`PREFIX`. The braces make the crawl name a Redis Cluster
hash tag, so all of a crawl's keys live in one slot: the frontier's scripts and the index's
transactions each touch several keys, which Redis Cluster allows only within one slot.
"""

from __future__ import annotations

#: ``neardup:{<crawl>}:``, the prefix of every key of one crawl
PREFIX = "neardup:{%(crawl)s}:"
#: list: the requests waiting for node ``node`` (pushed left, popped right)
QUEUE = PREFIX + "queue:%(node)d"
#: list: the requests node ``node`` has popped and not yet acknowledged
INFLIGHT = PREFIX + "inflight:%(node)d"
#: string: the name of the process that runs node ``node`` (:mod:`crawler.frontier.lease`)
LEASE = PREFIX + "lease:%(node)d"
#: set: Scrapy request fingerprints of every request ever queued (the crawl's seen URLs)
SEEN = PREFIX + "seen"
#: set: the nodes that have queued their start requests
NODES = PREFIX + "nodes"
#: hash: the crawl's frontier settings every node must share (``nodes``: K)
FRONTIER = PREFIX + "frontier"
#: the prefix of the crawl's dedup index (:class:`storage.redis_index.RedisIndex`)
INDEX = PREFIX + "index:"

#: ``request.meta`` key holding a popped request's queue entry, to acknowledge it by
ENTRY_META = "neardup_frontier_entry"

#: seconds between the two looks that must both find the crawl's lists empty (termination)
SETTLE_SECONDS = 1.0
#: seconds between the looks of an idle node at the crawl's lists, between Scrapy's heartbeats
IDLE_LOOK_SECONDS = 1.0

#: the settings (``from_crawler``): Redis URL, ``"I/K"``, crawl name, settle seconds
SETTING_URL = "NEARDUP_FRONTIER"
SETTING_NODE = "NEARDUP_FRONTIER_NODE"
SETTING_CRAWL = "NEARDUP_FRONTIER_CRAWL"
SETTING_SETTLE = "NEARDUP_FRONTIER_SETTLE"
#: how many times a Redis command is retried, with back-off of up to a second, before the
#: node gives Redis up (crawler.frontier.connection)
SETTING_RETRIES = "NEARDUP_FRONTIER_RETRIES"
RETRIES = 40
#: seconds a node's lease lasts from its last renewal (renewed three times as often): how long
#: a node started again after a kill waits for the killed process's lease
SETTING_LEASE = "NEARDUP_FRONTIER_LEASE"
LEASE_SECONDS = 15.0


def keys(crawl: str) -> dict[str, str]:
    """The crawl-wide keys, filled in (per-node ones: :func:`node_keys`).

    >>> keys("demo")["seen"]
    'neardup:{demo}:seen'
    """
    names = {"seen": SEEN, "nodes": NODES, "frontier": FRONTIER, "index": INDEX}
    return {name: template % {"crawl": crawl} for name, template in names.items()}


def node_keys(crawl: str, node: int) -> tuple[str, str]:
    """Node ``node``'s queue and in-flight list.

    >>> node_keys("demo", 2)
    ('neardup:{demo}:queue:2', 'neardup:{demo}:inflight:2')
    """
    values = {"crawl": crawl, "node": node}
    return QUEUE % values, INFLIGHT % values


def lease_key(crawl: str, node: int) -> str:
    """Node ``node``'s lease (:mod:`crawler.frontier.lease`).

    >>> lease_key("demo", 2)
    'neardup:{demo}:lease:2'
    """
    return LEASE % {"crawl": crawl, "node": node}
