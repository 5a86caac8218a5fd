"""Which node of a crawl fetches a host: node ``1 + h(host) mod K``, ``h`` a stable hash.

One host belongs to one node, as in every crawler that spreads hosts over machines (Nutch's
``partition.url.mode=byHost``, Heritrix's HashCrawlMapper): the node's own Scrapy then keeps
the host's politeness (download slots, delays, robots.txt) with nothing shared. The hash is
BLAKE2b of the lower-cased host name, the same on every machine and in every run, never
Python's ``hash()``, which changes with each interpreter. The port is not part of the host, as
in Scrapy's download slots.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["crawl_name", "node_of_host", "node_of_url", "parse_node"]


def parse_node(text: str) -> tuple[int, int]:
    """``"I/K"`` as ``(I, K)``: node I of K, 1-based; ``ValueError`` with the reason otherwise.

    >>> parse_node("2/3")
    (2, 3)
    >>> parse_node("4/3")
    Traceback (most recent call last):
    ...
    ValueError: --node 4/3: the node must be between 1 and 3
    """
    node, slash, nodes = str(text).partition("/")
    if not slash or not node.strip().isdigit() or not nodes.strip().isdigit():
        raise ValueError(f"--node {text}: expected I/K, node I of K nodes, such as 1/3")
    i, k = int(node), int(nodes)
    if k < 1:
        raise ValueError(f"--node {text}: a crawl needs at least one node")
    if not 1 <= i <= k:
        raise ValueError(f"--node {text}: the node must be between 1 and {k}")
    return i, k


def node_of_host(host: str, nodes: int) -> int:
    """The node (1 … ``nodes``) that fetches ``host``.

    >>> node_of_host("Example.COM", 3) == node_of_host("example.com", 3)
    True
    >>> node_of_host("example.com", 1)
    1
    """
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1; got {nodes}")
    digest = hashlib.blake2b(host.lower().encode("utf-8"), digest_size=8).digest()
    return 1 + int.from_bytes(digest, "big") % nodes


def node_of_url(url: str, nodes: int) -> int:
    """The node that fetches ``url``'s host.

    >>> node_of_url("http://example.com:8080/a", 5) == node_of_host("example.com", 5)
    True
    """
    return node_of_host(urlsplit(url).hostname or "", nodes)


#: what a crawl's name may hold: it begins every Redis key of the crawl
_CRAWL_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def check_crawl_name(crawl: str) -> str:
    """``crawl`` if it can name a crawl's keys, else a ValueError that says what can.

    >>> check_crawl_name("docs-2026.12")
    'docs-2026.12'
    >>> check_crawl_name("bad name")
    Traceback (most recent call last):
    ...
    ValueError: crawl name 'bad name': use 1 to 100 letters, digits, '.', '_' or '-'
    """
    if not _CRAWL_NAME.fullmatch(crawl):
        raise ValueError(f"crawl name {crawl!r}: use 1 to 100 letters, digits, '.', '_' or '-'")
    return crawl


def crawl_name(start_urls: Iterable[str]) -> str:
    """A name for the crawl of these start URLs (in any order): what every node given the same
    URLs computes alike, to name the crawl's keys when no name is given.

    >>> crawl_name(["http://b.test/", "http://a.test/"]) == crawl_name(["http://a.test/", "http://b.test/"])
    True
    """
    joined = "\n".join(sorted(set(start_urls))).encode("utf-8")
    return hashlib.blake2b(joined, digest_size=8).hexdigest()
