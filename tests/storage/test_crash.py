"""SIGKILL a writer at random moments, many times: the store stays consistent, nothing is lost.

The invariant (``docs/architecture.md``): a crash at any instant leaves a store that verify
accepts after the next start, with no kept page lost and none stored twice.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from storage.store import Store
from storage.verify import verify_store

HERE = Path(__file__).resolve().parent


def run_and_kill(path: Path, seed: int, after: float) -> list[dict]:
    """Start the writer, let it write for ``after`` seconds once open, SIGKILL it."""
    lines: list[dict] = []
    opened = threading.Event()

    def read(stream) -> None:
        for line in stream:
            lines.append(json.loads(line))
            opened.set()

    with subprocess.Popen(
        [sys.executable, str(HERE / "crash_writer.py"), str(path), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        reader = threading.Thread(target=read, args=(child.stdout,))
        reader.start()
        assert opened.wait(timeout=20), "the writer did not open the store"
        time.sleep(after)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        reader.join(timeout=10)
    return lines


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_and_stores_nothing_twice(tmp_path):
    path = tmp_path / "store"
    rng = random.Random(20250101)
    committed = 0
    repairs: list[str] = []
    kills = 0
    deadline = time.monotonic() + 20
    while kills < 5 or (not repairs and kills < 15 and time.monotonic() < deadline):
        lines = run_and_kill(path, seed=kills, after=rng.uniform(0.05, 0.5))
        kills += 1
        repairs += lines[0]["repairs"]
        done = [line["committed"] for line in lines[1:]]
        assert done == sorted(done)
        if done:
            committed = done[-1]
    assert committed > 0

    report = verify_store(path)
    assert report.ok, report.problems
    repairs += report.repaired
    assert any("after the last commit" in r for r in repairs), "no kill hit the WARC window"

    with Store.open(path, readonly=True) as store:
        records = dict(store.documents())
        # everything committed before a kill is there, under its own id, once
        assert set(range(committed)) <= set(records)
        assert sorted(records) == list(range(len(records)))
        urls = [r.url for r in records.values()]
        assert len(urls) == len(set(urls))
        kept = {d: r for d, r in records.items() if r.decision == "kept"}
        assert {d for d, r in records.items() if r.page is not None} == set(kept)
        for doc_id, record in kept.items():
            assert store.read_page(record.page).url == record.url
            assert store.index.cluster_of(doc_id) == record.cluster_id
        # no WARC record without its document: as many response records as kept pages
        responses = 0
        for _, warc in store.pages.files():
            with open(warc, "rb") as fh:
                responses += sum(r.rec_type == "response" for r in ArchiveIterator(fh))
        assert responses == len(kept)
