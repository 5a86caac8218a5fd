"""``neardup crawl URL...``: crawl a site into a store, one copy of every page.

Runs Scrapy's engine (``AsyncCrawlerProcess``) with :class:`~crawler.spiders.SiteSpider`, the
dedup and storage stages of :mod:`crawler.pipelines` and the progress line of
:mod:`crawler.extensions.progress`. :func:`crawl` is the part ``neardup demo`` shares.

**Stopping and resuming.** Scrapy keeps the crawl's seen-requests in a JOBDIR, here
``<store>/jobdir``, and the crawl's scheduler saves its queue there when the crawl stops
(:mod:`crawler.scheduler`). Ctrl-C stops cleanly (the last batch commits, the queue is saved) and the
same command resumes. A crawl that was *killed* (SIGKILL, a power cut) cannot be trusted to have
saved its queue consistently, so a marker file, ``<store>/crawl.running``, is written when a
crawl starts and removed when it stops cleanly: found on the next start, it means the JOBDIR is
discarded and the crawl starts again from its start URLs. That costs refetching, not
correctness: the store's URL table makes every page it already decided a no-op, and the pages
of the batch the kill interrupted were never committed, so they are decided again. A finished
crawl removes its JOBDIR, so running the command again refetches the site and decides only the
pages that are new. ``<store>/crawl.lock`` (an ``flock``, released by the kernel however the
process ends) keeps two crawls off one store.

**On several machines** (``--frontier redis://HOST:PORT/DB --node I/K``, ``docs/distributed.md``),
the command runs node I of K of one crawl: Scrapy's scheduler is the shared frontier's
(:mod:`crawler.frontier`), which keeps the requests in Redis, so no JOBDIR is kept; every page
is decided against the crawl's index in Redis (:mod:`crawler.work.shared`) and stored in this
node's store, which records that it is node I/K. Every node is given the same start URLs (they
name the crawl, and so its Redis keys) and the same ``--frontier``. After a kill the same
command starts the node again: the requests it held in flight come back from Redis.

**When the store cannot be written** (a full disk, a read-only directory, a file that cannot
grow), the crawl stops: the terminal gets one line, ``neardup crawl: error: <cause>: <path>``,
and the exit status is 1; the summary counts only what was committed; the Scrapy log keeps the
traceback. Whoever meets such a failure logs it once with the one line as the record's
``neardup_failure`` (:meth:`crawler.pipelines.session.DedupSession._stop_crawl` does); the
command takes that line for its error and shows nothing more on the terminal after it. The
queue is discarded, as after a kill, so the next crawl, once the store can be written, starts
again from the start URLs and passes over every page already committed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from crawler.cli.common import RunFailed, UserError, add_config_arguments, resolve_config
from crawler.config import Config, parse_assignment
from storage.errors import StoreBusyError, StoreWriteError
from storage.nodes import CrawlNode
from storage.store import hold_lock

if TYPE_CHECKING:
    # typing.Self requires Python 3.11
    from typing_extensions import Self

HELP = "crawl a site, keeping one copy of every page (exact and near duplicates dropped)"
DESCRIPTION = """\
Crawl from the start URLs (their hosts only, unless crawl.allowed_domains says otherwise) and
decide every page as it arrives: kept (stored, as WARC), exact_duplicate or near_duplicate
(dropped: its canonical text equals, or its sketch resembles, a page already kept), contained
(with dedup.containment set) or skipped with a reason (not HTML, empty, an HTTP error, ...).
Every decision is one JSON line in <store>/logs/<run>.jsonl, dropped pages too.

Pages are crawled breadth first, so the copy that is kept is usually the one nearest the start
page. A live line on stderr shows progress; at the end a summary says what was kept and
dropped and where the store and the log are.

Politely: robots.txt is obeyed, its Crawl-delay too, and the delay between two requests to a
host follows the median of its last five response times; a page slower than crawl.timeout is
skipped as timeout while the crawl goes on.

