"""The worker process that runs the crawl's dedup and storage work, and the crawl's side of it.

A crawl is CPU-bound on Scrapy's event-loop thread, and nearly all of the dedup and storage work
(sketch, decide, index, WARC, commit, log) is Python that holds the GIL: on a worker *thread* it
only takes turns with Scrapy, and loses to running it inline (``benchmarks.crawl`` measures the
three). So, while an asyncio event loop runs (``NEARDUP_WORKER="process"``, the default), the
:class:`~crawler.work.steps.StoreWork` runs in one child process, started in ``open_spider``,
fed over a pipe; Scrapy goes on fetching and parsing on its core meanwhile. The stages send a
page (:class:`~crawler.work.page.PageView`: URL, tokens, status, headers, body) and get back a
small :class:`~crawler.work.steps.Outcome`. :class:`Worker` is the crawl's side: it returns a
future of each step's outcome and knows nothing of Scrapy; the session
(:mod:`crawler.pipelines.session`) turns outcomes into items, drops and stats.

*One* worker, fed in arrival order, keeps the greedy clustering deterministic (each page is
decided against every page that arrived before it) and the LMDB write transaction on one
thread. The child ignores Ctrl-C (the crawl stops it), dies with the crawl
(``PR_SET_PDEATHSIG`` on Linux), and on a closed pipe aborts its batch. A worker that dies is
a store failure: the crawl is stopped, and every page still on its way is dropped with a
one-line reason (``StoreFailed``), so that nothing waits for a worker that has gone.

**The protocol.** :mod:`crawler.ipc`'s messages over two pipes. The crawl sends ``open`` (the
settings; the worker answers ``opened`` with the store's repairs, or ``open_failed``), then
steps in order: ``decide``, ``store``, ``not_stored``, ``tick``, and ``finish`` last; the worker
answers each with ``done`` and its outcome (``finished`` for the last, with the run's totals),
and sends ``totals`` on a tick, ``log`` for each of its log records, which the crawl logs
where Scrapy logs, and ``durable`` with the URLs whose pages the store settled (committed, or
passed over), which a distributed crawl's frontier acknowledges then.

The child runs ``python -c`` :data:`_CHILD` with this package's root first on ``sys.path``, and
imports this module, the store work, ``dedup`` and ``storage``, but nothing of Scrapy, whose
import would delay the worker's first answer on every crawl. Keep Scrapy, the spider and the
review commands out of this module's imports and those of the modules it loads
(``tests/crawler/test_worker_imports.py`` checks).
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.ipc import Receiver, Sender, Unframer, die_with_parent, frame, message_pipe
from crawler.work.page import PageView
from crawler.work.outcome import Failure, Outcome
from crawler.work.steps import StoreWork

if TYPE_CHECKING:
    import asyncio

    from crawler.work.settings import SessionSettings

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

class _Forward(logging.Handler):
    """Sends the worker's log records to the crawl, which logs them where Scrapy logs."""

    def __init__(self, replies: Sender) -> None:
        super().__init__(logging.INFO)
        self.replies = replies
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.replies.queue(("log", record.levelno, record.name, self.format(record)))
        except Exception:  # noqa: BLE001 - logging must never break the work
            self.handleError(record)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: the worker's command line: ``python -c _CHILD PACKAGE_ROOT READ_FD WRITE_FD``
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from crawler.work.process import _child_main; _child_main()"
)


def _child_main() -> None:
    """The worker process (see :data:`_CHILD` and :class:`Worker`)."""
    parent = os.getppid()
    # Ctrl-C, and a SIGTERM sent to the whole process group (timeout, kill -TERM -PGID, a
    # stopped systemd service), stop the crawl, which then stops us once its work is stored
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != parent:  # the crawl died before we asked
        return
    # steps in; replies queued and flushed once per burst of steps, so a burst costs one write
    steps, replies = Receiver(int(sys.argv[1])), Sender(int(sys.argv[2]))
    root = logging.getLogger()
    root.addHandler(_Forward(replies))
    root.setLevel(logging.INFO)
    first = steps.receive()
    if not first:
        return
    _, config, storing, fused, run_id = first[0]
    work = StoreWork(config, storing=storing, fused=fused, run_id=run_id)
    try:
        repairs = work.open()
    except Exception as exc:  # noqa: BLE001 - reported to the crawl, which stops
        said = " ".join(str(exc).split()) or type(exc).__name__
        replies.send(("open_failed", "".join(traceback.format_exception(exc)).rstrip(), said))
        return
    replies.queue(("opened", repairs))
    try:
        _serve(steps, replies, work, first[1:])
    finally:
        work.close()  # an aborted batch at worst: the next open cuts its WARC tail off


