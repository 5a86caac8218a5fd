"""``neardup log``, ``explain`` and ``report`` over the stores of one crawl's nodes.

One real crawl of the demo site served on two hosts (127.0.0.1 and 127.0.0.2, each the whole
site, so the second host's pages duplicate the first's) goes into one store; its documents and
log lines are then dealt out to two node stores by host
(:func:`tests.crawler.review_stores.split_into_nodes`), as two nodes of a distributed crawl
would have kept them: cluster ids of the whole crawl, each line with its node and its place in
the crawl's order. Read together, the two node stores must say what the one store says.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from crawler.cli import main
from crawler.demo import SITE_DIR
from crawler.demo.server import serve
from crawler.review.explain import explain
from crawler.review.facts import collect
from crawler.review.log import decisions
from dedup.params import SketchParams
from storage.store import Store
from tests.crawler.review_stores import split_into_nodes
from tests.crawler.test_explain_command import neardup
from tests.crawler.test_log_command import neardup as neardup_bytes
from tests.crawler.test_review_runs import _Page, table

SECOND_HOST = "127.0.0.2"


def node_of(url: str) -> int:
    """The node of a URL: its host's (127.0.0.1 is node 1, the other host node 2)."""
    return 0 if urlsplit(url).hostname == "127.0.0.1" else 1


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="module")
def second_host() -> Iterator[str]:
    with serve(SITE_DIR, host=SECOND_HOST) as base:
        yield base


@pytest.fixture(scope="module")
def nodes(demo_site: str, second_host: str, tmp_path_factory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("nodes")
    whole = home / "whole"
    proc = neardup("crawl", demo_site + "/", second_host + "/", "--store", str(whole),
                   "--quiet", "--set", "crawl.autothrottle=false")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stores = [home / "node1", home / "node2"]
    split_into_nodes(whole, stores, node_of)
    lines = [d.entry for d in decisions(whole)]
    assert {node_of(e["url"]) for e in lines} == {0, 1}
    return {"whole": whole, "stores": stores, "lines": lines,
            "argv": [a for s in stores for a in ("--store", str(s))]}  # fmt: skip


# --- neardup log ---------------------------------------------------------------------------------


def test_log_merges_the_nodes_in_the_crawls_order(nodes):
    proc = neardup_bytes("log", *nodes["argv"], "--json")
    assert proc.returncode == 0
    merged = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["order"] for e in merged] == list(range(len(nodes["lines"])))
    assert [e["url"] for e in merged] == [e["url"] for e in nodes["lines"]]
    assert all(e["node"] == f"{node_of(e['url']) + 1}/2" for e in merged)
    # byte for byte: each merged line is a line of its node's log
    written = {line for s in nodes["stores"] for f in (s / "logs").glob("*.jsonl")
               for line in f.read_bytes().splitlines()}  # fmt: skip
    assert set(proc.stdout.splitlines()) == written


def test_log_table_has_a_node_column(nodes, capsys):
    assert main(["log", *nodes["argv"], "--width", "220"]) == 0
    out = capsys.readouterr().out
    rows = table(out)
    assert len(rows) == len(nodes["lines"])
    # two hosts: URLs whole, each with the node of its host
    assert [(r["URL"], r["node"]) for r in rows] == [
        (e["url"], f"{node_of(e['url']) + 1}/2") for e in nodes["lines"]
    ]
    # the filters work across the nodes: every dropped page of both
    assert main(["log", *nodes["argv"], "-d", "dropped", "--width", "220"]) == 0
    dropped = table(capsys.readouterr().out)
    assert [r["URL"] for r in dropped] == [
        e["url"] for e in nodes["lines"] if e["decision"] in ("exact_duplicate", "near_duplicate")
    ]
    assert {r["node"] for r in dropped} == {"1/2", "2/2"}


def test_one_node_store_alone_reads_as_before(nodes, capsys):
    """A single --store: its own lines in written order, nothing merged."""
    first = nodes["stores"][0]
    assert main(["log", "--store", str(first), "--json"]) == 0
    out = capsys.readouterr().out.encode("utf-8")
    assert out == b"".join(f.read_bytes() for f in sorted((first / "logs").glob("*.jsonl")))