Ctrl-C stops cleanly; the same command then resumes where it stopped. After a crash or a kill
the crawl starts again from the start URLs and passes over every page the store already has.
The same command on a store whose last crawl finished is a recrawl: every URL it knows is asked
for with its validators (a 304 keeps the page's decision), changed pages are decided again, and
neardup log --run last --change changed,gone says what moved.

On several machines, every node runs the same command with the same start URLs and the same
--frontier (a Redis server, with its AOF on), each with its own --node I/K and its own store:
each host is fetched by one node, and a page is dropped as a copy of a page any node kept.

examples:
  neardup crawl https://example.org/ --store example-store
  neardup crawl https://example.org/docs/ --set crawl.max_pages=500 --set dedup.threshold=0.8
  neardup crawl http://127.0.0.1:8000/ --set crawl.concurrency=1 --quiet --json
  neardup crawl https://example.org/ -s REDIRECT_MAX_TIMES=5 -s RETRY_TIMES=0
  neardup crawl https://example.org/ https://example.net/ --store node1-store \\
      --frontier redis://10.0.0.5:6379/0 --node 1/3
"""

#: the crawl's state files inside the store
JOBDIR = "jobdir"
MARKER = "crawl.running"
LOCK = "crawl.lock"
_START = "neardup-start.json"

#: breadth-first order: Scrapy's documented settings for a broad crawl
BREADTH_FIRST = {
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
}
PIPELINES = {
    "crawler.pipelines.DedupPipeline": 300,
    "crawler.pipelines.StoragePipeline": 400,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("urls", metavar="URL", nargs="+", help="start URL(s), http or https")
    parser.add_argument(
        "--store", metavar="DIR", help="store directory (default: 'store' in the config file)"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress line")
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="Scrapy's INFO log on stderr too"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument(
        "-s", "--scrapy-setting", metavar="NAME=VALUE", action="append", default=[],
        help="a Scrapy setting, as scrapy crawl -s takes it (wins over everything; repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--frontier", metavar="redis://HOST:PORT/DB",
        help="run as one node of a crawl on several machines: the Redis server that holds the "
             "crawl's frontier and dedup index (the same for every node)",
    )  # fmt: skip
    parser.add_argument(
        "--node", metavar="I/K", help="with --frontier: this is node I of K (1-based)"
    )
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    if args.store:
        config = replace(config, store=args.store)
    urls = check_start_urls(args.urls)
    settings = dict(parse_assignment(a) for a in args.scrapy_setting)
    frontier = check_frontier(args.frontier, args.node, urls, settings)
    outcome = crawl(
        config,
        urls,
        progress=not (args.quiet or args.json),
        verbose=args.verbose,
        settings=settings,
        frontier=frontier,
    )
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        print(outcome.render())
    if outcome.error is not None:
        raise RunFailed(outcome.error)
    if outcome.nothing_crawled is not None:
        raise RunFailed(f"nothing was crawled: {outcome.nothing_crawled}")
    return outcome.exit_status


def check_start_urls(urls: list[str]) -> list[str]:
    """The start URLs as given, or a UserError naming the first one that is not http(s)."""
    for url in urls:
        try:
            parts = urlsplit(url)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            ok = False
        if not ok:
            raise UserError(f"not an http(s) URL: {url!r} (e.g. https://example.org/)")
    return list(urls)


@dataclass(frozen=True)
class Frontier:
    """The distributed crawl this command runs a node of: the Redis URL and the node."""

    url: str
    node: CrawlNode

    def settings(self, user_agent: str) -> dict[str, Any]:
        """The Scrapy settings of the node: the frontier's scheduler and spider middleware,
        and a User-Agent that names the node (so that a server's log says which node came)."""
        from crawler.frontier import defaults

        return {
            "SCHEDULER": "crawler.frontier.scheduler.FrontierScheduler",
            "SPIDER_MIDDLEWARES": {"crawler.frontier.middleware.FrontierSpiderMiddleware": 10},
            defaults.SETTING_URL: self.url,
            defaults.SETTING_NODE: self.node.label,
            defaults.SETTING_CRAWL: self.node.crawl,
            "USER_AGENT": node_user_agent(user_agent, self.node.label),
        }


def check_frontier(
    url: str | None, node: str | None, start_urls: list[str], settings: dict[str, Any]
) -> Frontier | None:
    """``--frontier`` and ``--node`` checked (a UserError, one line, for a bad value or a Redis
    that does not answer), or None for a single machine's crawl. The crawl's name is
    ``NEARDUP_FRONTIER_CRAWL`` if given, else made from the start URLs."""
    from crawler.frontier import connection, defaults
    from crawler.frontier.partition import check_crawl_name, crawl_name, parse_node

    given = [name for name in (defaults.SETTING_URL, defaults.SETTING_NODE) if name in settings]
    if given:
        raise UserError(f"-s {given[0]}: give the frontier as --frontier URL --node I/K")
    if url is None and node is None:
        return None
    if url is None:
        raise UserError("--node needs --frontier redis://HOST:PORT/DB (the crawl's Redis)")
    if node is None:
        raise UserError("--frontier needs --node I/K (which node of how many this one is)")
    try:
        i, k = parse_node(node)
        connection.check(url)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    crawl = str(settings.get(defaults.SETTING_CRAWL) or crawl_name(start_urls))
    try:
        check_crawl_name(crawl)
    except ValueError as exc:
        raise UserError(f"-s {defaults.SETTING_CRAWL}: {exc}") from None
    return Frontier(url, CrawlNode(crawl, i, k))


def node_user_agent(agent: str, label: str) -> str:
    """The User-Agent with the node in it.

    >>> node_user_agent("neardup/0.1 (near-duplicate aware crawler)", "2/3")
    'neardup/0.1 (near-duplicate aware crawler; node 2/3)'
    >>> node_user_agent("mybot/1.0", "1/2")
    'mybot/1.0 (node 1/2)'
    """
    if agent.endswith(")"):
        return f"{agent[:-1]}; node {label})"
    return f"{agent} (node {label})"


# --- the outcome ---------------------------------------------------------------------------------


@dataclass
class CrawlOutcome:
    """What a crawl did, for the summary (and for ``neardup demo``)."""

    store: Path
    run_id: str
    log: Path
    scrapy_log: Path
    start_urls: list[str]
    #: Scrapy's close reason ("finished", "shutdown" after Ctrl-C, ...); None if it never closed
    reason: str | None = None
    seconds: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    already_decided: int = 0
    #: True when the session committed everything it decided
    clean: bool = True
    resumed: bool = False
    #: the store's crawl run was begun by an earlier command (stopped or killed)
    run_resumed: bool = False
    notes: list[str] = field(default_factory=list)
    #: why the crawl stopped early, in one line (a store that could not be written), or None
    error: str | None = None
    #: decisions lost with a batch that could not commit (the next crawl makes them again)
    not_committed: int = 0
    #: the store's crawl run (1: its first crawl; a recrawl is the next)
    crawl_run: int = 0
    #: what changed since the store's last run: new, unchanged, changed, gone, redecided
    changes: dict[str, int] = field(default_factory=dict)
    #: the node of a distributed crawl this was (``I/K``), None on a single machine
    node: CrawlNode | None = None
    #: when a crawl skipped every page it decided (a start URL that does not answer, a 404):
    #: that, with the first such page and why, in one line; else None
    nothing_crawled: str | None = None

    @property
    def interrupted(self) -> bool:
        return self.reason == "shutdown"

    @property
    def exit_status(self) -> int:
        if not self.clean or self.reason is None or self.error is not None:
            return 1
        if self.nothing_crawled is not None:
            return 1
        return 130 if self.interrupted else 0

    @property
    def decided(self) -> int:
        return sum(self.decisions.values())

    @property
    def links_not_followed(self) -> dict[str, int]:
        """Links not followed, by why: ``duplicate_budget`` (the links of duplicates past
        ``crawl.duplicate_link_budget``, on ``duplicate_budget_pages`` pages) and
        ``max_pages`` (links found once ``crawl.max_pages`` URLs were scheduled, each time
        one was found), ``repeated_path`` and ``too_many_segments`` (links whose path repeats
        itself or runs too deep: crawler.spiders.paths)."""
        return {
            "duplicate_budget": self.stats.get("neardup/links/duplicate_budget", 0),
            "duplicate_budget_pages": self.stats.get("neardup/duplicate_budget_pages", 0),
            "max_pages": self.stats.get("neardup/links/max_pages", 0),
            "repeated_path": self.stats.get("neardup/links/repeated_path", 0),
            "too_many_segments": self.stats.get("neardup/links/too_many_segments", 0),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": str(self.store),
            "run_id": self.run_id,
            "log": str(self.log),
            "scrapy_log": str(self.scrapy_log),
            "start_urls": self.start_urls,
            "node": self.node.label if self.node is not None else None,
            "crawl": self.node.crawl if self.node is not None else None,
            "reason": self.reason,
            "interrupted": self.interrupted,
            "resumed": self.resumed,
            "run_resumed": self.run_resumed,
            "seconds": round(self.seconds, 3),
            "responses": self.stats.get("response_received_count", 0),
            "response_bytes": self.stats.get("downloader/response_bytes", 0),
            "decided": self.decided,
            "decisions": {k: self.decisions.get(k, 0) for k in _ORDER},
            "skipped": dict(sorted(self.skipped.items())),
            "already_decided": self.already_decided,
            "crawl_run": self.crawl_run,
            "changes": {k: self.changes.get(k, 0) for k in _CHANGES},
            "not_committed": self.not_committed,
            "links_not_followed": self.links_not_followed,
            "error": self.error,
            "nothing_crawled": self.nothing_crawled,
            "notes": self.notes,
            "stats": {k: v for k, v in sorted(self.stats.items()) if k.startswith("neardup/")},
        }

    def render(self) -> str:
        d = self.decisions
        rate = self.decided / self.seconds if self.seconds else 0.0
        state = {
            "finished": "finished",
            "shutdown": "interrupted",
            None: "did not finish",
        }.get(self.reason, f"stopped ({self.reason})")
        pages = "page" if self.decided == 1 else "pages"
        lines = [
            (
                f"crawl {state}: {self.decided:,} {pages} decided in {self.seconds:.1f} s "
                f"({rate:.1f}/s), {self.stats.get('response_received_count', 0):,} responses"
            ),
            f"  kept               {d.get('kept', 0):>7,}   stored in {self.store / 'pages'}",
            f"  exact duplicates   {d.get('exact_duplicate', 0):>7,}   dropped",
            f"  near duplicates    {d.get('near_duplicate', 0):>7,}   dropped",
        ]
        if d.get("contained"):
            lines.append(f"  contained          {d['contained']:>7,}   dropped")
        reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(self.skipped.items(), key=_by_count))
        lines.append(f"  skipped            {d.get('skipped', 0):>7,}   {reasons}".rstrip())
        if self.already_decided:
            lines.append(
                f"  already decided    {self.already_decided:>7,}   earlier in this run; passed over"
            )
        if self.crawl_run > 1:
            c = self.changes
            lines.append(
                f"  since run {self.crawl_run - 1:<8} {c.get('unchanged', 0):>7,} unchanged, "
                f"{c.get('changed', 0):,} changed, {c.get('gone', 0):,} gone, "
                f"{c.get('new', 0):,} new; {c.get('redecided', 0):,} decided again as their "
                "kept page changed"
            )
            if self.run_resumed:  # the counts are this command's, the log has the whole run's
                lines.append(f"  (this command's part of run {self.crawl_run}; all of it: "
                             f"neardup log --run {self.crawl_run} --store {self.store})")  # fmt: skip
        held = self.links_not_followed
        if held["duplicate_budget"]:
            pages = held["duplicate_budget_pages"]
            lines.append(
                f"  links not followed {held['duplicate_budget']:>7,}   on {pages:,} "
                f"duplicate{'' if pages == 1 else 's'} past crawl.duplicate_link_budget "
                "(a spider trap ends)"
            )
        paths = held["repeated_path"] + held["too_many_segments"]
        if paths:
            lines.append(f"  links not followed {paths:>7,}   whose path repeats itself or runs past "
                         "crawl.max_path_segments (a directory linked to itself ends)")  # fmt: skip
        if held["max_pages"]:
            lines.append(f"  links not followed {held['max_pages']:>7,}   past crawl.max_pages: that "
                         "many URLs were already scheduled")  # fmt: skip
        crawl_delay = self.stats.get("neardup/throttle/crawl_delay/max")
        if crawl_delay:
            lines.append(f"  robots.txt delay   {crawl_delay:>6g}s   between two requests to a host "
                         "that asks for it (the longest asked)")  # fmt: skip
        if self.not_committed:
            lines.append(
                f"  not committed      {self.not_committed:>7,}   lost with the batch that "
                "failed; decided again next run"
            )
        if self.node is not None:
            lines.append(f"  node               {self.node.label:>7}   of the distributed crawl "
                         f"{self.node.crawl!r}")  # fmt: skip
        lines += [f"note: {n}" for n in self.notes]
        lines += [
            f"dedup log:  {self.log}",
            f"Scrapy log: {self.scrapy_log}",
            f"store:      {self.store}   (check it: neardup verify --store {self.store})",
        ]
        if self.error is not None:
            lines.append(
                f"stopped: {self.error}. Once that is mended, run the same command again: it "
                "starts from the start URLs and passes over every page the store has"
            )
        elif self.interrupted:
            lines.append("interrupted: run the same command again to resume where it stopped")
        elif not self.clean:
            lines.append(f"the store could not be written: see {self.scrapy_log}")
        return "\n".join(lines)


_ORDER = ("kept", "exact_duplicate", "near_duplicate", "contained", "skipped")
_CHANGES = ("new", "unchanged", "changed", "gone", "redecided")


def _by_count(pair: tuple[str, int]) -> tuple[int, str]:
    return (-pair[1], pair[0])


# --- the crawl's state files ---------------------------------------------------------------------


class CrawlState:
    """The lock, the unclean-stop marker and the JOBDIR of one store (see the module doc)."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.jobdir = store / JOBDIR
        self.marker = store / MARKER
        self._lock: IO[bytes] | None = None

    def __enter__(self) -> Self:
        self.store.mkdir(parents=True, exist_ok=True)
        try:  # held for the whole crawl
            fh = hold_lock(
                self.store / LOCK, busy=f"store {self.store} is being crawled by another process "
                "(pid {pid})"
            )
        except StoreBusyError as exc:
            raise UserError(str(exc)) from None
        self._lock = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def prepare(
        self, start_urls: list[str], run_id: str, *, frontier: bool = False
    ) -> tuple[bool, list[str]]:
        """Decide what to do with a JOBDIR left behind; write the marker. (resumed, notes)

        A node of a distributed crawl keeps no JOBDIR (its requests are in Redis, and those it
        held when it stopped come back from there): only the marker is written."""
        notes: list[str] = []
        resumed = False
        if frontier:
            if self.marker.exists():
                before = _read_json(self.marker)
                notes.append(
                    f"the previous crawl (run {before.get('run_id', '?')}) did not stop cleanly; "
                    "the requests it held go back to this node's queue in Redis, and the pages "
                    "the store already has are passed over"
                )
            shutil.rmtree(self.jobdir, ignore_errors=True)
            _write_json(self.marker, {"run_id": run_id, "pid": os.getpid(),
                                      "start_urls": start_urls, "started": time.time()})
            return False, notes
        if self.marker.exists():
            before = _read_json(self.marker)
            shutil.rmtree(self.jobdir, ignore_errors=True)
            notes.append(
                f"the previous crawl (run {before.get('run_id', '?')}) did not stop cleanly; "
                "its queue was discarded and the crawl starts again from the start URLs, "
                "passing over the pages the store already has"
            )
        elif self.jobdir.is_dir():
            saved = _read_json(self.jobdir / _START)
            if saved.get("start_urls") == start_urls:
                resumed = True
                notes.append(f"resuming the interrupted crawl of run {saved.get('run_id', '?')}")
            else:
                shutil.rmtree(self.jobdir, ignore_errors=True)
                notes.append(
                    "discarded the queue of an interrupted crawl of other start URLs "
                    f"({', '.join(saved.get('start_urls') or ['?'])})"
                )
        record = {"run_id": run_id, "pid": os.getpid(), "start_urls": start_urls,
                  "started": time.time()}  # fmt: skip
        _write_json(self.marker, record)
        self.jobdir.mkdir(exist_ok=True)
        if not resumed:
            _write_json(self.jobdir / _START, record)
        return resumed, notes

    def finish(self, *, opened: bool, clean: bool, reason: str | None) -> None:
        """Remove the marker; keep the JOBDIR only when a resume can continue from it."""
        if opened and (not clean or reason is None or reason == "finished"):
            # finished: nothing left to resume; unclean: the queue cannot be trusted
            shutil.rmtree(self.jobdir, ignore_errors=True)
        self.marker.unlink(missing_ok=True)
        _fsync_dir(self.store)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- running Scrapy ------------------------------------------------------------------------------


def _as_the_crawl_runs(config: Config, settings: dict[str, Any] | None) -> Config:
    """``config`` with the sketch, dedup rule and content area the crawl's work will take once
    ``-s NEARDUP_...`` settings override the mapped ones, so that :func:`check_store` checks
    what the crawl will use; a bad value is one line."""
    if not settings or not any(name.startswith("NEARDUP_") for name in settings):
        return config
    from scrapy.settings import Settings

    from crawler.pipelines.session import session_settings
    from crawler.settings import scrapy_settings

    try:
        work = session_settings(Settings({**scrapy_settings(config), **settings}))
    except ValueError as exc:
        raise UserError(f"-s: {exc}") from None
    return replace(config, sketch=work.sketch, dedup=work.dedup, canonical=work.area)


def check_store(config: Config, frontier: Frontier | None = None) -> None:
    """Open the store once before Scrapy starts, so a mismatch, a busy store or a threshold its
    index cannot serve (see :func:`dedup.cluster.indexed_count`) is one line; so is, for a
    node of a distributed crawl, a store of another node or crawl, a count of nodes or
    parameters other than the crawl's (:func:`check_crawl`)."""
    from dedup.cluster import GreedyClusterer
    from storage.errors import StoreError
    from storage.store import Store

    try:
        with Store.open(config.store, config.sketch, area=config.canonical) as store:
            store.check_crawl_node(frontier.node if frontier is not None else None)
            if frontier is None:
                GreedyClusterer(store.index, config.dedup)
            else:
                check_node_unfinished(store, frontier)
        if frontier is not None:
            check_crawl(config, frontier)
    except StoreWriteError:
        raise
    except (StoreError, ValueError) as exc:
        raise UserError(str(exc)) from None


def check_node_unfinished(store: Any, frontier: Frontier) -> None:
    """A node's store whose run finished took part in a crawl that ended (a node ends only
    with the whole crawl): the same command again would find every URL seen and fetch nothing.
    A crawl on several machines runs once (docs/distributed.md), so this is one line."""
    from crawler.frontier import defaults

    last = store.history.run()
    if last is not None and last.finished:
        raise UserError(
            f"store {store.path} is {frontier.node.describe()}, which has finished: a crawl on "
            "several machines runs once; crawl again with a new --store on every node and a new "
            f"crawl name (-s {defaults.SETTING_CRAWL}=NAME)"
        )


def check_crawl(config: Config, frontier: Frontier) -> None:
    """The crawl in Redis takes this node: the same count of nodes (the first node fixes it)
    and the same sketch and dedup parameters (the first node's are the index's);
    ``ValueError`` naming the difference."""
    from crawler.frontier import defaults
    from crawler.frontier.connection import client
    from crawler.frontier.queue import check_nodes
    from crawler.work.shared import index_params
    from dedup.cluster import GreedyClusterer
    from storage.redis_index import RedisIndex

    node = frontier.node
    server = client(frontier.url)
    try:
        check_nodes(server, node.crawl, node.nodes)
        params = index_params(config.sketch, config.canonical, config.dedup)
        index = RedisIndex(server, defaults.keys(node.crawl)["index"], node=node.node,
                           params=params)  # fmt: skip
        GreedyClusterer(index, config.dedup)
    finally:
        server.close()


def crawl(
    config: Config,
    start_urls: list[str],
    *,
    progress: bool = True,
    verbose: bool = False,
    settings: dict[str, Any] | None = None,
    frontier: Frontier | None = None,
) -> CrawlOutcome:
    """Crawl ``start_urls`` into ``config.store``; Scrapy ``settings`` override the mapped ones.
    With ``frontier``, as one node of a distributed crawl (module doc).

    Runs a Twisted reactor, so it can be called once per process. A store that cannot be
    written is :class:`RunFailed` with one line, before the crawl or after it (module doc).
    """
    from storage.log import new_run_id

    store = Path(config.store).resolve()
    config = replace(config, store=str(store))
    if store.exists() and not store.is_dir():
        raise UserError(f"store {store} is not a directory")
    run_id = new_run_id()
    checked = _as_the_crawl_runs(config, settings)
    try:
        with CrawlState(store) as state:
            check_store(checked, frontier)
            resumed, notes = state.prepare(start_urls, run_id, frontier=frontier is not None)
            return _run_scrapy(config, start_urls, state, run_id, resumed, notes, progress,
                               verbose, settings, frontier)  # fmt: skip
    except OSError as exc:  # the store's own files, before or after the crawl
        raise RunFailed(str(StoreWriteError.of(exc, store))) from None
    except StoreWriteError as exc:
        raise RunFailed(str(exc)) from None


def _run_scrapy(
    config: Config,
    start_urls: list[str],
    state: CrawlState,
    run_id: str,
    resumed: bool,
    notes: list[str],
    progress: bool,
    verbose: bool,
    settings: dict[str, Any] | None,
    frontier: Frontier | None = None,
) -> CrawlOutcome:
    """Run Scrapy's engine for :func:`crawl`, inside the store's crawl state."""
    from scrapy import signals
    from scrapy.crawler import AsyncCrawlerProcess

    from crawler.pipelines.session import DedupSession
    from crawler.settings import scrapy_settings
    from crawler.spiders import SiteSpider

    store = state.store
    logs = store / "logs"
    outcome = CrawlOutcome(
        store=store,
        run_id=run_id,
        log=logs / f"{run_id}.jsonl",
        scrapy_log=logs / f"{run_id}.scrapy.log",
        start_urls=start_urls,
        resumed=resumed,
        notes=notes,
        node=frontier.node if frontier is not None else None,
    )
    base = scrapy_settings(config)
    # the progress line is added only when wanted: a disabled extension that says why is a
    # WARNING line in Scrapy's log
    extensions = {**base["EXTENSIONS"]}
    if progress:
        extensions["crawler.extensions.progress.ProgressLine"] = 500
    merged = {
        **base,
        **BREADTH_FIRST,
        "ITEM_PIPELINES": PIPELINES,
        "EXTENSIONS": extensions,
        "NEARDUP_PROGRESS": progress,
        "NEARDUP_RUN_ID": run_id,
        "NEARDUP_STORE": str(store),
        "LOG_FILE": str(outcome.scrapy_log),
        "LOG_LEVEL": "DEBUG" if verbose else "INFO",
    }
    if frontier is None:
        # the queue is saved to the JOBDIR when the crawl stops (crawler.scheduler)
        merged["JOBDIR"] = str(state.jobdir)
        merged["SCHEDULER"] = "crawler.scheduler.ResumableScheduler"
    else:
        merged.update(frontier.settings(base["USER_AGENT"]))
    merged.update(settings or {})
    seen: dict[str, Any] = {"opened": False, "reason": None}
    failure = _FailureLine()
    handler = _stderr_handler(logging.INFO if verbose else logging.WARNING, failure)
    crawler = None
    started = time.monotonic()
    error: BaseException | None = None
    # a log file on a full disk must not print "--- Logging error ---" tracebacks: the one
    # line the failure gets is the terminal's account of it
    raise_exceptions, logging.raiseExceptions = logging.raiseExceptions, False
    # everything after the marker is written runs under this try, so that only a kill
    # (never an exception or a Ctrl-C before Scrapy starts) can leave the marker behind
    try:
        logs.mkdir(exist_ok=True)
        root = logging.getLogger()
        root.addHandler(failure)
        process = AsyncCrawlerProcess(merged)
        root.addHandler(handler)
        crawler = process.create_crawler(SiteSpider)

        def opened(**_: Any) -> None:
            seen["opened"] = True

        def closed(reason: str, **_: Any) -> None:
            seen["reason"] = reason

        crawler.signals.connect(opened, signal=signals.spider_opened, weak=False)
        crawler.signals.connect(closed, signal=signals.spider_closed, weak=False)
        task = process.crawl(crawler, start_urls=start_urls)
        process.start()
        if task.done() and not task.cancelled():
            error = task.exception()
    finally:
        outcome.seconds = time.monotonic() - started
        logging.getLogger().removeHandler(handler)
        logging.getLogger().removeHandler(failure)
        logging.raiseExceptions = raise_exceptions
        session = DedupSession.find(crawler) if crawler is not None else None
        outcome.reason = seen["reason"]
        outcome.error = failure.line
        outcome.clean = (session is None or session.clean) and failure.line is None
        if crawler is not None:
            with contextlib.suppress(RuntimeError, AttributeError):
                outcome.stats = dict(crawler.stats.get_stats())
        if session is not None:
            outcome.decisions = dict(session.tally.decisions)
            outcome.skipped = dict(session.tally.skipped)
            outcome.already_decided = session.tally.already_decided
            outcome.changes = dict(session.tally.changes)
            outcome.run_resumed = session.tally.run_resumed
            outcome.crawl_run = int(outcome.stats.get("neardup/crawl_run", 0))
            outcome.not_committed = session.tally.not_committed
            outcome.log = session.log.path if session.log is not None else outcome.log
        try:
            state.finish(opened=seen["opened"], clean=outcome.clean, reason=outcome.reason)
        except OSError as exc:
            if outcome.error is None:
                outcome.error = str(StoreWriteError.of(exc, store))
            outcome.notes.append(
                f"the crawl's state could not be tidied ({StoreWriteError.of(exc, store)}): "
                "the next crawl starts again from the start URLs"
            )
    if error is not None:
        raise UserError(f"the crawl failed: {_one_line(error)} (see {outcome.scrapy_log})")
    if outcome.reason == "finished" and outcome.node is None and outcome.decided and (
        outcome.decided == outcome.decisions.get("skipped", 0)
    ):
        url, why = _first_skipped(outcome.log)
        if outcome.decided == 1:
            outcome.nothing_crawled = f"{url} was skipped ({why})"
        else:
            outcome.nothing_crawled = (
                f"all {outcome.decided:,} pages were skipped, the first {url} ({why})"
            )
    return outcome


def _first_skipped(log: Path) -> tuple[str, str]:
    """The first skipped page of a run's dedup log and why (the log of a crawl that skipped
    every page it decided is short)."""
    from storage.log import read_log

    try:
        for entry in read_log(log.parent, runs=[log.name.removesuffix(".jsonl")]):
            if entry.get("decision") == "skipped":
                detail = entry.get("detail")
                why = f"{entry.get('reason')}: {detail}" if detail else entry.get("reason")
                return str(entry.get("url")), str(why)
    except (OSError, ValueError):
        pass
    return "a page", f"see {log}"


class _FailureLine(logging.Handler):
    """Keeps the first ``neardup_failure`` line logged: the crawl's error (module doc)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.line: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        line = getattr(record, "neardup_failure", None)
        if line is not None and self.line is None:
            self.line = str(line)


class OneLineFormatter(logging.Formatter):
    """A log record as one line: no traceback (Scrapy's log file keeps those)."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split())
        if len(text) > 300:
            text = text[:297] + "..."
        return f"{record.levelname} {record.name}: {text}"


def _stderr_handler(level: int, failure: _FailureLine) -> logging.Handler:
    """Log records on stderr, one line each; none once the crawl has failed (the command then
    says why in one line of its own, and the Scrapy log keeps the rest)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(OneLineFormatter())
    handler.addFilter(lambda record: failure.line is None and record.name not in _PAGE_FAILURES)
    return handler


#: Scrapy's loggers of a request that failed: the page is logged as skipped with the reason
#: (the summary counts it, ``neardup log`` lists it), so the terminal does not get it twice
_PAGE_FAILURES = frozenset({"scrapy.downloadermiddlewares.retry",
                            "scrapy.downloadermiddlewares.robotstxt"})  # fmt: skip


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
