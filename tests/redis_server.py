"""A real ``redis-server`` for tests: started on a free port of 127.0.0.1, with AOF, and stopped.

The server is Debian's ``redis-server``, run as the distributed crawl's documentation says to
run it (``--appendonly yes --appendfsync always``), in a temporary directory. One server serves
the whole session (``redis_server``); ``redis_client`` empties it before each test. A test that
restarts Redis (to check what survives it) calls :meth:`RedisServer.restart`: the same port,
the same directory, the data read back from the AOF.

Without ``redis-server`` the tests that need it are skipped, except in CI (``CI`` set), where
they fail: CI must test against a real server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["RedisServer", "redis_client", "redis_server"]

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process on ``HOST``:``port`` with its AOF in ``directory``."""

    def __init__(self, executable: str, directory: Path) -> None:
        self.executable = executable
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self) -> None:
        command = [
            self.executable, "--bind", HOST, "--port", str(self.port),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            "--dir", str(self.directory), "--daemonize", "no", "--loglevel", "warning",
        ]  # fmt: skip
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self._log_tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}: {self._log_tail()}")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server: SIGTERM (it finishes its AOF write), or SIGKILL with ``kill``."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(timeout=20)
        self.process = None

    def restart(self, *, kill: bool = False) -> None:
        """Stop and start again on the same port; what the AOF holds is read back."""
        self.stop(kill=kill)
        self.start()

    def _log_tail(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    executable = shutil.which("redis-server")
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is needed in CI (apt-get install redis-server)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="neardup-redis-") as folder:
        server = RedisServer(executable, Path(folder))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[object]:
    """A redis-py client of the session's server, emptied before the test (and restarted if a
    test before it left the server stopped)."""
    import redis

    if redis_server.process is None:
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    try:
        yield client
    finally:
        client.close()
