"""The one LMDB environment of a store, and the transactions every other module goes through.

Three rules from LMDB shape this module (see ``reference/style-anchors.md`` §3):

* **One environment per path per process.** Opening the same files twice breaks LMDB's locks,
  so :func:`acquire` hands out a shared handle, counted, keyed by the directory's device and
  inode (a second path to the same directory finds the same handle).
* **Map growth replays the batch.** The map starts small; when a write transaction hits
  ``MapFullError`` the transaction is dead. :class:`Transactions` keeps every write of the open
  batch as data (database, key, value), so it can abort, double the map and replay them all in
  a new transaction: nothing the caller wrote is lost and the caller never sees the error.
* **Readers adopt a grown map.** A process whose map is smaller than the file another process
  grew gets ``MapResizedError`` when it begins a transaction; ``set_mapsize(0)`` adopts the new
  size and the transaction is begun again.

Keys are fixed-width big-endian integers (``>Q``), so byte order is numeric order and a dupsort
database's duplicates come out in ascending id order.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import lmdb

from storage.errors import StoreError

#: a named database's handle (py-lmdb's type, public only in its stubs)
Database = lmdb._Database

#: the named databases and their (persistent, immutable) flags
DATABASES: dict[str, dict[str, bool]] = {
    "meta": {},
    # fingerprint → cluster ids whose representative holds it
    "fp_clusters": {"dupsort": True, "dupfixed": True},
    # cluster id → first doc, size, identical flag, representative sketch
    "clusters": {},
    # cluster id → member doc ids
    "members": {"dupsort": True, "dupfixed": True},
    # cluster id ‖ sequence number → one member's sketch values (the "popular" rule)
    "member_fps": {},
    # content hash → first doc id ‖ its cluster id
    "hashes": {},
    # doc id → DocumentRecord bytes
    "docs": {},
    # doc id → cluster id
    "doc_clusters": {},
    # blake2b-128 of a URL → the doc id decided for it (a resumed crawl decides nothing twice)
    "urls": {},
    # doc id → sketch bytes
    "sketches": {},
    # doc id → zlib-compressed UTF-8 canonical text of a dropped page (neardup explain)
    "texts": {},
    # blake2b-128 of a URL → what the last crawl run that decided it saw (storage.history)
    "history": {},
    # cluster id → its members whose content hash is not the first member's (when any)
    "odd_members": {},
    # doc id → its place in the order of a distributed crawl's decisions (a node's store)
    "orders": {},
}

#: databases added after the first stores were made: a read-only open of an older store goes
#: without them (a writable open creates them), so readers never refuse a store for lacking one
OPTIONAL_DATABASES = frozenset({"texts", "history", "odd_members", "orders"})

#: the widest key any database uses (cluster id ‖ sequence number in member_fps)
WIDEST_KEY = 16

_ID = struct.Struct(">Q")

#: an LMDB data file's two header (meta) pages, of at least 4 KiB each
_HEADER_BYTES = 2 * 4096
#: what LMDB says of a file that is not an environment it can open
_UNREADABLE = (lmdb.InvalidError, lmdb.VersionMismatchError, lmdb.CorruptedError,
               lmdb.PageNotFoundError)  # fmt: skip
_RESTORE = "a copy that did not finish? Restore the index from a whole copy; nothing was changed"
_MAX_ATTEMPTS = 64


def pack_id(value: int) -> bytes:
    """An id or fingerprint as its 8-byte big-endian key.

    >>> pack_id(258).hex()
    '0000000000000102'
    """
    return _ID.pack(value)


def unpack_id(data: bytes | memoryview) -> int:
    return int(_ID.unpack(data)[0])


@dataclass
class Shared:
    """An open environment and its database handles, shared by every store object on it."""

    env: lmdb.Environment
    dbs: dict[str, Database]
    readonly: bool
    users: int
    durable: bool = True


_OPEN: dict[tuple[int, int], Shared] = {}


def acquire(directory: Path, *, readonly: bool, map_size: int, durable: bool = True) -> Shared:
    """The process's environment for ``directory``, opened on first use.

    ``durable=False`` is for an index that can be rebuilt from its input (``recluster``'s):
    no fsync at commit and writes straight into the shared map (``writemap``), so a commit costs
    next to nothing however many pages the batch dirtied. A killed process still leaves the
    last commit intact (LMDB never writes over a page the committed tree uses, and the kernel
    keeps what the map wrote); only a crash of the whole machine may lose the file. Nor is it
    synced at close: the kernel writes the map back in its own time, and a temporary index is
    deleted before it would. The first opener in a process decides.

    The database handles are opened once, with the environment: opening one later needs a
    transaction, which would wait on this very process's open write batch. A read-only user
    may share a writable environment; a writer may not share a read-only one (``ValueError``:
    close the readers first).
    """
    if not readonly:
        directory.mkdir(parents=True, exist_ok=True)
    st = os.stat(directory)
    key = (st.st_dev, st.st_ino)
    shared = _OPEN.get(key)
    if shared is not None:
        if shared.readonly and not readonly:
            raise ValueError(
                f"{directory} is open read-only in this process; close it before writing"
            )
        shared.users += 1
        return shared
    data = directory / "data.mdb"
    size = data.stat().st_size if data.exists() else None
    if size is not None and size < _HEADER_BYTES:
        # LMDB would take an empty file for a new environment: a store made afresh in place
        # of the one whose index this was, and its pages then cut off as uncommitted
        raise StoreError(
            f"{data} is cut short: {size:,} bytes, less than LMDB's header; {_RESTORE}"
        )
    try:
        env = lmdb.open(
            str(directory),
            map_size=map_size,
            max_dbs=len(DATABASES),
            readonly=readonly,
            subdir=True,
            lock=True,
            sync=durable,
            metasync=durable,
            writemap=not durable and not readonly,
        )
    except _UNREADABLE as exc:
        raise StoreError(f"{data} is not an index LMDB can read ({exc}); {_RESTORE}") from None
    try:
        _check_length(env, data)
        if env.max_key_size() < WIDEST_KEY:
            raise RuntimeError(f"LMDB max_key_size {env.max_key_size()} < {WIDEST_KEY} bytes")
        if not readonly:
            env.reader_check()  # free reader slots left by killed processes
        dbs: dict[str, Database] = {}
        for name, flags in DATABASES.items():
            try:
                dbs[name] = env.open_db(
                    name.encode(),
                    create=not readonly,
                    dupsort=flags.get("dupsort", False),
                    dupfixed=flags.get("dupfixed", False),
                )
            except lmdb.NotFoundError:
                if not (readonly and name in OPTIONAL_DATABASES):
                    raise
    except BaseException:
        env.close()
        raise
    shared = _OPEN[key] = Shared(env, dbs, readonly, 1, durable)
    return shared


def _check_length(env: lmdb.Environment, data: Path) -> None:
    """Refuse a data file shorter than the pages its last commit uses (a copy or a restore
    that stopped half way): LMDB maps the file, and reading a page past its end would kill
    this process with SIGBUS, saying nothing. Only the header LMDB read at open is used."""
    needed = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    size = data.stat().st_size
    if size < needed:
        raise StoreError(
            f"{data} is cut short: {size:,} bytes, where its last commit uses {needed:,}; "
            f"{_RESTORE}"
        )


def release(shared: Shared) -> None:
    """Drop one user; the last one syncs (if writable and durable) and closes the environment."""
    shared.users -= 1
    if shared.users > 0:
        return
    for key, value in list(_OPEN.items()):
        if value is shared:
            del _OPEN[key]
    if shared.durable and not shared.readonly:
        shared.env.sync(True)
    shared.env.close()


def begin(env: lmdb.Environment, *, write: bool = False) -> tuple[lmdb.Transaction, int]:
    """``env.begin``, adopting a map another process grew; also says how many times it did.

    ``MapResizedError`` means the file outgrew this process's map; ``set_mapsize(0)`` adopts
    the size the other process committed, and the transaction is begun again.
    """
    for adopted in range(_MAX_ATTEMPTS):
        try:
            return env.begin(write=write), adopted
        except lmdb.MapResizedError:
            env.set_mapsize(0)
    raise RuntimeError("the LMDB map kept being resized while beginning a transaction")


# One write, as data, so that a batch can be replayed after the map grows:
# ("put" | "delete", database, key, value) or ("put_many", database, ((key, value), ...), b"")
_Op = tuple[str, str, bytes | tuple[tuple[bytes, bytes], ...], bytes]


class Transactions:
    """Reads and batched writes on one environment.

    Outside a batch every read gets its own short read transaction (long-lived readers make
    LMDB's file grow without bound). Inside a batch reads go through the batch's write
    transaction, so a batch sees its own uncommitted writes.
    """

    def __init__(self, env: lmdb.Environment, dbs: dict[str, Database]) -> None:
        self.env = env
        self.dbs = dbs
        #: how many times the map was doubled
        self.growths = 0
        #: how many times a map grown by another process was adopted
        self.resizes_adopted = 0
        #: how many batches were aborted (readers caching batch state forget it when it moves)
        self.aborts = 0
        self._txn: lmdb.Transaction | None = None
        self._ops: list[_Op] = []
        #: the read transaction of an open snapshot
        self._pinned: lmdb.Transaction | None = None

    @property
    def in_batch(self) -> bool:
        return self._txn is not None

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        current = self._txn or self._pinned
        if current is not None:
            yield current
            return
        txn = self._begin(write=False)
        try:
            yield txn
        finally:
            txn.abort()

    def get(self, db: str, key: bytes) -> bytes | None:
        current = self._txn or self._pinned
        if current is not None:  # the common case in a writer's batch, without a context
            value = current.get(key, db=self.dbs[db])
        else:
            with self.read() as txn:
                value = txn.get(key, db=self.dbs[db])
        return None if value is None else bytes(value)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read until the block ends goes through one read transaction: one committed
        state, however many reads a check of the whole store takes while a writer commits.

        For short-lived readers only (``neardup verify``): a long reader keeps LMDB from
        reusing pages, so the file grows while it lasts. Inside a batch, or inside another
        snapshot, reads already see one state, and this changes nothing.
        """
        if self._txn is not None or self._pinned is not None:
            yield
            return
        self._pinned = self._begin(write=False)
        try:
            yield
        finally:
            self._pinned.abort()
            self._pinned = None

    # --- the write batch --------------------------------------------------------------------

    def begin_batch(self) -> None:
        if self._txn is not None:
            raise RuntimeError("a batch is already open; batches do not nest")
        if self._pinned is not None:
            raise RuntimeError("a snapshot is open: a batch cannot begin inside it")
        self._ops = []
        self._txn = self._begin(write=True)

    def put(self, db: str, key: bytes, value: bytes) -> None:
        """Write ``key → value`` (for a dupsort database: add the pair)."""
        txn = self._require_batch()  # the most frequent write, so without _write's dispatch
        self._ops.append(("put", db, key, value))
        try:
            txn.put(key, value, db=self.dbs[db])
        except lmdb.MapFullError:
            self._grow_and_replay()

    def put_many(self, db: str, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Write every ``(key, value)`` of ``items`` (dupsort: add each pair) in one call.

        One cursor ``putmulti`` instead of a Python call per pair, and one operation in the
        batch's replay log.
        """
        pairs = tuple(items)
        if pairs:
            self._write(("put_many", db, pairs, b""))

    def delete(self, db: str, key: bytes, value: bytes = b"") -> None:
        """Delete ``key`` (for a dupsort database with ``value``: only that pair)."""
        self._write(("delete", db, key, value))

    def commit(self) -> None:
        """Commit the batch, growing the map and replaying it as often as needed."""
        while True:
            txn = self._require_batch()
            try:
                txn.commit()
                break
            except lmdb.MapFullError:
                self._txn = None  # a failed commit frees the transaction
                self._grow_and_replay()
        self._txn = None
        self._ops = []

    def abort(self) -> None:
        if self._txn is not None:
            self._txn.abort()
        self.aborts += 1
        self._txn = None
        self._ops = []

    def _begin(self, *, write: bool) -> lmdb.Transaction:
        txn, adopted = begin(self.env, write=write)
        self.resizes_adopted += adopted
        return txn

    def _require_batch(self) -> lmdb.Transaction:
        if self._txn is None:
            raise RuntimeError("writing to the store needs a batch: `with store.batch(): ...`")
        return self._txn

    def _write(self, op: _Op) -> None:
        txn = self._require_batch()
        self._ops.append(op)
        try:
            self._apply(txn, op)
        except lmdb.MapFullError:
            self._grow_and_replay()

    def _apply(self, txn: lmdb.Transaction, op: _Op) -> None:
        kind, db, key, value = op
        if kind == "put":
            assert isinstance(key, bytes)
            txn.put(key, value, db=self.dbs[db])
        elif kind == "delete":
            assert isinstance(key, bytes)
            txn.delete(key, value, db=self.dbs[db])
        else:
            assert isinstance(key, tuple)
            txn.cursor(db=self.dbs[db]).putmulti(key, dupdata=True)

    def _grow_and_replay(self) -> None:
        """Abort, double the map, and redo every write of the batch in a new transaction."""
        while True:
            if self._txn is not None:
                self._txn.abort()
                self._txn = None
            self.env.set_mapsize(self.env.info()["map_size"] * 2)
            self.growths += 1
            txn = self._begin(write=True)
            self._txn = txn
            try:
                for op in self._ops:
                    self._apply(txn, op)
                return
            except lmdb.MapFullError:
                continue

    # --- sizes ------------------------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        """The map size and the bytes in use (``(last_pgno + 1) · page size``)."""
        info = self.env.info()
        psize = self.env.stat()["psize"]
        return {"map_size": info["map_size"], "used_bytes": (info["last_pgno"] + 1) * psize}
