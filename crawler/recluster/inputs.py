"""Corpora to re-cluster: this tool's store, anyone's WARC files, JSON Lines text dumps, and
HTML files (a mirror such as ``wget --mirror`` leaves).

Each reader yields :class:`SourceDocument` in input order (which is the processing order of
greedy clustering) and never loads a whole file: corpora larger than memory stream through.
An HTML file is not even read by its reader: its document holds a :class:`FileContent`, which
the process that sketches it reads, so the pages' bytes need not pass through a reader process
and a pipe on the way (a tenth of the work of re-clustering HTML pages).
A record that cannot be used (a WARC response that is not HTML, a JSON line without the text
field) is yielded as a document with a ``skip_reason`` so the caller counts and reports it
instead of stopping or silently losing it.
"""

from __future__ import annotations

import gzip
import json
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dedup.canonical import looks_like_html
from dedup.html_text import charset_of


@dataclass(frozen=True)
class FileContent:
    """A document's content still in its file, read by :meth:`read` where it is sketched."""

    path: str

    def read(self) -> bytes:
        with open(self.path, "rb") as fh:
            return fh.read()


@dataclass(frozen=True)
class SourceDocument:
    #: the id written to clusters.jsonl: a URL for web pages, the id field for JSON Lines
    id: str
    #: "html" or "text"
    kind: str
    #: the text or page itself, or where to read it (see FileContent)
    content: str | bytes | FileContent
    skip_reason: str | None = None
    #: the transport's charset (HTTP Content-Type), so stored bytes decode as the crawl decoded them
    encoding: str | None = None


class InputError(ValueError):
    """An input that cannot be read at all (missing file, not a WARC); one line for the user."""


def read_warc(paths: Iterable[str | Path]) -> Iterator[SourceDocument]:
    """HTML ``response`` records of WARC or WARC.gz files (warcio decodes gzip and chunking)."""
    for path in paths:
        try:
            stream = open(path, "rb")
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
        with stream:
            yield from read_warc_stream(stream, path)


def read_warc_stream(stream: IO[bytes], path: str | Path) -> Iterator[SourceDocument]:
    """The documents of one WARC file already open (a local file, or the bytes a Hadoop file
    system gave Spark); ``path`` names it in errors."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    _check_archive_start(stream, path)
    try:
        for record in ArchiveIterator(stream):
            if record.rec_type != "response":
                continue
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            body = record.content_stream().read()
            ctype, status = "", ""
            if record.http_headers is not None:
                ctype = (record.http_headers.get_header("Content-Type") or "").lower()
                status = record.http_headers.get_statuscode() or ""
            if status and not status.startswith("2"):
                # the crawler never clusters an error page, whatever its type
                yield SourceDocument(url, "html", b"", skip_reason=f"http_{status}")
            elif "html" in ctype or (not ctype and looks_like_html(body)):
                yield SourceDocument(url, "html", body, encoding=charset_of(ctype or ""))
            else:
                reason = f"not_html ({ctype or 'no Content-Type'})"
                yield SourceDocument(url, "html", b"", skip_reason=reason)
    except ArchiveLoadFailed as exc:
        raise InputError(f"{path} is not a WARC file: {exc}") from None


#: how a WARC (or an ARC, which warcio also reads) file begins, once un-gzipped
_ARCHIVE_STARTS = (b"WARC/", b"filedesc://")


def _check_archive_start(stream: IO[bytes], path: str | Path) -> None:
    """Refuse a file that does not begin like an archive; leave ``stream`` at its start.

    warcio alone takes any line of five words for an ARC header, so a JSON Lines file given to
    ``--warc`` would be "read" as a record of nonsense instead of being refused.
    """
    head = stream.read(2)
    stream.seek(0)
    if head == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=stream) as unzipped:
                head = unzipped.read(16)
        except (OSError, EOFError) as exc:
            raise InputError(f"{path} is not a WARC file: bad gzip data ({exc})") from None
        stream.seek(0)
    else:
        head = stream.read(16)
        stream.seek(0)
    if head and not head.lstrip().startswith(_ARCHIVE_STARTS):
        raise InputError(f"{path} is not a WARC file: it begins {head[:16]!r}")


def read_jsonl(
    paths: Iterable[str | Path], id_field: str = "id", text_field: str = "text"
) -> Iterator[SourceDocument]:
    """One document per JSON object per line; the id defaults to ``FILE:LINE`` when absent."""
    for path in paths:
        yield from read_jsonl_file(path, path, id_field, text_field)


def read_jsonl_file(
    path: str | Path, name: str | Path, id_field: str = "id", text_field: str = "text"
) -> Iterator[SourceDocument]:
    """The documents of the JSON Lines file at ``path``, named ``name`` in ids and errors (an
    executor opens a file where the driver's path leads, and names it as the user did)."""
    try:
        stream = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror}") from None
    with stream:
        yield from read_jsonl_lines(stream, name, id_field, text_field)


def read_jsonl_lines(
    lines: Iterable[str], path: str | Path, id_field: str = "id", text_field: str = "text"
) -> Iterator[SourceDocument]:
    """The documents of one JSON Lines file's ``lines`` (``path`` names them in ids)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            yield SourceDocument(where, "text", "", skip_reason="not_json")
            continue
        if not isinstance(obj, dict):
            yield SourceDocument(where, "text", "", skip_reason="not_an_object")
            continue
        doc_id = obj.get(id_field)
        doc_id = where if doc_id is None else str(doc_id)
        text = obj.get(text_field)
        if not isinstance(text, str):
            yield SourceDocument(doc_id, "text", "", skip_reason=f"no_{text_field}_field")
            continue
        yield SourceDocument(doc_id, "text", text)


#: what :func:`read_html_files` takes for an HTML page in a directory
HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml")


def read_html_files(paths: Iterable[str | Path]) -> Iterator[SourceDocument]:
    """HTML files, each a document whose id is its path: the files named, in the order given,
    and the HTML files (by :data:`HTML_SUFFIXES`) under the directories named, in sorted order.

    The pages are read where they are sketched (:class:`FileContent`); a file that cannot be
    read then is skipped as ``unreadable``.
    """
    for path in map(Path, paths):
        mode = _mode(path)  # one look per path: a corpus names tens of thousands
        if stat.S_ISDIR(mode):
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in HTML_SUFFIXES)
            for page in found:
                if page.is_file():
                    yield SourceDocument(str(page), "html", FileContent(str(page)))
        elif stat.S_ISREG(mode):
            yield SourceDocument(str(path), "html", FileContent(str(path)))
        else:
            raise InputError(f"cannot read {path}: no such file or directory")


def _mode(path: Path) -> int:
    """``path``'s file type and mode, links followed; 0 if there is nothing to read there."""
    try:
        return path.stat().st_mode
    except (OSError, ValueError):
        return 0


def read_store(path: str | Path) -> Iterator[SourceDocument]:
    """The kept pages of a neardup store, in the order they were stored (read-only)."""
    from storage.store import Store

    if not Path(path).is_dir():
        raise InputError(f"no store at {path}")
    with Store.open(path, readonly=True) as store:
        for page in store.iter_pages():
            yield store_page_document(page.url, page.headers, page.body)


def store_page_document(url: str, headers: list[tuple[str, str]], body: bytes) -> SourceDocument:
    """A stored page as a document, decoded with the charset its HTTP headers named."""
    ctype = next((v for k, v in headers if k.lower() == "content-type"), None)
    return SourceDocument(url, "html", body, encoding=charset_of(ctype or ""))
