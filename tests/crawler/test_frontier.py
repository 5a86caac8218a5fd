"""The shared frontier (crawler.frontier): hosts partitioned over nodes by a stable hash, the
node queues against a real redis-server, and real crawls: Scrapy's engine in three node
processes, over a site served on six loopback addresses (127.0.0.x are distinct hosts), one of
them killed mid-crawl and started again."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import redis
from scipy.stats import chisquare
from scrapy import Request, Spider

from crawler.demo.server import serve_hosts
from crawler.frontier import defaults
from crawler.frontier.partition import crawl_name, node_of_host, node_of_url, parse_node
from crawler.frontier.queue import NodeQueues

ROOT = Path(__file__).resolve().parents[2]
NODES = 3
PAGES = 10  # per host


# --- partition -------------------------------------------------------------------------------


def test_a_host_belongs_to_the_node_its_blake2b_says():
    # the hash is fixed: these are the values of 1 + blake2b-64(host) mod K on any machine
    import hashlib

    for host in ("example.com", "127.0.0.2", "xn--bcher-kva.example"):
        digest = hashlib.blake2b(host.encode(), digest_size=8).digest()
        assert node_of_host(host, 7) == 1 + int.from_bytes(digest, "big") % 7
    assert node_of_host("EXAMPLE.com", 4) == node_of_host("example.com", 4)
    assert node_of_url("http://Example.com:81/x?y", 4) == node_of_host("example.com", 4)


def test_hosts_spread_evenly_over_the_nodes():
    counts = Counter(node_of_host(f"host{i}.example.org", 5) for i in range(20_000))
    assert set(counts) == {1, 2, 3, 4, 5}
    assert chisquare(list(counts.values())).pvalue > 0.001


@pytest.mark.parametrize(
    ("text", "message"),
    [("3", "expected I/K"), ("a/3", "expected I/K"), ("0/3", "between 1 and 3"),
     ("2/0", "at least one node"), ("-1/3", "expected I/K")],
)  # fmt: skip
def test_a_bad_node_is_refused_with_the_reason(text, message):
    with pytest.raises(ValueError, match=message):
        parse_node(text)


def test_every_node_names_the_crawl_alike():
    assert crawl_name(["http://b/", "http://a/", "http://a/"]) == crawl_name(["http://a/", "http://b/"])
    assert crawl_name(["http://a/"]) != crawl_name(["http://b/"])


# --- the queues, against Redis ---------------------------------------------------------------


class QueueSpider(Spider):
    name = "queue-test"

    def parse(self, response):
        pass


def host_of_node(node: int, nodes: int = NODES, avoid=()) -> str:
    return next(
        f"127.0.0.{i}" for i in range(2, 250)
        if node_of_host(f"127.0.0.{i}", nodes) == node and f"127.0.0.{i}" not in avoid
    )  # fmt: skip


def test_requests_go_to_their_hosts_node_once_and_come_back_if_not_acknowledged(redis_client):
    spider = QueueSpider()
    one, two = (NodeQueues(redis_client, spider, "t", n, NODES) for n in (1, 2))
    mine, theirs = f"http://{host_of_node(1)}/a", f"http://{host_of_node(2)}/b"
    assert one.push(Request(mine), b"fp-a")
    assert one.push(Request(theirs), b"fp-b")  # node 1 found a link to node 2's host
    assert not two.push(Request(theirs), b"fp-b")  # seen: once for the whole crawl
    assert two.push(Request(theirs, dont_filter=True), None)  # unless not filtered
    assert (len(one), len(two)) == (1, 2)

    request, entry = one.pop()
    assert request.url == mine and len(one) == 0
    assert redis_client.lrange(one.inflight_key, 0, -1) == [entry]
    assert one.work_left() == -1  # not every node has registered
    for queues in (one, two, NodeQueues(redis_client, spider, "t", 3, NODES)):
        queues.register()
    assert one.work_left() == 3  # one in flight, two queued

    # node 1 is killed with the request in flight; started again, it gets it back
    again = NodeQueues(redis_client, spider, "t", 1, NODES)
    assert again.recover() == 1
    request, entry = again.pop()
    assert request.url == mine
    # a redirect made from it replaces it, in one step
    assert again.push(Request(theirs + "/moved"), b"fp-c", replaces=entry)
    assert redis_client.llen(again.inflight_key) == 0 and len(two) == 3
    assert not again.ack(entry)  # already gone
    for _ in range(3):
        _, entry = two.pop()
        assert two.ack(entry)
    assert one.work_left() == 0


def test_a_node_started_with_another_count_of_nodes_is_refused(redis_client):
    spider = QueueSpider()
    NodeQueues(redis_client, spider, "t", 1, 3).check_nodes()
    with pytest.raises(ValueError, match="runs on 3 nodes; this node was started as one of 4"):
        NodeQueues(redis_client, spider, "t", 1, 4).check_nodes()


def test_a_node_is_held_by_one_process_and_a_killed_ones_lease_expires(redis_client):
    """A second process gets the name of the live holder, after waiting as long as a stopped
    holder's lease would take to expire; once the holder stops renewing, the lease is the new
    process's, and the old holder learns it was taken over."""
    from crawler.frontier.lease import NodeLease

    first, second = (NodeLease(redis_client, "t", 2, 0.5) for _ in range(2))
    assert first.acquire() is None
    renewing = threading.Event()
    renewing.set()

    def renew() -> None:
        while renewing.is_set():
            assert first.renew() is None
            time.sleep(0.1)

    thread = threading.Thread(target=renew)
    thread.start()
    started = time.monotonic()
    try:
        assert second.acquire() == first.holder
    finally:
        renewing.clear()
        thread.join()
    assert time.monotonic() - started >= 0.5  # it waited for a killed holder's lease to go
    assert first.holder.startswith(f"host {socket.gethostname()}, pid {os.getpid()}, ")
    # the first stops renewing (killed): its lease expires and the second takes it
    assert second.acquire() is None
    assert first.renew() == second.holder  # taken over: the first must stop
    first.release()  # not its lease any more: nothing given back
    assert redis_client.get(defaults.lease_key("t", 2)) == second.holder.encode()
    second.release()
    assert not redis_client.exists(defaults.lease_key("t", 2))
    # a holder whose lease expired while it stalled, and nobody took it, takes it again
    assert first.acquire() is None
    redis_client.delete(defaults.lease_key("t", 2))
    assert first.renew() is None and redis_client.ttl(defaults.lease_key("t", 2)) >= 0


