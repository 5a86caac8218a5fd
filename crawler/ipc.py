"""Messages between our processes: pickled, framed by length, over OS pipes.

The crawl's worker process (:mod:`crawler.work.process`) and re-clustering's sketching processes
(:mod:`crawler.recluster.pool`) both talk to their parent this way, through this one module:

* a message is a pickle, framed by its length (4 bytes, big-endian): :func:`frame`,
  :class:`Unframer`;
* :class:`Receiver` reads whole messages from a pipe, blocking, as many as have arrived at once
  (one ``read`` for a burst); :class:`Sender` writes them, holding them until :meth:`~Sender.flush`
  when a burst should cost one ``write``;
* :func:`message_pipe` makes a pipe that holds :data:`PIPE_BYTES` where the system allows it;
* a helper process dies with its parent (:func:`die_with_parent`), and an exception crosses only
  if it survives pickling (:func:`sendable`).

Not :mod:`multiprocessing.connection`: the crawl's side of the worker pipe is read by Scrapy's
event loop (``add_reader``), which needs the raw descriptor and a parser that accepts bytes as
they come; one framing for both users keeps one protocol to read.

>>> read_fd, write_fd = message_pipe()
>>> sender, receiver = Sender(write_fd), Receiver(read_fd)
>>> sender.queue(("docs", [1, 2])); sender.queue(("end", None)); sender.flush()
True
>>> receiver.receive()
[('docs', [1, 2]), ('end', None)]
>>> sender.close(); receiver.get()
Traceback (most recent call last):
...
EOFError: the other process closed the pipe
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
from collections import deque
from typing import Any

try:
    import fcntl
except ImportError:  # not a POSIX system: pipes keep their size
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "PIPE_BYTES",
    "Receiver",
    "Sender",
    "Unframer",
    "die_with_parent",
    "frame",
    "message_pipe",
    "sendable",
    "widen",
]

#: bytes a pipe holds, where the system lets us set it: a few messages of pages. (Linux's
#: default, 64 KiB, holds less than one, so a writer would wait on each reader in turn.)
PIPE_BYTES = 1 << 20
#: bytes asked of one read
_READ = 1 << 20

_LENGTH = struct.Struct(">I")


def frame(message: Any) -> bytes:
    """``message`` as it goes down a pipe: its pickle, after the pickle's length."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


class Unframer:
    """Bytes in as they arrive, whole messages out.

    >>> unframer = Unframer()
    >>> data = frame("a") + frame("b")
    >>> unframer.feed(data[:7]), unframer.feed(data[7:])
    ([], ['a', 'b'])
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += data
        messages = []
        start = 0
        while len(buffer) - start >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer, start)
            end = start + _LENGTH.size + size
            if len(buffer) < end:
                break
            messages.append(pickle.loads(buffer[start + _LENGTH.size : end]))
            start = end
        del buffer[:start]
        return messages


class Receiver:
    """The reading end of a message pipe, blocking."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._unframer = Unframer()
        self._ready: deque[Any] = deque()

    def receive(self) -> list[Any] | None:
        """Every message that has arrived, waiting for at least one; None at end of input."""
        if self._ready:
            ready, self._ready = list(self._ready), deque()
            return ready
        while True:
            data = os.read(self.fd, _READ)
            if not data:
                return None
            messages = self._unframer.feed(data)
            if messages:
                return messages

    def get(self) -> Any:
        """The next message; EOFError at end of input."""
        if not self._ready:
            messages = self.receive()
            if messages is None:
                raise EOFError("the other process closed the pipe")
            self._ready.extend(messages)
        return self._ready.popleft()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Sender:
    """The writing end of a message pipe, blocking; queued messages go in one write."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._queued: list[bytes] = []

    def queue(self, message: Any) -> None:
        self._queued.append(frame(message))

    def flush(self) -> bool:
        """Write what is queued; False when the far end is gone (or this end is closed)."""
        data = memoryview(b"".join(self._queued))
        self._queued.clear()
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:  # a broken pipe, or a descriptor already closed
            return False
        return True

    def send(self, message: Any) -> bool:
        self.queue(message)
        return self.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def message_pipe() -> tuple[int, int]:
    """A pipe (read end, write end) widened to :data:`PIPE_BYTES`."""
    read_fd, write_fd = os.pipe()
    widen(write_fd)
    return read_fd, write_fd


def widen(fd: int) -> None:
    """Let the pipe behind ``fd`` hold :data:`PIPE_BYTES` (Linux; elsewhere, or above the
    system's limit, it keeps its size)."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, set_size, PIPE_BYTES)


def sendable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies: a SIGKILLed crawl or re-cluster
    leaves no worker behind, holding a store's writer lock or burning a core. Elsewhere the
    worker's closed pipe ends it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
