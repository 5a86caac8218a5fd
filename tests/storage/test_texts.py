"""The ``texts`` database: the canonical text of dropped pages, compressed, beside their records."""

from __future__ import annotations

import zlib

import pytest

from storage import lmdb_env
from storage.lmdb_env import pack_id
from storage.records import DocumentRecord
from storage.store import TEXTS_DB, Store
from storage.verify import verify_store
from tests.storage.helpers import add_kept

TEXT = "ein fixer text über die harrow fell ridge " * 200


def _add_dropped(store: Store, url: str = "http://site.test/copy") -> int:
    doc_id = store.next_doc_id()
    store.index.add_member(0, doc_id, identical=False)
    store.put_document(doc_id, DocumentRecord(url, "near_duplicate", 5.0, 0, 7))
    return doc_id


def test_a_text_reads_back_compressed_after_reopening(tmp_path):
    path = tmp_path / "s"
    with Store.open(path) as store:
        with store.batch():
            kept = add_kept(store)
            dropped = _add_dropped(store)
            store.put_text(dropped, TEXT)
            store.put_text(kept, "")  # empty texts are texts too
    with Store.open(path, readonly=True) as store:
        assert store.text(dropped) == TEXT
        assert store.text(kept) == ""
        assert store.text(dropped + 1) is None
        raw = store._txns.get(TEXTS_DB, pack_id(dropped))
    # stored as zlib, so a repetitive text costs far less than its UTF-8 bytes
    assert raw is not None and zlib.decompress(raw).decode("utf-8") == TEXT
    assert len(raw) < len(TEXT.encode("utf-8")) / 10
    assert verify_store(path).ok


def test_a_text_needs_its_document_and_a_batch(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            kept = add_kept(store)
        with pytest.raises(RuntimeError, match="batch"):
            store.put_text(kept, "x")
        with store.batch():
            with pytest.raises(ValueError, match="no document 5"):
                store.put_text(5, "x")
            with pytest.raises(ValueError, match="doc_id"):
                store.put_text(-1, "x")
            with pytest.raises(TypeError, match="str"):
                store.put_text(kept, b"bytes")  # type: ignore[arg-type]


def test_an_aborted_batch_keeps_no_text(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            add_kept(store)
        with pytest.raises(KeyError), store.batch():
            store.put_text(_add_dropped(store), TEXT)
            raise KeyError("crash")
        assert store.text(1) is None


def test_a_store_made_before_texts_reads_without_them(tmp_path, monkeypatch):
    path = tmp_path / "old"
    older = {k: v for k, v in lmdb_env.DATABASES.items() if k != TEXTS_DB}
    with monkeypatch.context() as m:
        m.setattr(lmdb_env, "DATABASES", older)
        with Store.open(path) as store, store.batch():
            add_kept(store)
            _add_dropped(store)
    # read-only: the database is not there and cannot be made; texts are simply absent
    with Store.open(path, readonly=True) as store:
        assert TEXTS_DB not in store._txns.dbs
        assert store.text(1) is None
        assert store.document(1).decision == "near_duplicate"
    # the next writer adds it, and the store stays consistent
    with Store.open(path) as store:
        with store.batch():
            store.put_text(1, TEXT)
        assert store.text(1) == TEXT
    assert verify_store(path).ok
