"""The store: one directory with everything a crawl keeps, consistent after any crash.

::

    neardup-store/
      index/          one LMDB environment: the cluster index, the documents, the meta data,
                      the canonical texts of dropped pages (zlib, for neardup explain)
      pages/          pages-00001.warc.gz, ...: the kept pages (storage.pages)
      logs/           <run-id>.jsonl: every decision (storage.log)
      manifest.json   the parameters the sketches were made with (storage.manifest)
      writer.lock     held by the one process that writes

The store of one node of a distributed crawl is the same, but for its cluster index, which is
the crawl's, in Redis: it records which node it is and each document's place in the crawl's
order (:mod:`storage.nodes`).

**Crash consistency.** The invariant (``docs/architecture.md``) is that the index and the page
store agree: every stored page is referenced by exactly one committed document, and every
committed document's page is stored. A batch (:meth:`Store.batch`) writes pages to the WARC
file and index entries to one LMDB write transaction, and ends in this order:

1. the WARC file is flushed and fsynced;
2. the LMDB transaction commits, recording the WARC file's new end as the *committed
   position* in ``meta`` (LMDB's commit is atomic and, with ``sync=True``, durable).

A crash before step 2 leaves the LMDB state of the previous commit, which references nothing
past the old committed position; the pages written since are an unreferenced tail, and the
next writable open (or ``neardup verify``) truncates it. A crash after step 2 loses nothing:
the pages were durable before the commit that references them. No order of events leaves a
committed document pointing at a page that is not on disk, or a page that two documents share.

**Checking it.** :meth:`Store.check` (what ``neardup verify`` runs) checks that invariant and
the rest of the layout, beside the code that writes it: the documents, the meta counters and
the page store here, the index's databases in :meth:`storage.lmdb_index.LmdbIndex.check`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import lmdb

from dedup.params import ContentArea, SketchParams
from dedup.sketches import Sketch, sketch_from_bytes
from storage import lmdb_env
from storage.errors import (
    StoreBusyError,
    StoreError,
    StoreMismatchError,
    StoreNotFoundError,
    StoreWriteError,
)
from storage.lmdb_env import Transactions, pack_id, unpack_id
from storage.history import History
from storage.lmdb_index import LmdbIndex
from storage.log import DedupLog, read_log
from storage.manifest import FORMAT_VERSION, Manifest
from storage.nodes import CrawlNode
from storage.pages import Page, PageStore, WarcPosition
from storage.records import DocumentRecord, PageLocation, url_of_record, warc_name

#: URL → the document decided for it (``url_key`` of the URL → doc id), so that a resumed or
#: repeated crawl recognises a page it has already decided.
URLS_DB = "urls"
#: doc id → the zlib-compressed UTF-8 canonical text of a dropped page, so that its drop can be
#: explained after the crawl (a dropped page never reaches the WARC files)
TEXTS_DB = "texts"
#: doc id → its place in the order of a distributed crawl's decisions (storage.nodes)
ORDERS_DB = "orders"

MANIFEST_KEY = b"manifest"
NEXT_DOC_KEY = b"next_doc_id"
WARC_KEY = b"warc_committed"
#: the node of a distributed crawl that keeps the store (storage.nodes), if it is one
NODE_KEY = b"crawl_node"
_POSITION = struct.Struct(">IQ")
_CHUNK = 1024
_URL_CHUNK = 8192  # URLs are small: a longer chunk, still a short transaction
_MAX_ID = 2**63 - 1


@dataclass
class Inventory:
    """What :meth:`Store.check` counted while it checked."""

    documents: int = 0
    #: documents whose page is in the page store
    pages: int = 0
    clusters: int = 0
    #: fingerprint → cluster entries
    fingerprints: int = 0
    exact_hashes: int = 0
    warc_files: int = 0
    #: page records in the WARC files, up to the committed position
    warc_records: int = 0
    #: revisit records among them (unchanged pages of a recrawl, byte-identical mirrors)
    revisit_records: int = 0
    #: URLs the crawl runs remember (storage.history)
    urls: int = 0
    #: page-store files with data past the last commit: (name, bytes past it), or (name, None)
    #: for a file wholly past it; what a crash leaves, cut off by the next writable open
    uncommitted: list[tuple[str, int | None]] = field(default_factory=list)
    #: the node of a distributed crawl the store is, if it is one (its index is in Redis)
    node: CrawlNode | None = None
    #: documents with their place in the distributed crawl's order
    orders: int = 0


@dataclass(frozen=True)
class StoredPage:
    """A kept page as :meth:`Store.iter_pages` yields it."""

    doc_id: int
    record: DocumentRecord
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Store:
    """An open store; use :meth:`Store.open`, as a context manager.

    Use one store object from one thread: an LMDB write transaction belongs to the thread that
    began it. Readers in other processes may open the same store read-only at any time.
    """

    def __init__(
        self,
        path: Path,
        *,
        shared: lmdb_env.Shared,
        txns: Transactions,
        manifest: Manifest,
        pages: PageStore,
        readonly: bool,
        lock: BinaryIO | None,
        repairs: list[str],
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.readonly = readonly
        self.pages = pages
        self.index = LmdbIndex(txns)
        #: what the crawl runs saw of each URL, and the runs (a recrawl's baseline)
        self.history = History(txns)
        #: what opening repaired (an uncommitted WARC tail), one line each
        self.repairs = repairs
        self._shared = shared
        self._txns = txns
        self._lock = lock
        self._closed = False

    @property
    def params(self) -> SketchParams:
        return self.manifest.sketch

    @property
    def map_growths(self) -> int:
        """How often this process doubled the LMDB map (a full map is grown, never an error)."""
        return self._txns.growths

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        params: SketchParams | None = None,
        *,
        readonly: bool = False,
        map_size: int = 1 << 30,
        warc_max_bytes: int = 1 << 30,
        durable: bool = True,
        area: ContentArea | None = None,
    ) -> Store:
        """Open the store at ``path``, creating it (writable opens only) if it is not there.

        ``params`` must equal the store's (else :class:`StoreMismatchError`, naming the key);
        ``None`` adopts the store's, or the defaults for a new store. A writable open takes the
        store's writer lock (:class:`StoreBusyError` if another process holds it) and repairs an
        uncommitted WARC tail (see :attr:`repairs`). Read-only opens work beside a writer.
        ``durable=False`` is for an index that can be rebuilt from its input, such as
        ``recluster``'s (see :func:`storage.lmdb_env.acquire`). ``area`` is the content area
        the pages are read with: like ``params``, it must equal the store's (``None`` adopts
        it; a new store records it).
        """
        root = Path(path)
        name = os.fspath(path)
        if map_size < 4096:
            raise ValueError(f"map_size must be at least 4096 bytes; got {map_size}")
        index_dir, pages_dir = root / "index", root / "pages"
        has_index = cls.exists(root)
        lock: BinaryIO | None = None
        if readonly:
            if not has_index:
                raise StoreNotFoundError(f"no store at {name} (no {name}/index/data.mdb)")
        else:
            if root.exists() and not root.is_dir():
                raise StoreError(f"store {name} is not a directory")
            root.mkdir(parents=True, exist_ok=True)
            lock = _lock_writer(root, name)
            if not has_index and any(pages_dir.glob("pages-*.warc.gz")):
                lock.close()
                raise StoreError(
                    f"store {name} has pages but no index ({name}/index is missing); "
                    "not touching it"
                )
            for sub in (pages_dir, root / "logs"):
                sub.mkdir(exist_ok=True)
        try:
            shared = lmdb_env.acquire(
                index_dir, readonly=readonly, map_size=map_size, durable=durable
            )
        except lmdb.NotFoundError:
            if lock is not None:
                lock.close()
            raise StoreError(
                f"{name} is not a neardup store (its index lacks our databases)"
            ) from None
        except ValueError as exc:
            if lock is not None:
                lock.close()
            raise StoreBusyError(f"store {name}: {exc}") from None
        except BaseException:
            if lock is not None:
                lock.close()
            raise
        try:
            txns = Transactions(shared.env, shared.dbs)
            manifest = _load_manifest(txns, name, params, readonly, area)
            position = position_from_bytes(txns.get("meta", WARC_KEY))
            pages = PageStore(pages_dir, position, max_bytes=warc_max_bytes, writable=not readonly)
            repairs = [] if readonly else pages.restore_committed()
            if not readonly:
                _write_manifest_copy(root / "manifest.json", manifest)
        except BaseException:
            lmdb_env.release(shared)
            if lock is not None:
                lock.close()
            raise
        return cls(
            root,
            shared=shared,
            txns=txns,
            manifest=manifest,
            pages=pages,
            readonly=readonly,
            lock=lock,
            repairs=repairs,
        )

    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        """Whether there is a store's index at ``path`` (a writable open would make one)."""
        return (Path(path) / "index" / "data.mdb").is_file()

    def close(self) -> None:
        """Abort any open batch, sync and close; the writer lock is released last."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._txns.in_batch:
                self._txns.abort()
                self.pages.rollback()
            self.pages.close()
        finally:
            try:
                lmdb_env.release(self._shared)
            finally:
                if self._lock is not None:
                    self._lock.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- writing ----------------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[Store]:
        """One LMDB write transaction for many documents, and the pages they keep.

        On a clean exit: WARC fsync first, then the LMDB commit that records the new WARC end
        (the order the module docstring argues for). On an exception: the transaction is
        aborted and the pages written in the batch are cut off again. A commit the disk
        refuses raises :class:`StoreWriteError`, naming the cause and the place.
        """
        if self.readonly:
            raise PermissionError(f"store {self.path} is open read-only")
        self._txns.begin_batch()
        self.pages.in_batch = True
        try:
            yield self
            position = self.pages.flush()
            self._txns.put("meta", WARC_KEY, _POSITION.pack(*position))
            try:
                self._txns.commit()
            except lmdb.Error as exc:
                raise StoreWriteError.of(exc, self.path / "index") from exc
        except BaseException:
            self._txns.abort()
            self.pages.rollback()
            raise
        finally:
            self.pages.in_batch = False
        self.pages.mark_committed(position)

    def next_doc_id(self) -> int:
        """A new document id (0, 1, 2, ...); ids of a batch that does not commit are reused."""
        doc_id = self._next_doc_id()
        self._txns.put("meta", NEXT_DOC_KEY, pack_id(doc_id + 1))
        return doc_id

    def put_document(
        self, doc_id: int, record: DocumentRecord, sketch: Sketch | None = None
    ) -> None:
        """Record a document (and its sketch, for re-clustering and explaining).

        The URL is indexed too (:meth:`find_url`); a later document with the same URL takes the
        URL over.
        """
        key = pack_id(_checked_id(doc_id))
        self._txns.put("docs", key, record.to_bytes())
        self._txns.put(URLS_DB, url_key(record.url), key)
        if sketch is not None:
            self._txns.put("sketches", key, sketch.to_bytes())
        if doc_id >= self._next_doc_id():  # ids chosen by the caller are never handed out again
            self._txns.put("meta", NEXT_DOC_KEY, pack_id(doc_id + 1))

    def put_text(self, doc_id: int, text: str) -> None:
        """Keep a document's canonical text, zlib-compressed, beside its record.

        For dropped pages, whose text is nowhere else (``neardup explain`` shows it). The
        document must already be recorded, in this batch or before: a text never outlives the
        decision it explains. Writing again replaces the text.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str; got {type(text).__name__}")
        key = pack_id(_checked_id(doc_id))
        if self._txns.get("docs", key) is None:
            raise ValueError(f"no document {doc_id} in the store: record it before its text")
        self._txns.put(TEXTS_DB, key, zlib.compress(text.encode("utf-8", "surrogatepass")))

    def text(self, doc_id: int) -> str | None:
        """The canonical text kept for ``doc_id``, or None (none kept, or a store made before
        texts were kept)."""
        if TEXTS_DB not in self._txns.dbs:  # an older store opened read-only
            return None
        value = self._txns.get(TEXTS_DB, pack_id(_checked_id(doc_id)))
        if value is None:
            return None
        return zlib.decompress(value).decode("utf-8", "surrogatepass")

    def _next_doc_id(self) -> int:
        value = self._txns.get("meta", NEXT_DOC_KEY)
        return 0 if value is None else unpack_id(value)

    # --- a node of a distributed crawl (storage.nodes) ---------------------------------------

    @property
    def crawl_node(self) -> CrawlNode | None:
        """The node of a distributed crawl this store is kept by, or None (a single machine's)."""
        value = self._txns.get("meta", NODE_KEY)
        return None if value is None else CrawlNode.from_bytes(value)

    def check_crawl_node(self, wanted: CrawlNode | None) -> None:
        """Refuse to be crawled as other than what the store is: the node ``wanted`` of a
        distributed crawl (None: a single machine's crawl). A store without documents may
        become a node. :class:`StoreMismatchError`, one line, otherwise."""
        have = self.crawl_node
        if have == wanted or (have is None and self._next_doc_id() == 0):
            return
        if have is None:
            raise StoreMismatchError(
                f"store {self.path} holds a single-machine crawl; a node of a distributed crawl "
                "needs a store of its own (another --store)"
            )
        if wanted is None:
            raise StoreMismatchError(
                f"store {self.path} is {have.describe()}: crawl it with --frontier and --node "
                f"{have.label}, or give a single-machine crawl another --store"
            )
        raise StoreMismatchError(
            f"store {self.path} is {have.describe()}; this crawl is {wanted.describe()} "
            "(each node needs a store of its own)"
        )

    def join_crawl(self, node: CrawlNode) -> None:
        """Record that this store is kept by ``node`` (in the open batch), after
        :meth:`check_crawl_node`."""
        self.check_crawl_node(node)
        if self.crawl_node is None:
            self._txns.put("meta", NODE_KEY, node.to_bytes())

    def put_order(self, doc_id: int, order: int) -> None:
        """Record the document's place in the distributed crawl's order of decisions."""
        self._txns.put(ORDERS_DB, pack_id(_checked_id(doc_id)), pack_id(_checked_id(order)))

    def order_of(self, doc_id: int) -> int | None:
        """The document's place in the distributed crawl's order, or None (not a node's)."""
        if ORDERS_DB not in self._txns.dbs:
            return None
        value = self._txns.get(ORDERS_DB, pack_id(doc_id))
        return None if value is None else unpack_id(value)

    def orders(self) -> Iterator[tuple[int, int]]:
        """``(doc_id, order)`` of every document with a place in the crawl's order, by doc id.

        The orders mostly rise with the doc ids, not always: a page a node had decided but not
        stored when it was killed is stored after its restart with its first place, after
        documents decided since. Sort by order to read a crawl in its order.
        """
        if ORDERS_DB in self._txns.dbs:
            yield from self._scan(ORDERS_DB, unpack_id, _URL_CHUNK)

    # --- reading ----------------------------------------------------------------------------

    def document(self, doc_id: int) -> DocumentRecord | None:
        value = self._txns.get("docs", pack_id(doc_id))
        return None if value is None else DocumentRecord.from_bytes(value)

    def find_url(self, url: str) -> int | None:
        """The id of the document recorded for ``url`` (exactly this string), or None.

        A lookup by a 128-bit hash of the URL, checked against the document's own URL, so a
        hash collision can only ever answer None.
        """
        value = self._txns.get(URLS_DB, url_key(url))
        if value is None:
            return None
        doc_id = unpack_id(value)
        record = self.document(doc_id)
        return doc_id if record is not None and record.url == url else None

    def sketch(self, doc_id: int) -> Sketch | None:
        value = self._txns.get("sketches", pack_id(doc_id))
        return None if value is None else sketch_from_bytes(value)

    def documents(self, start: int = 0) -> Iterator[tuple[int, DocumentRecord]]:
        """``(doc_id, record)`` in id order, read in short transactions of about a thousand."""
        return self._scan("docs", DocumentRecord.from_bytes, _CHUNK, start)

    def urls(self) -> Iterator[tuple[int, str]]:
        """``(doc_id, url)`` of every document in id order, reading only the URLs.

        For a scan of every URL (``neardup explain`` finding a page from part of its URL):
        short read transactions of a few thousand records, none of them parsed beyond the URL.
        A URL decided twice appears twice; :meth:`find_url` says which document holds it now.
        """
        return self._scan("docs", url_of_record, _URL_CHUNK)

    def _scan(
        self, db: str, decode: Callable[[bytes], Any], chunk_size: int, start: int = 0
    ) -> Iterator[tuple[int, Any]]:
        """``(doc_id, decode(value))`` of the database ``db`` (keyed by document id) in id
        order, from ``start``, read in short transactions of ``chunk_size`` records, so that a
        long scan never holds a reader slot (and the writer's old pages) for its whole length."""
        while True:
            chunk: list[tuple[int, Any]] = []
            with self._txns.read() as txn:
                cursor = txn.cursor(db=self._txns.dbs[db])
                if cursor.set_range(pack_id(start)):
                    for key, value in cursor:
                        chunk.append((unpack_id(key), decode(value)))
                        if len(chunk) >= chunk_size:
                            break
            yield from chunk
            if len(chunk) < chunk_size:
                return
            start = chunk[-1][0] + 1

    def read_page(self, location: PageLocation) -> Page:
        """``(url, status, headers, body)`` of the stored page at ``location``."""
        return self.pages.read(location)

    def current_documents(self) -> Iterator[tuple[int, DocumentRecord]]:
        """The documents that are their URL's current one, in id order: what the latest crawl
        run holds. A recrawl decides a changed page as a new document and keeps the old one as
        history (:mod:`storage.history`); the order of the current ones is greedy
        clustering's (``docs/architecture.md``)."""
        for doc_id, record in self.documents():
            if self._is_current(doc_id, record.url):
                yield doc_id, record

    def _is_current(self, doc_id: int, url: str) -> bool:
        value = self._txns.get(URLS_DB, url_key(url))
        return value is not None and unpack_id(value) == doc_id

    def iter_pages(self) -> Iterator[StoredPage]:
        """Every kept page of the current documents with its document, in document order."""
        for doc_id, record in self.current_documents():
            if record.page is not None:
                page = self.pages.read(record.page)
                yield StoredPage(doc_id, record, *page)

    def stats(self) -> dict[str, int]:
        """Counts and sizes, e.g. for the crawl's ``neardup/…`` stats."""
        entries = self._entries()
        return {
            "documents": entries["docs"],
            "clusters": entries["clusters"],
            "fingerprints": entries["fp_clusters"],
            "exact_hashes": entries["hashes"],
            "warc_files": len(self.pages.files()),
            "map_growths": self.map_growths,
            **self._txns.sizes(),
        }

    def _entries(self) -> dict[str, int]:
        with self._txns.read() as txn:
            return {
                name: int(txn.stat(self._txns.dbs[name])["entries"])
                for name in ("docs", "clusters", "fp_clusters", "hashes")
            }

    # --- checking the layout (neardup verify) -----------------------------------------------

    def check(self, problem: Callable[[str], None]) -> Inventory:
        """Check the store's layout and its invariant (see the module docstring); call
        ``problem`` with each disagreement, one line each; return what was counted.

        Checked here: every document record is readable, its cluster exists, no two
        documents share a page, every sketch belongs to a document, the document counter is
        past every document; every document with a page has a WARC response record there, of
        the same length and URL, and every response record up to the committed position
        belongs to exactly one document. The index's databases are checked by
        :meth:`storage.lmdb_index.LmdbIndex.check`.

        The LMDB side is read in one snapshot (:meth:`storage.lmdb_env.Transactions.snapshot`),
        which also holds the committed WARC position the pages are checked up to, so a check
        beside a writer sees one committed state. Data past that position is not a problem:
        it is listed in :attr:`Inventory.uncommitted`.
        """
        found = Inventory()
        with self._txns.snapshot():
            entries = self._entries()
            found.documents, found.clusters = entries["docs"], entries["clusters"]
            found.fingerprints, found.exact_hashes = entries["fp_clusters"], entries["hashes"]
            found.node = node = self.crawl_node
            if node is None:  # a node's clusters are the crawl's, in Redis (storage.nodes)
                for line in self.index.check(self._has_document):
                    problem(line)
            locations = self._check_documents(problem, local_clusters=node is None)
            found.pages = locations.count
            found.urls = self._check_history(problem)
            if node is not None:
                found.orders = self._check_orders(problem)
            position = position_from_bytes(self._txns.get("meta", WARC_KEY))
        self._check_pages(position, locations, problem, found)
        return found

    def _check_history(self, problem: Callable[[str], None]) -> int:
        """Each URL's state names its current document, and a kept page's capture is where the
        document says its page is; returns how many URLs have a state."""
        count = 0
        for key, state in self.history.states():
            count += 1
            value = self._txns.get(URLS_DB, key)
            record = self.document(state.doc_id)
            if record is None or value is None or unpack_id(value) != state.doc_id:
                problem(f"the history of a URL names document {state.doc_id}, which is not the "
                        "URL's current document")  # fmt: skip
                continue
            capture, page = state.capture, record.page
            if capture is not None and record.decision == "kept" and page is not None and (
                (capture.file, capture.offset) != (page.number, page.offset)
            ):
                problem(f"{record.url}: its history's capture is {warc_name(capture.file)}:"
                        f"{capture.offset}, its document's page {page.file}:{page.offset}")
        return count

    def _has_document(self, doc_id: int) -> bool:
        with self._txns.read() as txn:
            return txn.get(pack_id(doc_id), db=self._txns.dbs["docs"]) is not None

    def _check_orders(self, problem: Callable[[str], None]) -> int:
        """A node's store: every document has its place in the crawl's order, and no two
        share one; returns how many have one."""
        count = 0
        owners: dict[int, int] = {}
        for doc_id, order in self.orders():
            count += 1
            if not self._has_document(doc_id):
                problem(f"the place {order} in the crawl's order names document {doc_id}, "
                        "which is missing")  # fmt: skip
            elif order in owners:
                problem(f"documents {owners[order]} and {doc_id} share the place {order} in the "
                        "crawl's order")  # fmt: skip
            owners.setdefault(order, doc_id)
        if count < self._entries()["docs"]:
            for doc_id, record in self.documents():
                if self.order_of(doc_id) is None:
                    problem(f"document {doc_id} ({record.url}) has no place in the crawl's order")
        return count

    def _check_documents(
        self, problem: Callable[[str], None], *, local_clusters: bool = True
    ) -> _Locations:
        """The records, their clusters (when the index is the store's own) and the sketches;
        the page location of each document."""
        locations = _Locations()
        last = -1
        with self._txns.read() as txn:
            for key, value in txn.cursor(db=self._txns.dbs["docs"]):
                doc_id = last = unpack_id(key)
                try:
                    record = DocumentRecord.from_bytes(value)
                except ValueError as exc:
                    problem(f"document {doc_id}: unreadable record ({exc})")
                    continue
                if (local_clusters and record.cluster_id is not None
                        and not self.index.has_cluster(record.cluster_id)
                        and self._is_current(doc_id, record.url)):  # an older one's may be gone
                    problem(f"document {doc_id}: its cluster {record.cluster_id} is missing")
                if record.page is not None:
                    locations.add(doc_id, record, problem)
            for key, _ in txn.cursor(db=self._txns.dbs["sketches"]):
                if not self._has_document(unpack_id(key)):
                    problem(f"sketch of missing document {unpack_id(key)}")
        if last >= self._next_doc_id():
            problem(f"next document id is not past document {last}")
        return locations

    def _check_pages(
        self,
        committed: WarcPosition,
        locations: _Locations,
        problem: Callable[[str], None],
        found: Inventory,
    ) -> None:
        """The WARC files up to the ``committed`` position against the documents' locations."""
        files = dict(self.pages.files())
        found.warc_files = len(files)
        #: (URL, WARC-Date) of every response record → its payload digest
        captures: dict[tuple[str | None, str | None], str | None] = {}
        revisits: list[tuple[str, Any]] = []
        for number in range(1, committed.file + 1):
            if number not in files:
                problem(f"{warc_name(number)} is missing from {self.pages.directory}")
        for number, path in sorted(files.items()):
            if number > committed.file:
                found.uncommitted.append((path.name, None))
                continue
            end = committed.end if number == committed.file else None
            size = path.stat().st_size
            if end is not None and size < end:
                problem(f"{path.name} has {size} bytes, but {end} were committed")
            elif end is not None and size > end:
                found.uncommitted.append((path.name, size - end))
            at = 0
            try:
                for rec in self.pages.scan(number, end):
                    at = rec.offset + rec.length
                    if rec.type == "warcinfo":
                        continue
                    if rec.type == "revisit":
                        found.revisit_records += 1
                        revisits.append((path.name, rec))
                        continue
                    if rec.type != "response":
                        problem(f"{path.name}:{rec.offset}: unexpected {rec.type} record")
                        continue
                    found.warc_records += 1
                    captures[(rec.url, rec.date)] = rec.payload_digest
                    ref = locations.pages.pop((number, rec.offset), None)
                    if ref is None:
                        problem(
                            f"{path.name}:{rec.offset}: page {rec.url} is referenced by no "
                            "document"
                        )
                        continue
                    doc_id, length, url = ref
                    if length != rec.length or url != rec.url:
                        problem(
                            f"document {doc_id}: {path.name}:{rec.offset} holds {rec.url} "
                            f"({rec.length} bytes), the document says {url} ({length} bytes)"
                        )
            except Exception as exc:  # a damaged file: say where, keep checking the others
                problem(f"{path.name}: unreadable after byte {at} ({type(exc).__name__}: {exc})")
        for (number, offset), (doc_id, _, url) in sorted(locations.pages.items()):
            problem(f"document {doc_id} ({url}): no WARC record at {warc_name(number)}:{offset}")
        for name, rec in revisits:  # each must resolve, as a replay tool resolves it
            target = (rec.refers_to_uri, rec.refers_to_date)
            if target not in captures:
                problem(f"{name}:{rec.offset}: the revisit of {rec.url} refers to "
                        f"{rec.refers_to_uri} at {rec.refers_to_date}, which no response "
                        "record holds")  # fmt: skip
            elif captures[target] != rec.payload_digest:
                problem(f"{name}:{rec.offset}: the revisit of {rec.url} has payload digest "
                        f"{rec.payload_digest}, the record it refers to {captures[target]}")

    # --- the dedup log ----------------------------------------------------------------------

    def log(self, run_id: str | None = None) -> DedupLog:
        """A new (or continued) dedup log for one run, in ``logs/``."""
        return DedupLog(self.path / "logs", run_id)

    def read_log(self, runs: list[str] | None = None) -> Iterator[dict[str, Any]]:
        return read_log(self.path / "logs", runs)


