"""Sketches of a stream of documents, made by worker processes and delivered in input order.

Canonicalising and sketching are most of re-clustering's work, and documents are independent
until the index step, so they run in ``jobs`` worker processes while the parent clusters in
input order, the order greedy clustering is defined by. The parent does nothing else:

* a **feeder** process reads the input (files, WARC records, JSON lines: whatever the sources
  iterator does) and deals chunks of :data:`CHUNK` documents to the workers in turn;
* each **worker** sketches its chunks and sends the sketches back on a pipe of its own;
* the **parent** reads the workers' pipes in that same turn, so the sketches arrive in input
  order with nothing to reorder.

The pipes are :mod:`crawler.ipc`'s message pipes. Each holds a few chunks (a chunk of pages is
cut at :data:`CHUNK_BYTES`), so a parent slower than its workers holds them back, and they hold
the feeder back: memory stays flat however large the corpus. An error in the feeder (an input
that cannot be read) or in a worker travels down the same pipes and is raised in the parent, at
the document where it happened.

Not :class:`multiprocessing.pool.Pool`: its task and result threads live in the parent and take
the GIL from the clustering loop, and the parent would read and pickle every document to hand it
over; for text input that costs the parent as much again as clustering.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from crawler.ipc import Receiver, Sender, die_with_parent, message_pipe, sendable
from crawler.recluster.inputs import FileContent, SourceDocument
from dedup.canonical import document_tokens
from dedup.document import Sketcher
from dedup.html_text import DocumentTooDeep
from dedup.params import ContentArea, SketchParams
from dedup.sketches import Sketch

__all__ = ["CHUNK", "SketchedDocument", "init_sketcher", "sketch_source", "sketched"]

#: documents per message from the feeder to a worker, and per message of sketches back
CHUNK = 32
#: content per message from the feeder at most (a chunk ends at CHUNK documents or this)
CHUNK_BYTES = 1 << 18


@dataclass(frozen=True)
class SketchedDocument:
    id: str
    sketch: Sketch | None
    content_hash: int = 0
    tokens: int = 0
    skip_reason: str | None = None


# --- sketching one document: the same in a worker process and in the parent -------------------

_sketcher: tuple[Sketcher, str, ContentArea | None] | None = None


def init_sketcher(params: SketchParams, engine: str, area: ContentArea | None = None) -> None:
    """Set what :func:`sketch_source` sketches with in this process: once per worker process,
    per Spark Python worker, or in the parent for one job, so each keeps its own tables."""
    global _sketcher
    _sketcher = (Sketcher(params), engine, area)


def sketch_source(doc: SourceDocument) -> SketchedDocument:
    """Canonicalise and sketch one document (in a worker process, or in the parent for 1 job)."""
    assert _sketcher is not None, "call init_sketcher first"
    sketcher, engine, area = _sketcher
    if doc.skip_reason:
        return SketchedDocument(doc.id, None, skip_reason=doc.skip_reason)
    unit = sketcher.params.unit
    content = doc.content
    if isinstance(content, FileContent):
        try:
            content = content.read()
        except OSError as exc:
            return SketchedDocument(doc.id, None, skip_reason=f"unreadable ({exc.strerror})")
    try:
        tokens = document_tokens(
            content, doc.kind, unit, engine, encoding=doc.encoding, area=area
        )
    except DocumentTooDeep:
        return SketchedDocument(doc.id, None, skip_reason="too_deep")
    if not tokens:
        return SketchedDocument(doc.id, None, skip_reason="empty")
    made = sketcher.sketch(tokens)
    return SketchedDocument(doc.id, made.sketch, made.content_hash, made.tokens)


# --- the processes -----------------------------------------------------------------------------


@contextmanager
def sketched(
    sources: Iterable[SourceDocument],
    params: SketchParams,
    engine: str,
    jobs: int,
    *,
    feed_here: bool = False,
    area: ContentArea | None = None,
) -> Iterator[Iterator[SketchedDocument]]:
    """The sketches of ``sources``, in input order, made by ``jobs`` worker processes.

    The processes start on entry: enter this before opening an LMDB environment, so that no
    forked process holds one (LMDB forbids using an environment across ``fork``). With one job,
    or where processes cannot be forked, the parent reads and sketches the sources itself.
    ``feed_here`` reads the sources in a thread of this process instead of a feeder process,
    for a sources iterator whose side effects the caller reads (it costs the parent some time).
    On exit, every process still running is stopped. ``area``: the content area HTML
    documents are read with (None: the whole page).
    """
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        init_sketcher(params, engine, area)
        yield map(sketch_source, sources)
        return
    ctx = multiprocessing.get_context("fork")
    to_workers = [message_pipe() for _ in range(jobs)]  # (worker's end, feeder's end)
    to_parent = [message_pipe() for _ in range(jobs)]  # (parent's end, worker's end)
    every_fd = [fd for pair in to_workers + to_parent for fd in pair]
    writers = [Sender(w) for _, w in to_workers]
    readers = [Receiver(r) for r, _ in to_parent]
    processes = [
        ctx.Process(target=_worker, args=(Receiver(to_workers[k][0]), Sender(to_parent[k][1]),
                                           params, engine, every_fd, area),
                    name=f"neardup-sketcher-{k}", daemon=True)  # fmt: skip
        for k in range(jobs)
    ]
    if not feed_here:
        processes.append(ctx.Process(target=_feeder_process, args=(sources, writers, every_fd),
                                     name="neardup-feeder", daemon=True))  # fmt: skip
    sys.stdout.flush()  # a forked child flushes what it inherited: nothing, then
    sys.stderr.flush()
    for process in processes:
        process.start()
    kept = {r.fd for r in readers} | ({w.fd for w in writers} if feed_here else set())
    _close_all_but(kept, every_fd)  # the children hold these: EOF must reach us when they exit
    feeder = None
    if feed_here:
        feeder = threading.Thread(target=_feed, args=(sources, writers), daemon=True,
                                  name="neardup-feeder")  # fmt: skip
        feeder.start()
    try:
        yield _in_turn(readers)
    finally:
        for reader in readers:
            reader.close()
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(5)
        if feeder is not None:
            feeder.join(5)  # its next write fails now that the workers are gone
            for writer in writers:
                writer.close()


def _in_turn(readers: list[Receiver]) -> Iterator[SketchedDocument]:
    """The workers' messages, read in the turn the feeder dealt the chunks in."""
    turn = 0
    while True:
        try:
            kind, payload = readers[turn % len(readers)].get()
        except EOFError:
            raise RuntimeError("a sketching process died; see the messages above") from None
        if kind == "end":
            return
        if kind == "error":
            raise payload
        yield from payload
        turn += 1


