"""The store as its users see it: open, batch, read back, reopen, refuse to mix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import storage.store
from dedup.params import SketchParams
from storage.errors import StoreBusyError, StoreMismatchError, StoreNotFoundError
from storage.records import DocumentRecord
from storage.store import Store
from tests.storage.helpers import HEADERS, add_kept, body_for, sketch_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_everything_written_reads_back_after_reopening(tmp_path):
    path = tmp_path / "s"
    with Store.open(path) as store:
        with store.batch():
            kept = [add_kept(store) for _ in range(3)]
            dropped = store.next_doc_id()
            store.index.add_member(0, dropped, identical=True)
            store.put_document(
                dropped, DocumentRecord("http://site.test/copy", "exact_duplicate", 5.0, 0, 0)
            )
            skipped = store.next_doc_id()
            store.put_document(skipped, DocumentRecord("http://site.test/x.pdf", "skipped", 6.0))
    with Store.open(path, readonly=True) as store:
        assert [d for d, _ in store.documents()] == [*kept, dropped, skipped]
        for doc_id in kept:
            record = store.document(doc_id)
            assert record is not None and record.decision == "kept"
            url, status, headers, body = store.read_page(record.page)
            assert (url, status, headers, body) == (record.url, 200, HEADERS, body_for(doc_id))
            assert store.sketch(doc_id) == sketch_for(doc_id)
            assert store.index.cluster_of(doc_id) == record.cluster_id
        assert store.document(dropped).page is None
        assert store.sketch(skipped) is None
        assert [p.doc_id for p in store.iter_pages()] == kept
        assert store.index.members(0) == [kept[0], dropped]
        assert store.index.cluster(0).size == 2
        assert store.index.find_exact(1) == (kept[1], 1)
        stats = store.stats()
        assert (stats["documents"], stats["clusters"], stats["warc_files"]) == (5, 3, 1)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["sketch"] == SketchParams().to_dict()


def test_documents_are_read_in_short_chunks_without_losing_any(tmp_path, monkeypatch):
    monkeypatch.setattr(storage.store, "_CHUNK", 4)
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            for _ in range(11):
                store.put_document(store.next_doc_id(), DocumentRecord("u", "skipped", 0.0))
        assert [d for d, _ in store.documents()] == list(range(11))
        assert [d for d, _ in store.documents(start=9)] == [9, 10]


def test_other_parameters_are_refused_and_none_adopts(tmp_path):
    path = tmp_path / "s"
    made = SketchParams(shingle_size=4, kind="mod", modulus=8)
    Store.open(path, made).close()
    with pytest.raises(StoreMismatchError) as err:
        Store.open(path, SketchParams(shingle_size=5, kind="mod", modulus=8))
    assert str(err.value) == (
        f"store {path} was made with sketch.shingle_size=4; this run asks for 5 "
        "(use another --store, or the same parameters)"
    )
    with pytest.raises(StoreMismatchError, match="sketch.kind=mod; this run asks for min"):
        Store.open(path, SketchParams(shingle_size=4), readonly=True)
    with Store.open(path) as store:  # params=None: the store's own
        assert store.params == made
    with Store.open(path, made, readonly=True) as store:
        assert store.params == made


def test_read_only_open_of_a_missing_store_says_so(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no store at"):
        Store.open(tmp_path / "nothing", readonly=True)
    assert not (tmp_path / "nothing").exists()


def test_one_writer_and_readers_beside_it(tmp_path):
    path = tmp_path / "s"
    with Store.open(path) as writer:
        with pytest.raises(StoreBusyError, match="being written by another process"):
            Store.open(path)
        with Store.open(path, readonly=True) as reader:  # shares the process's environment
            with writer.batch():
                add_kept(writer)
                assert writer.document(0) is not None  # a batch sees its own writes
                assert reader.document(0) is None  # others see only commits
            assert reader.document(0) is not None
    Store.open(path).close()  # the lock went with the writer
    with Store.open(path, readonly=True), pytest.raises(StoreBusyError, match="read-only in this"):
        Store.open(path)  # one environment per process, and it cannot become writable


def test_a_failed_batch_leaves_no_trace(tmp_path):
    path = tmp_path / "s"
    with Store.open(path) as store:
        with store.batch():
            add_kept(store)
        warc = path / "pages" / "pages-00001.warc.gz"
        size = warc.stat().st_size
        with pytest.raises(RuntimeError, match="boom"), store.batch():
            add_kept(store)
            add_kept(store)
            raise RuntimeError("boom")
        assert warc.stat().st_size == size
        assert store.document(1) is None and len(store.index) == 1
        with store.batch():
            assert add_kept(store) == 1  # the id of the lost batch is handed out again
        assert [p.doc_id for p in store.iter_pages()] == [0, 1]


def test_writes_need_a_batch(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with pytest.raises(RuntimeError, match="needs a batch"):
            store.next_doc_id()
        with pytest.raises(RuntimeError, match="needs a batch"):
            store.pages.append("http://a.test/", 200, {}, b"")
        with pytest.raises(RuntimeError, match="needs a batch"):
            store.index.new_cluster(0, sketch_for(0))
        with store.batch(), pytest.raises(RuntimeError, match="do not nest"), store.batch():
            pass


def test_opening_cuts_off_pages_written_after_the_last_commit(tmp_path):
    path = tmp_path / "s"
    with Store.open(path, warc_max_bytes=1) as store:  # one page per file
        for _ in range(2):
            with store.batch():
                add_kept(store)
    pages = path / "pages"
    current = pages / "pages-00002.warc.gz"
    committed = current.stat().st_size
    # What a crash between the WARC write and the LMDB commit leaves: a tail and a new file.
    tail = b"\x1f\x8b half a record"
    with open(current, "ab") as fh:
        fh.write(tail)
    (pages / "pages-00003.warc.gz").write_bytes(b"\x1f\x8b another")
    with Store.open(path) as store:
        assert store.repairs == [
            f"truncated pages-00002.warc.gz from {committed + len(tail)} to {committed} bytes "
            "(a tail written after the last commit)",
            "removed pages-00003.warc.gz (10 bytes written after the last commit)",
        ]
        assert current.stat().st_size == committed
        with store.batch():
            add_kept(store)
        assert [p.doc_id for p in store.iter_pages()] == [0, 1, 2]
    with Store.open(path) as store:
        assert store.repairs == []


def test_a_full_map_grows_without_losing_a_write_and_readers_follow(tmp_path):
    path = tmp_path / "s"
    with Store.open(path, map_size=64 * 1024) as store:
        with store.batch():
            add_kept(store)
        with subprocess.Popen(
            [sys.executable, str(HERE / "reader_child.py"), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        ) as reader:
            assert json.loads(reader.stdout.readline())["documents"] == 1  # open before growth
            total = 1
            for _ in range(10):
                with store.batch():
                    for _ in range(200):
                        add_kept(store)
                        total += 1
            assert store.map_growths >= 5  # 64 KiB → several MiB
            assert store.stats()["map_size"] >= 64 * 1024 * 2**store.map_growths
            reader.stdin.write("count\n")
            reader.stdin.flush()
            seen = json.loads(reader.stdout.readline())
            reader.stdin.close()
            assert reader.wait(timeout=10) == 0
        assert seen == {"documents": total, "clusters": total, "resizes_adopted": 1}
        records = list(store.documents())
    assert [d for d, _ in records] == list(range(total))
    with Store.open(path, readonly=True) as store:
        for doc_id in (0, 777, total - 1):
            found = store.index.candidates(sketch_for(doc_id).values, cap=8)
            assert found.shared[store.index.cluster_of(doc_id)] == 20
            assert store.read_page(store.document(doc_id).page).body == body_for(doc_id)


def test_a_batch_that_fills_the_map_at_commit_is_replayed(tmp_path):
    # one big value per document: the map fills inside put() and in commit()
    with Store.open(tmp_path / "s", map_size=64 * 1024) as store:
        with store.batch():
            for doc_id in range(40):
                record = DocumentRecord("u" * 20_000, "skipped", float(doc_id))
                store.put_document(doc_id, record)
        assert store.map_growths > 0
        assert [r.time for _, r in store.documents()] == [float(d) for d in range(40)]


def test_stats_report_sizes(tmp_path):
    with Store.open(tmp_path / "s") as store:
        stats = store.stats()
        assert stats["map_size"] == 1 << 30
        assert 0 < stats["used_bytes"] < stats["map_size"]


def test_the_content_area_is_a_store_parameter(tmp_path):
    from dedup.params import ContentArea

    path = tmp_path / "s"
    main = ContentArea("main", exclude=[".ads"])
    Store.open(path, SketchParams(), area=main).close()
    assert json.loads((path / "manifest.json").read_text())["canonical"] == main.to_dict()
    with pytest.raises(StoreMismatchError) as err:
        Store.open(path, SketchParams(), area=ContentArea())
    assert str(err.value) == (
        f"store {path} was made with canonical.content_area=main; this run asks for all "
        "(use another --store, or re-analyse this one: neardup recluster --store)"
    )
    with pytest.raises(StoreMismatchError, match=r"canonical.exclude=\[.ads\]; this run asks "
                                                 r"for \[.ads, #x\]"):  # fmt: skip
        Store.open(path, area=ContentArea("main", exclude=[".ads", "#x"]), readonly=True)
    with Store.open(path, SketchParams()) as store:  # no area given: the store's own
        assert store.manifest.canonical == main
    with Store.open(path, SketchParams(), area=main, readonly=True) as store:
        assert store.manifest.canonical == main


def test_a_store_made_before_content_areas_reads_as_all(tmp_path):
    from dedup.params import ContentArea
    from storage.store import MANIFEST_KEY

    path = tmp_path / "old"
    with Store.open(path, SketchParams()) as store:
        old = json.loads(store.manifest.to_json())
        del old["canonical"]  # what a store made before this change recorded
        store._txns.begin_batch()
        store._txns.put("meta", MANIFEST_KEY, json.dumps(old).encode("utf-8"))
        store._txns.commit()
    with Store.open(path, SketchParams(), area=ContentArea(), readonly=True) as store:
        assert store.manifest.canonical == ContentArea()
    with pytest.raises(StoreMismatchError, match="canonical.content_area=all; this run asks for "
                                                 "main"):  # fmt: skip
        Store.open(path, SketchParams(), area=ContentArea("main"), readonly=True)


def test_a_snapshot_reads_one_committed_state_while_a_writer_commits(tmp_path):
    from storage import lmdb_env
    from storage.lmdb_env import Transactions, pack_id

    with Store.open(tmp_path / "s") as writer:
        with writer.batch():
            add_kept(writer)
        shared = lmdb_env.acquire(tmp_path / "s" / "index", readonly=True, map_size=1 << 20)
        try:
            reader = Transactions(shared.env, shared.dbs)
            with reader.snapshot():
                with writer.batch():  # committed while the snapshot lasts: not in it
                    add_kept(writer)
                assert reader.get("docs", pack_id(0)) is not None
                with reader.read() as txn:
                    assert txn.get(pack_id(1), db=shared.dbs["docs"]) is None
                assert reader.get("docs", pack_id(1)) is None
                with pytest.raises(RuntimeError, match="inside it"):
                    reader.begin_batch()
            assert reader.get("docs", pack_id(1)) is not None
        finally:
            lmdb_env.release(shared)
