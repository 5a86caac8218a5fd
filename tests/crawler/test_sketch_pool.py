"""crawler.recluster.pool: real worker processes, real pipes; the order, errors and ends they promise.

Each test compares the pool's sketches with the same documents sketched one by one in this
process, so a chunk dealt to the wrong worker or read out of turn fails it.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import random
import time

import pytest

from crawler.ipc import PIPE_BYTES, message_pipe
from crawler.recluster.inputs import SourceDocument
from crawler.recluster.pool import (
    CHUNK,
    CHUNK_BYTES,
    _chunks,
    init_sketcher,
    sketch_source,
    sketched,
)
from dedup.params import SketchParams

PARAMS = SketchParams()
ENGINE = "fast"


def documents(n: int, seed: int = 7) -> list[SourceDocument]:
    """``n`` text and HTML documents, some skipped and some empty, in a seeded mix."""
    rng = random.Random(seed)
    words = [f"w{k}" for k in range(300)]
    docs = []
    for k in range(n):
        body = " ".join(rng.choices(words, k=rng.randint(5, 60)))
        if k % 11 == 0:
            docs.append(SourceDocument(f"d{k}", "html", b"", skip_reason="not_html (image/png)"))
        elif k % 13 == 0:
            docs.append(SourceDocument(f"d{k}", "text", "  ...  "))  # no words: "empty"
        elif k % 2:
            docs.append(SourceDocument(f"d{k}", "html", f"<p>{body}</p>".encode()))
        else:
            docs.append(SourceDocument(f"d{k}", "text", body))
    return docs


def one_by_one(docs: list[SourceDocument]) -> list:
    init_sketcher(PARAMS, ENGINE)
    return [sketch_source(doc) for doc in docs]


def children() -> list:
    return multiprocessing.active_children()


@pytest.mark.parametrize("jobs", [1, 2, 3])
@pytest.mark.parametrize("feed_here", [False, True])
def test_sketches_arrive_in_input_order_whatever_the_jobs(jobs, feed_here):
    # more chunks than workers, and a last chunk that is not full
    docs = documents(CHUNK * 7 + 5)
    with sketched(iter(docs), PARAMS, ENGINE, jobs, feed_here=feed_here) as stream:
        got = list(stream)
    assert got == one_by_one(docs)
    assert {d.skip_reason for d in got} == {None, "empty", "not_html (image/png)"}
    assert not children()


@pytest.mark.parametrize("feed_here", [False, True])
def test_an_input_that_fails_midway_raises_in_the_parent_after_what_came_before(feed_here):
    docs = documents(CHUNK * 3)

    def failing():
        yield from docs
        raise OSError("disk went away")

    got = []
    with pytest.raises(OSError, match="disk went away"):
        with sketched(failing(), PARAMS, ENGINE, 2, feed_here=feed_here) as stream:
            for doc in stream:
                got.append(doc)
    # everything read before the failure was delivered, in order
    assert got == one_by_one(docs)
    assert not children()


def test_an_exception_that_cannot_be_pickled_still_arrives_as_one_line():
    class Local(Exception):  # a local class does not pickle
        pass

    def failing():
        yield from documents(3)
        raise Local("bad record 4")

    with pytest.raises(RuntimeError, match="Local: bad record 4"):
        with sketched(failing(), PARAMS, ENGINE, 2) as stream:
            list(stream)


def test_a_parent_that_stops_early_leaves_no_process_behind():
    docs = documents(CHUNK * 40)
    with sketched(iter(docs), PARAMS, ENGINE, 2) as stream:
        first = [next(stream) for _ in range(5)]
    assert first == one_by_one(docs[:5])
    deadline = time.monotonic() + 5
    while children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not children()


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path):
    docs = documents(CHUNK * 40)
    killed = tmp_path / "killed"

    def held_back():
        # the rest of the input only once the worker is dead: the run cannot end before it
        yield from docs[: CHUNK * 4]
        deadline = time.monotonic() + 30
        while not killed.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        yield from docs[CHUNK * 4:]

    with pytest.raises(RuntimeError, match="a sketching process died"):
        with sketched(held_back(), PARAMS, ENGINE, 2) as stream:
            next(stream)
            for process in children():
                if process.name == "neardup-sketcher-1":
                    process.kill()
                    process.join()
            killed.touch()
            list(stream)


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
def test_pipes_hold_a_few_chunks_where_the_system_allows() -> None:
    # the default 64 KiB holds less than one chunk of pages: the feeder would wait on each
    # worker in turn while the other idles
    reader, writer = message_pipe()
    try:
        with open("/proc/sys/fs/pipe-max-size") as fh:
            allowed = int(fh.read())
        size = fcntl.fcntl(reader, fcntl.F_GETPIPE_SZ)
        assert size >= min(PIPE_BYTES, allowed) > 1 << 16
    finally:
        os.close(reader)
        os.close(writer)


def test_chunks_are_cut_by_count_and_by_bytes() -> None:
    small = [SourceDocument(f"s{k}", "text", "a b") for k in range(CHUNK + 3)]
    big = [SourceDocument(f"b{k}", "html", b"x" * (CHUNK_BYTES // 3 + 1)) for k in range(7)]
    chunks = list(_chunks(small + big))
    assert [doc for chunk in chunks for doc in chunk] == small + big  # all, in order
    assert [len(chunk) for chunk in chunks] == [CHUNK, 3 + 3, 3, 1]  # 3 big ones fill a chunk
    assert all(sum(len(d.content) for d in chunk[:-1]) < CHUNK_BYTES for chunk in chunks)
    assert list(_chunks([])) == []
