"""Corpora to re-cluster: this tool's store, anyone's WARC files, JSON Lines text dumps, and
HTML files (a mirror such as ``wget --mirror`` leaves).

Each reader yields :class:`SourceDocument` in input order (which is the processing order of
greedy clustering) and never loads a whole file: corpora larger than memory stream through.
An HTML file is not even read by its reader: its document holds a :class:`FileContent`, which
the process that sketches it reads, so the pages' bytes need not pass through a reader process
and a pipe on the way (a tenth of the work of re-clustering HTML pages).
A record that cannot be used (a WARC response that is not HTML, a JSON line without the text
field) is yielded as a document with a ``skip_reason`` so the caller counts and reports it
instead of stopping or silently losing it. A WARC or gzipped JSON Lines file that breaks off
(cut short, or unreadable from some point on) yields the documents before the break and then
one marker that says where it broke (:class:`BrokenInput`); the engines count it as a broken
file, not as a document.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import os
import zlib
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

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


#: how the skip reason of a :class:`BrokenInput` marker begins (its JSON follows)
BROKEN = "broken_input "

#: the skip reason of a WARC revisit record: its content is an earlier record's
REVISIT = "revisit"


@dataclass(frozen=True)
class BrokenInput:
    """A file that breaks off: the ``records`` before the break were read whole and their
    documents used; nothing after it could be. A WARC file breaks at byte ``offset``; a JSON
    Lines file after its line ``records`` (``unit`` "lines", no ``offset``: a byte offset in
    gzipped text means nothing to its reader).

    It travels to the engine in the stream of documents, as a skipped document whose reason
    holds it (:meth:`as_source`), because that stream is all that crosses from the process
    (or Spark executor) that reads a file to the one that counts what was read; the engine
    turns it back with :meth:`from_reason`.
    """

    path: str
    #: where the first record that could not be read whole begins (the end of the last whole
    #: record): a byte offset in the file as it is on disk, gzipped or not
    offset: int | None
    #: the WARC records (of any type), or the lines, before it
    records: int
    cause: str
    unit: str = "records"

    def line(self) -> str:
        """The one line that names the break for the user."""
        if self.offset is None:
            return (f"{self.path}: broken after line {self.records} ({self.cause}); the "
                    f"{self.unit} before it were used")  # fmt: skip
        return (f"{self.path}: broken at byte {self.offset}, after {self.records} {self.unit} "
                f"({self.cause}); the {self.unit} before it were used")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.path, "offset": self.offset, self.unit: self.records,
                "cause": self.cause}  # fmt: skip

    def as_source(self) -> SourceDocument:
        return SourceDocument(self.path, "html", b"",
                              skip_reason=BROKEN + json.dumps(self.to_dict()))  # fmt: skip

    @classmethod
    def from_reason(cls, reason: str | None) -> BrokenInput | None:
        """The break a marker's skip reason holds; None for any other reason.

        >>> cut = BrokenInput("a.warc.gz", 4096, 7, "the record there is incomplete")
        >>> BrokenInput.from_reason(cut.as_source().skip_reason) == cut
        True
        >>> cut = BrokenInput("a.jsonl.gz", None, 12, "the gzip data breaks off", "lines")
        >>> BrokenInput.from_reason(cut.as_source().skip_reason) == cut
        True
        >>> BrokenInput.from_reason("not_json") is None
        True
        """
        if not reason or not reason.startswith(BROKEN):
            return None
        data = json.loads(reason[len(BROKEN) :])
        unit = "lines" if "lines" in data else "records"
        offset = None if data["offset"] is None else int(data["offset"])
        return cls(str(data["file"]), offset, int(data[unit]), str(data["cause"]), unit)


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
    """The documents of one WARC file already open and seekable (a local file, or the bytes a
    Hadoop file system gave Spark); ``path`` names it in errors and in its break.

    A file that does not begin like a WARC is an :class:`InputError`. One that breaks off
    later (truncated, or unreadable from some byte on: a damaged gzip member, a record cut
    short, bytes that are no record) yields the documents of the records before the break,
    then its :class:`BrokenInput` marker, and ends.
    """
    _check_archive_start(stream, path)
    whole = end = 0  # the records read whole, and where the last of them ends
    for read in _records(stream):
        if read.failure is not None or not read.whole:
            at = _next_start(stream, end) if read.failure is not None else read.offset
            cause = read.failure or "the record there is incomplete"
            if read.said:
                cause += f"; warcio: {read.said}"
            yield BrokenInput(str(path), at, whole, cause).as_source()
            return
        whole, end = whole + 1, read.offset + read.length
        if read.document is not None:
            yield read.document
    at = _next_start(stream, end)
    if stream.read(1):  # warcio stopped, yet the file goes on
        yield BrokenInput(str(path), at, whole, "what follows is no record").as_source()


@dataclass(frozen=True)
class _Read:
    """One step of warcio through a file: a record read to its end, or why none could be."""

    document: SourceDocument | None = None
    offset: int = 0
    length: int = 0
    #: whether the record was read to the end its header declares (see _whole)
    whole: bool = True
    #: why the next record could not be read (warcio's exception, as one line)
    failure: str | None = None
    #: what warcio wrote to stderr meanwhile, as one line
    said: str = ""


def _records(stream: IO[bytes]) -> Iterator[_Read]:
    """warcio's records of ``stream``, each read to its end, until the file ends or a record
    cannot be read (the last step then says why).

    On damaged bytes warcio raises almost anything (a cut header is a record without a URL),
    and says some things on stderr instead (a damaged gzip member); both become the cause of
    the break, so that a broken file is one line, the engine's. stderr is taken only while
    warcio reads, never across a yield.
    """
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    records = ArchiveIterator(stream)
    iterator = iter(records)
    said = io.StringIO()
    while True:
        with contextlib.redirect_stderr(said):
            try:
                record = next(iterator)
                document = _response_document(record)
                offset, length = records.get_record_offset(), records.get_record_length()
                read = _Read(document, offset, length, _whole(record))
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - damaged bytes make warcio raise anything
                # warcio's own message (without the damaged bytes it quotes), else what broke
                if isinstance(exc, ArchiveLoadFailed):
                    cause = _one_line(str(exc).split(", first line:")[0])
                else:
                    cause = type(exc).__name__
                read = _Read(failure=f"unreadable record: {cause}")
        if said.tell():
            read = dataclasses.replace(read, said=_one_line(said.getvalue()))
            said = io.StringIO()
        yield read
        if read.failure is not None:
            return


def _response_document(record: Any) -> SourceDocument | None:
    """The document of a WARC ``response`` record (its body read); a ``revisit`` record, whose
    content is another record's (a recrawl's unchanged page, a crawl's deduplicated copy), as
    skipped, so the summary accounts for it; None for other records."""
    if record.rec_type not in ("response", "revisit"):
        return None
    url = record.rec_headers.get_header("WARC-Target-URI") or ""
    if record.rec_type == "revisit":
        return SourceDocument(url, "html", b"", skip_reason=REVISIT)
    body = record.content_stream().read()
    ctype, status = "", ""
    if record.http_headers is not None:
        ctype = (record.http_headers.get_header("Content-Type") or "").lower()
        status = record.http_headers.get_statuscode() or ""
    if status and not status.startswith("2"):
        # the crawler never clusters an error page, whatever its type
        return SourceDocument(url, "html", b"", skip_reason=f"http_{status}")
    if "html" in ctype or (not ctype and looks_like_html(body)):
        return SourceDocument(url, "html", body, encoding=charset_of(ctype or ""))
    return SourceDocument(url, "html", b"", skip_reason=f"not_html ({ctype or 'no Content-Type'})")


def _whole(record: Any) -> bool:
    """Whether a record was read to the end its header declares. A cut leaves no length (the
    header itself cut: warcio then reads the record as ending where the file does, or as one
    of length 0) or a block shorter than its length (warcio's reader is left short of it)."""
    declared = record.rec_headers.get_header("length" if record.format == "arc" else
                                             "Content-Length")  # fmt: skip
    try:
        int(declared)
    except (TypeError, ValueError):
        return False
    return not getattr(record.raw_stream, "limit", 0)


def _next_start(stream: IO[bytes], end: int) -> int:
    """Where the record after byte ``end`` begins: past the blank lines that close the record
    before it (in a plain WARC file; a gzip member holds its own). Leaves ``stream`` there."""
    stream.seek(end)
    head = stream.read(64)
    at = end + len(head) - len(head.lstrip(b"\r\n"))
    stream.seek(at)
    return at


def _one_line(text: str, limit: int = 120) -> str:
    """warcio's message as one short line: its first paragraph, whitespace collapsed, and
    only printable ASCII (it may quote damaged bytes).

    >>> _one_line("\\n    ERROR: non-chunked gzip file,\\n    gzip block continues\\n\\nmore")
    'ERROR: non-chunked gzip file, gzip block continues'
    """
    first = " ".join(text.strip().split("\n\n")[0].split())
    shown = "".join(c if " " <= c <= "~" else "?" for c in first)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


#: how a WARC (or an ARC, which warcio also reads) file begins, once un-gzipped
_ARCHIVE_STARTS = (b"WARC/", b"filedesc://")


def _check_archive_start(stream: IO[bytes], path: str | Path) -> None:
    """Refuse a file that does not begin like an archive; leave ``stream`` at its start.

    warcio alone takes any line of five words for an ARC header, so a JSON Lines file given to
    ``--warc`` would be "read" as a record of nonsense instead of being refused. A file cut so
    short that only the first bytes of such a beginning are left passes: it broke off.
    """
    head = stream.read(2)
    stream.seek(0)
    if head == b"\x1f"[: len(head)]:  # a gzip file cut after its first byte, or empty
        return
    if head == b"\x1f\x8b":  # only the first bytes: damage further on is a break, not this
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(stream.read(1024), 16)
        except zlib.error as exc:
            raise InputError(f"{path} is not a WARC file: bad gzip data ({exc})") from None
        stream.seek(0)
    else:
        head = stream.read(16)
        stream.seek(0)
    start = head.lstrip()
    if not any(start.startswith(s) or s.startswith(start) for s in _ARCHIVE_STARTS):
        raise InputError(f"{path} is not a WARC file: it begins {head[:16]!r}")
    if _gzipped_whole(stream):
        raise InputError(
            f"{path} is gzipped as a whole, not record by record as WARC files are: "
            f"'warcio recompress {path} NEW.warc.gz' writes one that can be read"
        )


def _gzipped_whole(stream: IO[bytes], limit: int = 1 << 20) -> bool:
    """Whether a gzipped WARC file's first gzip member goes on past its first record (a
    ``.warc.gz`` made by ``gzip``, which warcio reads no further than that record): a second
    record begins within the member's first ``limit`` bytes. Leaves ``stream`` at its start."""
    gzipped = stream.read(2) == GZIP_MAGIC
    stream.seek(0)
    if not gzipped:
        return False
    member = zlib.decompressobj(16 + zlib.MAX_WBITS)
    seen = b""
    try:
        while not member.eof and len(seen) < limit:
            chunk = stream.read(65536)
            if not chunk:
                break
            seen += member.decompress(chunk, limit)
    except zlib.error:
        pass  # damage further on is a break, found as the records are read
    stream.seek(0)
    return seen.find(b"\r\n\r\nWARC/") > 0


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
        stream = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror}") from None
    with stream:
        yield from read_jsonl_stream(stream, name, id_field, text_field)


