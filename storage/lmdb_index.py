"""The greedy-clustering index (:class:`dedup.index.ClusterIndex`) kept in LMDB.

Same answers as :class:`dedup.memory_index.MemoryIndex` for the same calls (a test replays one
sequence on both), but on disk, shared by crawl restarts, and bigger than memory. Databases
(see :data:`storage.lmdb_env.DATABASES`):

* ``fp_clusters`` (dupsort, dupfixed): fingerprint → the clusters whose representative holds
  it — all of each representative's fingerprints, or the part that ``index_need`` (in
  ``meta``) says suffices (:func:`dedup.cluster.indexed_count`). Duplicates sort by their
  big-endian bytes, i.e. by cluster id, so the ``cap`` lowest clusters of a boilerplate
  fingerprint are the first ``cap`` duplicates of its key;
* ``clusters``: cluster id → first doc, size, identical flag, representative sketch;
* ``members`` (dupsort): cluster id → its documents; ``doc_clusters``: the reverse;
* ``member_fps``: cluster id ‖ n → the n-th recorded member sketch's values ("popular" rule);
* ``hashes``: content hash → first doc id ‖ its cluster id;
* ``odd_members``: cluster id → how many members are not identical to the first (kept so that
  a member leaving can make its cluster identical again; absent for a cluster made before it
  was kept, which is counted from its members the first time one leaves).

Every write goes through the store's current batch (:class:`storage.lmdb_env.Transactions`), so
the caller decides when to commit, and reads inside a batch see the batch's own writes.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from itertools import islice, repeat
from typing import Any

import numpy as np

from dedup.cluster import bound_denominator, indexed_count
from dedup.index import Candidates, ClusterInfo
from dedup.sketches import Sketch, sketch_from_bytes
from storage.lmdb_env import Transactions, pack_id, unpack_id
from storage.presence import PresenceFilter

_CLUSTER = struct.Struct(">QQB")  # first doc, size, flags; the sketch bytes follow
_IDENTICAL, _ORPHANED = 1, 2  # the flags: every member identical; no representative
_EXACT = struct.Struct(">QQ")  # doc id, cluster id
_NEXT_CLUSTER = b"next_cluster_id"
_INDEX_NEED = b"index_need"  # see index_need
_NEED = struct.Struct(">d")
_MAX_ID = 2**63 - 1
_CHUNK = 1024
_CACHE_KEYS = 1 << 16  # capped keys cached at most (cap ids each), then started afresh
_CACHE_SKETCHES = 1 << 12  # representatives cached at most (a few MB), then started afresh


class LmdbIndex:
    """The cluster index of one store; get it as ``store.index``."""

    def __init__(self, txns: Transactions) -> None:
        self._t = txns
        #: packed fingerprint → the ids read for it, for keys over the cap (candidates)
        self._capped: dict[bytes, np.ndarray] = {}
        self._cache_cap = 0
        self._cache_aborts = txns.aborts
        #: cluster id → its representative, parsed (see representative)
        self._sketches: dict[int, Sketch] = {}
        #: the keys of fp_clusters, as a Bloom filter; built by the writer's first lookup
        self._presence: PresenceFilter | None = None

    # --- reading ----------------------------------------------------------------------------

    def candidates(self, fingerprints: np.ndarray, cap: int) -> Candidates:
        """Clusters whose representative holds any of the (distinct) ``fingerprints``.

        One ``getmulti`` call reads the postings of every key at once (LMDB's
        ``MDB_GET_MULTIPLE``: whole pages of fixed-width duplicates per step, in C), and numpy
        cuts each key's run of ids at ``cap`` and counts the ids of all keys: no Python work
        per key or per posting, which is what a lookup of a hundred keys used to cost.

        A capped key's ids are the ``cap`` lowest of its postings; new clusters get higher
        ids, so those stay the same while postings are only added. They are cached (a
        boilerplate fingerprint is met on most pages, and its full run is long) for the
        writer's batches, so each boilerplate key is read in full once, and forgotten when a
        representative changes the key's postings or a batch aborts.
        """
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"cap must be a positive integer; got {cap!r}")
        distinct = _ascending_distinct(np.asarray(fingerprints, dtype=np.uint64))
        presence = self._presence_filter()
        if presence is not None:  # keys certainly in no representative need no lookup
            distinct = distinct[presence.might_hold(distinct)]
        keys = _packed(distinct)
        cache = self._capped_cache(cap)
        parts: list[np.ndarray] = []
        capped = 0
        if cache:
            probe = []
            for key in keys:
                cached = cache.get(key)
                if cached is None:
                    probe.append(key)
                else:
                    parts.append(cached)
            capped = len(parts)
            keys = probe
        if keys:
            with self._t.read() as txn:
                cursor = txn.cursor(db=self._t.dbs["fp_clusters"])
                found = cursor.getmulti(keys, dupdata=True, dupfixed_bytes=8, keyfixed=True)
                # (key, cluster id) rows, grouped by key; copied out of the transaction
                rows = np.frombuffer(found, dtype=">u8").reshape(-1, 2).astype(np.uint64)
            ids, over = _cut_at_cap(rows, cap)
            parts.append(ids)
            capped += len(over)
            if cache is not None:
                for key, kept in over:
                    cache[key] = kept
        data = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else None
        if data is None or not data.size:
            return Candidates(shared={}, capped=capped)
        # a dozen ids is typical: counted as Python ints, not sorted by numpy
        return Candidates(shared=dict(Counter(data.tolist())), capped=capped)

    def _capped_cache(self, cap: int) -> dict[bytes, np.ndarray] | None:
        """The capped keys' ids for this ``cap``, or None when no cache may be used."""
        if not self._caches_valid():
            return None
        if self._cache_cap != cap or len(self._capped) >= _CACHE_KEYS:
            self._capped.clear()
            self._cache_cap = cap
        return self._capped

    def _caches_valid(self) -> bool:
        """Whether the writer's caches (capped keys, parsed representatives) may be used.

        Only the writer's batch caches: its process alone changes the index, so it knows when
        to forget an entry; a plain reader may see another process's changes at any time. An
        aborted batch takes its clusters and postings with it, so the caches start afresh.
        """
        if not self._t.in_batch:
            return False
        if self._cache_aborts != self._t.aborts:
            self._capped.clear()
            self._sketches.clear()
            self._cache_aborts = self._t.aborts
        return True

    def _presence_filter(self) -> PresenceFilter | None:
        """The Bloom filter of indexed fingerprints, or None when it may not be used.

        Like the capped cache, only the writer's batches use it: the writer holds the store's
        lock, so after one scan of the keys at its first lookup every later key comes through
        its own :meth:`new_cluster` and :meth:`set_representative`, which add it. Keys of an
        aborted batch stay in the filter, which only costs a lookup; none is ever missing.
        """
        if not self._t.in_batch:
            return None
        if self._presence is None:
            presence = PresenceFilter()
            with self._t.read() as txn:
                cursor = txn.cursor(db=self._t.dbs["fp_clusters"])
                keys = cursor.iternext_nodup(keys=True, values=False)
                while chunk := b"".join(islice(keys, 1 << 16)):
                    presence.add(np.frombuffer(chunk, dtype=">u8"))
            self._presence = presence
        return self._presence

    def representative(self, cluster_id: int) -> Sketch:
        """The cluster's representative; the writer keeps the last few thousand parsed, since
        the clusters of a site's boilerplate are estimated against on page after page."""
        if not self._caches_valid():
            return self._read_cluster_raw(cluster_id)[1]
        sketch = self._sketches.get(cluster_id)
        if sketch is None:
            sketch = self._read_cluster_raw(cluster_id)[1]
            self._remember(cluster_id, sketch)
        return sketch

    def _remember(self, cluster_id: int, sketch: Sketch) -> None:
        if len(self._sketches) >= _CACHE_SKETCHES:
            self._sketches.clear()
        self._sketches[cluster_id] = sketch

    def cluster(self, cluster_id: int) -> ClusterInfo:
        return _parse_info(cluster_id, self._cluster_value(cluster_id))

    def member_fingerprints(self, cluster_id: int) -> np.ndarray:
        self._cluster_value(cluster_id)
        prefix = pack_id(cluster_id)
        parts: list[np.ndarray] = []
        with self._t.read() as txn:
            cursor = txn.cursor(db=self._t.dbs["member_fps"])
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if key[:8] != prefix:
                        break
                    parts.append(np.frombuffer(value, dtype=">u8").astype(np.uint64))
        if not parts:
            return np.empty(0, dtype=np.uint64)
        return np.concatenate(parts)

    def find_exact(self, content_hash: int) -> tuple[int, int] | None:
        value = self._t.get("hashes", pack_id(content_hash))
        if value is None:
            return None
        doc_id, cluster_id = _EXACT.unpack(value)
        return int(doc_id), int(cluster_id)

    def cluster_of(self, doc_id: int) -> int | None:
        value = self._t.get("doc_clusters", pack_id(doc_id))
        return None if value is None else unpack_id(value)

    # --- writing ----------------------------------------------------------------------------

    def index_need(self) -> float | None:
        value = self._t.get("meta", _INDEX_NEED)
        if value is None:
            # a store from before the need was recorded indexes all of every representative
            return 0.0 if len(self) else None
        return float(_NEED.unpack(value)[0])

    def set_index_need(self, need: float) -> None:
        if not 0.0 <= need <= 1.0:
            raise ValueError(f"index need must be in [0, 1]; got {need!r}")
        self._t.put("meta", _INDEX_NEED, _NEED.pack(need))

    def new_cluster(self, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None) -> int:
        """Start a cluster with ``doc_id`` as first member; ids are 0, 1, 2, … in order."""
        _check_id("doc_id", doc_id)
        self._check_new_doc(doc_id)
        counter = self._t.get("meta", _NEXT_CLUSTER)
        cluster_id = 0 if counter is None else unpack_id(counter)
        self._t.put("meta", _NEXT_CLUSTER, pack_id(cluster_id + 1))
        self._start(cluster_id, doc_id, sketch, indexed)
        return cluster_id

    def _start(
        self, cluster_id: int, doc_id: int, sketch: Sketch, indexed: np.ndarray | None
    ) -> None:
        """Write a cluster of one document, ``doc_id``, represented by ``sketch``."""
        key = pack_id(cluster_id)
        self._t.put("clusters", key, _CLUSTER.pack(doc_id, 1, _IDENTICAL) + sketch.to_bytes())
        self._t.put("members", key, pack_id(doc_id))
        self._t.put("doc_clusters", pack_id(doc_id), key)
        distinct = sketch.distinct() if indexed is None else _ascending_distinct(indexed)
        self._t.put_many("fp_clusters", zip(_packed(distinct), repeat(key)))
        if self._presence is not None:
            self._presence.add(distinct)
        if self._caches_valid():  # it is estimated against as soon as the next page
            self._remember(cluster_id, sketch)

    def add_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        _check_id("doc_id", doc_id)
        value = self._cluster_value(cluster_id)
        info, raw = _parse_info(cluster_id, value), value[_CLUSTER.size :]
        if info.orphaned:
            raise ValueError(f"cluster {cluster_id} is orphaned: only take_over adds to it")
        self._check_new_doc(doc_id)
        key = pack_id(cluster_id)
        odd = self._odd(info) + (not identical)
        self._put_info(key, info.first_doc, info.size + 1, odd, raw)
        self._t.put("members", key, pack_id(doc_id))
        self._t.put("doc_clusters", pack_id(doc_id), key)

    def remove_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        value = self._cluster_value(cluster_id)
        info, raw = _parse_info(cluster_id, value), value[_CLUSTER.size :]
        if self.cluster_of(doc_id) != cluster_id:
            raise ValueError(f"document {doc_id} is not in cluster {cluster_id}")
        if doc_id == info.first_doc:
            raise ValueError(f"document {doc_id} represents cluster {cluster_id}: "
                             "remove_representative takes it out")  # fmt: skip
        key = pack_id(cluster_id)
        odd = self._odd(info) - (not identical)
        self._t.delete("members", key, pack_id(doc_id))
        self._t.delete("doc_clusters", pack_id(doc_id))
        self._put_info(key, info.first_doc, info.size - 1, max(odd, 0), raw)

    def remove_representative(self, cluster_id: int) -> list[int]:
        info, rep, raw = self._read_cluster_raw(cluster_id)
        if info.orphaned:
            raise ValueError(f"cluster {cluster_id} has no representative")
        key = pack_id(cluster_id)
        for fp in rep.distinct().tolist():  # the indexed part is among them; others are absent
            packed = pack_id(fp)
            self._capped.pop(packed, None)
            self._t.delete("fp_clusters", packed, key)
        self._sketches.pop(cluster_id, None)
        members = self.members(cluster_id)
        for doc_id in members:
            self._t.delete("members", key, pack_id(doc_id))
            self._t.delete("doc_clusters", pack_id(doc_id))
        self._t.put("clusters", key, _CLUSTER.pack(info.first_doc, 0, _IDENTICAL | _ORPHANED) + raw)
        self._forget_odd(key)
        return [doc_id for doc_id in members if doc_id != info.first_doc]

    def take_over(
        self, cluster_id: int, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None
    ) -> None:
        _check_id("doc_id", doc_id)
        if not self.cluster(cluster_id).orphaned:
            raise ValueError(f"cluster {cluster_id} has a representative; only an orphaned "
                             "cluster can be taken over")  # fmt: skip
        self._check_new_doc(doc_id)
        self._start(cluster_id, doc_id, sketch, indexed)

    def discard_orphan(self, cluster_id: int) -> None:
        if not self.cluster(cluster_id).orphaned:
            raise ValueError(f"cluster {cluster_id} has a representative")
        self._t.delete("clusters", pack_id(cluster_id))

    def remove_exact(self, content_hash: int, doc_id: int) -> None:
        found = self.find_exact(content_hash)
        if found is not None and found[0] == doc_id:
            self._t.delete("hashes", pack_id(content_hash))

    def _odd(self, info: ClusterInfo) -> int:
        """How many members of the cluster are not identical to its first."""
        if info.identical:
            return 0
        value = self._t.get("odd_members", pack_id(info.cluster_id))
        if value is not None:
            return unpack_id(value)
        return self._count_odd(info)

    def _count_odd(self, info: ClusterInfo) -> int:
        """The members whose content hash is not the first member's, counted from their
        documents (a cluster made before the count was kept)."""
        from storage.records import DocumentRecord

        def content_hash(doc_id: int) -> int | None:
            value = self._t.get("docs", pack_id(doc_id))
            return None if value is None else DocumentRecord.from_bytes(value).content_hash

        first = content_hash(info.first_doc)
        return sum(content_hash(doc) != first for doc in self.members(info.cluster_id))

    def _put_info(self, key: bytes, first_doc: int, size: int, odd: int, raw: bytes) -> None:
        flags = _IDENTICAL if odd == 0 else 0
        self._t.put("clusters", key, _CLUSTER.pack(first_doc, size, flags) + raw)
        if odd:
            self._t.put("odd_members", key, pack_id(odd))
        else:
            self._forget_odd(key)

    def _forget_odd(self, key: bytes) -> None:
        if self._t.get("odd_members", key) is not None:
            self._t.delete("odd_members", key)

    def set_representative(self, cluster_id: int, sketch: Sketch) -> None:
        """Replace the representative; only the fingerprints that changed are re-indexed."""
        info, old, _ = self._read_cluster_raw(cluster_id)
        key = pack_id(cluster_id)
        before, after = set(old.distinct().tolist()), set(sketch.distinct().tolist())
        for fp in before ^ after:  # an old id added or removed: the lowest ids may change
            self._capped.pop(pack_id(fp), None)
        self._sketches.pop(cluster_id, None)
        for fp in sorted(before - after):
            self._t.delete("fp_clusters", pack_id(fp), key)
        added = sorted(after - before)
        self._t.put_many("fp_clusters", ((pack_id(fp), key) for fp in added))
        if self._presence is not None:
            self._presence.add(np.array(added, dtype=np.uint64))
        head = _CLUSTER.pack(info.first_doc, info.size, _IDENTICAL if info.identical else 0)
        self._t.put("clusters", key, head + sketch.to_bytes())

    def record_member_sketch(self, cluster_id: int, sketch: Sketch) -> None:
        self._cluster_value(cluster_id)
        prefix = pack_id(cluster_id)
        with self._t.read() as txn:
            cursor = txn.cursor(db=self._t.dbs["member_fps"])
            # the last key of this cluster is just before the first key of the next one
            if cursor.set_range(pack_id(cluster_id + 1)):
                found = cursor.prev()
            else:
                found = cursor.last()
            last = bytes(cursor.key()) if found else b""
        seq = unpack_id(last[8:]) + 1 if last[:8] == prefix else 0
        values = np.asarray(sketch.values, dtype=np.uint64).astype(">u8").tobytes()
        self._t.put("member_fps", prefix + pack_id(seq), values)

    def add_exact(self, content_hash: int, doc_id: int, cluster_id: int) -> None:
        """Remember the first document with this content hash; later calls keep the first."""
        self._cluster_value(cluster_id)
        key = pack_id(content_hash)
        if self._t.get("hashes", key) is None:
            self._t.put("hashes", key, _EXACT.pack(doc_id, cluster_id))

    # --- beyond the protocol: inspection ----------------------------------------------------

    def __len__(self) -> int:
        """The number of clusters."""
        with self._t.read() as txn:
            return int(txn.stat(self._t.dbs["clusters"])["entries"])

    def clusters(self) -> Iterator[ClusterInfo]:
        """Every cluster in id order, read in short transactions of a thousand or so."""
        start = 0
        while True:
            chunk: list[ClusterInfo] = []
            with self._t.read() as txn:
                cursor = txn.cursor(db=self._t.dbs["clusters"])
                if cursor.set_range(pack_id(start)):
                    for key, value in cursor:
                        chunk.append(_parse_info(unpack_id(key), value))
                        if len(chunk) >= _CHUNK:
                            break
            yield from chunk
            if len(chunk) < _CHUNK:
                return
            start = chunk[-1].cluster_id + 1

    def members(self, cluster_id: int) -> list[int]:
        """The documents of a cluster in id order (the first member included)."""
        with self._t.read() as txn:
            cursor = txn.cursor(db=self._t.dbs["members"])
            if not cursor.set_key(pack_id(cluster_id)):
                return []
            return [unpack_id(v) for v in cursor.iternext_dup()]

    def has_cluster(self, cluster_id: int) -> bool:
        with self._t.read() as txn:
            return txn.get(pack_id(cluster_id), db=self._t.dbs["clusters"]) is not None

    def postings(self, fingerprint: int) -> list[int]:
        """The clusters whose representative holds ``fingerprint``, sorted."""
        with self._t.read() as txn:
            cursor = txn.cursor(db=self._t.dbs["fp_clusters"])
            if not cursor.set_key(pack_id(int(fingerprint))):
                return []
            return [unpack_id(v) for v in cursor.iternext_dup()]

    # --- checking the layout (neardup verify) -----------------------------------------------

    def check(self, has_document: Callable[[int], bool]) -> Iterator[str]:
        """Every way the index's databases disagree with each other, or with the documents
        (``has_document``), one line each; nothing when they agree.

        The rules are the ones the writing methods above keep:

        * a representative's fingerprints are in ``fp_clusters``: all of them, or as many as
          the index need asks (:func:`dedup.cluster.indexed_count`); every ``fp_clusters``
          entry names a cluster whose representative holds the fingerprint;
        * a cluster's first document and members are documents, each member mapped back to
          it by ``doc_clusters``, as many members as its size;
        * a content hash names a document and a cluster;
        * the cluster counter is past every cluster.

        Everything is read in one read transaction (the caller's, inside
        :meth:`storage.lmdb_env.Transactions.snapshot`), so the checks see one state.
        """
        need = self.index_need() or 0.0
        with self._t.read() as txn:
            sizes, last = yield from self._check_representatives(txn, need, has_document)
            yield from self._check_members(txn, sizes, has_document)
            yield from self._check_exact(txn, has_document)
            counter = txn.get(_NEXT_CLUSTER, db=self._t.dbs["meta"])
            if last >= (0 if counter is None else unpack_id(counter)):
                yield f"next cluster id is not past cluster {last}"

    def _check_representatives(
        self, txn: Any, need: float, has_document: Callable[[int], bool]
    ) -> Generator[str, None, tuple[dict[int, int], int]]:
        """Each cluster's record readable, its representative indexed, its first document
        there; returns every cluster's size and the last cluster id."""
        dbs = self._t.dbs
        postings = txn.cursor(db=dbs["fp_clusters"])
        sizes: dict[int, int] = {}
        last = -1
        indexed_pairs = 0
        all_found = True
        for key, value in txn.cursor(db=dbs["clusters"]):
            cluster_id = last = unpack_id(key)
            try:
                info, rep = parse_cluster(cluster_id, value)
            except ValueError as exc:
                yield f"cluster {cluster_id}: unreadable record ({exc})"
                all_found = False
                continue
            sizes[cluster_id] = info.size
            if info.orphaned:  # a recrawl's batch takes a shell over or removes it
                yield (f"cluster {cluster_id} is orphaned: its representative left and no "
                       "document took it over")  # fmt: skip
                continue
            held = np.unique(rep.values).tolist()
            missing = [fp for fp in held if not postings.set_key_dup(pack_id(fp), key)]
            indexed_pairs += len(held) - len(missing)
            # all of the representative, or the part its index need says (dedup.cluster)
            wanted = len(held) if bound_denominator(rep) is None else indexed_count(len(held), need)
            if len(held) - len(missing) < wanted:
                all_found = False
                if wanted == len(held):
                    for fp in missing:
                        yield (
                            f"cluster {cluster_id}: representative fingerprint {fp:#x} is not "
                            "indexed"
                        )
                else:
                    yield (
                        f"cluster {cluster_id}: {len(held) - len(missing)} of its "
                        f"representative's {len(held)} fingerprints are indexed, fewer than "
                        f"the {wanted} it needs"
                    )
            if not has_document(info.first_doc):
                yield f"cluster {cluster_id}: first document {info.first_doc} is missing"
        # Each pair found is a distinct fp_clusters entry; if they are all there and as many
        # as the entries, there is no other entry. Otherwise look at every entry.
        if not all_found or indexed_pairs != txn.stat(dbs["fp_clusters"])["entries"]:
            yield from self._check_every_posting(txn)
        return sizes, last

    def _check_every_posting(self, txn: Any) -> Iterator[str]:
        dbs = self._t.dbs
        cache: dict[int, set[int] | None] = {}
        for key, value in txn.cursor(db=dbs["fp_clusters"]):
            fp, cluster_id = unpack_id(key), unpack_id(value)
            if cluster_id not in cache:
                if len(cache) > 100_000:
                    cache.clear()
                raw = txn.get(value, db=dbs["clusters"])
                try:
                    cache[cluster_id] = (
                        None
                        if raw is None
                        else set(parse_cluster(cluster_id, raw)[1].values.tolist())
                    )
                except ValueError:
                    cache[cluster_id] = set()
            held = cache[cluster_id]
            if held is None:
                yield f"fingerprint {fp:#x} points at missing cluster {cluster_id}"
            elif fp not in held:
                yield (
                    f"fingerprint {fp:#x} points at cluster {cluster_id}, whose representative "
                    "does not hold it"
                )

    def _check_members(
        self, txn: Any, sizes: dict[int, int], has_document: Callable[[int], bool]
    ) -> Iterator[str]:
        dbs = self._t.dbs
        members: dict[int, int] = {}
        for key, value in txn.cursor(db=dbs["members"]):
            cluster_id, doc_id = unpack_id(key), unpack_id(value)
            members[cluster_id] = members.get(cluster_id, 0) + 1
            if txn.get(key, db=dbs["clusters"]) is None:
                yield f"document {doc_id} is a member of missing cluster {cluster_id}"
            if not has_document(doc_id):
                yield f"cluster {cluster_id}: member document {doc_id} is missing"
            back = txn.get(value, db=dbs["doc_clusters"])
            if back is None or unpack_id(back) != cluster_id:
                yield f"cluster {cluster_id}: member {doc_id} is not mapped back to it"
        for cluster_id, size in sizes.items():
            if members.get(cluster_id, 0) != size:
                yield f"cluster {cluster_id}: size {size} but {members.get(cluster_id, 0)} members"
        mapped = int(txn.stat(dbs["doc_clusters"])["entries"])
        if mapped != sum(members.values()):
            yield (
                f"{mapped} documents are mapped to clusters, "
                f"but clusters have {sum(members.values())} members"
            )

    def _check_exact(self, txn: Any, has_document: Callable[[int], bool]) -> Iterator[str]:
        dbs = self._t.dbs
        for key, value in txn.cursor(db=dbs["hashes"]):
            doc_id, cluster_id = _EXACT.unpack_from(value)
            if not has_document(doc_id):
                yield f"content hash {unpack_id(key):#x}: document {doc_id} is missing"
            if txn.get(pack_id(cluster_id), db=dbs["clusters"]) is None:
                yield f"content hash {unpack_id(key):#x}: cluster {cluster_id} is missing"

    # --- helpers ----------------------------------------------------------------------------

    def _cluster_value(self, cluster_id: int) -> bytes:
        value = None
        if 0 <= cluster_id <= _MAX_ID:
            value = self._t.get("clusters", pack_id(cluster_id))
        if value is None:
            raise KeyError(f"no cluster {cluster_id}")
        return value

    def _read_cluster_raw(self, cluster_id: int) -> tuple[ClusterInfo, Sketch, bytes]:
        value = self._cluster_value(cluster_id)
        raw = value[_CLUSTER.size :]
        return _parse_info(cluster_id, value), sketch_from_bytes(raw), raw

    def _check_new_doc(self, doc_id: int) -> None:
        cluster_id = self.cluster_of(doc_id)
        if cluster_id is not None:
            raise ValueError(f"document {doc_id} is already in cluster {cluster_id}")


