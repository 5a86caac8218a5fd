"""The shared frontier of a crawl on several machines: a Scrapy scheduler over Redis.

``neardup crawl ... --frontier redis://HOST:PORT/DB --node I/K`` runs node I of K. Each host
belongs to one node (:mod:`.partition`); each node has a queue and an in-flight list in Redis
(:mod:`.queue`), and every request any node makes goes to the queue of its host's node, once
for the whole crawl (a set of Scrapy's request fingerprints). :mod:`.scheduler` is the Scrapy
scheduler of one node, :mod:`.middleware` the spider middleware it needs, :mod:`.defaults` the
one home of settings defaults and key templates. The dedup decision shared by the nodes is
:mod:`storage.redis_index`'s, under the same crawl prefix (``defaults.INDEX``).

**What comes from scrapy-redis (0.9.1).** The queue interface and its request serialisation:
:class:`~crawler.frontier.queue.NodeQueues` is a ``scrapy_redis.queue.Base``, so requests are
stored as ``Request.to_dict`` pickled by ``scrapy_redis.picklecompat``, decoded with Scrapy's
``request_from_dict``; and its layout of defaults and key templates in one module.

**What does not fit, and is Redis used directly instead.**

* Its queues pop destructively (``RPOP``, ``ZRANGE`` + ``ZREMRANGEBYRANK``): a request a killed
  node had popped is gone, and its dupefilter has seen it, so it is never fetched. Here a pop is
  ``LMOVE`` into the node's in-flight list, and the entry leaves it only when the page is done.
* It has one queue for all processes and no routing: any process pops any request, so a host's
  politeness is per process and a host is fetched from every machine. Here each node has its
  own queue and a request is pushed to the queue of its host's node.
* Its dupefilter hashes a hand-written fingerprint (method, canonical URL, body as JSON) and
  deletes its set when the spider closes unless ``SCHEDULER_PERSIST``; its scheduler builds
  from ``from_settings``. Here the seen set holds ``crawler.request_fingerprinter``'s bytes,
  persists, and the check and the push are one script (no URL seen but queued nowhere).
* ``RedisSpider`` feeds start URLs from a Redis key through ``start_requests``, which Scrapy
  2.16 removed; here the spider's own ``start()`` requests are scheduled like any others.
* Nothing in it knows when a crawl spread over several processes is finished; here the
  scheduler keeps an idle node open until every node's lists are empty.
"""

from __future__ import annotations

from crawler.frontier.partition import crawl_name, node_of_host, node_of_url, parse_node

__all__ = ["crawl_name", "node_of_host", "node_of_url", "parse_node"]