def test_a_page_is_acknowledged_only_once_its_links_are_queued(redis_client):
    """The scheduler's own bookkeeping, without an engine: an ack that comes while the page's
    callback output is still being consumed waits for its end; a page without items is
    acknowledged at the end of its output; a failure through the errback it was given."""
    from crawler.frontier.scheduler import FrontierScheduler

    scheduler = FrontierScheduler(redis_client, "t", 1, 1)
    scheduler.open(QueueSpider())
    inflight = scheduler.queues.inflight_key
    for path in ("a", "b", "c"):
        assert scheduler.enqueue_request(Request(f"http://{host_of_node(1, 1)}/{path}"))
    first, second, third = (scheduler.next_request() for _ in range(3))
    assert redis_client.llen(inflight) == 3

    scheduler.output_started(first)
    scheduler.ack_url(first.url)  # the page is committed before its output is consumed
    assert redis_client.llen(inflight) == 3
    scheduler.output_finished(first, items=1)
    assert redis_client.llen(inflight) == 2

    scheduler.output_started(second)
    scheduler.output_finished(second, items=0)  # nothing to commit: acknowledged at once
    assert redis_client.llen(inflight) == 1

    failure = type("Failure", (), {"request": third})()  # what Scrapy hands an errback
    assert third.errback(failure) is failure  # no errback of its own: the failure goes on
    assert redis_client.llen(inflight) == 0
    assert scheduler.next_request() is None and not scheduler.has_pending_requests()

    # an HTTP error status: the errback acknowledges, then the (empty) output finishes; the
    # second acknowledgement must not take the entry of the same request fetched again
    for _ in range(2):
        scheduler.enqueue_request(Request(first.url, dont_filter=True))
    refused, again = scheduler.next_request(), scheduler.next_request()
    refused.errback(type("Failure", (), {"request": refused})())
    scheduler.output_started(refused)
    scheduler.output_finished(refused, items=0)
    assert redis_client.lrange(inflight, 0, -1) == [again.meta[defaults.ENTRY_META]]