class _Locations:
    """The page location of each document a check has read: (file number, offset) → (doc id,
    record length, URL); two documents at one location are a problem."""

    def __init__(self) -> None:
        self.pages: dict[tuple[int, int], tuple[int, int, str]] = {}
        #: documents with a page, those sharing one included
        self.count = 0

    def add(self, doc_id: int, record: DocumentRecord, problem: Callable[[str], None]) -> None:
        page = record.page
        assert page is not None
        self.count += 1
        where = (page.number, page.offset)
        if where in self.pages:
            problem(
                f"documents {self.pages[where][0]} and {doc_id} share the page at "
                f"{page.file}:{page.offset}"
            )
            return
        self.pages[where] = (doc_id, page.length, record.url)


def _checked_id(doc_id: int) -> int:
    if isinstance(doc_id, bool) or not isinstance(doc_id, int) or not 0 <= doc_id <= _MAX_ID:
        raise ValueError(f"doc_id must be an integer in [0, 2**63); got {doc_id!r}")
    return doc_id


def url_key(url: str) -> bytes:
    """The fixed-width key of a URL in the ``urls`` database: 16 bytes of BLAKE2b.

    Fixed width keeps every key far below LMDB's 511-byte limit, whatever the URL's length.

    >>> len(url_key("http://a.test/" + "x" * 5000))
    16
    """
    return hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _lock_writer(root: Path, name: str) -> BinaryIO:
    """Hold ``writer.lock`` for the store's lifetime: one writing process per store."""
    return hold_lock(
        root / "writer.lock",
        busy=f"store {name} is being written by another process (pid {{pid}}); "
        "wait for it to finish, or open the store read-only",
    )