def _serve(steps: Receiver, replies: Sender, work: StoreWork, messages: list[Any]) -> None:
    """Run the steps in arrival order, holding decisions while a commit waits (the hold is
    described in :mod:`crawler.work.steps`)."""
    held: deque[tuple[Any, ...]] = deque()
    held_since = 0.0
    hold_limit = max(1.0, 2 * work.config.batch_seconds)

    def run(message: tuple[Any, ...]) -> None:
        kind, seq = message[0], message[1]
        try:
            if kind == "decide":
                outcome = work.decide(PageView.from_wire(message[2]))
            elif kind == "store":
                outcome = work.store_page(PageView.from_wire(message[2]))
            elif kind == "not_stored":
                outcome = work.not_stored(message[2], message[3])
            else:
                outcome = work.tick()
                replies.queue(("totals", {**work.totals(), "cpu": _cpu_seconds()}))
        except Exception as exc:  # noqa: BLE001 - a bug outside the steps' guards stops the work
            outcome = work.failed(Failure.of(exc, None))
        replies.queue(("done", seq, outcome))

    while True:
        for message in messages:
            if message[0] == "finish":
                while held:
                    run(held.popleft())
                replies.send(("finished", message[1], {**work.finish(), "cpu": _cpu_seconds()}))
                os._exit(0)  # all is committed and closed: no interpreter teardown to wait for
            if message[0] == "decide" and (held or work.must_hold()):
                if not held:
                    held_since = time.monotonic()
                held.append(message)
                continue
            run(message)
            if held:
                expired = time.monotonic() - held_since >= hold_limit
                if expired or not work.pending:
                    work.commit_if_due()
                    while held and (expired or not work.must_hold()):
                        run(held.popleft())
                    held_since = time.monotonic()
        durable = work.take_durable()
        if durable:
            replies.queue(("durable", durable))
        replies.flush()
        received = steps.receive()
        if received is None:  # the crawl has gone without closing: commit nothing more
            return
        messages = received