def test_a_redirect_takes_its_requests_place_with_its_own_errback(redis_client):
    from crawler.frontier.scheduler import FrontierScheduler

    scheduler = FrontierScheduler(redis_client, "t", 1, 1)
    scheduler.open(QueueSpider())
    assert scheduler.enqueue_request(Request(f"http://{host_of_node(1, 1)}/a"))
    popped = scheduler.next_request()
    moved = popped.replace(url=f"http://{host_of_node(1, 1)}/b")  # as RedirectMiddleware does
    assert scheduler.enqueue_request(moved)
    assert redis_client.llen(scheduler.queues.inflight_key) == 0
    again = scheduler.next_request()
    assert again.url.endswith("/b") and again.errback.original is None


# --- real crawls -----------------------------------------------------------------------------


def choose_hosts() -> list[str]:
    """Six loopback addresses, two owned by each of the three nodes."""
    chosen: list[str] = []
    for node in range(1, NODES + 1):
        for _ in range(2):
            chosen.append(host_of_node(node, avoid=chosen))
    return chosen


class Site:
    """A site on several hosts: pages /p0 … /p9 on each, linked within and across hosts, a
    link to a missing page, and a redirect to a page found only through it. Every request is
    logged with the address it came to, its path and its User-Agent (which names the node)."""

    def __init__(self, hosts: list[str], delay: float) -> None:
        self.hosts = hosts
        self.delay = delay
        self.log: list[tuple[str, str, str, float]] = []
        self.lock = threading.Lock()
        self.bases: list[str] = []

    def page(self, h: int, i: int) -> str:
        n = len(self.hosts)
        links = [f"/p{i + 1}"] if i + 1 < PAGES else []
        links += [f"/p{(i + 3) % PAGES}", f"{self.bases[(h + 1) % n]}/p{i}",
                  f"{self.bases[(h + 2) % n]}/p{(i * 7) % PAGES}"]  # fmt: skip
        if (h, i) == (1, 3):
            links.append("/missing")
        if (h, i) == (2, 5):
            links.append("/moved")
        body = "".join(f'<a href="{link}">link</a> ' for link in links)
        return f"<html><body><p>host {h} page {i}</p>{body}</body></html>"

    def answer(self, h: int, path: str) -> tuple[int, dict[str, str], str]:
        if path.startswith("/p") and path[2:].isdigit() and int(path[2:]) < PAGES:
            return 200, {"Content-Type": "text/html"}, self.page(h, int(path[2:]))
        if (h, path) == (2, "/moved"):
            return 302, {"Location": f"{self.bases[4]}/only-by-redirect"}, ""
        if (h, path) == (4, "/only-by-redirect"):
            return 200, {"Content-Type": "text/html"}, f'<a href="{self.bases[0]}/p9">back</a>'
        return 404, {"Content-Type": "text/html"}, "<html><body>not here</body></html>"

    def expected(self) -> tuple[set[str], set[str]]:
        """Every URL a crawl from /p0 of the first host must fetch, and those with pages."""
        pages = {f"{base}/p{i}" for base in self.bases for i in range(PAGES)}
        pages.add(f"{self.bases[4]}/only-by-redirect")
        fetched = pages | {f"{base}/robots.txt" for base in self.bases}
        fetched |= {f"{self.bases[1]}/missing", f"{self.bases[2]}/moved"}
        return fetched, pages

    def fetches(self) -> Counter[str]:
        with self.lock:
            return Counter(f"{self.bases[self.hosts.index(h)]}{path}" for h, path, _, _ in self.log)

    @contextmanager
    def serving(self):
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                host = self.server.server_address[0]
                with site.lock:
                    site.log.append((host, self.path, self.headers.get("User-Agent", ""),
                                     time.monotonic()))  # fmt: skip
                time.sleep(site.delay)
                status, headers, body = site.answer(site.hosts.index(host), self.path)
                data = body.encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # a killed node hangs up
                    self.wfile.write(data)

            def log_message(self, *args):
                pass

        with serve_hosts(Handler, self.hosts) as bases:
            self.bases[:] = bases
            yield self


