"""The report in a real browser: headless Chromium loads it with no console error, no request
beyond the file itself, a crawled ``<script>`` title shown as text and never run; a screenshot
is saved for people to look at.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it). Without ``/usr/bin/chromium`` the
tests are skipped, unless ``CI`` is set: CI must run them.

Three runs of the browser, each doing one thing the simple way:

* ``--dump-dom``: the DOM after load, to check that the hostile title is text, that no
  ``<script>`` element exists and that the document's title is the report's own;
* ``--screenshot``: a picture of the page at a laptop's width;
* the DevTools protocol over ``--remote-debugging-port``, through the small websocket client
  below (standard library only), to record every console message, exception, log entry and
  network request while the page loads.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from tests.crawler.test_report import EVIL_TITLE, CrawledSite, crawled_site

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync",
         "--hide-scrollbars", "--mute-audio"]  # fmt: skip
#: a laptop's width; tall enough to show the summary, the plots and the first clusters
WINDOW = "1366,2200"
#: where a copy of the screenshot goes, for people to look at
SHARED_SCREENSHOT = Path("/tmp/neardup-report.png")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="needs Debian's chromium (/usr/bin/chromium); .ci/run installs it",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> CrawledSite:
    return crawled_site(tmp_path_factory)


@pytest.fixture(scope="module")
def report_file(site: CrawledSite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert CHROMIUM.exists(), "CI is set but /usr/bin/chromium is missing: .ci/run installs it"
    out = tmp_path_factory.mktemp("browser") / "report.html"
    assert main(["report", "--store", str(site.store), "-o", str(out)]) == 0
    return out


def chromium(tmp: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{time.monotonic_ns()}"
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_the_dumped_dom_shows_the_hostile_title_as_text(report_file, tmp_path):
    proc = chromium(tmp_path, "--dump-dom", report_file.as_uri())
    assert proc.returncode == 0, proc.stderr[-3000:]
    dom = proc.stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.DOTALL)
    assert title is not None and title.group(1).startswith("neardup report: ")
    assert "PWNED" not in title.group(1)
    # the script would have been an element; as text it is serialised escaped
    assert "<script" not in dom.lower()
    assert "&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in dom
    assert dom.count("<svg") == 3 and "Largest clusters" in dom


def test_a_screenshot_is_saved(report_file, tmp_path):
    shot = tmp_path / "report.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", f"--window-size={WINDOW}",
                    report_file.as_uri())  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == tuple(int(n) for n in WINDOW.split(","))
    assert len(data) > 50_000  # a rendered page, not a blank one
    try:
        shutil.copyfile(shot, SHARED_SCREENSHOT)
    except OSError:
        pass  # the copy is a convenience; the test's own file is the result


def test_the_page_loads_with_no_console_error_and_no_request(report_file, tmp_path):
    with DevTools(tmp_path) as browser:
        events = browser.load(report_file.as_uri())
        title = browser.evaluate("document.title")
        scripts = browser.evaluate("document.scripts.length")
        shown = browser.evaluate("[...document.querySelectorAll('.title')].map(e => e.textContent)")
    assert title.startswith("neardup report: ") and scripts == 0
    assert EVIL_TITLE in shown
    errors = [e for e in events if _is_error(e)]
    assert errors == [], errors
    requests = [e["params"]["request"]["url"] for e in events
                if e["method"] == "Network.requestWillBeSent"]  # fmt: skip
    assert requests == [report_file.as_uri()]  # the file itself, and nothing else
    messages = [e for e in events if e["method"] in ("Runtime.consoleAPICalled", "Log.entryAdded")]
    assert messages == [], messages


def _is_error(event: dict[str, Any]) -> bool:
    method, params = event["method"], event.get("params", {})
    if method == "Runtime.exceptionThrown" or method == "Network.loadingFailed":
        return True
    if method == "Runtime.consoleAPICalled":
        return params.get("type") in ("error", "assert", "warning")
    if method == "Log.entryAdded":
        return params.get("entry", {}).get("level") in ("error", "warning")
    return False


# --- a minimal DevTools protocol client ----------------------------------------------------------


class DevTools:
    """Headless Chromium with one page, driven over the DevTools protocol (a websocket).

    Only what the test needs: send a command and wait for its answer, collecting every event
    that arrives meanwhile. The websocket is RFC 6455's client side, unmasked text frames in,
    masked text frames out, with control frames answered or ignored.
    """

    def __init__(self, tmp: Path, timeout: float = 30) -> None:
        self.tmp = tmp
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._session: str | None = None

    def __enter__(self) -> DevTools:  # noqa: PYI034 - a final class in a test
        # a fresh profile: a DevToolsActivePort left by another browser would name its port
        profile = self.tmp / f"devtools-profile-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            port, path = self._active_port(profile / "DevToolsActivePort")
            self.sock = _ws_connect("127.0.0.1", port, path, self.timeout)
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            attached = self.call("Target.attachToTarget", targetId=target, flatten=True)
            self._session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Network", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None:
            try:
                self._session = None
                self._send({"id": self._id(), "method": "Browser.close"})
            except OSError:
                pass
            sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def _active_port(self, path: Path) -> tuple[int, str]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            try:
                port, ws_path = path.read_text().split()[:2]
                return int(port), ws_path
            except (OSError, ValueError):
                time.sleep(0.05)
        raise TimeoutError("chromium wrote no DevToolsActivePort")

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _send(self, message: dict[str, Any]) -> None:
        if self._session is not None:
            message["sessionId"] = self._session
        _ws_send(self.sock, json.dumps(message))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events arriving meanwhile are recorded."""
        msg_id = self._id()
        self._send({"id": msg_id, "method": method, "params": params})
        while True:
            message = json.loads(_ws_receive(self.sock))
            if message.get("id") == msg_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def load(self, url: str) -> list[dict[str, Any]]:
        """Navigate, wait for the load event and a moment of quiet, return the events."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            self.call("Runtime.evaluate", expression="1")  # pumps the events
            time.sleep(0.05)
        time.sleep(0.3)  # anything the page would start after load has started by now
        self.call("Runtime.evaluate", expression="1")
        return [e for e in self.events if not e["method"].startswith("Page.")]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")


def _ws_connect(host: str, port: int, path: str, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        .encode("ascii")
    )  # fmt: skip
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("DevTools closed the connection during the handshake")
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status:
        raise ConnectionError(f"websocket handshake refused: {status!r}")
    return sock


def _ws_send(sock: socket.socket, text: str, opcode: int = 0x1) -> None:
    payload = text.encode("utf-8")
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack(">BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack(">BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(head + mask + masked)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("DevTools closed the connection")
        data += chunk
    return bytes(data)


def _ws_receive(sock: socket.socket) -> str:
    """One whole text message (continuation frames joined; pings answered)."""
    parts: list[bytes] = []
    while True:
        first, second = _read_exactly(sock, 2)
        fin, opcode, n = first & 0x80, first & 0x0F, second & 0x7F
        if n == 126:
            (n,) = struct.unpack(">H", _read_exactly(sock, 2))
        elif n == 127:
            (n,) = struct.unpack(">Q", _read_exactly(sock, 8))
        mask = _read_exactly(sock, 4) if second & 0x80 else b""
        payload = _read_exactly(sock, n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        if opcode == 0x8:
            raise ConnectionError("DevTools closed the websocket")
        if opcode == 0x9:  # ping
            _ws_send(sock, payload.decode("utf-8", "replace"), opcode=0xA)
            continue
        if opcode == 0xA:  # pong
            continue
        parts.append(payload)
        if fin:
            return b"".join(parts).decode("utf-8")
