"""What a store remembers of each URL between crawl runs, and the runs themselves.

A store is crawled in *runs*: the first ``neardup crawl`` of it is run 1, and the same command
on a store whose last run finished is the next run, a recrawl; a run that did not finish is
resumed. For every URL a run decides, the store keeps a :class:`UrlState`: the run, the URL's
current document, the last HTTP status, the validators of the last response that had any
(``ETag``, ``Last-Modified``: the next run sends them back as ``If-None-Match`` and
``If-Modified-Since``), the payload digest of the last body, the :class:`Capture` (WARC
response record) that holds its content, which revisit records of later runs refer to, and
its link depth, at which later runs request it.

Both live in the store's LMDB environment (:mod:`storage.lmdb_env`): the states in the
``history`` database, keyed by the URL's key (:func:`storage.store.url_key`), and the run in
``meta``; they are written in the store's batches, so a state commits with the decision it
records. A store made before runs existed reads as one whose run 1 finished, and its URLs as
having no state (their next fetch is unconditional).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from storage.lmdb_env import Transactions

__all__ = ["HISTORY_DB", "Capture", "History", "Run", "UrlState"]

#: url key -> UrlState bytes
HISTORY_DB = "history"
_RUN_KEY = b"crawl_run"
# number, finished, started, ended
_RUN = struct.Struct(">IBdd")
# version, run, doc id, status, fetched at, flags, capture file number, offset, length,
# the duplicate run's cluster and count
_STATE = struct.Struct(">BIQHdBIQQQH")
_VERSION = 1
# the link depth, after the five texts (absent in states written before it was kept)
_DEPTH = struct.Struct(">I")
_AWAITING_BODY = 1
_CHUNK = 4096


@dataclass(frozen=True)
class Run:
    """One crawl run of the store."""

    number: int
    finished: bool
    started: float
    ended: float = 0.0


@dataclass(frozen=True)
class Capture:
    """The WARC ``response`` record that holds a URL's content: where it is, and what a revisit
    record names it by (``WARC-Refers-To-Date``, ``WARC-Refers-To``)."""

    file: int
    offset: int
    length: int
    #: its ``WARC-Date`` (``2026-12-01T10:00:00Z``)
    date: str
    #: its ``WARC-Record-ID`` (``<urn:uuid:...>``)
    record_id: str


@dataclass(frozen=True)
class UrlState:
    """What the last run that decided a URL saw of it."""

    run: int
    #: the URL's current document
    doc_id: int
    #: the last HTTP status (304 is recorded as the status of the content it confirmed);
    #: 0 when the server did not answer
    status: int
    fetched_at: float
    etag: str | None = None
    last_modified: str | None = None
    #: the last body's digest as WARC writes it (``sha1:`` and base 32), None without a body
    payload_digest: str | None = None
    capture: Capture | None = None
    #: kept by a re-decision whose body this run has not fetched in full yet
    awaiting_body: bool = False
    #: the page's run of duplicates along its link path, (cluster, count), as its decision
    #: left it (crawler.work.links): a resumed run follows its links as before, and a later
    #: run, which requests the URL without the page that led to it, continues the run
    duplicate_run: tuple[int, int] | None = None
    #: its link depth from the start URLs, the least a run found it at (None: not known, a
    #: store made before depths were kept, or a page of another spider): a later run requests
    #: the URL at that depth, so that its links stop at the crawl's max_depth
    depth: int | None = None

    def validators(self) -> dict[str, str]:
        """The conditional request headers this state allows (none without validators)."""
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers

    def to_bytes(self) -> bytes:
        capture, run = self.capture, self.duplicate_run
        head = _STATE.pack(
            _VERSION, self.run, self.doc_id, self.status, self.fetched_at,
            _AWAITING_BODY if self.awaiting_body else 0,
            capture.file if capture else 0, capture.offset if capture else 0,
            capture.length if capture else 0, run[0] if run else 0, min(run[1], 0xFFFF) if run else 0,
        )  # fmt: skip
        texts = (self.etag, self.last_modified, self.payload_digest,
                 capture.date if capture else None, capture.record_id if capture else None)
        depth = b"" if self.depth is None else _DEPTH.pack(min(self.depth, 0xFFFFFFFF))
        return head + b"".join(_text(t) for t in texts) + depth

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> UrlState:
        buf = bytes(data)
        version, run, doc_id, status, fetched_at, flags, file, offset, length, cluster, count = (
            _STATE.unpack_from(buf)
        )
        if version != _VERSION:
            raise ValueError(f"URL state version {version} is not supported")
        texts, at = [], _STATE.size
        for _ in range(5):
            value, at = _read_text(buf, at)
            texts.append(value)
        etag, modified, digest, date, record_id = texts
        capture = None
        if length:
            capture = Capture(file, offset, length, date or "", record_id or "")
        # the depth trails the texts: a state written before depths were kept has none
        depth = _DEPTH.unpack_from(buf, at)[0] if len(buf) >= at + _DEPTH.size else None
        return cls(run, doc_id, status, fetched_at, etag, modified, digest, capture,
                   bool(flags & _AWAITING_BODY), (cluster, count) if count else None,
                   depth)  # fmt: skip


def _text(value: str | None) -> bytes:
    """A string as a 2-byte length and its UTF-8 (0xFFFF for None)."""
    if value is None:
        return b"\xff\xff"
    data = value.encode("utf-8", "surrogatepass")[:0xFFFE]
    return struct.pack(">H", len(data)) + data


def _read_text(buf: bytes, at: int) -> tuple[str | None, int]:
    (size,) = struct.unpack_from(">H", buf, at)
    at += 2
    if size == 0xFFFF:
        return None, at
    return buf[at : at + size].decode("utf-8", "surrogatepass"), at + size


class History:
    """The URL states and the runs of one store; get it as ``store.history``."""

    def __init__(self, txns: Transactions) -> None:
        self._t = txns

    # --- runs -------------------------------------------------------------------------------

    def run(self) -> Run | None:
        """The store's last run (None for a store never crawled; a store crawled before runs
        were kept reads as a finished run 1)."""
        value = self._t.get("meta", _RUN_KEY)
        if value is None:
            return Run(1, True, 0.0) if self._has_documents() else None
        number, finished, started, ended = _RUN.unpack(value)
        return Run(int(number), bool(finished), float(started), float(ended))

    def begin_run(self, now: float) -> tuple[Run, bool]:
        """The run a crawl starting now belongs to, and whether it resumes it: the last run
        if it did not finish, else a new one (written in the open batch)."""
        last = self.run()
        if last is not None and not last.finished:
            return last, True
        run = Run(1 if last is None else last.number + 1, False, now)
        self._t.put("meta", _RUN_KEY, _RUN.pack(run.number, 0, run.started, 0.0))
        return run, False

    def finish_run(self, now: float) -> Run:
        """Mark the last run finished (in the open batch): it is the next run's baseline."""
        run = self.run()
        if run is None:
            raise ValueError("no crawl run to finish")
        done = Run(run.number, True, run.started, now)
        self._t.put("meta", _RUN_KEY, _RUN.pack(done.number, 1, done.started, done.ended))
        return done

    def _has_documents(self) -> bool:
        with self._t.read() as txn:
            return bool(txn.stat(self._t.dbs["docs"])["entries"])

    # --- URL states -------------------------------------------------------------------------

    def get(self, key: bytes) -> UrlState | None:
        """The state of the URL whose key is ``key``, or None."""
        if HISTORY_DB not in self._t.dbs:  # an older store opened read-only
            return None
        value = self._t.get(HISTORY_DB, key)
        return None if value is None else UrlState.from_bytes(value)

    def put(self, key: bytes, state: UrlState) -> None:
        self._t.put(HISTORY_DB, key, state.to_bytes())

    def states(self) -> Iterator[tuple[bytes, UrlState]]:
        """Every (URL key, state), in key order, read in short transactions."""
        if HISTORY_DB not in self._t.dbs:
            return
        start = b""
        while True:
            chunk: list[tuple[bytes, UrlState]] = []
            with self._t.read() as txn:
                cursor = txn.cursor(db=self._t.dbs[HISTORY_DB])
                found = cursor.set_range(start) if start else cursor.first()
                if found:
                    for key, value in cursor:
                        if bytes(key) == start:
                            continue
                        chunk.append((bytes(key), UrlState.from_bytes(value)))
                        if len(chunk) >= _CHUNK:
                            break
            yield from chunk
            if len(chunk) < _CHUNK:
                return
            start = chunk[-1][0]
