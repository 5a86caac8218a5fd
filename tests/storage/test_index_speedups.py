"""The crawl-time shortcuts of the LMDB index: the capped-key and representative caches,
``put_many``, gzip level."""

from __future__ import annotations

import gzip
import io
import zlib

import numpy as np
import pytest
from warcio.archiveiterator import ArchiveIterator

from dedup.memory_index import MemoryIndex
from dedup.sketches import MinSketch
from storage.pages import GZIP_LEVEL
from storage.store import Store

BOILER = list(range(1000, 1010))  # fingerprints every representative holds


def sketch(values: list[int]) -> MinSketch:
    ids = sorted(set(values))
    return MinSketch(ids, s=100, n=len(ids))


def test_capped_cache_follows_added_and_replaced_postings(tmp_path):
    memory = MemoryIndex()
    with Store.open(tmp_path / "s") as store, store.batch():
        index = store.index
        for doc in range(6):
            for idx in (memory, index):
                idx.new_cluster(doc, sketch(BOILER + [doc]))
        probe = np.array(BOILER + [3], dtype=np.uint64)
        assert index.candidates(probe, 2) == memory.candidates(probe, 2)
        assert index.candidates(probe, 2).capped == len(BOILER)
        # a new cluster has a higher id: the cached lowest ids stay right
        for idx in (memory, index):
            idx.new_cluster(10, sketch(BOILER + [50]))
        assert index.candidates(probe, 2) == memory.candidates(probe, 2)
        # cluster 0 drops a boilerplate fingerprint: the cache must forget that key
        for idx in (memory, index):
            idx.set_representative(0, sketch(BOILER[1:] + [0]))
        assert index.candidates(probe, 2) == memory.candidates(probe, 2)
        assert index.candidates(probe, 2).shared[0] == len(BOILER) - 1
        # and adds it back
        for idx in (memory, index):
            idx.set_representative(0, sketch(BOILER + [0]))
        assert index.candidates(probe, 2) == memory.candidates(probe, 2)
        # another cap reads afresh
        assert index.candidates(probe, 3) == memory.candidates(probe, 3)


def test_capped_cache_is_forgotten_when_a_batch_aborts(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            for doc in range(3):
                store.index.new_cluster(doc, sketch(BOILER + [doc]))
        probe = np.array(BOILER, dtype=np.uint64)
        try:
            with store.batch():
                store.index.new_cluster(3, sketch(BOILER + [3]))
                store.index.new_cluster(4, sketch(BOILER + [4]))
                assert store.index.candidates(probe, 1).shared == {0: len(BOILER)}
                store.index.set_representative(0, sketch([0]))  # 1 is now the lowest
                assert store.index.candidates(probe, 1).shared == {1: len(BOILER)}
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        with store.batch():  # the aborted batch's change is gone, and so is what it cached
            assert store.index.candidates(probe, 1).shared == {0: len(BOILER)}
        # outside a batch nothing is cached, and the answer is the same
        assert store.index.candidates(probe, 1).shared == {0: len(BOILER)}
        assert store.index.candidates(probe, 5).capped == 0


def test_representative_cache_follows_replacements_and_aborts(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            store.index.new_cluster(0, sketch([1, 2, 3]))
            assert store.index.representative(0) == sketch([1, 2, 3])
            store.index.set_representative(0, sketch([1, 2, 4]))
            assert store.index.representative(0) == sketch([1, 2, 4])
        try:
            with store.batch():  # cluster 1 is made, cached, and lost with the batch
                assert store.index.new_cluster(1, sketch([7, 8])) == 1
                assert store.index.representative(1) == sketch([7, 8])
                store.index.set_representative(0, sketch([9]))
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        with store.batch():
            assert store.index.representative(0) == sketch([1, 2, 4])
            with pytest.raises(KeyError):
                store.index.representative(1)
            # the next cluster takes id 1 again, with its own representative
            assert store.index.new_cluster(1, sketch([5, 6])) == 1
            assert store.index.representative(1) == sketch([5, 6])
        assert store.index.representative(1) == sketch([5, 6])  # read, not cached


def test_put_many_is_replayed_when_the_map_grows(tmp_path):
    with Store.open(tmp_path / "s", map_size=64 * 1024) as store:
        with store.batch():
            for doc in range(300):  # 300 clusters × 100 postings: several doublings
                store.index.new_cluster(doc, sketch(list(range(doc, doc + 100))))
        assert store.map_growths > 0
        assert store.index.postings(150) == list(range(51, 151))
        assert store.stats()["fingerprints"] == 300 * 100


def test_pages_are_gzip_members_at_our_level_and_warcio_reads_them(tmp_path):
    body = b"<p>" + b"some words repeat " * 500 + b"</p>"
    with Store.open(tmp_path / "s") as store:
        with store.batch():
            locs = [store.pages.append(f"http://a.test/{i}", 200, {}, body) for i in range(3)]
        data = (store.pages.directory / locs[1].file).read_bytes()
    record = data[locs[1].offset : locs[1].offset + locs[1].length]
    raw = gzip.decompress(record)  # one whole member per record
    again = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    assert len(again.compress(raw) + again.flush()) == len(record)
    pages = [r.content_stream().read() for r in ArchiveIterator(io.BytesIO(data))
             if r.rec_type == "response"]
    assert pages == [body] * 3
