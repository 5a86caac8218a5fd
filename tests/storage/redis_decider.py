"""One node of the concurrency test, in its own process: decides its pages against the shared
Redis index, each page when every node has reached it (so copies are decided at the same
instant), and sends back what it decided."""

from __future__ import annotations

from typing import Any


def decide_pages(url: str, node: int, pages: list[Any], threshold: float, barrier: Any,
                 results: Any) -> None:  # fmt: skip
    import redis

    from dedup.cluster import GreedyClusterer
    from dedup.params import DedupParams
    from storage.redis_index import RedisIndex

    index = RedisIndex(redis.Redis.from_url(url), "race:", node=node)
    clusterer = GreedyClusterer(index, DedupParams(threshold=threshold))
    decided = []
    for key, sketch, content_hash in pages:
        barrier.wait()
        decided.append(index.assign(clusterer, key, sketch, content_hash))
    results.put(decided)
