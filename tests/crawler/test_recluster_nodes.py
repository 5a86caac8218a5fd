"""``neardup recluster`` over the stores of a distributed crawl's nodes.

One real crawl by three real ``neardup crawl --frontier URL --node I/3`` processes against a real
redis-server, over a site of three loopback hosts (one a node's) with mirrors, near copies and
related pages across them (tests/crawler/mirror_site.py): the stores are read together in the
crawl's order, which the nodes' own dedup logs record apart from the stores; with the crawl's
parameters ``--diff`` finds nothing to change, on either engine; the mistakes of giving the
stores are one line each. Node stores written by hand (real LMDB) give the order a node's
restart leaves, where document ids and places in the crawl's order disagree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crawler.cli import main
from crawler.recluster.inputs import crawl_stores, read_store
from storage.errors import StoreError
from storage.nodes import CrawlNode, in_crawl_order
from storage.records import DocumentRecord
from storage.store import Store
from tests.crawler.mirror_site import MirrorSite, hosts_for
from tests.crawler.test_distributed_crawl import NODES, log_lines, start, store_of, wait_all

#: the tests of the real crawl: three node processes, some twenty seconds before the first
crawled = pytest.mark.slow


@pytest.fixture(scope="module")
def crawl(redis_server, tmp_path_factory) -> dict:
    """The three node stores of a finished crawl, and every decision line of their logs in the
    crawl's order (by the ``order`` each line records)."""
    import redis

    folder = tmp_path_factory.mktemp("nodes")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    # each response takes a little while, so that every node is still crawling while the
    # others are, whatever the machine's load: the crawl's order then interleaves the nodes
    site = MirrorSite(hosts_for(NODES, 1), delay=0.2)
    with site.serving():
        nodes = {n: start(site, redis_server.url, folder, n) for n in range(1, NODES + 1)}
        wait_all(nodes, folder)
    stores = [store_of(folder, n) for n in range(1, NODES + 1)]
    lines = sorted((line for n in range(1, NODES + 1) for line in log_lines(folder, n)),
                   key=lambda line: line["order"])  # fmt: skip
    return {"folder": folder, "stores": stores, "lines": lines,
            "argv": [arg for store in stores for arg in ("--store", str(store))]}  # fmt: skip


