"""One process per node: a lease in Redis that the node's scheduler holds while it runs.

Two processes started as the same node of a crawl (``--node 2/3`` given twice, on two
machines) would share the node's queue, and the second's start would put the first's requests
in flight back in the queue: pages fetched twice, into two stores. So a node's scheduler takes
the node's lease before it touches the node's lists, renews it while it runs and gives it back
when it closes.

The lease is one Redis key whose value names its holder (host, process id, a random part) and
which expires ``seconds`` after its last renewal. A node killed without giving it back holds it
until then: the node started again waits for it, up to ``seconds`` and a little more. A lease
still held when that wait is over is renewed by a live process: the node is running elsewhere,
and the new process stops with a line naming it. A holder that finds its lease gone (Redis
restarted, or the process stalled past the expiry) takes it again, unless another process has;
then it is that process's node, and the holder stops.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from crawler.frontier import defaults

if TYPE_CHECKING:
    import redis

__all__ = ["NodeLease"]

# Renew the lease if this holder has it, or take it again if it expired; else the holder's
# name. KEYS: the lease; ARGV: this holder's name, milliseconds.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""

# Give the lease back if this holder has it. KEYS: the lease; ARGV: this holder's name.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
"""

#: seconds between two tries at a lease a stopped process may still hold
_POLL = 0.25


class NodeLease:
    """Node ``node``'s lease of the crawl ``crawl``, held ``seconds`` from each renewal."""

    def __init__(self, server: redis.Redis, crawl: str, node: int, seconds: float) -> None:
        if not seconds > 0:
            raise ValueError(f"a node's lease lasts a positive number of seconds; got {seconds}")
        self.server = server
        self.key = defaults.lease_key(crawl, node)
        self.seconds = seconds
        #: this process, as another one names it
        self.holder = f"host {socket.gethostname()}, pid {os.getpid()}, {secrets.token_hex(4)}"
        self._renew = server.register_script(_RENEW)
        self._release = server.register_script(_RELEASE)

    @property
    def _milliseconds(self) -> int:
        return max(1, round(self.seconds * 1000))

    def acquire(self, on_wait: Callable[[], None] | None = None) -> str | None:
        """Take the lease: at once, or once a stopped holder's lease expires (``on_wait`` is
        called when it must wait). None when taken; else the live holder's name (it was
        renewed all the while)."""
        deadline = time.monotonic() + self.seconds + 2 * _POLL
        while True:
            if self.server.set(self.key, self.holder, nx=True, px=self._milliseconds):
                return None
            if on_wait is not None:
                on_wait()
                on_wait = None
            if time.monotonic() >= deadline:
                holder = self.server.get(self.key)
                if holder is not None:
                    return _text(holder)
            time.sleep(_POLL)

    def renew(self) -> str | None:
        """Keep the lease another ``seconds``. None when kept; else the name of the process
        that took it."""
        other = self._renew(keys=[self.key], args=[self.holder, self._milliseconds])
        return None if other is None else _text(other)

    def release(self) -> None:
        """Give the lease back (when this process holds it)."""
        self._release(keys=[self.key], args=[self.holder])


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
