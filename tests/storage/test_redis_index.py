"""RedisIndex against a real redis-server: the same decisions as MemoryIndex and LmdbIndex on
real pages, one transaction per decision (retried when another node commits in between), a
recorded decision adopted instead of made again, and nothing lost over a Redis restart."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import redis

from benchmarks.distributed import planted_pages, sketched
from crawler.demo import SITE_DIR
from dedup.cluster import GreedyClusterer
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams
from dedup.sketches import MinSketch
from storage.redis_index import RedisIndex
from storage.store import Store
from tests.conftest import html_corpus_or_skip

RULES = [
    DedupParams(),
    DedupParams(threshold=0.8, representative="popular"),
    DedupParams(threshold=0.9, containment=0.8),
]


def demo_pages():
    """The demo site's pages (mirrors, syndicated and printed copies among them), with a
    planted copy of every third."""
    return planted_pages(sorted(SITE_DIR.rglob("*.html")))


def replay_everywhere(docs, params, client, tmp_path):
    """Every page decided on the three indexes, in order; the Redis orders are 1, 2, 3, …, so
    they are the document ids the other two are given."""
    memory = GreedyClusterer(MemoryIndex(), params)
    expected = [memory.assign(i + 1, sk, h) for i, (_, sk, h) in enumerate(docs)]
    with Store.open(tmp_path / "store") as store:
        on_disk = GreedyClusterer(store.index, params)
        lmdb = []
        for start in range(0, len(docs), 16):
            with store.batch():
                for i in range(start, min(start + 16, len(docs))):
                    _, sk, h = docs[i]
                    lmdb.append(on_disk.assign(i + 1, sk, h))
    index = RedisIndex(client, "test:", node=3)
    clusterer = GreedyClusterer(index, params)
    decided = [index.assign(clusterer, name, sk, h) for name, sk, h in docs]
    return expected, lmdb, decided, (memory, clusterer)


def check_same(expected, lmdb, decided, clusterers):
    assert [d.order for d in decided] == list(range(1, len(decided) + 1))
    assert {d.node for d in decided} == {3}
    assert not any(d.adopted for d in decided)
    got = [d.assignment for d in decided]
    assert lmdb == expected
    for a, b in zip(got, expected):
        assert a == b
    memory, on_redis = clusterers
    assert on_redis.stats == memory.stats
    kinds = {a.decision.kind for a in expected}
    assert {"kept", "exact_duplicate", "near_duplicate"} <= kinds  # a replay worth comparing


@pytest.mark.parametrize("params", RULES, ids=["first", "popular", "containment"])
def test_demo_pages_get_the_same_decisions_on_all_three_indexes(params, redis_client, tmp_path):
    docs = sketched(demo_pages())
    check_same(*replay_everywhere(docs, params, redis_client, tmp_path))


def test_real_pages_get_the_same_decisions_on_all_three_indexes(redis_client, tmp_path):
    docs = sketched(planted_pages(html_corpus_or_skip(300)[:300]))
    expected, lmdb, decided, clusterers = replay_everywhere(
        docs, DedupParams(threshold=0.8), redis_client, tmp_path
    )
    check_same(expected, lmdb, decided, clusterers)
    assert sum(d.decision.kind == "near_duplicate" for d in decided) >= 20


def near_copies(seed=1):
    """Two MIN_50 sketches of pages sharing 290 of 300 shingles (and their content hashes)."""
    ids = np.random.default_rng(seed).integers(0, 2**63, size=310, dtype=np.uint64)
    return MinSketch.from_ids(ids[:300], 50), MinSketch.from_ids(ids[10:], 50)


class Interleaved(GreedyClusterer):
    """A clusterer that lets another node commit once, just before its first decision: inside
    the transaction, after its WATCH and its read."""

    def __init__(self, index, params, meanwhile):
        super().__init__(index, params)
        self.meanwhile = meanwhile

    def decide(self, sketch, content_hash):
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return super().decide(sketch, content_hash)


@pytest.mark.parametrize("copy", ["near", "exact"])
def test_a_copy_committed_between_read_and_exec_is_found_on_the_retry(
    copy, redis_client, redis_server
):
    params = DedupParams(threshold=0.8)
    a, b = near_copies()
    if copy == "exact":
        b = a
    b_hash = 7 if copy == "near" else 5
    other = RedisIndex(redis.Redis.from_url(redis_server.url), "test:", node=2)
    by_other = []

    def other_node_commits():
        by_other.append(other.assign(GreedyClusterer(other, params), "b", b, b_hash))

    index = RedisIndex(redis_client, "test:", node=1)
    mine = index.assign(Interleaved(index, params, other_node_commits), "a", a, 5)
    assert by_other[0].decision.kind == "kept" and by_other[0].order == 1
    # without the transaction's WATCH, "a" would have been kept too: it read before "b" existed
    assert mine.attempts == 2
    assert mine.order == 2
    assert mine.decision.kind == f"{copy}_duplicate"
    assert mine.decision.duplicate_of == 1


class CommitsAfterMetaRead(redis.Redis):
    """A client that lets another node commit once, right after its first command that reads
    the index's ``meta`` hash (where a clusterer learns which part of each page is indexed)."""

    meanwhile = None

    def execute_command(self, *args, **options):
        result = super().execute_command(*args, **options)
        if self.meanwhile is not None and any(
            isinstance(arg, bytes) and arg.endswith(b":meta") for arg in args
        ):
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return result