def start_node(node: int, url: str, site: Site, folder: Path, **settings) -> subprocess.Popen:
    spec = {
        "start_urls": [f"{site.bases[0]}/p0"],
        "committed": str(folder / f"committed-{node}.jsonl"),
        "result": str(folder / f"result-{node}.json"),
        "settings": {
            defaults.SETTING_URL: url,
            defaults.SETTING_NODE: f"{node}/{NODES}",
            defaults.SETTING_CRAWL: "test",
            defaults.SETTING_SETTLE: 0.5,
            defaults.SETTING_LEASE: 2,  # a killed node's lease, which its restart waits for
            "USER_AGENT": f"frontier-test node {node}",
            "ROBOTSTXT_OBEY": True,
            "RETRY_ENABLED": False,
            "DOWNLOAD_DELAY": 0,
            "CONCURRENT_REQUESTS": 4,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "DOWNLOAD_TIMEOUT": 10,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "INFO",
            **settings,
        },
    }
    path = folder / f"spec-{node}.json"
    path.write_text(json.dumps(spec))
    path_list = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path_list}
    log = (folder / f"node-{node}.log").open("ab")
    code = "from tests.crawler.frontier_node import main; main()"
    process = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    log.close()
    return process


def wait_all(processes, folder: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    for node, process in processes.items():
        try:
            process.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in processes.values():
                other.kill()
            logs = "\n".join((folder / f"node-{n}.log").read_text()[-3000:] for n in processes)
            pytest.fail(f"the nodes did not finish in {timeout} s:\n{logs}")
        assert process.returncode == 0, (folder / f"node-{node}.log").read_text()[-4000:]


def committed(folder: Path, node: int) -> list[str]:
    path = folder / f"committed-{node}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["url"] for line in path.read_text().splitlines() if line.endswith("}")]


def check_finished(client, folder: Path, *, restarted: bool = False) -> None:
    """Every node finished, acknowledged each request it popped once, and left its lists empty.
    Only across a Redis restart may an acknowledgement find its entry gone: the reply of the
    LREM that removed it was lost, and the client sent it again."""
    for node in range(1, NODES + 1):
        result = json.loads((folder / f"result-{node}.json").read_text())
        assert result["reasons"] == ["finished"]
        stats = result["stats"]
        assert stats["neardup/frontier/dequeued"] == stats.get("neardup/frontier/acked", 0) + \
            stats.get("neardup/frontier/replaced", 0)  # fmt: skip
        if not restarted:
            assert "neardup/frontier/acked/reply_lost" not in stats, stats
        queue, inflight = defaults.node_keys("test", node)
        assert client.llen(queue) == 0 and client.llen(inflight) == 0
    assert client.scard(defaults.keys("test")["nodes"]) == NODES


def owners_by_host(site: Site) -> dict[str, set[str]]:
    by_host: dict[str, set[str]] = {}
    with site.lock:
        for host, _, agent, _ in site.log:
            by_host.setdefault(host, set()).add(agent)
    return by_host


@pytest.mark.slow
def test_three_nodes_fetch_every_url_once_each_host_from_its_own_node(
    redis_server, redis_client, tmp_path
):
    with Site(choose_hosts(), delay=0.02).serving() as site:
        broken = f"{site.bases[3]}/p7"  # the pipeline raises on its item: nothing to commit
        nodes = {n: start_node(n, redis_server.url, site, tmp_path, TEST_FAIL=broken)
                 for n in range(1, NODES + 1)}  # fmt: skip
        wait_all(nodes, tmp_path)
        fetched, pages = site.expected()
        assert site.fetches() == Counter(fetched)  # every reachable URL, each exactly once
        for host, agents in owners_by_host(site).items():
            assert agents == {f"frontier-test node {node_of_host(host, NODES)}"}
    check_finished(redis_client, tmp_path)
    stored = [url for n in range(1, NODES + 1) for url in committed(tmp_path, n)]
    assert sorted(stored) == sorted(pages - {broken})
    for n in range(1, NODES + 1):
        assert {node_of_url(url, NODES) for url in committed(tmp_path, n)} == {n}