def parse_cluster(cluster_id: int, value: bytes | memoryview) -> tuple[ClusterInfo, Sketch]:
    """A ``clusters`` value as its info and representative; ValueError if it is no record."""
    if len(value) < _CLUSTER.size:
        raise ValueError(f"a cluster record of {len(value)} bytes is shorter than its header")
    return _parse_info(cluster_id, value), sketch_from_bytes(bytes(value)[_CLUSTER.size :])


def _parse_info(cluster_id: int, value: bytes | memoryview) -> ClusterInfo:
    first, size, flags = _CLUSTER.unpack_from(value)
    return ClusterInfo(
        cluster_id, int(first), int(size), bool(flags & _IDENTICAL), bool(flags & _ORPHANED)
    )


def _ascending_distinct(values: np.ndarray) -> np.ndarray:
    """``values`` sorted without repeats; a check when they already are (sketch values are)."""
    values = np.asarray(values, dtype=np.uint64)
    if values.size < 2 or bool((values[1:] > values[:-1]).all()):
        return values
    return np.unique(values)


def _packed(values: np.ndarray) -> list[bytes]:
    """uint64 values as 8-byte big-endian keys (``V8`` keeps trailing NULs, ``S8`` would not).

    >>> _packed(np.array([1, 256], dtype=np.uint64))
    [b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01', b'\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00']
    """
    return np.asarray(values, dtype=">u8").view("V8").tolist()  # type: ignore[no-any-return]