class Worker:
    """The crawl's side of the worker process: each step sent returns a future of its
    :class:`~crawler.work.steps.Outcome`, resolved on the event-loop thread.

    It knows no session: what the worker reports besides outcomes goes to the callbacks,
    ``on_totals(totals)`` (the run's counters, after a tick), ``on_failure(failure)`` (the
    worker could not open the store, or went away with steps outstanding) and
    ``on_durable(urls)`` (pages the store settled; the last ones come with :meth:`finish`'s
    totals, as ``durable``).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        on_totals: Callable[[dict[str, Any]], None],
        on_failure: Callable[[Failure], None],
        on_durable: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.loop = loop
        self.on_totals = on_totals
        self.on_failure = on_failure
        self.on_durable = on_durable
        self.proc: subprocess.Popen[bytes] | None = None
        self._seq = 0
        self._futures: dict[int, asyncio.Future[Outcome]] = {}
        self._unframer = Unframer()
        self._backlog = bytearray()
        self._read_fd = self._write_fd = -1
        self._store = ""
        self._finished: dict[str, Any] | None = None
        self._gone = False

    def start(self, config: SessionSettings, storing: bool, fused: bool, run_id: str) -> None:
        from_parent, to_child = message_pipe()
        from_child, to_parent = message_pipe()
        # this very package, whatever the working directory holds
        package_root = str(Path(__file__).resolve().parents[2])
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, package_root, str(from_parent), str(to_parent)],
                pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL,
            )  # fmt: skip
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self._store = str(config.store)
        self._read_fd, self._write_fd = from_child, to_child
        os.set_blocking(from_child, False)
        os.set_blocking(to_child, False)
        self.loop.add_reader(from_child, self._readable)
        self._send(("open", config, storing, fused, run_id))

    def submit(self, kind: str, *args: Any) -> asyncio.Future[Outcome]:
        """Send a step; the future gets its outcome (a "not decided" drop once the worker is
        gone)."""
        future: asyncio.Future[Outcome] = self.loop.create_future()
        if self._gone:
            future.set_result(_gone_outcome(self.proc))
            return future
        self._seq += 1
        self._futures[self._seq] = future
        self._send((kind, self._seq, *args))
        return future

    def _send(self, message: Any) -> None:
        data = frame(message)
        if self._backlog:
            self._backlog += data
            return
        try:
            written = os.write(self._write_fd, data)
        except BlockingIOError:
            written = 0
        except OSError:  # the worker has gone; _lost says so
            return
        if written < len(data):
            self._backlog += data[written:]
            self.loop.add_writer(self._write_fd, self._drain)

    def _drain(self) -> None:
        try:
            written = os.write(self._write_fd, self._backlog)
        except BlockingIOError:
            return
        except OSError:
            written = len(self._backlog)
        del self._backlog[:written]
        if not self._backlog:
            self.loop.remove_writer(self._write_fd)

    def _readable(self) -> None:
        try:
            data = os.read(self._read_fd, 1 << 20)
        except BlockingIOError:
            return
        if not data:
            self._lost()
            return
        for message in self._unframer.feed(data):
            self._handle(message)

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "done":
            future = self._futures.pop(message[1], None)
            if future is not None and not future.done():
                future.set_result(message[2])
        elif kind == "log":
            logging.getLogger(message[2]).log(message[1], "%s", message[3])
        elif kind == "totals":
            self.on_totals(message[1])
        elif kind == "durable":
            if self.on_durable is not None:
                self.on_durable(message[1])
        elif kind == "opened":
            for line in message[1]:
                logger.warning("Store %s repaired on opening: %s", self._store, line)
        elif kind == "open_failed":
            self.on_failure(Failure("store", f"the worker could not open the store: {message[2]}",
                                    message[1]))  # fmt: skip
        elif kind == "finished":
            self._finished = message[2]

    def _lost(self) -> None:
        """The worker's pipe closed: every step still waiting for it is not done."""
        if self._gone:
            return
        self._gone = True
        self.loop.remove_reader(self._read_fd)
        if self._backlog:
            self.loop.remove_writer(self._write_fd)
            self._backlog.clear()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        outcome = _gone_outcome(self.proc)
        if self._futures or self._finished is None:
            assert outcome.failure is not None
            self.on_failure(outcome.failure)
        self._abandon(replace(outcome, failure=None))

    def _abandon(self, outcome: Outcome) -> None:
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_result(outcome)

    def finish(self) -> dict[str, Any] | None:
        """The last step, waited for (blocking): the worker commits, closes and exits."""
        if not self._gone:
            self._seq += 1
            self._send(("finish", self._seq))
            if self._backlog:
                self.loop.remove_writer(self._write_fd)
            self.loop.remove_reader(self._read_fd)
            os.set_blocking(self._write_fd, True)
            os.set_blocking(self._read_fd, True)
            try:
                while self._backlog:
                    del self._backlog[: os.write(self._write_fd, self._backlog)]
                while self._finished is None:
                    data = os.read(self._read_fd, 1 << 20)
                    if not data:
                        break
                    for message in self._unframer.feed(data):
                        self._handle(message)
            except OSError:
                pass
            self._gone = True
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc is not None and self._finished is None:
            # it answered nothing: make sure it is gone. A worker that answered has closed the
            # store (its writer lock is free) and only has its interpreter to tear down
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._finished is None:
            self._abandon(replace(_gone_outcome(self.proc), failure=None))
        return self._finished


def _gone_outcome(proc: subprocess.Popen[bytes] | None) -> Outcome:
    code = proc.returncode if proc is not None else None
    how = f"exited with status {code}" if code is not None else "stopped answering"
    return Outcome(
        drop="store_failed",
        message=f"not decided: the neardup worker process {how}",
        level="WARNING",
        failure=Failure("worker", f"the neardup worker process {how}"),
    )
