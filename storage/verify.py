"""``neardup verify``: check the store's invariant, repair what a crash can leave behind.

The invariant (DESIGN.md): every fingerprint in the index belongs to a page in the page store,
and every stored page is in the index. Concretely, checked here:

* every ``fp_clusters`` entry names an existing cluster whose representative holds the
  fingerprint, and every representative has as many of its fingerprints indexed as the
  store's index need asks (all of them, or :func:`dedup.cluster.indexed_count`);
* every cluster's members exist as documents (and point back at the cluster), and its size is
  its member count; every content hash points at an existing document and cluster;
* every document with a page location has a readable WARC response record there, of the same
  length and URL; every response record in ``pages/`` is referenced by exactly one document;
* the id counters are past every id in use.

The only repair is the one a crash makes necessary: a WARC tail written after the last commit
(see :mod:`storage.store`) is cut off, by opening the store for writing. When another process is
writing, the store is opened read-only, the committed state is checked and nothing is repaired.

The LMDB side is read in one read transaction so that every check sees one snapshot, consistent
with the committed WARC position it holds; verify is short-lived, so this long reader is fine.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lmdb
import numpy as np

from dedup.cluster import bound_denominator, indexed_count
from storage.errors import StoreBusyError
from storage.lmdb_env import pack_id, unpack_id
from storage.lmdb_index import parse_cluster
from storage.records import DocumentRecord, warc_name
from storage.store import NEXT_DOC_KEY, WARC_KEY, Store, position_from_bytes

_NEXT_CLUSTER = b"next_cluster_id"
#: problems listed one by one; beyond this they are only counted
MAX_LISTED = 50


@dataclass
class VerifyReport:
    store: str
    documents: int = 0
    #: documents whose page is in the page store
    pages: int = 0
    clusters: int = 0
    fingerprints: int = 0
    exact_hashes: int = 0
    warc_files: int = 0
    warc_records: int = 0
    repaired: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def problem(self, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_LISTED:
            self.problems.append(message)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}

    def render(self) -> str:
        state = "consistent" if self.ok else f"DAMAGED ({self.problem_count} problems)"
        lines = [
            f"store {self.store}: {state}",
            f"  documents     {self.documents:>10}  ({self.pages} with a stored page)",
            f"  clusters      {self.clusters:>10}",
            f"  fingerprints  {self.fingerprints:>10}  (fingerprint -> cluster entries)",
            f"  exact hashes  {self.exact_hashes:>10}",
            f"  WARC files    {self.warc_files:>10}  ({self.warc_records} page records)",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  repaired: {r}" for r in self.repaired] or ["  repaired: nothing to repair"]
        lines += [f"  problem: {p}" for p in self.problems]
        if self.problem_count > len(self.problems):
            lines.append(f"  ... and {self.problem_count - len(self.problems)} more problems")
        return "\n".join(lines)


def verify_store(path: str | os.PathLike[str], *, repair: bool = True) -> VerifyReport:
    """Check the store at ``path`` (repairing an uncommitted WARC tail unless ``repair`` is off).

    Raises :class:`~storage.errors.StoreNotFoundError` when there is no store there.
    """
    report = VerifyReport(store=os.fspath(path))
    store: Store | None = None
    # what pages past the last commit are, when they are left in place
    tail = "left by an interrupted write; verify without --no-repair cuts it off"
    if repair:
        try:
            store = Store.open(path, readonly=False) if _exists(path) else None
        except StoreBusyError:
            report.notes.append(
                "another process is writing: checked the committed state only, repaired nothing"
            )
            tail = "being written"
    if store is None:
        store = Store.open(path, readonly=True)
    with store:
        report.repaired.extend(store.repairs)
        try:
            _check(store, report, tail)
        except lmdb.Error as exc:
            report.problem(f"the LMDB index cannot be read ({type(exc).__name__}: {exc})")
    return report


def _exists(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / "index" / "data.mdb").is_file()


def _check(store: Store, report: VerifyReport, tail: str) -> None:
    txns = store._txns
    dbs = txns.dbs
    need = store.index.index_need() or 0.0
    with txns.read() as txn:
        stat = {name: int(txn.stat(dbs[name])["entries"]) for name in dbs}
        report.documents = stat["docs"]
        report.clusters = stat["clusters"]
        report.fingerprints = stat["fp_clusters"]
        report.exact_hashes = stat["hashes"]

        def exists(db: str, key: int) -> bool:
            return txn.get(pack_id(key), db=dbs[db]) is not None

        # clusters: representative fingerprints indexed; members exist and point back
        fp_cursor = txn.cursor(db=dbs["fp_clusters"])
        indexed_pairs = 0
        all_found = True
        max_cluster = -1
        sizes: dict[int, int] = {}
        for key, value in txn.cursor(db=dbs["clusters"]):
            cluster_id = unpack_id(key)
            max_cluster = cluster_id
            try:
                info, rep = parse_cluster(cluster_id, value)
            except ValueError as exc:
                report.problem(f"cluster {cluster_id}: unreadable record ({exc})")
                all_found = False
                continue
            sizes[cluster_id] = info.size
            held = np.unique(rep.values).tolist()
            missing = [fp for fp in held if not fp_cursor.set_key_dup(pack_id(fp), key)]
            indexed_pairs += len(held) - len(missing)
            # all of the representative, or the part its index need says (dedup.cluster)
            wanted = len(held) if bound_denominator(rep) is None else indexed_count(len(held), need)
            if len(held) - len(missing) < wanted:
                all_found = False
                if wanted == len(held):
                    for fp in missing:
                        report.problem(
                            f"cluster {cluster_id}: representative fingerprint {fp:#x} is not "
                            "indexed"
                        )
                else:
                    report.problem(
                        f"cluster {cluster_id}: {len(held) - len(missing)} of its "
                        f"representative's {len(held)} fingerprints are indexed, fewer than "
                        f"the {wanted} it needs"
                    )
            if not exists("docs", info.first_doc):
                report.problem(f"cluster {cluster_id}: first document {info.first_doc} is missing")
        # Each verified pair is a distinct fp_clusters entry; if they are all there and as many
        # as the entries, there is no other entry. Otherwise look at every entry.
        if not all_found or indexed_pairs != report.fingerprints:
            _check_every_fingerprint(txn, dbs, report)

        members: dict[int, int] = {}
        for key, value in txn.cursor(db=dbs["members"]):
            cluster_id, doc_id = unpack_id(key), unpack_id(value)
            members[cluster_id] = members.get(cluster_id, 0) + 1
            if not exists("clusters", cluster_id):
                report.problem(f"document {doc_id} is a member of missing cluster {cluster_id}")
            if not exists("docs", doc_id):
                report.problem(f"cluster {cluster_id}: member document {doc_id} is missing")
            back = txn.get(pack_id(doc_id), db=dbs["doc_clusters"])
            if back is None or unpack_id(back) != cluster_id:
                report.problem(f"cluster {cluster_id}: member {doc_id} is not mapped back to it")
        for cluster_id, size in sizes.items():
            if members.get(cluster_id, 0) != size:
                report.problem(
                    f"cluster {cluster_id}: size {size} but {members.get(cluster_id, 0)} members"
                )
        if stat["doc_clusters"] != sum(members.values()):
            report.problem(
                f"{stat['doc_clusters']} documents are mapped to clusters, "
                f"but clusters have {sum(members.values())} members"
            )

        for key, value in txn.cursor(db=dbs["hashes"]):
            doc_id, cluster_id = unpack_id(value[:8]), unpack_id(value[8:16])
            if not exists("docs", doc_id):
                report.problem(f"content hash {unpack_id(key):#x}: document {doc_id} is missing")
            if not exists("clusters", cluster_id):
                report.problem(f"content hash {unpack_id(key):#x}: cluster {cluster_id} is missing")

        # documents: collect page locations (each must be unique)
        locations: dict[tuple[int, int], tuple[int, int, str]] = {}
        max_doc = -1
        for key, value in txn.cursor(db=dbs["docs"]):
            doc_id = unpack_id(key)
            max_doc = doc_id
            try:
                record = DocumentRecord.from_bytes(value)
            except ValueError as exc:
                report.problem(f"document {doc_id}: unreadable record ({exc})")
                continue
            if record.cluster_id is not None and not exists("clusters", record.cluster_id):
                report.problem(f"document {doc_id}: its cluster {record.cluster_id} is missing")
            page = record.page
            if page is None:
                continue
            report.pages += 1
            where = (page.number, page.offset)
            if where in locations:
                report.problem(
                    f"documents {locations[where][0]} and {doc_id} share the page at "
                    f"{page.file}:{page.offset}"
                )
                continue
            locations[where] = (doc_id, page.length, record.url)
        for key, _ in txn.cursor(db=dbs["sketches"]):
            if not exists("docs", unpack_id(key)):
                report.problem(f"sketch of missing document {unpack_id(key)}")

        next_doc = txn.get(NEXT_DOC_KEY, db=dbs["meta"])
        if max_doc >= (0 if next_doc is None else unpack_id(next_doc)):
            report.problem(f"next document id is not past document {max_doc}")
        next_cluster = txn.get(_NEXT_CLUSTER, db=dbs["meta"])
        if max_cluster >= (0 if next_cluster is None else unpack_id(next_cluster)):
            report.problem(f"next cluster id is not past cluster {max_cluster}")
        position = position_from_bytes(txn.get(WARC_KEY, db=dbs["meta"]))

    _check_pages(store, position.file, position.end, locations, report, tail)


def _check_every_fingerprint(txn: Any, dbs: dict[str, Any], report: VerifyReport) -> None:
    cache: dict[int, set[int] | None] = {}
    for key, value in txn.cursor(db=dbs["fp_clusters"]):
        fp, cluster_id = unpack_id(key), unpack_id(value)
        if cluster_id not in cache:
            if len(cache) > 100_000:
                cache.clear()
            raw = txn.get(pack_id(cluster_id), db=dbs["clusters"])
            try:
                cache[cluster_id] = (
                    None if raw is None else set(parse_cluster(cluster_id, raw)[1].values.tolist())
                )
            except ValueError:
                cache[cluster_id] = set()
        held = cache[cluster_id]
        if held is None:
            report.problem(f"fingerprint {fp:#x} points at missing cluster {cluster_id}")
        elif fp not in held:
            report.problem(
                f"fingerprint {fp:#x} points at cluster {cluster_id}, whose representative "
                "does not hold it"
            )


def _check_pages(
    store: Store,
    committed_file: int,
    committed_end: int,
    locations: dict[tuple[int, int], tuple[int, int, str]],
    report: VerifyReport,
    tail: str,
) -> None:
    files = dict(store.pages.files())
    report.warc_files = len(files)
    for number in range(1, committed_file + 1):
        if number not in files:
            report.problem(f"{warc_name(number)} is missing from {store.pages.directory}")
    for number, path in sorted(files.items()):
        if number > committed_file:
            report.notes.append(f"{path.name} is past the last commit ({tail})")
            continue
        end = committed_end if number == committed_file else None
        if end is not None and path.stat().st_size < end:
            report.problem(f"{path.name} has {path.stat().st_size} bytes, but {end} were committed")
        elif end is not None and path.stat().st_size > end:
            size = path.stat().st_size
            report.notes.append(f"{path.name} has {size - end} bytes past the last commit ({tail})")
        at = 0
        try:
            for rec in store.pages.scan(number, end):
                at = rec.offset + rec.length
                if rec.type == "warcinfo":
                    continue
                if rec.type != "response":
                    report.problem(f"{path.name}:{rec.offset}: unexpected {rec.type} record")
                    continue
                report.warc_records += 1
                ref = locations.pop((number, rec.offset), None)
                if ref is None:
                    report.problem(
                        f"{path.name}:{rec.offset}: page {rec.url} is referenced by no document"
                    )
                    continue
                doc_id, length, url = ref
                if length != rec.length or url != rec.url:
                    report.problem(
                        f"document {doc_id}: {path.name}:{rec.offset} holds {rec.url} "
                        f"({rec.length} bytes), the document says {url} ({length} bytes)"
                    )
        except Exception as exc:  # a damaged file: report where, keep checking the others
            report.problem(f"{path.name}: unreadable after byte {at} ({type(exc).__name__}: {exc})")
    for (number, offset), (doc_id, _, url) in sorted(locations.items()):
        report.problem(f"document {doc_id} ({url}): no WARC record at {warc_name(number)}:{offset}")
