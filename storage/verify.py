"""``neardup verify``: check the store's invariant, repair what a crash can leave behind.

The invariant (``docs/architecture.md``): every fingerprint in the index belongs to a page in
the page store, and every stored page is in the index. The checks live with the code that
writes the layout, so that they change with it: :meth:`storage.store.Store.check` (documents,
counters, pages) and :meth:`storage.lmdb_index.LmdbIndex.check` (the index's databases), which
list what they check. This module chooses how the store is opened and renders the report.

The store of a node of a distributed crawl (:mod:`storage.nodes`) has its cluster index in
Redis: its documents, pages, history and places in the crawl's order are checked, its own
(empty) index is not.

The only repair is the one a crash makes necessary: a WARC tail written after the last commit
(see :mod:`storage.store`) is cut off, by opening the store for writing. When another process is
writing, the store is opened read-only, the committed state is checked and nothing is repaired.
"""

from __future__ import annotations

import errno
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import lmdb

from storage.errors import StoreBusyError
from storage.store import Inventory, Store

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
    #: revisit records (unchanged pages of a recrawl, byte-identical mirrors), each resolved
    revisit_records: int = 0
    #: URLs whose state the crawl runs keep
    urls: int = 0
    #: the node of a distributed crawl the store is (``I/K``), None for a single machine's
    node: str | None = None
    #: a node's documents with their place in the crawl's order
    orders: int = 0
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
            f"  WARC files    {self.warc_files:>10}  ({self.warc_records} page records, "
            f"{self.revisit_records} revisits)",
            f"  URLs          {self.urls:>10}  (with the state of their last crawl run)",
        ]
        if self.node is not None:
            lines.append(f"  orders        {self.orders:>10}  (documents with their place in the "
                         f"order of the crawl's decisions; node {self.node})")  # fmt: skip
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
            store = Store.open(path, readonly=False) if Store.exists(path) else None
        except StoreBusyError:
            report.notes.append(
                "another process is writing: checked the committed state only, repaired nothing"
            )
            tail = "being written"
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            report.notes.append(f"the store cannot be written ({exc.strerror}): checked it as "
                                "it is, repaired nothing")  # fmt: skip
            tail = "left by an interrupted write; verify on a writable store cuts it off"
    if store is None:
        store = Store.open(path, readonly=True)
    with store:
        report.repaired.extend(store.repairs)
        try:
            found = store.check(report.problem)
        except lmdb.Error as exc:
            report.problem(f"the LMDB index cannot be read ({type(exc).__name__}: {exc})")
        else:
            _add_counts(report, found, tail)
    return report


def _add_counts(report: VerifyReport, found: Inventory, tail: str) -> None:
    report.documents, report.pages = found.documents, found.pages
    report.clusters, report.fingerprints = found.clusters, found.fingerprints
    report.exact_hashes = found.exact_hashes
    report.warc_files, report.warc_records = found.warc_files, found.warc_records
    report.revisit_records, report.urls = found.revisit_records, found.urls
    if found.node is not None:
        report.node, report.orders = found.node.label, found.orders
        report.notes.append(
            f"the store is {found.node.describe()}: its clusters are in the crawl's Redis index, "
            "so the store's own index is empty and not checked"
        )
    for name, extra in found.uncommitted:
        if extra is None:
            report.notes.append(f"{name} is past the last commit ({tail})")
        else:
            report.notes.append(f"{name} has {extra} bytes past the last commit ({tail})")