# --- neardup report ------------------------------------------------------------------------------


def test_the_report_of_the_nodes_is_the_report_of_the_crawl(nodes):
    whole = collect(nodes["whole"], threshold=0.9, top_clusters=100)
    both = collect(nodes["stores"], threshold=0.9, top_clusters=100)
    assert both.several and not whole.several
    assert both.decisions == whole.decisions and both.fetched == len(nodes["lines"])
    assert both.summary.to_dict() == whole.summary.to_dict()
    assert both.summary.duplicate_clusters > 0
    assert both.sizes == whole.sizes
    assert both.dropped_total == whole.dropped_total
    assert both.skipped == whole.skipped
    assert sorted(both.near_estimates) == sorted(whole.near_estimates)

    def clusters(data) -> list[tuple[Any, ...]]:
        return [(c.cluster_id, c.size, c.identical, sorted((m.url, m.decision) for m in c.members))
                for c in data.largest]  # fmt: skip

    assert clusters(both) == clusters(whole)
    # a cluster across nodes: pages of both hosts, each with its node
    across = [c for c in both.largest if {m.node for m in c.members} == {"1/2", "2/2"}]
    assert across
    for c in both.largest:
        assert all(m.node == f"{node_of(m.url) + 1}/2" for m in c.members)
    # each dropped page explained as in the one store, its original found on either node
    assert [v.row.url for v in both.dropped] == [v.row.url for v in whole.dropped]
    for a, b in zip(both.dropped, whole.dropped):
        assert a.error is None and a.explanation is not None and b.explanation is not None
        assert a.explanation.original is not None and b.explanation.original is not None
        assert a.explanation.original.url == b.explanation.original.url
        assert a.estimated_resemblance == b.estimated_resemblance
        assert a.exact_resemblance == b.exact_resemblance
        assert a.row.node == f"{node_of(a.row.url) + 1}/2"
    assert [s.node for s in both.stores] == ["1/2", "2/2"]
    assert sum(s.documents for s in both.stores) == both.fetched


def test_the_report_page_lists_the_nodes(nodes, tmp_path):
    out = tmp_path / "nodes.html"
    assert main(["report", *nodes["argv"], "-o", str(out), "-q", "--top", "50"]) == 0
    text = out.read_text(encoding="utf-8")
    page = _Page.of(text)
    assert len(page.ids) == len(set(page.ids))  # doc ids repeat across nodes; anchors do not
    dropped = page.tables["dropped-table"]
    assert [row[0] for row in dropped] == [
        e["url"] for e in nodes["lines"] if e["decision"] in ("exact_duplicate", "near_duplicate")
    ]
    assert [row[1] for row in dropped] == [f"{node_of(row[0]) + 1}/2" for row in dropped]
    for links in page.links["dropped-table"]:  # each links to its explanation on the page
        assert links[0].startswith("#doc-") and links[0][1:] in page.ids
    for store in nodes["stores"]:
        assert str(store) in text
    assert "(node 1/2)" in text and "(node 2/2)" in text


