"""The URL lookup: a resumed crawl must find every page it has already decided, and only those."""

from __future__ import annotations

from storage.records import DocumentRecord
from storage.store import Store
from storage.verify import verify_store
from tests.storage.helpers import add_kept


def test_find_url_answers_committed_and_batch_documents(tmp_path):
    path = tmp_path / "s"
    long_url = "http://site.test/long?" + "q" * 3000  # far past LMDB's 511-byte key limit
    with Store.open(path) as store:
        assert store.find_url("http://site.test/0") is None
        with store.batch():
            kept = add_kept(store)
            skipped = store.next_doc_id()
            store.put_document(skipped, DocumentRecord(long_url, "skipped", 1.0))
            # inside the batch the lookup sees the batch's own writes
            assert store.find_url("http://site.test/0") == kept
        assert store.find_url(long_url) == skipped
    with Store.open(path, readonly=True) as store:
        assert store.find_url("http://site.test/0") == kept
        assert store.find_url(long_url) == skipped
        # exact strings only: no canonicalisation happens here
        assert store.find_url("http://site.test/0/") is None
        assert store.find_url("HTTP://site.test/0") is None
    assert verify_store(path).ok


def test_an_aborted_batch_leaves_no_url_behind(tmp_path):
    path = tmp_path / "s"
    with Store.open(path) as store:
        try:
            with store.batch():
                add_kept(store)
                raise RuntimeError("crash before commit")
        except RuntimeError:
            pass
        assert store.find_url("http://site.test/0") is None


def test_a_later_document_takes_the_url_over(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            first = store.next_doc_id()
            store.put_document(first, DocumentRecord("http://a.test/", "skipped", 1.0))
            second = store.next_doc_id()
            store.put_document(second, DocumentRecord("http://a.test/", "skipped", 2.0))
        assert store.find_url("http://a.test/") == second
