"""Everything neardup keeps on disk: the store (LMDB index, WARC page store, dedup logs).

Imports ``dedup`` for what a sketch is, never ``crawler``. Start at :mod:`storage.store`.
"""

from __future__ import annotations

from storage.errors import (
    PageReadError,
    StoreBusyError,
    StoreError,
    StoreMismatchError,
    StoreNotFoundError,
)
from storage.log import DedupLog, read_log
from storage.records import DECISIONS, DocumentRecord, PageLocation
from storage.store import Store, StoredPage

__all__ = [
    "DECISIONS",
    "DedupLog",
    "DocumentRecord",
    "PageLocation",
    "PageReadError",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreMismatchError",
    "StoreNotFoundError",
    "StoredPage",
    "read_log",
]
