"""The request lists of one node of a crawl in Redis, with Redis's reliable-queue pattern.

A request is *pushed* to the queue of the node that owns its host (:mod:`.partition`), only if
its fingerprint is new to the crawl's ``seen`` set; the check and the push are one script, so a
node killed between them cannot leave a URL seen but queued nowhere. It is *popped* with
``LMOVE`` into the node's in-flight list, where it stays until it is *acknowledged* (``LREM``)
once its page is done; what a killed node held in flight goes back to its queue when it starts
again (:meth:`NodeQueues.recover`). A request that replaces one in flight (a redirect or a
retry made by a downloader middleware) is pushed and the one it replaces acknowledged in the
same script, so the URL is always in exactly one list.

Entries are scrapy-redis's: ``Request.to_dict`` pickled (its queue's ``_encode_request``), so
callbacks must be spider methods. The lists are FIFO (pushed left, popped right): a node crawls
its hosts breadth first, and request priorities are not kept across nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_redis import picklecompat
from scrapy_redis.queue import Base

from crawler.frontier import defaults
from crawler.frontier.partition import node_of_url

if TYPE_CHECKING:
    import redis
    from scrapy import Request, Spider

__all__ = ["FrontierLost", "NodeQueues", "check_nodes"]

# KEYS: seen, the owner's queue, this node's in-flight list; ARGV: fingerprint ('' when not
# filtered), entry, the in-flight entry it replaces (''). 1 if queued, 0 if seen before.
_PUSH = """
local queued = 1
if ARGV[1] ~= '' and redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  queued = 0
else
  redis.call('LPUSH', KEYS[2], ARGV[2])
end
if ARGV[3] ~= '' then
  redis.call('LREM', KEYS[3], 1, ARGV[3])
end
return queued
"""

# KEYS: in-flight list, queue. Everything in flight back to the queue's popping end, the
# oldest nearest to it. Returns how many.
_RECOVER = """
local moved = 0
while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do
  moved = moved + 1
end
return moved
"""


class NodeQueues(Base):  # type: ignore[misc]  # scrapy-redis ships no type hints
    """Node ``node``'s side of the crawl ``crawl`` on ``nodes`` nodes, in ``server``'s database.

    ``spider`` is what requests are serialised against (its methods are the callbacks).
    """

    def __init__(
        self,
        server: redis.Redis,
        spider: Spider,
        crawl: str,
        node: int,
        nodes: int,
        serializer: Any = picklecompat,
    ) -> None:
        if not 1 <= node <= nodes:
            raise ValueError(f"node {node} of {nodes}: the node must be between 1 and {nodes}")
        self.queue_key, self.inflight_key = defaults.node_keys(crawl, node)
        super().__init__(server, spider, self.queue_key, serializer)
        self.crawl = crawl
        self.node = node
        self.nodes = nodes
        self.keys = defaults.keys(crawl)
        self._push = server.register_script(_PUSH)
        self._recover = server.register_script(_RECOVER)

    def __len__(self) -> int:
        """Requests waiting in this node's queue."""
        return int(self.server.llen(self.queue_key))

    def owner(self, request: Request) -> int:
        return node_of_url(request.url, self.nodes)

    def push(
        self, request: Request, fingerprint: bytes | None, replaces: bytes | None = None
    ) -> bool:
        """Queue ``request`` for its host's node, unless ``fingerprint`` (None: not filtered)
        was seen; acknowledge ``replaces`` in the same step. True if queued."""
        queue, _ = defaults.node_keys(self.crawl, self.owner(request))
        queued = self._push(
            keys=[self.keys["seen"], queue, self.inflight_key],
            args=[fingerprint or b"", self._encode_request(request), replaces or b""],
        )
        return bool(queued)

    def pop(self, timeout: int = 0) -> tuple[Request, bytes] | None:
        """The next request and its entry, moved into the in-flight list; None when the queue
        is empty. A request that cannot be decoded raises ``ValueError`` naming it, after its
        entry was dropped from the in-flight list (it could never be crawled)."""
        raw = self.server.lmove(self.queue_key, self.inflight_key, "RIGHT", "LEFT")
        if raw is None:
            return None
        try:
            return self._decode_request(raw), raw
        except Exception as exc:
            self.ack(raw)
            raise ValueError(f"an undecodable request in {self.queue_key}: {exc}") from exc

    def ack(self, entry: bytes) -> bool:
        """Done with the request of ``entry``: out of the in-flight list. False if it was not
        there (acknowledged already)."""
        return bool(self.server.lrem(self.inflight_key, 1, entry))

    def recover(self) -> int:
        """Put the requests this node held in flight when it stopped back in its queue."""
        return int(self._recover(keys=[self.inflight_key, self.queue_key]))

    def register(self) -> None:
        """Say this node has queued its start requests (termination waits for all K)."""
        self.server.sadd(self.keys["nodes"], self.node)

    def check_nodes(self) -> None:
        """Fix the crawl's number of nodes, or refuse a node started with another one."""
        check_nodes(self.server, self.crawl, self.nodes)

    def work_left(self, registered: bool = False) -> int:
        """Requests queued or in flight on any node, read in one transaction; -1 while not all
        nodes have registered (one that has not may still queue its start requests).

        ``registered``: this node has registered, so its absence means the crawl's keys are
        gone (a Redis restarted without its data): :class:`FrontierLost`."""
        pipe = self.server.pipeline(transaction=True)
        pipe.scard(self.keys["nodes"])
        pipe.sismember(self.keys["nodes"], self.node)
        for node in range(1, self.nodes + 1):
            for key in defaults.node_keys(self.crawl, node):
                pipe.llen(key)
        count, member, *lengths = pipe.execute()
        if registered and not member:
            raise FrontierLost(
                f"the crawl {self.crawl!r} is gone from its Redis (restarted without its data?)"
            )
        if count < self.nodes:
            return -1
        return int(sum(lengths))

    def unregistered(self) -> list[int]:
        """The nodes of the crawl that have not registered yet (not started, or starting)."""
        registered = {int(n) for n in self.server.smembers(self.keys["nodes"])}
        return [n for n in range(1, self.nodes + 1) if n not in registered]

    def clear(self) -> None:
        """Forget this node's queue and in-flight list."""
        self.server.delete(self.queue_key, self.inflight_key)


class FrontierLost(Exception):
    """The crawl's frontier cannot be used any more; the message says why, in one line."""


def check_nodes(server: redis.Redis, crawl: str, nodes: int) -> None:
    """Fix the crawl's number of nodes (the first node to ask does), or refuse ``nodes`` if it
    is another one (``ValueError``)."""
    key = defaults.keys(crawl)["frontier"]
    server.hsetnx(key, "nodes", nodes)
    stored = int(server.hget(key, "nodes"))
    if stored != nodes:
        raise ValueError(
            f"the crawl {crawl!r} runs on {stored} nodes; this node was started as one "
            f"of {nodes} (give every node the same --node I/K)"
        )