def run(capsys, *argv: str) -> dict:
    assert main(["recluster", *argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys, *argv: str) -> str:
    assert main(["recluster", *argv, "--quiet"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith("neardup recluster: error: "), captured.err
    return lines[0].removeprefix("neardup recluster: error: ")


@crawled
def test_the_nodes_stores_are_read_in_the_crawls_order(crawl, tmp_path, capsys):
    kept = [line["url"] for line in crawl["lines"] if line["decision"] == "kept"]
    # the crawl's order interleaves the nodes: reading the stores one after another would not
    nodes = [line["node"] for line in crawl["lines"] if line["decision"] == "kept"]
    assert nodes != sorted(nodes)
    # every node's order: the stores' documents, by the place each has, are the logs' order
    assert [doc.id for doc in read_store(crawl["stores"])] == kept
    # given in any order, the stores are read in the crawl's
    assert [doc.id for doc in read_store(crawl["stores"][::-1])] == kept
    out = tmp_path / "clusters.jsonl"
    summary = run(capsys, *crawl["argv"], "-o", str(out), "-j", "2")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["id"] for row in rows] == kept
    # the crawl kept no two alike: each kept page is a cluster of its own again
    assert all(row["representative"] for row in rows)
    assert summary["summary"]["documents"] == len(kept)


@crawled
def test_diff_over_every_node_finds_no_decision_to_change(crawl, capsys):
    decided = crawl["lines"]
    report = run(capsys, *crawl["argv"], "--diff", "-j", "2")
    assert report["changed"] == 0 and report["now_dropped"] == report["now_kept"] == []
    assert report["stores"] == [str(store) for store in crawl["stores"]]
    skipped = sum(line["decision"] == "skipped" for line in decided)
    assert skipped >= 1  # the link that leads nowhere
    assert report["compared"] == len(decided) - skipped
    dropped = [line for line in decided if line["decision"] != "kept" and
               line["decision"] != "skipped"]  # fmt: skip
    assert report["unchanged"] == {"kept": report["compared"] - len(dropped),
                                   "dropped": len(dropped)}  # fmt: skip
    # dropped pages across nodes are among them: a copy kept by another node
    node_of = {line["url"]: line["node"] for line in decided}
    assert any(node_of[line["duplicate_of"]] != line["node"] for line in dropped)
    assert set(report["not_compared"]) == {"skipped"}


@crawled
def test_diff_with_other_parameters_names_each_changed_pages_node(crawl, capsys):
    """At a threshold of 0.2 a related page (the first half of another host's article, about a
    third alike) is now dropped for the article, whichever node keeps it."""
    report = run(capsys, *crawl["argv"], "--diff", "--threshold", "0.2", "-j", "2")
    node_of = {line["url"]: line["node"] for line in crawl["lines"]}
    assert report["now_dropped"]
    for change in report["now_dropped"] + report["now_kept"]:
        assert change["node"] == node_of[change["url"]]
    assert any(node_of[c["duplicate_of"]] != c["node"] for c in report["now_dropped"])
    # the table has a node column
    assert main(["recluster", *crawl["argv"], "--diff", "--threshold", "0.2", "--quiet"]) == 0
    table = capsys.readouterr().out
    assert table.startswith(f"re-clustered the stores of {NODES} nodes (")
    head = next(line for line in table.splitlines() if line.strip().startswith("node"))
    assert head.split()[:2] == ["node", "url"]


@crawled
def test_spark_reads_the_stores_in_the_crawls_order_as_the_local_engine_does(
    crawl, spark, tmp_path, capsys
):
    local, on_spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    run(capsys, *crawl["argv"], "-o", str(local), "-j", "1")
    run(capsys, *crawl["argv"], "-o", str(on_spark), "--engine", "spark")
    assert on_spark.read_bytes() == local.read_bytes()
    # with the crawl's parameters, nothing to change
    expected = run(capsys, *crawl["argv"], "--diff", "-j", "1")
    got = run(capsys, *crawl["argv"], "--diff", "--engine", "spark", "--partitions", "2")
    assert got.pop("seconds") > 0 and expected.pop("seconds") > 0
    assert got == expected and got["changed"] == 0 and len(got["stores"]) == NODES


@crawled
def test_the_stores_must_be_every_node_of_one_crawl(crawl, tmp_path, capsys):
    one, two, three = map(str, crawl["stores"])
    assert one_line_error(capsys, "--store", one, "--store", two, "--diff") == (
        f"--diff compares with the decisions of node 1/3 of the distributed crawl "
        f"{_crawl_name(one)!r}, made against the pages of all 3 nodes: give the stores of "
        "node 3/3 too")
    assert "give the stores of node 2/3, 3/3 too" in one_line_error(
        capsys, "--store", one, "--diff")
    assert one_line_error(capsys, "--store", one, "--store", one) == (
        f"--store {one} is given twice (as {one})")
    copy = tmp_path / "copy-of-1"
    shutil.copytree(one, copy)
    assert one_line_error(capsys, "--store", one, "--store", str(copy)) == (
        f"stores {one} and {copy} are both node 1/3 of the crawl {_crawl_name(one)!r}: give "
        "each node's store once")
    single = tmp_path / "single"
    with Store.open(single, readonly=False):
        pass
    assert "holds a single-machine crawl" in one_line_error(
        capsys, "--store", one, "--store", str(single))
    assert one_line_error(capsys, "--store", one, "--store", str(tmp_path / "none")) == (
        f"no store at {tmp_path / 'none'}")
    # a subset of the nodes, without --diff, is re-clustered as given, in the crawl's order
    out = tmp_path / "two.jsonl"
    run(capsys, "--store", three, "--store", one, "-o", str(out))
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [line["url"] for line in crawl["lines"]
                   if line["decision"] == "kept" and line["node"] in ("1/3", "3/3")]  # fmt: skip


def _crawl_name(store: str | Path) -> str:
    with Store.open(store, readonly=True) as opened:
        assert opened.crawl_node is not None
        return opened.crawl_node.crawl


# --- node stores written by hand ---------------------------------------------------------------


def node_store(path: Path, node: int, places: list[int | None]) -> Path:
    """A store of node ``node`` of 2 whose documents 0, 1, ... have the crawl's ``places``."""
    with Store.open(path) as store, store.batch():
        store.join_crawl(CrawlNode("by-hand", node, 2))
        for place in places:
            doc_id = store.next_doc_id()
            store.put_document(doc_id, DocumentRecord(f"http://127.0.0.{node + 1}/{doc_id}",
                                                      "kept", 0.0))  # fmt: skip
            if place is not None:
                store.put_order(doc_id, place)
    return path


def test_a_restarted_nodes_documents_take_their_places_in_the_crawls_order(tmp_path):
    """Node 1 was killed after Redis decided its page at place 1 and before its store kept it:
    started again, it stored it as document 2, after document 1 (place 3)."""
    one = node_store(tmp_path / "one", 1, [0, 3, 1])
    two = node_store(tmp_path / "two", 2, [2, 4])
    with crawl_stores([two, one]) as stores:
        read = [(k, doc_id) for k, doc_id, _ in in_crawl_order(stores)]
        assert read == [(1, 0), (1, 2), (0, 0), (1, 1), (0, 1)]
        # one node's store alone: its own documents in the crawl's order, not by id
        assert [d for _, d, _ in in_crawl_order(stores[1:])] == [0, 2, 1]


def test_a_document_without_its_place_or_two_in_one_place_is_one_line(tmp_path):
    one = node_store(tmp_path / "one", 1, [0, None])
    two = node_store(tmp_path / "two", 2, [1, 2])
    with crawl_stores([one]) as stores, pytest.raises(StoreError) as lost:
        next(in_crawl_order(stores))
    assert str(lost.value) == (f"store {one}: document 1 (http://127.0.0.2/1) has no place in "
                               "the crawl's order (neardup verify --store says more)")  # fmt: skip
    three = node_store(tmp_path / "three", 1, [0, 2])
    with crawl_stores([three, two]) as stores, pytest.raises(StoreError) as shared:
        next(in_crawl_order(stores))
    assert str(shared.value) == (f"document 1 of store {three} and document 1 of store {two} "
                                 "share the place 2 in the crawl's order")  # fmt: skip
