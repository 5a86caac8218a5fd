"""Recrawls against a real Apache httpd serving real pages, compressed as Debian's Apache
compresses HTML (mod_deflate, its default), which changes each page's entity tag.

Debian's ``apache2`` runs on a free port of 127.0.0.1 with a configuration of its own, in a
temporary directory; its access log says what each request carried and what it got. Without
``apache2`` the tests are skipped, except in CI (``CI`` set), where they fail: ``.ci/run``
installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import html_corpus_or_skip
from tests.crawler.test_recrawl import OPTIONS, _port, neardup

#: real pages served: enough for a site, few enough for a quick crawl
PAGES = 24
#: the modules a configuration of our own loads (Debian builds the rest as modules too)
MODULES = ("mpm_event", "authz_core", "mime", "dir", "filter", "deflate")
#: one access log line: the status, the path, the If-None-Match it carried, between tabs
LOG_FORMAT = r"%>s\t%U\t%{If-None-Match}i"


def _apache_or_skip() -> str:
    found = shutil.which("apache2") or shutil.which("apache2", path="/usr/sbin")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's apache2 is needed in CI (.ci/run installs it)")
        pytest.skip("no apache2 (apt-get install apache2)")
    return found


class Apache:
    """One ``apache2`` in the foreground, serving ``docs`` on 127.0.0.1:``port``."""

    def __init__(self, executable: str, directory: Path) -> None:
        self.directory = directory
        self.docs = directory / "docs"
        self.port = _port()
        self.base = f"http://127.0.0.1:{self.port}"
        modules = "\n".join(f"LoadModule {name}_module /usr/lib/apache2/modules/mod_{name}.so"
                            for name in MODULES)  # fmt: skip
        self.conf = directory / "httpd.conf"
        self.conf.write_text(f"""
ServerRoot {directory}
PidFile {directory}/httpd.pid
Listen 127.0.0.1:{self.port}
ServerName 127.0.0.1
{modules}
TypesConfig /etc/mime.types
ErrorLog {directory}/error.log
LogFormat "{LOG_FORMAT}" tested
CustomLog {directory}/access.log tested
DocumentRoot {self.docs}
DirectoryIndex index.html
AddOutputFilterByType DEFLATE text/html
<Directory {self.docs}>
    Require all granted
</Directory>
""")
        with open(directory / "stderr.log", "wb") as stderr:  # what it says before its log
            self.process = subprocess.Popen([executable, "-f", str(self.conf), "-DFOREGROUND"],
                                            stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(self.base + "/", timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"apache2 did not start: {self.errors()}") from None
                time.sleep(0.1)
        self.access_log().write_text("")

    def access_log(self) -> Path:
        return self.directory / "access.log"

    def requests(self) -> list[tuple[int, str, str]]:
        """(status, path, If-None-Match) of each request since the log was last emptied."""
        out = []
        for line in self.access_log().read_text().splitlines():
            status, path, tags = line.split("\t")
            out.append((int(status), path, tags))
        self.access_log().write_text("")
        return out

    def errors(self) -> str:
        logs = (self.directory / name for name in ("stderr.log", "error.log"))
        return "".join(log.read_text() for log in logs if log.exists())[-2000:]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


@pytest.fixture
def apache() -> Iterator[Apache]:
    executable = _apache_or_skip()
    pages = html_corpus_or_skip(PAGES, packages=("python3.11-doc",))[:PAGES]
    # Apache's workers, started by root, read the pages as another user: not from tmp_path
    directory = Path(tempfile.mkdtemp(prefix="neardup-apache-"))
    try:
        directory.chmod(0o755)
        docs = directory / "docs"
        docs.mkdir(mode=0o755)
        links = []
        for n, page in enumerate(pages):
            name = f"page-{n:02d}.html"
            shutil.copyfile(page, docs / name)
            links.append(f'<li><a href="{name}">{page.name}</a></li>')
        (docs / "index.html").write_text(
            "<html><head><title>Pages</title></head><body><h1>Pages</h1><ul>"
            + "".join(links) + "</ul></body></html>")  # fmt: skip
        server = Apache(executable, directory)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _crawl(apache: Apache, store: Path) -> tuple[dict, list[tuple[int, str, str]]]:
    """The crawl's summary, and the requests Apache answered but robots.txt's."""
    # the pages' own links lead out of the copied set: the index and its pages only
    proc = neardup("crawl", apache.base + "/", "--store", str(store), "--json", *OPTIONS,
                   "--set", "crawl.max_depth=1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), [r for r in apache.requests() if r[1] != "/robots.txt"]


@pytest.mark.slow
def test_a_recrawl_gets_304s_from_apache_compressing_its_pages(apache, tmp_path):
    """Apache sends each compressed page with its entity tag suffixed (``-gzip``) and answers
    304 only to the tag without the suffix. A recrawl asks with both: every unchanged page
    answers 304, an edited one its new body; the next recrawl, with the tags the 304s gave,
    gets 304s alone."""
    store = tmp_path / "store"
    _, asked = _crawl(apache, store)
    pages = [path for status, path, _ in asked if path.startswith("/page-")]
    assert len(pages) == PAGES and {status for status, _, _ in asked} == {200}, asked
    edited = apache.docs / pages[0].lstrip("/")
    edited.write_text(edited.read_text().replace("</body>", "<p>One paragraph more.</p></body>"))

    second, asked = _crawl(apache, store)
    answered = {path: (status, tags) for status, path, tags in asked if path in pages}
    assert len(answered) == PAGES, asked
    assert all("-gzip" in tags for _, tags in answered.values()), answered  # Apache's own tags
    assert answered.pop(pages[0])[0] == 200
    assert {status for status, _ in answered.values()} == {304}, answered
    assert second["changes"]["changed"] == 1, second["changes"]

    _, asked = _crawl(apache, store)
    assert {status for status, path, _ in asked if path in pages} == {304}, asked
