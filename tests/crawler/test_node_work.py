"""The work of one node of a distributed crawl (crawler.work.steps over crawler.work.shared), run
inline on a real store and a real redis-server: each decision is the crawl's, with its place in
the crawl's order; pages are settled only once committed; a decision Redis has and the store
lost is adopted; a URL another node decided is left to it; a node's store is not recrawled."""

from __future__ import annotations

import random

from crawler.frontier import defaults
from crawler.work.page import PageView
from crawler.work.settings import SessionSettings
from crawler.work.steps import StoreWork
from dedup.params import DedupParams, SketchParams
from storage.nodes import CrawlNode
from storage.redis_index import RedisIndex
from storage.store import Store

CRAWL = "node-work"


def page(url: str, words: list[str]) -> PageView:
    body = f"<html><body><main><p>{' '.join(words)}</p></main></body></html>".encode()
    return PageView(url, None, None, None, 200, [("Content-Type", "text/html")], body, "html",
                    None, 0.0)  # fmt: skip


def article(seed: int, n: int = 300) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(n)]


def settings(store, url: str, node: int, *, batch_size: int = 100) -> SessionSettings:
    return SessionSettings(store=str(store), sketch=SketchParams(), dedup=DedupParams(),
                           batch_size=batch_size, batch_seconds=60.0, run_id=None,
                           worker="inline", frontier=url,
                           crawl_node=CrawlNode(CRAWL, node, 2))  # fmt: skip


def opened(store, url: str, node: int, **kwargs) -> StoreWork:
    work = StoreWork(settings(store, url, node, **kwargs), storing=True, fused=True, run_id="r")
    work.open()
    return work


def lines(store) -> list[dict]:
    with Store.open(store, readonly=True) as opened_store:
        return list(opened_store.read_log())


def test_a_node_decides_with_the_crawl_and_settles_pages_once_committed(
    redis_server, redis_client, tmp_path
):
    one, two = tmp_path / "one", tmp_path / "two"
    text = article(1)
    first = opened(one, redis_server.url, 1)
    second = opened(two, redis_server.url, 2)
    assert first.decide(page("http://127.0.0.2/a", text)).drop is None  # kept
    assert first.take_durable() == []  # decided, in the batch, not committed: not settled
    copy = second.decide(page("http://127.0.0.3/copy", text))  # a mirror on node 2's host
    assert copy.drop == "exact_duplicate" and "http://127.0.0.2/a" in copy.message
    near = text.copy()
    near[150] = "zzzzzz"
    assert second.decide(page("http://127.0.0.3/near", near)).drop == "near_duplicate"
    first.commit()
    assert first.take_durable() == ["http://127.0.0.2/a"]
    second.finish()
    first.finish()

    found = lines(one) + lines(two)
    assert [line["order"] for line in found] == [1, 2, 3]  # one order for the whole crawl
    assert [line["node"] for line in found] == ["1/2", "2/2", "2/2"]
    assert {line["duplicate_of"] for line in found[1:]} == {"http://127.0.0.2/a"}
    assert len({line["cluster_id"] for line in found}) == 1  # the crawl's cluster id
    with Store.open(two, readonly=True) as store:
        assert store.crawl_node == CrawlNode(CRAWL, 2, 2)
        assert [order for _, order in store.orders()] == [2, 3]
        assert len(store.index) == 0  # the clusters are Redis's


def test_a_decision_the_store_lost_is_adopted_and_another_nodes_url_left_to_it(
    redis_server, redis_client, tmp_path
):
    store = tmp_path / "store"
    work = opened(store, redis_server.url, 1)
    assert work.decide(page("http://127.0.0.2/a", article(2))).drop is None
    order = RedisIndex(redis_client, defaults.keys(CRAWL)["index"]).decision_of(
        "http://127.0.0.2/a").order
    work.close()  # killed before the batch committed: Redis has the decision, the store not
    again = opened(store, redis_server.url, 1)
    outcome = again.decide(page("http://127.0.0.2/a", article(2)))
    assert outcome.drop is None  # kept, as decided before, not a duplicate of itself
    # a URL node 2 decided (a redirect led here from its host): not this node's to keep
    other = opened(tmp_path / "other", redis_server.url, 2)
    assert other.decide(page("http://127.0.0.4/b", article(3))).drop is None
    other.finish()
    elsewhere = again.decide(page("http://127.0.0.4/b", article(3)))
    assert elsewhere.drop == "already_decided" and "by node 2/2" in elsewhere.message
    assert again.take_durable() == ["http://127.0.0.4/b"]  # nothing to write: settled at once
    again.finish()
    with Store.open(store, readonly=True) as opened_store:
        docs = list(opened_store.current_documents())
        assert [record.url for _, record in docs] == ["http://127.0.0.2/a"]
        assert opened_store.order_of(docs[0][0]) == order
    assert [(line["url"], line["order"]) for line in lines(store)] == [("http://127.0.0.2/a", order)]


def test_a_nodes_store_passes_over_what_it_decided_in_an_earlier_run(
    redis_server, redis_client, tmp_path
):
    """A recrawl of a distributed crawl is not supported: a later run of a node's store passes
    over every URL it has, changed or not, as a resumed crawl does."""
    store = tmp_path / "store"
    work = opened(store, redis_server.url, 1)
    assert work.decide(page("http://127.0.0.2/a", article(4))).drop is None
    work.finish()
    with Store.open(store) as opened_store, opened_store.batch():
        opened_store.history.finish_run(0.0)  # the crawl finished: the next run is a new one
    later = opened(store, redis_server.url, 1)
    assert later.run == 2
    changed = later.decide(page("http://127.0.0.2/a", article(5)))
    assert changed.drop == "already_decided"
    later.finish()
    assert len(lines(store)) == 1


def test_a_skipped_page_has_its_place_in_the_crawls_order_too(redis_server, redis_client, tmp_path):
    store = tmp_path / "store"
    work = opened(store, redis_server.url, 1)
    missing = PageView("http://127.0.0.2/gone", None, "http_404", "HTTP status 404", 404, [],
                       b"", "html", None, 0.0)  # fmt: skip
    assert work.decide(missing).drop == "skipped"
    assert work.decide(page("http://127.0.0.2/a", article(6))).drop is None
    work.finish()
    assert [(line["decision"], line["order"]) for line in lines(store)] == [("skipped", 1),
                                                                           ("kept", 2)]
