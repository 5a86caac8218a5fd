"""The page store: kept pages as WARC ``response`` records, one gzip member per record.

Files are ``pages/pages-00001.warc.gz``, ``pages-00002.warc.gz``, …; a new one starts when the
current one has reached ``max_bytes``. Each file opens with a ``warcinfo`` record, and every
page is a ``response`` record holding the HTTP status line, headers and body as the server sent
them, so ``warcio``, ``zcat`` or any WARC tool reads the files, and any record can be cut out by
its byte range (:class:`~storage.records.PageLocation`) and read on its own.

**What is committed.** The store's LMDB ``meta`` holds the *committed position*: the current
file's number and the end of its last committed record. Everything before it is referenced by
committed documents; anything after it (a tail of the current file, or whole later files) was
written by a batch that never committed and is removed by :meth:`PageStore.restore_committed`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time as _clock
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import BinaryIO, NamedTuple
from urllib.parse import quote

from warcio.archiveiterator import ArchiveIterator
from warcio.limitreader import LimitReader
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from storage.errors import PageReadError, StoreWriteError
from storage.records import PageLocation, warc_name, warc_number

HeadersLike = Mapping[str, str] | Iterable[tuple[str, str]]


class WarcPosition(NamedTuple):
    """The committed end: file number (0 before the first page) and byte offset in it."""

    file: int
    end: int


class Page(NamedTuple):
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class ScannedRecord(NamedTuple):
    """One record found by reading a WARC file from the start (for integrity checks)."""

    offset: int
    length: int
    type: str
    url: str | None
    date: str | None = None
    payload_digest: str | None = None
    #: a revisit's WARC-Refers-To-Target-URI and WARC-Refers-To-Date
    refers_to_uri: str | None = None
    refers_to_date: str | None = None


class Captured(NamedTuple):
    """A response record just written: where it is, and what a revisit names it by."""

    location: PageLocation
    #: its WARC-Date
    date: str
    #: its WARC-Record-ID
    record_id: str
    #: its WARC-Payload-Digest (``sha1:`` and base 32)
    payload_digest: str


#: the revisit profiles of the WARC version these files are written in (WARC/1.0)
IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest"
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.0/revisit/server-not-modified"


class PageStore:
    """Appends pages to the current WARC file and reads any stored page back.

    The writer side is driven by the store's batch: :meth:`append` while the batch runs,
    :meth:`flush` (fsync) before the LMDB commit, :meth:`mark_committed` after it, or
    :meth:`rollback` when the batch fails.
    """

    def __init__(
        self,
        directory: Path,
        committed: WarcPosition,
        *,
        max_bytes: int = 1 << 30,
        writable: bool = False,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"warc_max_bytes must be a positive number of bytes; got {max_bytes}")
        self.directory = directory
        self.max_bytes = max_bytes
        self.writable = writable
        self._committed = committed
        self._number = committed.file
        self._out: BinaryIO | None = None
        self._unsynced = False
        self._new_files = False
        self._started_at = 0
        self._readers: dict[int, BinaryIO] = {}
        #: set by the store while a batch is open: pages outside a batch would never commit
        self.in_batch = False

    @property
    def committed(self) -> WarcPosition:
        return self._committed

    def files(self) -> list[tuple[int, Path]]:
        """The page-store WARC files present, by number."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            number = warc_number(path.name)
            if number is not None:
                found.append((number, path))
        return sorted(found)

    # --- writing ----------------------------------------------------------------------------

    def append(
        self,
        url: str,
        status: int,
        headers: HeadersLike,
        body: bytes,
        *,
        reason: str | None = None,
        time: float | None = None,
    ) -> PageLocation:
        """Write one page as a WARC ``response`` record; return where it is.

        ``reason`` is the status line's phrase (default: the standard one for ``status``);
        ``time`` the fetch time (seconds since the epoch; default: now). The body is stored as
        given, so it should be what the headers describe.
        """
        return self.capture(url, status, headers, body, reason=reason, time=time).location

    def capture(
        self,
        url: str,
        status: int,
        headers: HeadersLike,
        body: bytes,
        *,
        reason: str | None = None,
        time: float | None = None,
    ) -> Captured:
        """:meth:`append`, and what revisit records of later runs will name the record by."""
        date = warc_date(time)
        record_id = f"<urn:uuid:{uuid.uuid4()}>"
        record = response_record(url, status, headers, body, reason=reason, time=time,
                                 record_id=record_id)  # fmt: skip
        return Captured(self._write(record), date, record_id, payload_digest(body))

    def revisit(
        self,
        url: str,
        *,
        profile: str,
        status: int,
        headers: HeadersLike,
        refers_to_uri: str,
        refers_to_date: str,
        refers_to_id: str | None,
        digest: str,
        time: float | None = None,
    ) -> PageLocation:
        """Write a ``revisit`` record (:func:`revisit_record`); return where it is."""
        record = revisit_record(url, profile=profile, status=status, headers=headers,
                                refers_to_uri=refers_to_uri, refers_to_date=refers_to_date,
                                refers_to_id=refers_to_id, digest=digest, time=time)  # fmt: skip
        return self._write(record)

    def _write(self, record: bytes) -> PageLocation:
        if not self.writable:
            raise PermissionError("the page store is open read-only")
        if not self.in_batch:
            raise RuntimeError("storing a page needs a batch: `with store.batch(): ...`")
        with self._writing():
            out = self._current()
            offset = out.tell()
            out.write(record)
        self._unsynced = True
        return PageLocation(warc_name(self._number), offset, len(record))

    def flush(self) -> WarcPosition:
        """Make everything appended durable (flush, fsync); return the position to commit."""
        with self._writing():
            if self._out is not None and self._unsynced:
                self._out.flush()
                os.fsync(self._out.fileno())
            self._unsynced = False
            if self._new_files:
                _fsync_directory(self.directory)
                self._new_files = False
        if self._out is None:
            return self._committed
        return WarcPosition(self._number, self._out.tell())

    def mark_committed(self, position: WarcPosition) -> None:
        self._committed = position

    def rollback(self) -> list[str]:
        """Forget every page appended since the last commit (the batch failed).

        The writer is closed without a care for what it still buffered (the disk that failed
        the batch may refuse that too): it is cut off with the rest.
        """
        try:
            self._close_writer()
        except OSError:
            self._out = None  # closed all the same: the buffered bytes are what failed
        with self._writing():
            return self.restore_committed()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Name a failed write by its cause and place (:class:`StoreWriteError`)."""
        try:
            yield
        except OSError as exc:
            raise StoreWriteError.of(exc, self.directory) from exc

    def restore_committed(self) -> list[str]:
        """Cut the files back to the committed position; say what was removed.

        Later files are deleted and the current one truncated. Idempotent, so a crash during
        the repair is repaired by the next one.
        """
        if not self.writable:
            raise PermissionError("the page store is open read-only")
        self._close_writer()
        done: list[str] = []
        file, end = self._committed
        for number, path in self.files():
            size = path.stat().st_size
            if number > file:
                path.unlink()
                done.append(f"removed {path.name} ({size} bytes written after the last commit)")
            elif number == file and size > end:
                with open(path, "r+b") as fh:
                    fh.truncate(end)
                    os.fsync(fh.fileno())
                done.append(
                    f"truncated {path.name} from {size} to {end} bytes "
                    f"(a tail written after the last commit)"
                )
        if done:
            _fsync_directory(self.directory)
        self._number = file
        return done

    def _current(self) -> BinaryIO:
        """The file to append to, rotating to a new one at ``max_bytes``."""
        if self._out is None and self._number == 0:
            self._start_file(1)
        elif self._out is None:
            out = open(self.directory / warc_name(self._number), "r+b")  # noqa: SIM115
            out.seek(0, os.SEEK_END)
            self._out = out
            if out.tell() >= self.max_bytes:  # a committed file always holds a page
                self._start_file(self._number + 1)
        elif self._out.tell() >= self.max_bytes and self._out.tell() > self._started_at:
            self._start_file(self._number + 1)
        assert self._out is not None
        return self._out

    def _start_file(self, number: int) -> None:
        if self._out is not None:
            # the finished file must be durable before the commit that covers it
            self._out.flush()
            os.fsync(self._out.fileno())
            self._close_writer()
        self.directory.mkdir(parents=True, exist_ok=True)
        name = warc_name(number)
        out = open(self.directory / name, "xb")  # noqa: SIM115
        # the warcinfo record, once a file: warcio's writer, one gzip member
        writer = WARCWriter(_GzipMembers(out), gzip=False)
        info = writer.create_warcinfo_record(
            name,
            {
                "software": "neardup",
                "format": "WARC File Format 1.0",
                "description": "pages kept by neardup: near-duplicates were dropped before storing",
            },
        )
        writer.write_record(info)
        self._started_at = out.tell()  # a file holds at least one page before it rotates
        self._out, self._number = out, number
        self._unsynced = self._new_files = True

    def _close_writer(self) -> None:
        if self._out is not None:
            self._out.close()
        self._out = None

    # --- reading ----------------------------------------------------------------------------

    def read(self, location: PageLocation) -> Page:
        """The page at ``location``: URL, status code, headers and body as stored."""
        return self._read(location, body=True)

    def read_head(self, location: PageLocation) -> Page:
        """The page at ``location`` without its body (``b""``): what a revisit record of it
        needs, without inflating the body."""
        return self._read(location, body=False)

    def _read(self, location: PageLocation, *, body: bool) -> Page:
        if self._out is not None and location.number == self._number:
            self._out.flush()  # a page of the open batch, still in the write buffer
        fh = self._reader(location.number, location.file)
        fh.seek(location.offset)
        data = fh.read(location.length)
        if len(data) != location.length:
            raise PageReadError(
                f"{location.file} ends before the record at {location.offset}+{location.length}"
            )
        try:
            for record in ArchiveIterator(BytesIO(data)):
                if record.rec_type != "response" or record.http_headers is None:
                    break
                url = record.rec_headers.get_header("WARC-Target-URI")
                status = int(record.http_headers.get_statuscode())
                headers = list(record.http_headers.headers)
                return Page(url, status, headers, record.raw_stream.read() if body else b"")
        except Exception as exc:  # warcio raises several kinds on bad bytes
            raise PageReadError(
                f"{location.file} at {location.offset}: not a readable WARC record ({exc})"
            ) from None
        raise PageReadError(f"{location.file} at {location.offset}: not a WARC response record")

    def scan(self, number: int, end: int | None = None) -> Iterator[ScannedRecord]:
        """Every record of file ``number`` up to byte ``end``, read from the start."""
        with open(self.directory / warc_name(number), "rb") as fh:
            stream = LimitReader(fh, end) if end is not None else fh
            records = ArchiveIterator(stream)
            for record in records:
                header = record.rec_headers.get_header
                url, kind = header("WARC-Target-URI"), record.rec_type
                records.read_to_end(record)
                yield ScannedRecord(
                    records.get_record_offset(), records.get_record_length(), kind, url,
                    header("WARC-Date"), header("WARC-Payload-Digest"),
                    header("WARC-Refers-To-Target-URI"), header("WARC-Refers-To-Date"),
                )  # fmt: skip

    def captured(self, location: PageLocation) -> Captured:
        """What the response record at ``location`` is named by (a store whose history does
        not hold it: one made before recrawls)."""
        fh = self._reader(location.number, location.file)
        if self._out is not None and location.number == self._number:
            self._out.flush()
        fh.seek(location.offset)
        for record in ArchiveIterator(BytesIO(fh.read(location.length))):
            header = record.rec_headers.get_header
            return Captured(location, header("WARC-Date") or "", header("WARC-Record-ID") or "",
                            header("WARC-Payload-Digest") or "")  # fmt: skip
        raise PageReadError(f"{location.file} at {location.offset}: no WARC record there")

    def _reader(self, number: int, name: str) -> BinaryIO:
        fh = self._readers.get(number)
        if fh is None:
            try:
                fh = open(self.directory / name, "rb")  # noqa: SIM115
            except FileNotFoundError:
                raise PageReadError(f"{name} is missing from {self.directory}") from None
            if len(self._readers) >= 8:
                self._readers.pop(next(iter(self._readers))).close()
            self._readers[number] = fh
        return fh

    def close(self) -> None:
        self._close_writer()
        for fh in self._readers.values():
            fh.close()
        self._readers.clear()


#: zlib level of the gzip members: 6 compresses pages nearly as well as warcio's 9, much faster
GZIP_LEVEL = 6
#: zlib's window bits for gzip framing (a gzip header and trailer around the deflate stream)
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class _GzipMembers:
    """A file wrapper that gzips what is written, one member per record, at :data:`GZIP_LEVEL`.

    warcio's writer ends each record with ``flush()``; that ends the member here, so every
    record stays its own gzip member (cut out by byte range and read alone), as with warcio's
    own gzip, which has no level option.
    """

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self._zip = _compressor()

    def write(self, data: bytes) -> None:
        self.out.write(self._zip.compress(data))

    def flush(self) -> None:
        self.out.write(self._zip.flush())
        self._zip = _compressor()
        self.out.flush()


def _compressor() -> zlib._Compress:
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)


def response_record(
    url: str,
    status: int,
    headers: HeadersLike,
    body: bytes,
    *,
    reason: str | None = None,
    time: float | None = None,
    record_id: str | None = None,
) -> bytes:
    """One WARC/1.0 ``response`` record, gzipped as one member, ready to append.

    The bytes warcio's writer makes (same fields in the same order, same digests: the tests
    compare them; warcio reads them back), built in one pass, with one difference: a header
    value that is not ASCII and that warcio's RFC 8187 encoder cannot take (it raises on some,
    e.g. ``café; a="é"``) is %-encoded whole, so no page's headers can fail a batch.

    >>> import gzip
    >>> record = response_record("http://a.test/", 200, [("Content-Type", "text/html")],
    ...                          b"<p>hi</p>", time=1.7e9)
    >>> text = gzip.decompress(record).decode()
    >>> text.splitlines()[:3]
    ['WARC/1.0', 'WARC-Date: 2023-11-14T22:13:20Z', 'WARC-Type: response']
    >>> text.split("\\r\\n\\r\\n")[1:]
    ['HTTP/1.1 200 OK\\r\\nContent-Type: text/html', '<p>hi</p>', '']
    """
    if reason is None:
        reason = _phrase(status)
    status_line = f"{int(status)} {reason}".rstrip()
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    lines = [f"HTTP/1.1 {status_line}"]
    lines += [f"{k}: {v}" for k, v in pairs]
    lines.append("\r\n")
    try:
        http = "\r\n".join(lines).encode("ascii")
    except UnicodeEncodeError:  # rare: %-encode the values that are not ASCII
        http = _ascii_headers(status_line, pairs)
    block = hashlib.sha1(http)
    block.update(body)
    head = (
        "WARC/1.0\r\n"
        f"WARC-Date: {warc_date(time)}\r\n"
        "WARC-Type: response\r\n"
        f"WARC-Record-ID: {record_id or f'<urn:uuid:{uuid.uuid4()}>'}\r\n"
        f"WARC-Target-URI: {url}\r\n"
        f"WARC-Payload-Digest: {payload_digest(body)}\r\n"
        f"WARC-Block-Digest: sha1:{_base32(block.digest())}\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(http) + len(body)}\r\n\r\n"
    ).encode("utf-8")
    return zlib.compress(b"".join((head, http, body, b"\r\n\r\n")), GZIP_LEVEL, _GZIP_WBITS)


def revisit_record(
    url: str,
    *,
    profile: str,
    status: int,
    headers: HeadersLike,
    refers_to_uri: str,
    refers_to_date: str,
    refers_to_id: str | None,
    digest: str,
    time: float | None = None,
) -> bytes:
    """One WARC/1.0 ``revisit`` record, gzipped as one member: the HTTP status line and
    headers, no body, and where the content is (the response record of ``refers_to_uri`` at
    ``refers_to_date``, with payload digest ``digest``), built by warcio's record builder.

    The profile says what was seen: ``identical-payload-digest`` (:data:`IDENTICAL_PAYLOAD`),
    a body whose digest equals the one referred to (its headers are this response's, the body
    left out: ``WARC-Truncated: length``), or ``server-not-modified``
    (:data:`SERVER_NOT_MODIFIED`), a 304. A replay tool serves a revisit's status line and
    headers with the payload of the record it refers to, and a 304's would replay as an empty
    304, so for a 304 the caller gives the stored response's status and headers as the 304
    refreshed them (RFC 9111 §4.3.4); the profile keeps what the server answered. ``digest``
    is always the content's, carried forward, never the empty body's.

    >>> import gzip
    >>> record = revisit_record("http://a.test/", profile=SERVER_NOT_MODIFIED, status=200,
    ...     headers=[("ETag", '"x"')], refers_to_uri="http://a.test/",
    ...     refers_to_date="2026-11-02T09:00:00Z", refers_to_id=None, digest="sha1:AAAA",
    ...     time=1.7e9)
    >>> text = gzip.decompress(record).decode()
    >>> "WARC-Type: revisit" in text, "WARC-Profile: " + SERVER_NOT_MODIFIED in text
    (True, True)
    >>> text.count("WARC-Profile"), "WARC-Truncated" in text
    (1, False)
    """
    reason = _phrase(status)
    http = StatusAndHeaders(f"{int(status)} {reason}".rstrip(), _pairs(headers), "HTTP/1.1")
    extra = {"WARC-Date": warc_date(time)}
    if refers_to_id:
        extra["WARC-Refers-To"] = refers_to_id
    if profile == IDENTICAL_PAYLOAD:
        extra["WARC-Truncated"] = "length"
    buffer = BytesIO()
    writer = WARCWriter(_GzipMembers(buffer), gzip=False, warc_version="1.0")
    record = writer.create_revisit_record(url, digest, refers_to_uri, refers_to_date,
                                          http_headers=http, warc_headers_dict=extra)  # fmt: skip
    record.rec_headers.replace_header("WARC-Profile", profile)  # warcio writes only one kind
    writer.write_record(record)
    return buffer.getvalue()


def warc_date(time: float | None = None) -> str:
    """A WARC-Date (UTC, to the second) of ``time`` (default: now).

    >>> warc_date(1.7e9)
    '2023-11-14T22:13:20Z'
    """
    when = _clock.gmtime(time) if time is not None else _clock.gmtime()
    return _clock.strftime("%Y-%m-%dT%H:%M:%SZ", when)


def payload_digest(body: bytes) -> str:
    """A body's WARC-Payload-Digest: SHA-1, in base 32.

    >>> payload_digest(b"")
    'sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ'
    """
    return f"sha1:{_base32(hashlib.sha1(body).digest())}"


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _pairs(headers: HeadersLike) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in (headers.items() if isinstance(headers, Mapping)
                                          else headers)]  # fmt: skip


def _ascii_headers(status_line: str, pairs: list[tuple[str, str]]) -> bytes:
    """The HTTP head with non-ASCII header values %-encoded: warcio's RFC 8187 encoding where
    it manages, else the whole value %-encoded (warcio itself fails on some such values)."""
    named = [(str(k), str(v)) for k, v in pairs]
    try:
        return StatusAndHeaders(status_line, named, "HTTP/1.1").to_ascii_bytes()
    except UnicodeEncodeError:
        pass
    lines = [f"HTTP/1.1 {status_line}"]
    lines += [f"{quote(k, safe=_TOKEN)}: {v if v.isascii() else quote(v, safe=_VALUE)}"
              for k, v in named]  # fmt: skip
    lines.append("\r\n")
    return "\r\n".join(lines).encode("ascii")


_TOKEN = "!#$%&'*+-.^_`|~"
_VALUE = " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def _base32(digest: bytes) -> str:
    return base64.b32encode(digest).decode("ascii")


def _fsync_directory(directory: Path) -> None:
    """Make file creations and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