def _cut_at_cap(rows: np.ndarray, cap: int) -> tuple[np.ndarray, list[tuple[bytes, np.ndarray]]]:
    """The cluster ids of ``(key, id)`` rows (grouped by key, ids ascending within a key) with
    each key's run cut to its first ``cap``; and, for each key that had more, its packed key and
    the ids kept.

    >>> rows = np.array([[5, 1], [5, 2], [5, 3], [9, 4]], dtype=np.uint64)
    >>> ids, over = _cut_at_cap(rows, 2)
    >>> ids.tolist(), [(int.from_bytes(k, "big"), kept.tolist()) for k, kept in over]
    ([1, 2, 4], [(5, [1, 2])])
    """
    keys, ids = rows[:, 0], rows[:, 1]
    if ids.size <= cap:
        return ids, []
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    lengths = np.diff(np.append(starts, ids.size))
    long_runs = np.flatnonzero(lengths > cap)
    if not long_runs.size:
        return ids, []
    over = [(pack_id(int(keys[starts[r]])), ids[starts[r] : starts[r] + cap].copy())
            for r in long_runs.tolist()]
    rank = np.arange(ids.size) - np.repeat(starts, lengths)
    return ids[rank < cap], over


def _check_id(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    if not 0 <= value <= _MAX_ID:
        raise ValueError(f"{name} must be in [0, 2**63); got {value}")
