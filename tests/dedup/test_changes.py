"""Clusters that follow their pages (dedup.changes): after any sequence of changed and gone
pages, the index is what greedy clustering of the current documents in their order gives, in
memory and in a real store's LMDB index."""

from __future__ import annotations

import random
import pytest

from dedup.changes import Stored, replace
from dedup.cluster import GreedyClusterer, cluster_documents
from dedup.index import ClusterIndex
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams
from dedup.sketches import MinSketch

PARAMS = DedupParams(threshold=0.8)


def _content(rng: random.Random, families: int) -> tuple[int, int]:
    """(family, variant): variants of one family share most of their ids; families none."""
    return rng.randrange(families), rng.randrange(6)


def _stored(doc_id: int, content: tuple[int, int]) -> Stored:
    family, variant = content
    base = family * 10_000
    # variant v drops v*4 of the family's first ids: within a family, resemblances 0.6..1
    ids = range(base + variant * 4, base + 100 + variant * 4)
    return Stored(doc_id, MinSketch(ids, s=100, n=100), hash(content) & (2**63 - 1))


class Site:
    """URLs whose content changes, decided as a recrawl decides them."""

    def __init__(self, index: ClusterIndex) -> None:
        self.clusterer = GreedyClusterer(index, PARAMS)
        self.docs: dict[int, Stored] = {}
        self.current: dict[str, int] = {}  # URL -> its current document
        self.next_id = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def first_crawl(self, urls: dict[str, tuple[int, int]]) -> None:
        for url, content in urls.items():
            doc = _stored(self.new_id(), content)
            self.docs[doc.doc_id] = doc
            self.clusterer.assign(doc.doc_id, doc.sketch, doc.content_hash)
            self.current[url] = doc.doc_id

    def change(self, url: str, content: tuple[int, int] | None) -> None:
        old = self.docs[self.current[url]]
        new = None if content is None else _stored(self.new_id(), content)
        url_of = {doc: u for u, doc in self.current.items()}
        done = replace(self.clusterer, old, new, load=self.docs.__getitem__,
                       new_doc_id=self.new_id)  # fmt: skip
        if new is None:
            del self.current[url]
        else:
            self.docs[new.doc_id] = new
            self.current[url] = new.doc_id
        for again in done.redecided:
            self.docs[again.new_doc] = Stored(again.new_doc, self.docs[again.old_doc].sketch,
                                              self.docs[again.old_doc].content_hash)
            self.current[url_of[again.old_doc]] = again.new_doc

    def kept(self) -> dict[int, bool]:
        """Whether each current document is its cluster's representative."""
        index = self.clusterer.index
        return {doc: index.cluster(index.cluster_of(doc)).first_doc == doc
                for doc in self.current.values()}  # fmt: skip


def _from_scratch(site: Site) -> dict[int, bool]:
    order = sorted(site.current.values())
    done = cluster_documents([(site.docs[d].sketch, site.docs[d].content_hash) for d in order],
                             PARAMS)  # fmt: skip
    return {doc: a.representative for doc, a in zip(order, done)}


def _check_index(site: Site) -> None:
    index = site.clusterer.index
    members = {}
    for info in index.clusters():
        assert not info.orphaned
        docs = index.members(info.cluster_id)
        assert info.size == len(docs)
        first = site.docs[info.first_doc].content_hash
        assert info.identical == all(site.docs[d].content_hash == first for d in docs)
        for doc in docs:
            members[doc] = info.cluster_id
    assert sorted(members) == sorted(site.current.values())


@pytest.fixture(params=["memory", "lmdb"])
def index(request, tmp_path):
    """A fresh index of each kind: in memory, and a real store's LMDB index in a batch."""
    if request.param == "memory":
        yield MemoryIndex()
        return
    from storage.store import Store

    with Store.open(tmp_path / "store") as store, store.batch():
        yield store.index


@pytest.mark.parametrize("seed", range(30))
def test_after_any_changes_the_clusters_are_greedy_clustering_of_the_current_documents(
    seed, index
):
    rng = random.Random(seed)
    site = Site(index)
    urls = {f"/p{i}": _content(rng, 5) for i in range(30)}
    site.first_crawl(urls)
    for _ in range(rng.randrange(1, 25)):
        url = rng.choice(sorted(site.current))
        site.change(url, None if rng.random() < 0.15 else _content(rng, 6))
    _check_index(site)
    assert site.kept() == _from_scratch(site)


def test_a_page_edited_in_place_keeps_its_cluster_and_the_pages_like_it(index):
    site = Site(index)
    site.first_crawl({"/a": (0, 0), "/a-copy": (0, 1), "/b": (1, 0)})
    index = site.clusterer.index
    cluster = index.cluster_of(site.current["/a"])
    site.change("/a", (0, 2))  # a small edit: still like its copy
    assert index.cluster_of(site.current["/a"]) == cluster
    assert index.cluster_of(site.current["/a-copy"]) == cluster
    assert site.kept() == {site.current["/a"]: True, site.current["/a-copy"]: False,
                           site.current["/b"]: True}  # fmt: skip


def test_when_a_kept_page_is_gone_its_first_orphan_takes_its_cluster_over(index):
    site = Site(index)
    site.first_crawl({"/a": (0, 0), "/c1": (0, 1), "/c2": (0, 2)})
    index = site.clusterer.index
    cluster = index.cluster_of(site.current["/a"])
    site.change("/a", None)
    assert index.cluster_of(site.current["/c1"]) == cluster == index.cluster_of(site.current["/c2"])
    assert index.cluster(cluster).first_doc == site.current["/c1"]
    _check_index(site)


def test_a_kept_page_that_becomes_a_copy_of_another_leaves_its_cluster_to_its_orphans(index):
    site = Site(index)
    site.first_crawl({"/a": (0, 0), "/a-copy": (0, 1), "/b": (1, 0)})
    index = site.clusterer.index
    old = index.cluster_of(site.current["/a"])
    site.change("/a", (1, 0))  # now an exact copy of /b
    assert index.cluster_of(site.current["/a"]) == index.cluster_of(site.current["/b"])
    assert index.cluster_of(site.current["/a-copy"]) == old  # its copy keeps the cluster
    assert site.kept()[site.current["/a-copy"]]