@pytest.mark.slow
def test_a_node_killed_mid_crawl_and_restarted_loses_nothing_and_refetches_only_its_in_flight(
    redis_server, redis_client, tmp_path
):
    with Site(choose_hosts(), delay=0.15).serving() as site:
        fetched, pages = site.expected()
        victim = 2
        share = sum(node_of_url(url, NODES) == victim for url in pages)
        nodes = {n: start_node(n, redis_server.url, site, tmp_path) for n in range(1, NODES + 1)}
        _, inflight = defaults.node_keys("test", victim)
        deadline = time.monotonic() + 120
        # a third of its pages stored, and pages in flight (each takes the server 0.15 s)
        while len(committed(tmp_path, victim)) < share // 3 or redis_client.llen(inflight) < 2:
            assert time.monotonic() < deadline, "node 2 committed too little"
            assert nodes[victim].poll() is None, "node 2 ended before it was killed"
            time.sleep(0.005)
        os.kill(nodes[victim].pid, signal.SIGKILL)
        nodes[victim].wait()
        killed_at = time.monotonic()
        held = {pickle.loads(raw)["url"] for raw in redis_client.lrange(inflight, 0, -1)}
        assert held, "nothing was in flight when node 2 was killed"
        nodes[victim] = start_node(victim, redis_server.url, site, tmp_path)
        wait_all(nodes, tmp_path)
        counts = site.fetches()
        assert set(counts) == fetched  # nothing lost
        restarted = {f"{base}/robots.txt" for base in site.bases
                     if node_of_url(base, NODES) == victim}  # fmt: skip
        for url, count in counts.items():
            # fetched once; the killed node's in-flight requests came back, so at most twice
            # (and its new process read its hosts' robots.txt again)
            assert count == 1 or (url in held | restarted and count == 2), (url, count)
        with site.lock:  # and those were fetched again after the restart
            again = {f"{site.bases[site.hosts.index(h)]}{p}"
                     for h, p, _, t in site.log if t > killed_at}  # fmt: skip
        assert held <= again
        for host, agents in owners_by_host(site).items():
            assert agents == {f"frontier-test node {node_of_host(host, NODES)}"}
    check_finished(redis_client, tmp_path)
    stored = Counter(url for n in range(1, NODES + 1) for url in committed(tmp_path, n))
    assert set(stored) == pages
    # a page stored twice was committed, not yet acknowledged, when its node was killed
    assert {url for url, count in stored.items() if count > 1} <= held


@pytest.mark.slow
def test_a_redis_restart_mid_crawl_loses_no_url_and_fetches_none_twice(
    redis_server, redis_client, tmp_path
):
    """redis-server is killed (SIGKILL) a third of the way through and is back a second later:
    the nodes retry their commands meanwhile, and with the AOF fsynced on every write nothing
    Redis acknowledged is lost."""
    with Site(choose_hosts(), delay=0.1).serving() as site:
        fetched, pages = site.expected()
        nodes = {n: start_node(n, redis_server.url, site, tmp_path) for n in range(1, NODES + 1)}
        deadline = time.monotonic() + 120
        while sum(len(committed(tmp_path, n)) for n in nodes) < len(pages) // 3:
            assert time.monotonic() < deadline, "the crawl made too little progress"
            time.sleep(0.02)
        redis_server.stop(kill=True)
        time.sleep(1.0)
        redis_server.start()
        wait_all(nodes, tmp_path)
        assert site.fetches() == Counter(fetched)
    check_finished(redis.Redis.from_url(redis_server.url), tmp_path, restarted=True)
    stored = [url for n in range(1, NODES + 1) for url in committed(tmp_path, n)]
    assert sorted(stored) == sorted(pages)
