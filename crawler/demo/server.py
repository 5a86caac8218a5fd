"""A small threaded HTTP server on the loopback interface, for ``neardup demo`` and for tests.

It serves either a directory (the bundled demo site) or a *route table*: a mapping from a path
to a :class:`Route` saying exactly what to answer, including the misbehaviour a crawler must
survive (a stalled response, a redirect loop, a body with no length, a lying Content-Encoding).
It binds to ``127.0.0.1`` on port 0, so the kernel picks a free port and tests never collide.

>>> import urllib.request
>>> with serve({"/": Route(body="<p>hello</p>")}) as base:
...     urllib.request.urlopen(base + "/").read()
b'<p>hello</p>'
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlsplit

__all__ = ["Route", "serve"]

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Route:
    """What the server answers for one path.

    ``redirect`` answers with ``status`` (302 unless another 3xx is given) and a Location
    header. ``delay`` waits before answering; ``stall`` accepts the request and never answers
    (until the server stops), which is how a crawler meets a dead backend. Without
    ``send_length`` the body is delimited by closing the connection, so the client cannot know
    its size in advance.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html; charset=utf-8"),)
    body: bytes | str = b""
    delay: float = 0.0
    stall: bool = False
    redirect: str | None = None
    send_length: bool = True

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP status code 100..599; got {self.status!r}")
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0 seconds; got {self.delay!r}")
        if self.redirect is not None and self.status == 200:
            object.__setattr__(self, "status", 302)
        object.__setattr__(self, "headers", tuple((str(k), str(v)) for k, v in self.headers))

    def body_bytes(self) -> bytes:
        return self.body.encode("utf-8") if isinstance(self.body, str) else self.body


#: a route table: path (with query, if any) -> Route, or a plain body meaning 200 text/html
Routes = Mapping[str, Union[Route, bytes, str]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler must not keep the process alive
    block_on_close = False
    #: set when the server stops, so that stalled handlers return
    stopping: threading.Event
    request_log: list[str] | None

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client hanging up (a crawler abandoning a body that is too large) is no error here
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Quiet:
    """Mixin: no access log on stderr, and every request path recorded when asked."""

    server: _Server
    path: str
    #: headers and body go out in separate writes; without this, Nagle's algorithm and delayed
    #: ACKs hold every kept-alive response back by ~40 ms
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass

    def _record(self) -> None:
        log = self.server.request_log
        if log is not None:
            log.append(self.path)


class _DirectoryHandler(_Quiet, SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        self._record()
        super().do_GET()


class _RouteHandler(_Quiet, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    routes: Mapping[str, Route]

    def do_GET(self) -> None:
        self._record()
        route = self.routes.get(self.path) or self.routes.get(urlsplit(self.path).path)
        if route is None:
            route = Route(status=404, body="<html><body><h1>Not found</h1></body></html>")
        if route.stall:
            self.server.stopping.wait()
            self.close_connection = True
            return
        if route.delay and self.server.stopping.wait(route.delay):
            self.close_connection = True
            return
        body = route.body_bytes()
        self.send_response(route.status)
        for name, value in route.headers:
            self.send_header(name, value)
        if route.redirect is not None:
            self.send_header("Location", route.redirect)
        if route.send_length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        with contextlib.suppress(OSError):  # the client may hang up (e.g. body too large)
            self.wfile.write(body)


def _normalise(routes: Routes) -> dict[str, Route]:
    table: dict[str, Route] = {}
    for path, route in routes.items():
        if not path.startswith("/"):
            raise ValueError(f"route paths start with '/'; got {path!r}")
        table[path] = route if isinstance(route, Route) else Route(body=route)
    return table


@contextlib.contextmanager
def serve(
    root_or_routes: str | os.PathLike[str] | Routes,
    host: str = LOOPBACK,
    port: int = 0,
    *,
    request_log: list[str] | None = None,
) -> Iterator[str]:
    """Serve a directory or a route table on a daemon thread; yield the base URL (no slash).

    ``request_log``, when given, receives the path of every request in arrival order, so a test
    can check what a crawler fetched (or did not: robots.txt).
    """
    if isinstance(root_or_routes, Mapping):
        handler: Any = type("Handler", (_RouteHandler,), {"routes": _normalise(root_or_routes)})
    else:
        root = Path(root_or_routes)
        if not root.is_dir():
            raise ValueError(f"not a directory: {root}")
        handler = partial(_DirectoryHandler, directory=str(root))
    server = _Server((host, port), handler)
    server.stopping = threading.Event()
    server.request_log = request_log
    thread = threading.Thread(target=server.serve_forever, name="neardup-serve", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    try:
        yield f"http://{bound_host!s}:{bound_port}"
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