def test_report_json_over_the_nodes(nodes, capsys):
    assert main(["report", *nodes["argv"], "--json", "-q"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert [(s["path"], s["node"]) for s in facts["stores"]] == [
        (str(s), f"{n + 1}/2") for n, s in enumerate(nodes["stores"])
    ]
    assert facts["fetched"] == len(nodes["lines"]) and facts["changes"] is None
    nodes_of_dropped = {p["page"]["node"] for p in facts["dropped"]}
    assert nodes_of_dropped == {"1/2", "2/2"}


# --- neardup explain -----------------------------------------------------------------------------


def test_explain_finds_the_page_and_its_original_on_any_node(nodes, capsys):
    # a page dropped for a page of the other node
    line = next(e for e in nodes["lines"] if e["decision"] in ("exact_duplicate", "near_duplicate")
                and node_of(e["url"]) != node_of(e["duplicate_of"]))  # fmt: skip
    own, other = (nodes["stores"][node_of(url)] for url in (line["url"], line["duplicate_of"]))
    assert main(["explain", line["url"], *nodes["argv"], "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    with Store.open(nodes["whole"], readonly=True) as whole:
        alone = explain(whole, line["url"]).to_dict()
    assert (found["store"], found["original_store"]) == (str(own), str(other))
    assert found["duplicate_of"]["url"] == alone["duplicate_of"]["url"] == line["duplicate_of"]
    assert found["comparison"] == alone["comparison"]
    assert found["log"]["node"] == f"{node_of(line['url']) + 1}/2"
    assert main(["explain", line["url"], *nodes["argv"], "--no-text", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert f"  store         {own}\n" in out
    assert f"in store {other}" in out and f", node {node_of(line['url']) + 1}/2" in out


def test_explain_a_kept_page_lists_its_cluster_across_the_nodes(nodes, capsys):
    line = next(e for e in nodes["lines"] if e["decision"] == "kept" and any(
        d.get("duplicate_of") == e["url"] and node_of(d["url"]) != node_of(e["url"])
        for d in nodes["lines"]))  # fmt: skip
    assert main(["explain", line["url"], *nodes["argv"], "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    with Store.open(nodes["whole"], readonly=True) as whole:
        alone = explain(whole, line["url"]).to_dict()
    assert found["cluster"]["cluster_id"] == alone["cluster"]["cluster_id"]
    assert found["cluster"]["size"] == alone["cluster"]["size"] >= 2
    assert found["cluster"]["identical"] == alone["cluster"]["identical"]

    def members(cluster: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((m["url"], m["decision"], m["resemblance"]) for m in cluster["members"])

    assert members(found["cluster"]) == members(alone["cluster"])
    other = str(nodes["stores"][1 - node_of(line["url"])])
    assert any(m["store"] == other for m in found["cluster"]["members"])


def test_a_path_on_both_hosts_is_ambiguous_across_the_nodes(nodes, capsys):
    assert main(["explain", "/walks/wenlow-tarn.html", *nodes["argv"]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "the path /walks/wenlow-tarn.html is on 2 hosts in stores " in err
    assert main(["explain", "no-such-page", *nodes["argv"]]) == 2
    err = capsys.readouterr().err
    assert "no page in stores " in err and err.count("\n") == 1


def test_stores_of_other_parameters_are_refused_in_one_line(nodes, tmp_path, capsys):
    other = tmp_path / "other"
    Store.open(other, params=SketchParams(size=50)).close()
    for command in (["report", "-q"], ["explain", "/walks/"]):
        assert main([*command, "--store", str(nodes["stores"][0]), "--store", str(other)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "were made with different parameters (sketch.size" in err
    twice = ["--store", str(nodes["stores"][0]), "--store", str(Path(nodes["stores"][0]) / ".")]
    for command in (["report", "-q"], ["explain", "/walks/"], ["log"]):
        assert main([*command, *twice]) == 2
        assert "is given twice" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["log", "report", "explain"])
def test_stores_that_are_not_the_nodes_of_one_crawl_are_refused_in_one_line(
    nodes, command, capsys, tmp_path
):
    """A node's store with a single machine's store (or with itself under another name) is
    not one crawl: each review command refuses, as recluster does."""
    node1, whole = nodes["stores"][0], nodes["whole"]
    extra = {"log": [], "report": ["-o", str(tmp_path / "r.html")], "explain": ["/"]}[command]
    assert main([command, *extra, "--store", str(node1), "--store", str(whole)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"store {whole} holds a single-machine crawl" in err, err


def test_explain_on_one_node_names_the_page_in_another_node_s_store(nodes, capsys):
    """A copy dropped on node 2 of a page node 1 kept, explained from node 2's store alone: the
    note names the page and says where to find it."""
    line = next(e for e in nodes["lines"] if e["decision"] == "exact_duplicate"
                and node_of(e["url"]) == 1 and node_of(e["duplicate_of"]) == 0)  # fmt: skip
    assert main(["explain", line["url"], "--store", str(nodes["stores"][1])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (f"note: the page it duplicated ({line['duplicate_of']}) could not be found in the "
            "store: a node's store; give the other nodes' stores too (--store repeated)") in out