def hold_lock(path: Path, busy: str) -> BinaryIO:
    """Lock ``path`` for as long as the returned file stays open, and write our pid in it.

    ``flock`` locks go with the open file, so a killed holder's lock is released by the kernel
    and never needs cleaning up. When another process holds it, :class:`StoreBusyError` with
    ``busy`` (its ``{pid}`` replaced by the holder's pid).
    """
    fh = open(path, "a+b")  # noqa: SIM115
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().decode("ascii", "replace").strip() or "unknown"
        fh.close()
        raise StoreBusyError(busy.format(pid=holder)) from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()).encode("ascii"))
    fh.flush()
    return fh


def _load_manifest(
    txns: Transactions,
    name: str,
    params: SketchParams | None,
    readonly: bool,
    area: ContentArea | None = None,
) -> Manifest:
    stored = txns.get("meta", MANIFEST_KEY)
    if stored is None:
        if readonly:
            raise StoreError(f"{name} is not a neardup store yet (its index has no manifest)")
        manifest = Manifest.for_params(params or SketchParams(), area=area)
        txns.begin_batch()
        try:
            txns.put("meta", MANIFEST_KEY, manifest.to_json().encode("utf-8"))
            txns.put("meta", WARC_KEY, _POSITION.pack(0, 0))
            txns.commit()
        except BaseException:
            txns.abort()
            raise
        return manifest
    manifest = Manifest.from_json(stored)
    if manifest.format_version != FORMAT_VERSION:
        raise StoreMismatchError(
            f"store {name} was made with format_version={manifest.format_version}; this code "
            f"reads {FORMAT_VERSION} (use another --store)"
        )
    if params is not None or area is not None:
        wanted = Manifest.for_params(
            params or manifest.sketch,
            created=manifest.created,
            area=manifest.canonical if area is None else area,
        )
        manifest.check(wanted, name)
    return manifest


def position_from_bytes(value: bytes | memoryview | None) -> WarcPosition:
    """The committed WARC position as stored in ``meta`` (none yet: file 0)."""
    if value is None:
        return WarcPosition(0, 0)
    file, end = _POSITION.unpack(value)
    return WarcPosition(int(file), int(end))


def _write_manifest_copy(path: Path, manifest: Manifest) -> None:
    """``manifest.json`` for people, rewritten (atomically) only when it is missing or stale."""
    text = manifest.to_json()
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
