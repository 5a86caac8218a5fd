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
import email.utils
import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO, Union
from urllib.parse import urlsplit

__all__ = ["Exchange", "Route", "serve", "serve_hosts"]

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
    #: validators sent with a 200 and honoured as a real server does: ``etag`` (sent quoted,
    #: or "auto" for one made from the body) answers a matching ``If-None-Match`` with 304;
    #: ``last_modified`` (an HTTP date) answers an ``If-Modified-Since`` not before it with 304
    #: when the request has no ``If-None-Match``
    etag: str | None = None
    last_modified: str | None = None

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

    def entity_tag(self) -> str | None:
        """The ETag header's value (quoted), or None when the route sends none."""
        if self.etag is None:
            return None
        if self.etag == "auto":
            return f'"{hashlib.sha1(self.body_bytes()).hexdigest()[:16]}"'
        return f'"{self.etag}"'


@dataclass(frozen=True)
class Exchange:
    """One request as the server saw it and what it sent back: what a test of conditional
    requests checks (the validators the crawler sent, a 304 or a full body)."""

    path: str
    status: int
    #: bytes of the response body sent (0 for a 304)
    body_bytes: int
    if_none_match: str | None = None
    if_modified_since: str | None = None
    user_agent: str | None = None
    #: the request headers, lower-cased names
    headers: dict[str, str] = field(default_factory=dict)
    #: when the request arrived (time.monotonic())
    arrived: float = 0.0


def not_modified(
    headers: Any, etag: str | None, last_modified: str | None
) -> bool:
    """True when a request with ``headers`` gets a 304 for a resource with these validators
    (RFC 9110 13.1: If-None-Match wins; weak comparison; If-Modified-Since only without it).

    >>> not_modified({"If-None-Match": 'W/"a", "b"'}, '"a"', None)
    True
    >>> not_modified({"If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT"}, None,
    ...              "Tue, 01 Dec 2026 09:00:00 GMT")
    True
    >>> not_modified({"If-None-Match": '"x"', "If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT"},
    ...              '"a"', "Tue, 01 Dec 2026 09:00:00 GMT")
    False
    """
    wanted = headers.get("If-None-Match")
    if wanted is not None:
        if etag is None:
            return False
        tags = {tag.strip().removeprefix("W/") for tag in wanted.split(",")}
        return "*" in tags or etag.removeprefix("W/") in tags
    since = headers.get("If-Modified-Since")
    if since is None or last_modified is None:
        return False
    try:
        return email.utils.parsedate_to_datetime(last_modified) <= (
            email.utils.parsedate_to_datetime(since)
        )
    except (TypeError, ValueError):
        return False


#: a route table: path (with query, if any) -> Route, or a plain body meaning 200 text/html
Routes = Mapping[str, Union[Route, bytes, str]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler must not keep the process alive
    block_on_close = False
    #: set when the server stops, so that stalled handlers return
    stopping: threading.Event
    request_log: list[str] | None
    exchanges: list[Exchange] | None

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client hanging up (a crawler abandoning a body that is too large) is no error here
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Quiet:
    """Mixin: no access log on stderr, and every request path recorded when asked."""

    server: _Server
    path: str
    _arrived = 0.0
    #: headers and body go out in separate writes; without this, Nagle's algorithm and delayed
    #: ACKs hold every kept-alive response back by ~40 ms
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass

    def _record(self) -> None:
        self._arrived = time.monotonic()
        log = self.server.request_log
        if log is not None:
            log.append(self.path)

    def _exchanged(self, status: int, body_bytes: int) -> None:
        exchanges = self.server.exchanges
        if exchanges is None:
            return
        headers = self.headers  # type: ignore[attr-defined]
        exchanges.append(Exchange(
            self.path, status, body_bytes, headers.get("If-None-Match"),
            headers.get("If-Modified-Since"), headers.get("User-Agent"),
            {k.lower(): v for k, v in headers.items()}, self._arrived,
        ))  # fmt: skip


class _DirectoryHandler(_Quiet, SimpleHTTPRequestHandler):
    """The standard library's file server, with an ETag beside its Last-Modified (made from
    the file's size and modification time, as nginx makes its own) and If-None-Match, and
    connections kept alive, as real servers keep them (every answer of the standard server
    says its length)."""

    protocol_version = "HTTP/1.1"
    _sent = 0

    def do_GET(self) -> None:
        self._record()
        self._sent = 0
        path = self.translate_path(self.path)  # type: ignore[attr-defined]
        tag = _file_tag(path)
        if tag is not None and not_modified(self.headers, tag, None) and (
            "If-None-Match" in self.headers
        ):
            self.send_response(304)
            self.send_header("ETag", tag)
            self.end_headers()  # a 304 has no body: no length needed to keep the connection
            self._exchanged(304, 0)
            return
        self._tag = tag
        super().do_GET()
        self._exchanged(self._status, self._sent)

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = int(code)
        super().send_response(code, message)

    def end_headers(self) -> None:
        tag = getattr(self, "_tag", None)
        if tag is not None and self._status == 200:
            self.send_header("ETag", tag)
        super().end_headers()

    def copyfile(self, source: BinaryIO, outputfile: BinaryIO) -> None:  # type: ignore[override]
        data = source.read()
        self._sent += len(data)
        outputfile.write(data)


def _file_tag(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return f'"{st.st_mtime_ns:x}-{st.st_size:x}"'


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
        tag = route.entity_tag()
        if route.status == 200 and not_modified(self.headers, tag, route.last_modified):
            self.send_response(304)
            if tag is not None:
                self.send_header("ETag", tag)
            if route.last_modified is not None:
                self.send_header("Last-Modified", route.last_modified)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self._exchanged(304, 0)
            return
        self.send_response(route.status)
        for name, value in route.headers:
            self.send_header(name, value)
        if route.status == 200 and tag is not None:
            self.send_header("ETag", tag)
        if route.status == 200 and route.last_modified is not None:
            self.send_header("Last-Modified", route.last_modified)
        if route.redirect is not None:
            self.send_header("Location", route.redirect)
        if route.send_length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self._exchanged(route.status, len(body))
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
    exchanges: list[Exchange] | None = None,
) -> Iterator[str]:
    """Serve a directory or a route table on a daemon thread; yield the base URL (no slash).

    ``request_log``, when given, receives the path of every request in arrival order, so a test
    can check what a crawler fetched (or did not: robots.txt); ``exchanges`` receives an
    :class:`Exchange` for every request answered (its validators, its status, the body bytes
    sent).
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
    server.exchanges = exchanges
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


@contextlib.contextmanager
def serve_hosts(
    handler: type[BaseHTTPRequestHandler], hosts: Sequence[str]
) -> Iterator[list[str]]:
    """Serve ``handler`` on each of ``hosts`` (loopback addresses: 127.0.0.2, 127.0.0.3, ...
    are distinct hosts to a crawler), each on a free port, on daemon threads; yield their base
    URLs in the order of ``hosts``. The handler finds which host a request came to in
    ``self.server.server_address[0]``. For sites spread over hosts: the tests and the
    benchmark of a crawl on several nodes."""
    servers = []
    try:
        for host in hosts:
            server = ThreadingHTTPServer((host, 0), handler)
            server.daemon_threads = True
            servers.append(server)
            threading.Thread(target=server.serve_forever, name="neardup-serve",
                             daemon=True).start()  # fmt: skip
        yield [f"http://{host}:{server.server_address[1]}" for host, server in zip(hosts, servers)]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()

