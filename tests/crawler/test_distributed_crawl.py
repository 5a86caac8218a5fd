"""Crawls on several machines, with the real command: three ``neardup crawl --frontier URL
--node I/3`` processes, each with its own store, one real redis-server (tests/redis_server.py),
and a site on six loopback hosts, two owned by each node, with mirrors, near copies and related
pages across hosts (tests/crawler/mirror_site.py); one node killed and restarted, Redis killed
and restarted; and the mistakes a user can make starting a node, each one line."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis as redis_module

from crawler.cli import main
from crawler.config import Config
from crawler.frontier import defaults
from crawler.frontier.partition import crawl_name, node_of_url
from crawler.frontier.queue import check_nodes
from crawler.work.shared import index_params
from dedup.estimators import estimate
from dedup.sketches import Sketch
from storage.nodes import CrawlNode
from storage.records import DocumentRecord
from storage.redis_index import RedisIndex
from storage.store import Store
from tests.redis_server import RedisServer
from tests.crawler.mirror_site import (
    ROOT,
    MirrorSite,
    hosts_for,
    node_command,
    start_node,
    summary,
)

NODES = 3
AGENT = "neardup/0.1 (near-duplicate aware crawler; node {})"


# --- running the nodes -------------------------------------------------------------------------


def crawl_of(site: MirrorSite) -> str:
    """The crawl's name, which every node makes from the start URLs (the hosts' index pages)."""
    return crawl_name([f"{base}/" for base in site.bases])


def store_of(folder: Path, node: int) -> Path:
    return folder / f"store-{node}"


def out_of(folder: Path, node: int) -> Path:
    return folder / f"out-{node}.txt"


def start(site: MirrorSite, url: str, folder: Path, node: int, **settings: str):
    command = node_command(site, url, node, NODES, store_of(folder, node), **settings)
    return start_node(command, out_of(folder, node))


def wait_all(processes: dict, folder: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    for node, process in processes.items():
        try:
            process.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in processes.values():
                other.kill()
            tails = "\n".join(out_of(folder, n).read_text()[-2000:] for n in processes)
            pytest.fail(f"the nodes did not finish in {timeout} s:\n{tails}")
        assert process.returncode == 0, out_of(folder, node).read_text()[-4000:]
        assert summary(out_of(folder, node))["reason"] == "finished"


def wait_for_the_store(store: Path, timeout: float = 30) -> None:
    """Until no process holds the store's writer lock (a killed node's worker process dies with
    it, a moment later)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(store / "writer.lock", "a+b") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, "the killed node's worker kept its store"
        time.sleep(0.05)


# --- what the stores hold ----------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    node: int
    doc_id: int
    url: str
    decision: str
    order: int | None
    sketch: Sketch | None


def documents(folder: Path) -> list[Document]:
    """The current documents of every node's store."""
    found = []
    for node in range(1, NODES + 1):
        with Store.open(store_of(folder, node), readonly=True) as store:
            for doc_id, record in store.current_documents():
                found.append(Document(node, doc_id, record.url, record.decision,
                                      store.order_of(doc_id), store.sketch(doc_id)))  # fmt: skip
    return found