def read_jsonl_stream(
    stream: IO[bytes], name: str | Path, id_field: str = "id", text_field: str = "text"
) -> Iterator[SourceDocument]:
    """The documents of a JSON Lines file open at ``stream``, plain or gzipped; if it breaks
    off (a gzip file cut short or damaged, a read error), the lines before the break are used
    and a :class:`BrokenInput` marker says after which line."""
    head = stream.read(2)
    stream.seek(0)
    binary: IO[bytes] = gzip.GzipFile(fileobj=stream) if head == GZIP_MAGIC else stream
    read = 0

    def counted(text: Iterable[str]) -> Iterator[str]:
        nonlocal read
        for line in text:
            yield line
            read += 1

    try:
        with io.TextIOWrapper(binary, **JSONL_TEXT) as text:
            yield from read_jsonl_lines(counted(text), name, id_field, text_field)
    except (OSError, EOFError, zlib.error) as exc:
        cause = f"the gzip data breaks off: {exc}" if head == GZIP_MAGIC else str(exc)
        yield BrokenInput(str(name), None, read, cause, "lines").as_source()


#: how a JSON Lines file is read as text (plain or gzipped): lines end at "\n" only (a bare
#: "\r" is whitespace inside a JSON text), a byte-order mark is not part of the first line
JSONL_TEXT: dict[str, Any] = {"encoding": "utf-8-sig", "errors": "replace", "newline": "\n"}
GZIP_MAGIC = b"\x1f\x8b"


