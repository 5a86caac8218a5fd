"""Helpers shared by the storage tests: small stores and documents made to order."""

from __future__ import annotations

import time

import numpy as np

from dedup.sketches import MinSketch
from storage.records import DocumentRecord
from storage.store import Store

HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Server", "test")]


def sketch_for(key: int, s: int = 20) -> MinSketch:
    """A MIN_s sketch that depends only on ``key`` (same key, same sketch)."""
    ids = np.random.default_rng(key).integers(0, 2**63, size=3 * s, dtype=np.uint64)
    return MinSketch.from_ids(ids, s)


def body_for(doc_id: int) -> bytes:
    return f"<html><body><p>page {doc_id}</p></body></html>".encode()


def add_kept(store: Store, doc_id: int | None = None, *, key: int | None = None) -> int:
    """Store one kept page as a crawl would: page, new cluster, exact hash, document."""
    doc_id = store.next_doc_id() if doc_id is None else doc_id
    key = doc_id if key is None else key
    url = f"http://site.test/{doc_id}"
    sketch = sketch_for(key)
    location = store.pages.append(url, 200, HEADERS, body_for(doc_id))
    cluster_id = store.index.new_cluster(doc_id, sketch)
    store.index.add_exact(key, doc_id, cluster_id)
    record = DocumentRecord(url, "kept", time.time(), cluster_id, key, location)
    store.put_document(doc_id, record, sketch)
    return doc_id