def log_lines(folder: Path, node: int) -> list[dict]:
    lines = []
    for path in sorted((store_of(folder, node) / "logs").glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return lines


def shingles(words: tuple[str, ...], w: int = 4) -> set[tuple[str, ...]]:
    return {words[i : i + w] for i in range(len(words) - w + 1)}


def resemblance(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def check_the_crawl(site: MirrorSite, client, folder: Path, *, fetched_once: bool = True) -> None:
    """Everything a finished crawl on three nodes must be, whatever happened on the way."""
    # each host was contacted by exactly one node, its own (the server's log of User-Agents)
    for host, agents in site.agents_by_host().items():
        assert agents == {AGENT.format(f"{node_of_url(f'http://{host}/', NODES)}/{NODES}")}
    fetches = site.fetches()
    assert set(fetches) == site.fetched_urls()  # every reachable URL, nothing else
    if fetched_once:
        assert max(fetches.values()) == 1, [url for url, n in fetches.items() if n > 1]

    docs = documents(folder)
    by_url = {doc.url: doc for doc in docs}
    # every page decided once in the whole crawl, in the store of its host's node
    assert Counter(doc.url for doc in docs) == Counter(site.decided_urls())
    assert all(doc.node == node_of_url(doc.url, NODES) for doc in docs)
    # one order for the crawl: every document has its own place in it
    orders = [doc.order for doc in docs]
    assert None not in orders and len(set(orders)) == len(orders)

    for node in range(1, NODES + 1):
        mine = {doc.doc_id: doc for doc in docs if doc.node == node}
        lines = log_lines(folder, node)
        # each line names its node and the place its document has in the crawl's order (a
        # kill between a commit and the writing of its lines may leave a document without one)
        assert {line["doc_id"] for line in lines} <= set(mine)
        if fetched_once:
            assert len(lines) == len(mine)
        for line in lines:
            assert line["node"] == f"{node}/{NODES}"
            assert line["order"] == mine[line["doc_id"]].order
            assert line["duplicate_of"] != line["url"]  # never a copy of itself (adopted)

    kept = [doc for doc in docs if doc.decision == "kept"]
    # no two kept pages alike, across all stores
    for a, b in itertools.combinations(kept, 2):
        assert estimate(a.sketch, b.sketch).resemblance < 0.95, (a.url, b.url)
    # no page dropped for a page it resembles below 0.5: estimated from the stores' sketches,
    # and truly (the site's words), whichever node keeps the page it names
    for node in range(1, NODES + 1):
        for line in log_lines(folder, node):
            if line["decision"] in ("exact_duplicate", "near_duplicate"):
                original = by_url[line["duplicate_of"]]
                page = by_url[line["url"]]
                assert estimate(page.sketch, original.sketch).resemblance >= 0.5
                words = site.words_of(line["url"]), site.words_of(line["duplicate_of"])
                assert None not in words and resemblance(*words) >= 0.5
    # of an article and its mirror or near copy one is kept, on whichever node; both of the
    # related ones
    for kind, urls in site.groups():
        decisions = sorted(by_url[url].decision for url in urls)
        if kind == "related":
            assert decisions == ["kept", "kept"], urls
        else:
            assert decisions.count("kept") == 1, (kind, urls, decisions)

    # the frontier is empty: no node holds anything
    crawl = crawl_of(site)
    for node in range(1, NODES + 1):
        queue, inflight = defaults.node_keys(crawl, node)
        assert client.llen(queue) == 0 and client.llen(inflight) == 0
    # each store is consistent, and together they hold each kept page once
    records = 0
    for node in range(1, NODES + 1):
        done = subprocess.run([sys.executable, "-m", "crawler.cli", "verify", "--json", "--store",
                               str(store_of(folder, node))], cwd=ROOT, capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert report["node"] == f"{node}/{NODES}"
        records += report["warc_records"]
    assert records == len(kept)


# --- crawls ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_three_nodes_crawl_a_site_of_six_hosts_as_one_crawl(redis_server, redis_client, tmp_path):
    with MirrorSite(hosts_for(NODES, 2)).serving() as site:
        nodes = {n: start(site, redis_server.url, tmp_path, n) for n in range(1, NODES + 1)}
        wait_all(nodes, tmp_path)
        check_the_crawl(site, redis_client, tmp_path)
    # and copies were found across nodes: some page dropped for a page another node keeps
    docs = {doc.url: doc for doc in documents(tmp_path)}
    across = [line for n in range(1, NODES + 1) for line in log_lines(tmp_path, n)
              if line["duplicate_of"] and docs[line["duplicate_of"]].node != n]  # fmt: skip
    assert across
    # a node's store names the crawl it belongs to; the same command again changes nothing
    with Store.open(store_of(tmp_path, 1), readonly=True) as store:
        assert store.crawl_node == CrawlNode(crawl_of(site), 1, NODES)


@pytest.mark.slow
def test_a_node_killed_mid_crawl_and_started_again_loses_nothing_and_stores_nothing_twice(
    redis_server, redis_client, tmp_path
):
    """SIGKILL of a node once it has committed a third of its pages and Redis holds decisions
    of it that its store has not committed yet; the same command starts it again. Its pages in
    flight are fetched again, those Redis had decided keep their decision (adopted), and every
    page is decided and stored once."""
    victim = 2
    with MirrorSite(hosts_for(NODES, 2), articles=8, delay=0.25).serving() as site:
        mine = sorted(url for url in site.decided_urls() if node_of_url(url, NODES) == victim)
        # a page every 0.25 s, a commit every 2 s: decisions wait in the batch for a while
        slow = {"CONCURRENT_REQUESTS": "1", "NEARDUP_BATCH_SECONDS": "2"}
        nodes = {n: start(site, redis_server.url, tmp_path, n, **slow) for n in range(1, NODES + 1)}
        crawl = crawl_of(site)
        _, inflight = defaults.node_keys(crawl, victim)
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "node 2 committed too little"
            assert nodes[victim].poll() is None, "node 2 ended before it was killed"
            committed = {line["url"] for line in log_lines(tmp_path, victim)}
            if len(committed) >= len(mine) // 3:
                index = RedisIndex(redis_client, defaults.keys(crawl)["index"])
                decided = {url for url in mine if index.decision_of(url) is not None}
                if decided - committed and redis_client.llen(inflight):
                    break
            time.sleep(0.01)
        os.kill(nodes[victim].pid, signal.SIGKILL)
        nodes[victim].wait()
        uncommitted = {url: index.decision_of(url).order for url in decided - committed}
        wait_for_the_store(store_of(tmp_path, victim))
        nodes[victim] = start(site, redis_server.url, tmp_path, victim, **slow)
        wait_all(nodes, tmp_path)
        check_the_crawl(site, redis_client, tmp_path, fetched_once=False)
        # fetched twice at most: what the killed node held in flight (and its robots.txt)
        assert max(site.fetches().values()) <= 2
    docs = {doc.url: doc for doc in documents(tmp_path)}
    # the pages Redis had decided and the store had not kept the decision they were given
    for url, order in uncommitted.items():
        assert docs[url].order == order
    restarted = summary(out_of(tmp_path, victim))
    assert restarted["stats"].get("neardup/frontier/recovered", 0) >= 1
    assert any("did not stop cleanly" in note for note in restarted["notes"])


@pytest.mark.slow
def test_a_redis_restart_mid_crawl_loses_no_url_and_decides_none_twice(
    redis_server, redis_client, tmp_path
):
    """redis-server is killed (SIGKILL) once a third of the pages are committed and is back a
    second later from its AOF (appendfsync always): the nodes ride it out."""
    with MirrorSite(hosts_for(NODES, 2), articles=8, delay=0.05).serving() as site:
        total = len(site.decided_urls())
        slow = {"CONCURRENT_REQUESTS": "2"}
        nodes = {n: start(site, redis_server.url, tmp_path, n, **slow) for n in range(1, NODES + 1)}
        deadline = time.monotonic() + 120
        while sum(len(log_lines(tmp_path, n)) for n in nodes) < total // 3:
            assert time.monotonic() < deadline, "the crawl made too little progress"
            assert all(p.poll() is None for p in nodes.values()), "a node ended early"
            time.sleep(0.02)
        before = sum(len(log_lines(tmp_path, n)) for n in nodes)
        redis_server.stop(kill=True)
        time.sleep(1.0)
        redis_server.start()
        wait_all(nodes, tmp_path)
        import redis

        check_the_crawl(site, redis.Redis.from_url(redis_server.url), tmp_path)
    assert sum(len(log_lines(tmp_path, n)) for n in nodes) > before  # decided after the restart


# --- acknowledgements ----------------------------------------------------------------------------


class _Crawler:
    """What CommitAcks uses of a crawler: its signals (Scrapy's own signal manager)."""

    def __init__(self) -> None:
        from scrapy.signalmanager import SignalManager

        self.signals = SignalManager()


def test_a_page_is_acknowledged_once_through_the_pipelines_and_committed_in_either_order(
    redis_client,
):
    """The entry leaves the in-flight list only when both have happened, and on the event loop's
    next turn after the later one (after every handler of the item's signal, the spider's that
    queues the page's links among them); a page whose decision never commits stays in flight."""
    import asyncio

    from scrapy import Request, Spider, signals
    from scrapy.http import HtmlResponse

    from crawler.frontier.acks import CommitAcks
    from crawler.frontier.scheduler import FrontierScheduler

    class Quiet(Spider):
        name = "acks"

    scheduler = FrontierScheduler(redis_client, "acks", 1, 1)
    scheduler.open(Quiet())
    inflight = scheduler.queues.inflight_key
    urls = [f"http://127.0.0.2/{path}" for path in ("first", "second", "never")]
    for url in urls:
        scheduler.enqueue_request(Request(url))
    popped = [scheduler.next_request() for _ in urls]
    crawler = _Crawler()
    acks = CommitAcks(crawler, scheduler)

    def through(request):
        response = HtmlResponse(request.url, body=b"<p>x</p>", request=request)
        crawler.signals.send_catch_log(signals.item_scraped, item={"url": request.url},
                                       response=response, spider=None)  # fmt: skip

    async def scenario():
        # committed first, then through the pipelines: acknowledged on the next turn
        acks.settled([urls[0]])
        assert redis_client.llen(inflight) == 3
        through(popped[0])
        assert redis_client.llen(inflight) == 3
        await asyncio.sleep(0)
        assert redis_client.llen(inflight) == 2
        # through first, then committed
        through(popped[1])
        await asyncio.sleep(0)
        assert redis_client.llen(inflight) == 2
        acks.settled([urls[1]])
        await asyncio.sleep(0)
        assert redis_client.llen(inflight) == 1
        # through, never committed (the store failed): it stays for the restart
        through(popped[2])
        await asyncio.sleep(0.01)
        assert redis_client.lrange(inflight, 0, -1) == [popped[2].meta[defaults.ENTRY_META]]
        assert acks.waiting == 1

    asyncio.run(scenario())
    acks.close()


# --- mistakes ------------------------------------------------------------------------------------


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["crawl", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith("neardup crawl: error: "), captured.err
    return lines[0].removeprefix("neardup crawl: error: ")


def test_a_node_started_wrongly_is_told_in_one_line(redis_server, redis_client, tmp_path, capsys):
    url = "http://127.0.0.2:9/"
    store = str(tmp_path / "store")
    frontier = redis_server.url

    def error(*argv: str) -> str:
        return one_line_error(capsys, url, "--store", store, *argv)

    assert "not a Redis URL" in error("--frontier", "http://127.0.0.1:6379/0", "--node", "1/3")
    assert error("--frontier", frontier, "--node", "4/3") == (
        "--node 4/3: the node must be between 1 and 3")
    assert "expected I/K" in error("--frontier", frontier, "--node", "two")
    assert error("--node", "1/3") == (
        "--node needs --frontier redis://HOST:PORT/DB (the crawl's Redis)")
    assert "--frontier needs --node I/K" in error("--frontier", frontier)
    assert "give the frontier as --frontier URL --node I/K" in error(
        "-s", f"NEARDUP_FRONTIER={frontier}")
    silent = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    assert error("--frontier", silent, "--node", "1/3").startswith(
        f"--frontier {silent}: Redis does not answer (")
    assert error("--frontier", frontier, "--node", "1/3", "-s",
                 "NEARDUP_FRONTIER_CRAWL=bad name") == (
        "-s NEARDUP_FRONTIER_CRAWL: crawl name 'bad name': use 1 to 100 letters, digits, '.', "
        "'_' or '-'")
    assert not Path(store).exists()  # nothing made for a command refused

    # a node's store is that node's: not another node's, nor a single machine's crawl
    with Store.open(store) as made, made.batch():
        made.join_crawl(CrawlNode("other-crawl", 1, NODES))
    assert "is node 1/3 of the distributed crawl 'other-crawl'; this crawl is node 2/3" in error(
        "--frontier", frontier, "--node", "2/3")
    assert error() == (
        f"store {store} is node 1/3 of the distributed crawl 'other-crawl': crawl it with "
        "--frontier and --node 1/3, or give a single-machine crawl another --store")
    # a node whose crawl finished: the same command again would fetch nothing and say so as a
    # recrawl where nothing changed; a crawl on several machines runs once
    ended = tmp_path / "ended"
    with Store.open(ended) as made, made.batch():
        made.join_crawl(CrawlNode("ended-crawl", 2, NODES))
        made.history.begin_run(time.time())
        made.history.finish_run(time.time())
    assert one_line_error(capsys, url, "--store", str(ended), "--frontier", frontier, "--node",
                          "2/3", "-s", "NEARDUP_FRONTIER_CRAWL=ended-crawl") == (
        f"store {ended} is node 2/3 of the distributed crawl 'ended-crawl', which has finished: "
        "a crawl on several machines runs once; crawl again with a new --store on every node "
        "and a new crawl name (-s NEARDUP_FRONTIER_CRAWL=NAME)")
    with Store.open(ended, readonly=True) as store:
        assert store.history.run().number == 1  # no run begun
    single = tmp_path / "single"
    with Store.open(single) as made, made.batch():
        made.put_document(made.next_doc_id(), DocumentRecord(url, "skipped", 0.0))
    assert "holds a single-machine crawl" in one_line_error(
        capsys, url, "--store", str(single), "--frontier", frontier, "--node", "1/3")

    # the crawl in Redis has its count of nodes and its parameters from its first node
    config = Config()
    check_nodes(redis_client, "fixed", NODES)
    RedisIndex(redis_client, defaults.keys("fixed")["index"], node=1,
               params=index_params(config.sketch, config.canonical, config.dedup))  # fmt: skip
    fresh = str(tmp_path / "fresh")
    assert "runs on 3 nodes; this node was started as one of 4" in one_line_error(
        capsys, url, "--store", fresh, "--frontier", frontier, "--node", "1/4",
        "-s", "NEARDUP_FRONTIER_CRAWL=fixed")
    assert "was made with dedup.threshold 0.9, not 0.8: use the same" in one_line_error(
        capsys, url, "--store", fresh, "--frontier", frontier, "--node", "2/3",
        "-s", "NEARDUP_FRONTIER_CRAWL=fixed", "--set", "dedup.threshold=0.8")


@pytest.mark.slow
def test_a_node_started_twice_stops_the_second_process_in_one_line(redis_server, redis_client,
                                                                  tmp_path):  # fmt: skip
    """Node 1 of 2 crawls its host and waits for node 2; a second process started as node 1
    (another machine: another store) waits for the lease as long as a killed holder's would
    last, sees it renewed, and stops with one line, having fetched nothing; the first goes on,
    holding its lease."""
    with MirrorSite(hosts_for(2, 1), articles=2).serving() as site:
        # a lease of 6 s (renewed every 2 s): a busy machine cannot stall the first that long
        lease = {"NEARDUP_FRONTIER_LEASE": "6"}
        first = start_node(node_command(site, redis_server.url, 1, 2, store_of(tmp_path, 1),
                                        **lease), out_of(tmp_path, 1))  # fmt: skip
        waiting = f"neardup:{{{crawl_of(site)}}}:nodes"
        deadline = time.monotonic() + 60
        while not redis_client.sismember(waiting, 1):  # idle, waiting for node 2
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        fetched = site.fetches()
        out = tmp_path / "second.txt"
        second = start_node(node_command(site, redis_server.url, 1, 2, tmp_path / "other",
                                         **lease), out)  # fmt: skip
        second.wait(timeout=60)
        assert site.fetches() == fetched
        text = out.read_text()
        assert second.returncode == 1, text[-3000:]
        errors = [line for line in text.splitlines() if line.startswith("neardup crawl: error: ")]
        assert len(errors) == 1, text[-3000:]
        assert errors[0].startswith(f"neardup crawl: error: node 1/2 of the crawl "
                                    f"'{crawl_of(site)}' is already running (host ")
        assert errors[0].endswith("): start each node once: the node stopped")
        assert "Traceback" not in text
        assert first.poll() is None
        lease = redis_client.get(defaults.lease_key(crawl_of(site), 1)).decode()
        assert f", pid {first.pid}, " in lease
        first.kill()
        first.wait()


# --- losing Redis -------------------------------------------------------------------------------


def asked_who_is_missing(probe: redis_module.Redis, nodes_key: str) -> bool:
    """Node 1 is registered in ``nodes_key`` and a client's last command was SMEMBERS."""
    return bool(probe.sismember(nodes_key, 1)) and any(
        client.get("cmd") == "smembers" for client in probe.client_list())


@pytest.mark.parametrize("how", ["gone", "restarted_empty", "gone_mid_crawl"])
def test_a_node_that_loses_its_redis_stops_with_one_line(tmp_path, how):
    """Node 1 of 2 has crawled its hosts and waits for node 2 (never started) when its Redis
    goes away for good, or comes back without the crawl's data (no AOF), or Redis goes away
    while the node is still fetching its pages: the node stops, says why in one line, and
    exits with status 1 (its retries are set low to be quick). Mid-crawl, the pages on their
    way to a decision stop with it: none waits for Redis longer than the retries allow."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    (tmp_path / "redis").mkdir()
    server = RedisServer(executable, tmp_path / "redis")
    server.start()
    out, store = tmp_path / "out.txt", tmp_path / "store"
    node = None
    try:
        busy = how == "gone_mid_crawl"
        site = MirrorSite(hosts_for(2, 1), articles=30 if busy else 2, delay=0.2 if busy else 0)
        with site.serving():
            # a Redis restarted empty must be back within the node's retries, or the node
            # (rightly) says it does not answer: more of them, for a loaded machine
            retries = "8" if how == "restarted_empty" else "3"
            command = node_command(site, server.url, 1, 2, store, NEARDUP_FRONTIER_RETRIES=retries)
            node = start_node(command, out)
            waiting = f"neardup:{{{crawl_name([f'{b}/' for b in site.bases])}}}:nodes"
            probe = redis_module.Redis.from_url(server.url)
            deadline = time.monotonic() + 60
            # idle and waiting for node 2: registered, and has asked which nodes have not
            # (SMEMBERS, which only that question sends), so its stats say whom it waits for;
            # or, mid-crawl, a few pages fetched
            while len(site.fetches()) < 6 if busy else not asked_who_is_missing(probe, waiting):
                assert time.monotonic() < deadline and node.poll() is None, out.read_text()
                time.sleep(0.05)
            probe.close()
            server.stop(kill=True)
            gone = time.monotonic()
            if how == "restarted_empty":
                for path in (tmp_path / "redis").iterdir():
                    if path.name.startswith("append"):
                        shutil.rmtree(path) if path.is_dir() else path.unlink()
                server.start()
            node.wait(timeout=60)
            # three retries are about a second; the Redis client's default forty, half a minute
            assert time.monotonic() - gone < 20
    finally:
        if node is not None and node.poll() is None:
            node.kill()
        server.stop()
    text = out.read_text()
    assert node.returncode == 1, text[-3000:]
    errors = [line for line in text.splitlines() if line.startswith("neardup crawl: error: ")]
    said = {"gone": f"the crawl's Redis at {server.url} does not answer (",
            "gone_mid_crawl": f"the crawl's Redis at {server.url} does not answer (",
            "restarted_empty": "is gone from its Redis (restarted without its data?)"}[how]
    assert len(errors) == 1 and said in errors[0], text[-3000:]
    assert errors[0].endswith(": the node stopped"), errors
    assert "Traceback" not in text
    ended = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    assert ended["error"] == errors[0].removeprefix("neardup crawl: error: ")
    if busy:
        return
    # what its progress line said while it waited
    crawl = crawl_name([f"{b}/" for b in site.bases])
    assert ended["stats"]["neardup/frontier/waiting_for"] == f"2/2 of crawl {crawl}"
