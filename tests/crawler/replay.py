"""pywb, the replay tool, run on a store's WARC files: what a user of the archive would see.

pywb pins ``redis==2.10.6``, which cannot share an environment with the Redis client of the
distributed crawl, so it lives in a virtual environment of its own, made once with pip
(``NEARDUP_PYWB_ENV``, default ``.pywb-env`` in the repository; CI makes it fresh). Its
``wb-manager`` indexes the WARC files into a collection and its ``wayback`` server replays them
on a free port of 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the pywb release the replay tests were written against
PYWB = "pywb==2.10.0"


def pywb_env() -> Path:
    """The virtual environment with pywb, made on first use; in CI a failure to make it
    fails the test, elsewhere it skips it."""
    env = Path(os.environ.get("NEARDUP_PYWB_ENV", ROOT / ".pywb-env"))
    if (env / "bin" / "wayback").is_file():
        return env
    made = subprocess.run([sys.executable, "-m", "venv", str(env)], capture_output=True, text=True)
    installed = made.returncode == 0 and subprocess.run(
        [str(env / "bin" / "pip"), "install", "-q", PYWB], capture_output=True, text=True,
        timeout=600,
    ).returncode == 0  # fmt: skip
    if not installed:
        message = f"pywb could not be installed into {env}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return env


@contextmanager
def replay(warcs: list[Path], workdir: Path) -> Iterator[str]:
    """pywb's wayback serving a collection of ``warcs``; yields the collection's base URL."""
    env = pywb_env()
    manager = str(env / "bin" / "wb-manager")
    subprocess.run([manager, "init", "store"], cwd=workdir, check=True, capture_output=True)
    subprocess.run([manager, "add", "store", *map(str, warcs)], cwd=workdir, check=True,
                   capture_output=True)  # fmt: skip
    port = _free_port()
    server = subprocess.Popen([str(env / "bin" / "wayback"), "-p", str(port), "-b", "127.0.0.1"],
                              cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    base = f"http://127.0.0.1:{port}/store"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
                break
            except (OSError, urllib.error.URLError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"wayback did not start: {server.stderr.read()!r}"
                                       if server.stderr else "wayback did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stderr is not None:
            server.stderr.close()


def raw(base: str, url: str) -> tuple[int, bytes]:
    """The archived page at ``url`` in pywb's raw (``id_``) mode: its latest capture's status
    and the bytes the server sent, unrewritten."""
    try:
        with urllib.request.urlopen(f"{base}/id_/{url}", timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
