"""The Redis client of every part of a distributed crawl: one URL form, one way to ride out a
Redis restart, one check that the server is there before a crawl starts.

The frontier's scheduler (in the crawl process) and the dedup work (in its worker process) each
open a client from the same ``redis://`` URL. Their commands are retried with back-off for about
half a minute, so that a Redis restarted from its AOF is waited for rather than a failure
(:class:`storage.redis_index.RedisIndex` retries its transactions itself, whole). This module
imports nothing of Scrapy: the worker process loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from crawler.frontier.defaults import RETRIES

if TYPE_CHECKING:
    import redis

__all__ = ["MIN_VERSION", "check", "client", "shown"]

#: the oldest Redis the frontier runs on (``LMOVE`` came in 6.2)
MIN_VERSION = (6, 2)
#: seconds a check before the crawl waits for Redis to answer
CHECK_TIMEOUT = 3.0


def client(url: str, retries: int = RETRIES) -> redis.Redis:
    """A client of the Redis at ``url`` whose commands are retried through a restart (by
    default 40 retries, with back-off of up to a second: about half a minute)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=retries)
    return redis.Redis.from_url(
        url, retry=retry, retry_on_error=[redis.ConnectionError, redis.TimeoutError]
    )


def shown(url: str) -> str:
    """``url`` without its password, to name the server in a message.

    >>> shown("redis://:secret@10.0.0.5:6379/0")
    'redis://10.0.0.5:6379/0'
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, parts.query, ""))


def check(url: str) -> None:
    """Make sure the Redis at ``url`` answers, takes our commands and is recent enough;
    ``ValueError`` with the reason in one line otherwise."""
    import redis

    name = shown(url)
    try:
        probe = redis.Redis.from_url(
            url, socket_connect_timeout=CHECK_TIMEOUT, socket_timeout=CHECK_TIMEOUT
        )
    except ValueError as exc:
        raise ValueError(f"--frontier {name}: not a Redis URL ({exc}); e.g. "
                         "redis://HOST:6379/0") from None  # fmt: skip
    try:
        with probe:
            info = probe.info("server")
    except redis.AuthenticationError as exc:
        raise ValueError(f"--frontier {name}: Redis refused the password ({exc})") from None
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ValueError(f"--frontier {name}: Redis does not answer ({_one_line(exc)})") from None
    except redis.RedisError as exc:
        raise ValueError(f"--frontier {name}: Redis refused ({_one_line(exc)})") from None
    version = str(info.get("redis_version", "0"))
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if numbers < MIN_VERSION:
        wanted = ".".join(map(str, MIN_VERSION))
        raise ValueError(f"--frontier {name}: Redis {version} is too old; the frontier needs "
                         f"{wanted} or later (LMOVE)")  # fmt: skip


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
