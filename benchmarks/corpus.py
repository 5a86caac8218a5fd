"""A real HTML corpus, from Debian's documentation packages, for differential tests and speed.

Real, varied, hand-written and generated HTML: Sphinx pages from the Python documentation and
DocBook pages from PostgreSQL's (:data:`PACKAGES`: about 1,700 pages, 67 MB); Apache's and
SQLite's manuals add 1,600 more (:data:`EXTRA_PACKAGES`, for benchmarks that want over 3,000),
and the Java 17 API and Rust's documentation 42,000 more (:data:`LARGE_PACKAGES`, 870 MB, for
benchmarks that need tens of thousands of pages). Two releases of one site, cairomm's Doxygen
reference for 1.14 and 1.16 (:data:`RELEASE_PACKAGES`, about 140 pages each), are a site's next
release beside the last.
``apt-get download`` fetches the ``.deb`` files without installing anything, ``dpkg-deb -x``
unpacks each into its own folder of a cache directory, and later calls reuse what is there.

    python -m benchmarks.corpus            # install if needed, print how many pages
    python -m benchmarks.corpus --speed    # and measure the canonicaliser on them
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "EXTRA_PACKAGES",
    "LARGE_PACKAGES",
    "PACKAGES",
    "RELEASE_PACKAGES",
    "corpus_dir",
    "html_corpus",
    "reference_dir",
]

#: the Debian packages of the default corpus
PACKAGES = ("python3.11-doc", "postgresql-doc-15")
#: more packages of real HTML, for callers that want more pages
EXTRA_PACKAGES = ("apache2-doc", "sqlite3-doc")
#: two large packages (generated API pages, many alike), for a corpus of tens of thousands of pages
LARGE_PACKAGES = ("openjdk-17-doc", "rust-doc")
#: two releases of one documentation site: cairomm 1.14's reference (the package of its API
#: version, 1.0) and cairomm 1.16's
RELEASE_PACKAGES = ("libcairomm-1.0-doc", "libcairomm-1.16-doc")

_REPO = Path(__file__).resolve().parent.parent
_DONE = ".complete"  # written last in a package's folder: without it, a half-finished unpack


def corpus_dir() -> Path:
    """Where the corpus lives: ``$NEARDUP_CORPUS_DIR``, else ``<repo>/.cache/corpus``."""
    return Path(os.environ.get("NEARDUP_CORPUS_DIR") or _REPO / ".cache" / "corpus")


def reference_dir(package: str) -> Path:
    """The folder of an installed package's HTML reference (the release's site), as Debian
    lays out the packages of :data:`RELEASE_PACKAGES`."""
    return corpus_dir() / package / "usr" / "share" / "doc" / package / "reference" / "html"


def _pages(folder: Path) -> list[Path]:
    # os.walk does not follow symlinked folders, so no page is listed twice
    pages = []
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(parent, name)
            if name.endswith(".html") and path.is_file() and not path.is_symlink():
                pages.append(path)
    return pages


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def _install(root: Path, packages: Sequence[str]) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError("cannot install the HTML corpus: apt-get and dpkg-deb are needed")
    debs = root / "debs"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir()
    command = ["apt-get", "download", *packages]
    done = _run(command, debs)
    if done.returncode != 0:
        _run(["apt-get", "update"], debs)  # a fresh machine may have no package lists yet
        done = _run(command, debs)
    if done.returncode != 0:
        raise RuntimeError(
            f"cannot install the HTML corpus: {' '.join(command)} failed: "
            f"{(done.stderr or done.stdout).strip()[-500:]}"
        )
    for package in packages:
        found = sorted(debs.glob(f"{package}_*.deb"))
        if not found:
            raise RuntimeError(f"cannot install the HTML corpus: no .deb for {package}")
        folder = root / package
        shutil.rmtree(folder, ignore_errors=True)
        unpacked = _run(["dpkg-deb", "-x", str(found[-1]), str(folder)], root)
        if unpacked.returncode != 0:
            raise RuntimeError(f"cannot unpack {found[-1].name}: {unpacked.stderr.strip()[-500:]}")
        (folder / _DONE).write_text(found[-1].name + "\n")
    shutil.rmtree(debs, ignore_errors=True)


def html_corpus(min_pages: int = 500, packages: Sequence[str] = PACKAGES) -> list[Path]:
    """The sorted paths of the ``.html`` pages of ``packages``, installing them first if needed.

    Raises ``RuntimeError`` when they cannot be installed (no apt, no Debian mirror) or hold
    fewer than ``min_pages`` pages.
    """
    root = corpus_dir()
    missing = [p for p in packages if not (root / p / _DONE).exists()]
    if missing:
        root.mkdir(parents=True, exist_ok=True)
        # one installer at a time: parallel test runs share the cache
        with open(root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            missing = [p for p in packages if not (root / p / _DONE).exists()]
            if missing:
                _install(root, missing)
    pages = sorted(page for package in packages for page in _pages(root / package))
    if len(pages) < min_pages:
        raise RuntimeError(f"the HTML corpus in {root} has {len(pages)} pages, {min_pages} needed")
    return pages


def _speed(pages: list[Path], repeat: int) -> None:
    """MB/s of HTML through ``html_tokens`` (words), per engine, on one core.

    CPU time of this process (time spent waiting for the core does not count), best of
    ``repeat`` runs over the whole corpus; pages are decoded to ``str`` beforehand. The first
    line is for scale, since a shared machine's speed varies: bare lxml (parse, drop scripts and
    styles, serialise the text), with no block boundaries and no tokens.
    """
    from lxml import etree

    from dedup.canonical import decode_html, html_tokens

    blobs = [page.read_bytes() for page in pages]
    docs = [decode_html(blob) for blob in blobs]
    size = sum(map(len, blobs)) / 1e6
    parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)

    def bare(doc: str) -> None:
        root = etree.fromstring(doc.encode("utf-8"), parser)
        if root is not None:
            etree.strip_elements(root, "script", "style", "template", with_tail=False)
            etree.tostring(root, method="text", encoding="utf-8")

    def tokens(engine: str) -> Callable[[str], object]:
        return lambda doc: html_tokens(doc, engine=engine)

    for name, work, runs in (
        ("bare lxml", bare, repeat),
        ("fast", tokens("fast"), repeat),
        ("reference", tokens("reference"), 1),
    ):
        best = float("inf")
        for _ in range(runs):
            start = time.process_time()
            for doc in docs:
                work(doc)
            best = min(best, time.process_time() - start)
        print(f"{name:>9}: {size / best:6.1f} MB/s  ({size:.1f} MB in {best:.2f} s CPU)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__)
    parser.add_argument("--speed", action="store_true", help="time both engines on the corpus")
    parser.add_argument("--repeat", type=int, default=5, help="fast-engine runs (best counts)")
    parser.add_argument("--extra", action="store_true", help="add " + ", ".join(EXTRA_PACKAGES))
    args = parser.parse_args(argv)
    pages = html_corpus(packages=PACKAGES + EXTRA_PACKAGES if args.extra else PACKAGES)
    print(f"{len(pages)} HTML pages in {corpus_dir()}")
    if args.speed:
        _speed(pages, args.repeat)


if __name__ == "__main__":
    main()
