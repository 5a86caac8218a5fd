"""What the store keeps per document, and its compact byte form in the ``docs`` database.

A record is small and fixed-shape so that millions of them stay cheap to scan: one struct header
and the URL. The page itself is not here; a kept page's record says where its WARC record is.

>>> rec = DocumentRecord("http://a.test/", "kept", 1700000000.5, cluster_id=3, content_hash=9,
...                      page=PageLocation("pages-00001.warc.gz", 250, 323))
>>> DocumentRecord.from_bytes(rec.to_bytes()) == rec
True
>>> len(rec.to_bytes())
61
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from dedup.cluster import DROPPED

__all__ = ["DECISIONS", "DROPPED", "DocumentRecord", "PageLocation", "url_of_record", "warc_name"]

#: every decision a document can get (``docs/architecture.md``): the clusterer's, and "skipped"
#: for a page that could not be tokenised; only "kept" pages reach the page store. The order is
#: the on-disk code.
DECISIONS = ("kept", *DROPPED, "skipped")

_WARC_NAME = re.compile(r"^pages-(\d{5,})\.warc\.gz$")

# version, time, decision, flags, cluster id, content hash, WARC file number, offset, length
_HEADER = struct.Struct(">BdBBQQIQQ")
_VERSION = 1
_HAS_CLUSTER, _HAS_HASH, _HAS_PAGE = 1, 2, 4
_MAX_U64 = 2**64 - 1


def url_of_record(data: bytes | memoryview) -> str:
    """The URL of a record's bytes, without parsing the rest: what a scan of every URL reads.

    >>> url_of_record(DocumentRecord("http://a.test/x", "kept", 0.0).to_bytes())
    'http://a.test/x'
    """
    return bytes(data[_HEADER.size :]).decode("utf-8")


def warc_name(number: int) -> str:
    """The name of the ``number``-th WARC file of the page store (numbers start at 1).

    >>> warc_name(1)
    'pages-00001.warc.gz'
    """
    if number < 1:
        raise ValueError(f"WARC file numbers start at 1; got {number}")
    return f"pages-{number:05d}.warc.gz"


def warc_number(name: str) -> int | None:
    """The number of a page-store WARC file name, or None for any other name.

    >>> warc_number("pages-00012.warc.gz"), warc_number("notes.txt")
    (12, None)
    """
    match = _WARC_NAME.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class PageLocation:
    """Where a stored page is: a WARC file of ``pages/``, and the byte range of its record.

    ``length`` covers the whole gzip member, so ``file[offset:offset + length]`` is a complete
    WARC file of one record that any WARC tool reads.
    """

    file: str
    offset: int
    length: int

    def __post_init__(self) -> None:
        if warc_number(self.file) is None:
            raise ValueError(f"page file must be named like pages-00001.warc.gz; got {self.file!r}")
        if self.offset < 0 or self.length <= 0:
            raise ValueError(
                f"page location needs offset >= 0 and length > 0; got {self.offset}, {self.length}"
            )

    @property
    def number(self) -> int:
        number = warc_number(self.file)
        assert number is not None  # checked at construction
        return number


@dataclass(frozen=True)
class DocumentRecord:
    """One document's entry: what it was, what was decided, and where its page is if kept."""

    #: the URL, or an external id for documents that are not web pages
    url: str
    #: one of :data:`DECISIONS`
    decision: str
    #: when it was decided, seconds since the epoch
    time: float
    cluster_id: int | None = None
    #: the 64-bit hash of its canonical token stream (None when it was never tokenised)
    content_hash: int | None = None
    #: where its page is in the page store; None for pages that were not stored
    page: PageLocation | None = None

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(
                f"decision must be one of {', '.join(DECISIONS)}; got {self.decision!r}"
            )
        for name in ("cluster_id", "content_hash"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= _MAX_U64:
                raise ValueError(f"{name} must be in [0, 2**64); got {value}")

    def to_bytes(self) -> bytes:
        flags = (
            (_HAS_CLUSTER if self.cluster_id is not None else 0)
            | (_HAS_HASH if self.content_hash is not None else 0)
            | (_HAS_PAGE if self.page is not None else 0)
        )
        page = self.page
        head = _HEADER.pack(
            _VERSION,
            self.time,
            DECISIONS.index(self.decision),
            flags,
            self.cluster_id or 0,
            self.content_hash or 0,
            page.number if page else 0,
            page.offset if page else 0,
            page.length if page else 0,
        )
        return head + self.url.encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> DocumentRecord:
        buf = bytes(data)
        if len(buf) < _HEADER.size:
            raise ValueError(f"document record of {len(buf)} bytes is shorter than its header")
        version, time, decision, flags, cluster, chash, number, offset, length = (
            _HEADER.unpack_from(buf)
        )
        if version != _VERSION:
            raise ValueError(f"document record version {version} is not supported")
        if decision >= len(DECISIONS):
            raise ValueError(f"unknown decision code {decision} in a document record")
        return cls(
            url=buf[_HEADER.size :].decode("utf-8"),
            decision=DECISIONS[decision],
            time=time,
            cluster_id=cluster if flags & _HAS_CLUSTER else None,
            content_hash=chash if flags & _HAS_HASH else None,
            page=PageLocation(warc_name(number), offset, length) if flags & _HAS_PAGE else None,
        )