def read_jsonl_lines(
    lines: Iterable[str], path: str | Path, id_field: str = "id", text_field: str = "text"
) -> Iterator[SourceDocument]:
    """The documents of one JSON Lines file's ``lines`` (``path`` names them in ids). A skipped
    line is named ``FILE:LINE`` whatever its id, so that the summary can say where it is; an id
    that is not a string is its JSON text (``7``, ``["a", 1]``)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            yield SourceDocument(where, "text", "", skip_reason="not_json")
            continue
        except RecursionError:  # arrays or objects nested deeper than Python's stack
            yield SourceDocument(where, "text", "", skip_reason="too_deep")
            continue
        if not isinstance(obj, dict):
            yield SourceDocument(where, "text", "", skip_reason="not_an_object")
            continue
        text = obj.get(text_field)
        if not isinstance(text, str):
            yield SourceDocument(where, "text", "", skip_reason=f"no_{text_field}_field")
            continue
        doc_id = obj.get(id_field)
        if doc_id is None:
            doc_id = where
        elif not isinstance(doc_id, str):
            doc_id = json.dumps(doc_id, ensure_ascii=False)
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


#: one store's directory, or the directories of the stores of one crawl's nodes
StorePaths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def store_paths(paths: StorePaths) -> list[str]:
    """``paths`` as a list: one store's directory, or several.

    >>> store_paths("a"), store_paths(["a", "b"])
    (['a'], ['a', 'b'])
    """
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]


@contextlib.contextmanager
def crawl_stores(paths: StorePaths) -> Iterator[list[Any]]:
    """The stores at ``paths`` open read-only, closed on exit: one store, or the stores of one
    crawl's nodes, read together in the crawl's order (:func:`storage.nodes.in_crawl_order`).

    A path without a store is an :class:`InputError`; a store given twice, stores made with
    different parameters or that are not the nodes of one crawl, a
    :class:`~storage.errors.StoreMismatchError` (:func:`storage.nodes.check_one_crawl`).
    """
    from crawler.review.stores import distinct, open_stores
    from storage.nodes import check_one_crawl

    given = store_paths(paths)
    for path in given:
        if not Path(path).is_dir():
            raise InputError(f"no store at {path}")
    try:
        unique = distinct(given)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    with open_stores(unique) as stores:
        check_one_crawl(stores)
        yield stores


def read_store(paths: StorePaths) -> Iterator[SourceDocument]:
    """The kept pages of a neardup store, in the order they were decided (read-only); of the
    stores of a distributed crawl's nodes, in the crawl's order (:func:`crawl_stores`)."""
    from storage.nodes import in_crawl_order

    with crawl_stores(paths) as stores:
        for k, _, record in in_crawl_order(stores):
            if record.page is not None:
                yield stored_page(stores[k], record.url, record.page)


def stored_page(store: Any, url: str, location: Any) -> SourceDocument:
    """A kept page of ``store`` as a document; one whose record cannot be read (a damaged WARC
    file, which ``neardup verify`` checks) is skipped as unreadable, the file named, and the
    run goes on."""
    try:
        page = store.read_page(location)
    except Exception as exc:  # noqa: BLE001 - damaged bytes make warcio raise anything
        where = Path(store.path) / "pages" / location.file
        why = f"unreadable ({type(exc).__name__} in {where})"
        return SourceDocument(url, "html", b"", skip_reason=why)
    return store_page_document(page.url, page.headers, page.body)


def store_page_document(url: str, headers: list[tuple[str, str]], body: bytes) -> SourceDocument:
    """A stored page as a document, decoded with the charset its HTTP headers named."""
    ctype = next((v for k, v in headers if k.lower() == "content-type"), None)
    return SourceDocument(url, "html", body, encoding=charset_of(ctype or ""))