def test_a_node_starting_while_another_keeps_the_first_page_finds_its_copies(
    redis_client, redis_server
):
    # the other node's first kept page is indexed under 13 of its 50 fingerprints; a node
    # that took that index for a full one would prune the copy's candidate (13 of 50 shared)
    params = DedupParams(threshold=0.8)
    a, b = near_copies()
    other = RedisIndex(redis.Redis.from_url(redis_server.url), "test:", node=2)

    def other_node_keeps_its_first_page():
        assert other.assign(GreedyClusterer(other, params), "a", a, 5).decision.kind == "kept"

    client = CommitsAfterMetaRead.from_url(redis_server.url)
    client.meanwhile = other_node_keeps_its_first_page
    index = RedisIndex(client, "test:", node=1)
    clusterer = GreedyClusterer(index, params)
    assert client.meanwhile is None  # the other node committed while this one was reading
    assert clusterer.index_need == 0.8
    decided = index.assign(clusterer, "b", b, 7)
    assert decided.decision.kind == "near_duplicate"
    assert decided.decision.duplicate_of == 1


def test_a_decided_key_is_adopted_after_a_restart_not_decided_again(redis_client):
    params = DedupParams()
    a, _ = near_copies()
    index = RedisIndex(redis_client, "test:", node=1)
    first = index.assign(GreedyClusterer(index, params), "http://a.test/", a, 11)
    # the node is killed before its store commits; its new process fetches the page again
    again = RedisIndex(redis_client, "test:", node=1)
    clusterer = GreedyClusterer(again, params)
    second = again.assign(clusterer, "http://a.test/", a, 11)
    assert second.adopted and not first.adopted
    assert (second.order, second.node, second.key) == (first.order, 1, "http://a.test/")
    assert second.assignment == first.assignment
    assert again.orders() == 1  # no second order number was taken
    assert clusterer.stats["documents"] == 0
    recorded = again.decision_of("http://a.test/")
    assert (recorded.order, recorded.assignment, recorded.adopted) == (1, first.assignment, True)
    assert again.document(1).key == "http://a.test/"
    assert again.decision_of("http://b.test/") is None


def test_every_node_must_bring_the_same_parameters(redis_client):
    RedisIndex(redis_client, "test:", params={"threshold": 0.9}, bucket_bits=12)
    RedisIndex(redis_client, "test:", params={"threshold": 0.9}, bucket_bits=12)
    with pytest.raises(ValueError, match="made with threshold 0.9, not 0.8: use the same"):
        RedisIndex(redis_client, "test:", params={"threshold": 0.8}, bucket_bits=12)
    with pytest.raises(ValueError, match="made with bucket_bits 12, not 20"):
        RedisIndex(redis_client, "test:")
    RedisIndex(redis_client, "other:", params={"threshold": 0.8})  # another crawl: its own
    with pytest.raises(ValueError, match="decode_responses=False"):
        RedisIndex(redis.Redis(decode_responses=True), "test:")


def test_the_index_is_written_only_inside_assign(redis_client):
    index = RedisIndex(redis_client, "test:")
    a, _ = near_copies()
    with pytest.raises(RuntimeError, match=r"only inside RedisIndex.assign"):
        index.new_cluster(0, a)
    index.assign(GreedyClusterer(index, DedupParams()), "k", a, 1)
    assert index.find_exact(1) == (1, 0)
    assert index.cluster(0).first_doc == 1 and index.cluster_of(1) == 0
    assert index.representative(0) == a
    with pytest.raises(KeyError, match="no cluster 5"):
        index.cluster(5)


def test_decisions_survive_redis_being_killed_and_restarted(redis_server, redis_client):
    """SIGKILL of redis-server between two pages, and inside a transaction (after its read,
    before its EXEC, Redis down for 0.3 s): with the AOF fsynced on every write every
    acknowledged decision is still there, every page is decided once, and the decisions are
    those of one process deciding them all in order."""
    params = DedupParams(threshold=0.8)
    docs = sketched(demo_pages())
    index = RedisIndex(redis_client, "test:", node=1)
    clusterer = Interleaved(index, params, None)
    decided = [index.assign(clusterer, name, sk, h) for name, sk, h in docs[:20]]
    redis_server.restart(kill=True)  # between two pages: scripts and connections are gone
    back = threading.Thread(target=lambda: (time.sleep(0.3), redis_server.start()))

    def redis_dies():
        redis_server.stop(kill=True)
        back.start()

    clusterer.meanwhile = redis_dies
    try:
        decided += [index.assign(clusterer, name, sk, h) for name, sk, h in docs[20:]]
    finally:
        back.join()
    assert decided[20].attempts >= 2  # decided again once Redis was back
    assert [d.order for d in decided] == list(range(1, len(docs) + 1))
    memory = GreedyClusterer(MemoryIndex(), params)
    expected = [memory.assign(i + 1, sk, h) for i, (_, sk, h) in enumerate(docs)]
    assert [d.assignment for d in decided] == expected
    # a new process sees every decision
    fresh = RedisIndex(redis.Redis.from_url(redis_server.url), "test:", node=1)
    assert fresh.orders() == len(docs)
    again = fresh.assign(GreedyClusterer(fresh, params), docs[3][0], docs[3][1], docs[3][2])
    assert again.adopted and again.assignment == expected[3]