def _close_all_but(keep: set[int], every_fd: list[int]) -> None:
    """Close the pipe ends this process does not use: a copy held open would keep the far end
    from ever seeing EOF."""
    for fd in every_fd:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _child(keep: set[int], every_fd: list[int]) -> None:
    """In a child: only its own pipe ends; Ctrl-C and the parent's death are the parent's."""
    _close_all_but(keep, every_fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


def _feeder_process(sources: Iterable[SourceDocument], writers: list[Sender],
                    every_fd: list[int]) -> None:  # fmt: skip
    _child({w.fd for w in writers}, every_fd)
    _feed(sources, writers)


def _feed(sources: Iterable[SourceDocument], writers: list[Sender]) -> None:
    """Deal the sources to the workers in chunks, in turn; then an end (or an error) to each."""
    turn = 0
    try:
        for chunk in _chunks(sources):
            if not writers[turn % len(writers)].send(("docs", chunk)):
                return  # the parent stopped early
            turn += 1
    except Exception as exc:  # noqa: BLE001 - an input that cannot be read: the parent raises it
        writers[turn % len(writers)].send(("error", sendable(exc)))
        return
    for k in range(len(writers)):
        writers[(turn + k) % len(writers)].send(("end", None))


def _chunks(sources: Iterable[SourceDocument]) -> Iterator[list[SourceDocument]]:
    """The sources in chunks of :data:`CHUNK` documents, or fewer once they hold
    :data:`CHUNK_BYTES` of content, so that a pipe holds several."""
    chunk: list[SourceDocument] = []
    size = 0
    for doc in sources:
        chunk.append(doc)
        size += 0 if isinstance(doc.content, FileContent) else len(doc.content)
        if len(chunk) == CHUNK or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _worker(reader: Receiver, writer: Sender, params: SketchParams, engine: str,
            every_fd: list[int], area: ContentArea | None = None) -> None:  # fmt: skip
    _child({reader.fd, writer.fd}, every_fd)
    init_sketcher(params, engine, area)
    while True:
        try:
            kind, payload = reader.get()
        except (EOFError, OSError):
            return  # the feeder is gone, and so is the parent
        if kind == "docs":
            try:
                message: tuple[str, Any] = ("docs", [sketch_source(doc) for doc in payload])
            except Exception as exc:  # noqa: BLE001 - a sketching bug: the parent raises it
                message = ("error", sendable(exc))
        else:
            message = (kind, payload)
        if not writer.send(message) or message[0] != "docs":
            return
