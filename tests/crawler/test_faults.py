"""SIGKILL ``neardup crawl`` at random moments, restart it each time, and lose nothing.

The crawl runs as a user runs it (``python -m crawler.cli crawl``, a child process) against a
site of 161 pages served from this process. One request at a time and breadth first, so an
uninterrupted crawl and a crawl restarted from its start URLs meet the pages in the same order,
and greedy clustering must end with the same kept set. Small batches (8 pages) put many
commits in each run, so the kills land before, during and after commits.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler.demo.server import Route, serve
from storage.log import read_log
from storage.store import Store
from storage.verify import verify_store

ROOT = Path(__file__).resolve().parents[2]
HTML = (("Content-Type", "text/html; charset=utf-8"),)
#: the options every crawl of the fault site runs with
ORDERLY = [
    "--set", "crawl.concurrency=1", "--set", "crawl.autothrottle=false",
    "--set", "crawl.download_delay=0", "--set", "crawl.batch_size=8",
    "--set", "crawl.robots_txt=false", "--quiet", "--json",
]  # fmt: skip

SECTIONS = 10
PER_SECTION = 12


def _words(rng: random.Random, vocabulary: list[str], n: int) -> list[str]:
    return [rng.choice(vocabulary) for _ in range(n)]


def _html(title: str, text: str, links: list[str], wrapper: str = "div") -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
        f"<{wrapper}><p>{text}</p></{wrapper}><ul>{anchors}</ul></body></html>"
    )


def fault_site(delay: float = 0.0, seed: int = 11) -> dict[str, Route | str]:
    """120 distinct articles in 10 sections, 15 exact mirrors and 15 near copies (one word
    changed of 150: resemblance about 0.95), and the index and section pages: 161 pages."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
                  for _ in range(3000)]  # fmt: skip
    routes: dict[str, Route | str] = {"/robots.txt": Route(status=404, body="")}

    def page(path: str, body: str) -> None:
        # send_length=False: one connection per request. On a kept-alive connection the
        # server's separate header and body writes meet Nagle and delayed ACKs (~40 ms a page)
        routes[path] = Route(headers=HTML, body=body, delay=delay, send_length=False)

    sections = [f"/s/{k}.html" for k in range(SECTIONS)]
    page("/", _html("index", "index of the fault site " + " ".join(_words(rng, vocabulary, 40)),
                    sections))  # fmt: skip
    n = 0
    for k, section in enumerate(sections):
        links = []
        for _ in range(PER_SECTION):
            words = _words(rng, vocabulary, 150)
            text = " ".join(words)
            article = f"/p/{n}.html"
            links.append(article)
            nxt = [f"/p/{n + 1}.html"] if n + 1 < SECTIONS * PER_SECTION else []
            page(article, _html(f"article {n}", text, ["/", *nxt]))
            if n % 8 == 0:
                links.append(f"/mirror/{n}.html")  # same text and links, other markup
                page(f"/mirror/{n}.html",
                     _html(f"article {n}", text, ["/", *nxt], wrapper="section"))  # fmt: skip
            if n % 8 == 4:
                changed = list(words)
                changed[75] = "changedword"
                links.append(f"/near/{n}.html")
                page(f"/near/{n}.html", _html(f"article {n}", " ".join(changed), ["/", *nxt]))
            n += 1
        page(section, _html(f"section {k}", f"section {k} " + " ".join(_words(rng, vocabulary, 30)),
                            ["/", *links]))  # fmt: skip
    return routes


def crawl_command(base: str, store: Path) -> list[str]:
    return [sys.executable, "-m", "crawler.cli", "crawl", base + "/", "--store", str(store),
            *ORDERLY]  # fmt: skip


def child_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


def run_to_the_end(base: str, store: Path, timeout: float = 40) -> dict[str, Any]:
    proc = subprocess.run(crawl_command(base, store), check=False, cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def kept_pages(store: Path) -> dict[str, int]:
    """URL → doc id of every stored page; asserts no URL is stored twice."""
    with Store.open(store, readonly=True) as opened:
        urls = [(p.url, p.doc_id) for p in opened.iter_pages()]
    counts = Counter(url for url, _ in urls)
    assert not [u for u, c in counts.items() if c > 1], "a page is stored twice"
    return dict(urls)


@pytest.fixture(scope="module")
def site() -> Any:
    # 10 ms a page: the decisions run beside the fetching (crawler.pipelines.session), so without a pause
    # a restarted crawl could fetch the whole site before a kill lands
    with serve(fault_site(delay=0.01)) as base:
        yield base


@pytest.fixture(scope="module")
def uninterrupted(site: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("faults") / "whole"
    started = time.monotonic()
    summary = run_to_the_end(site, store)
    return {"store": store, "summary": summary, "kept": kept_pages(store),
            "seconds": time.monotonic() - started}  # fmt: skip


def test_the_fault_site_crawls_as_designed(uninterrupted):
    summary = uninterrupted["summary"]
    assert summary["decided"] == 161 and summary["reason"] == "finished"
    assert summary["decisions"]["exact_duplicate"] == 15
    assert summary["decisions"]["near_duplicate"] == 15
    assert summary["decisions"]["kept"] == 131 == len(uninterrupted["kept"])
    assert verify_store(uninterrupted["store"]).ok
    # a finished crawl leaves no queue to resume and no unclean-stop marker
    assert not (uninterrupted["store"] / "jobdir").exists()
    assert not (uninterrupted["store"] / "crawl.running").exists()


def test_sigkill_at_random_moments_loses_nothing(site, uninterrupted, tmp_path):
    seed = int(os.environ.get("NEARDUP_FAULT_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    where = f"(NEARDUP_FAULT_SEED={seed})"
    store = tmp_path / "killed"
    marker = store / "crawl.running"
    snapshots: list[dict[str, int]] = []
    killed_mid_crawl = 0
    last_killed = False
    deadline = time.monotonic() + 60
    for _ in range(4):
        proc = subprocess.Popen(crawl_command(site, store), cwd=ROOT, env=child_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        # A restarted crawl first refetches what is already decided, so a kill at a random
        # *time* would rarely reach new work. Instead: wait until this run has logged a random
        # number of new decisions (lines appear as batches commit), then a random moment more.
        target = rng.randint(0, 20)
        log = None
        while time.monotonic() < deadline and proc.poll() is None:
            if log is None:
                try:
                    running = json.loads(marker.read_text())
                    if running["pid"] == proc.pid:
                        log = store / "logs" / f"{running['run_id']}.jsonl"
                except (OSError, ValueError, KeyError):
                    pass
            elif log.exists() and log.read_bytes().count(b"\n") >= target:
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.25))
        last_killed = proc.poll() is None
        killed_mid_crawl += last_killed
        proc.kill()
        proc.wait(timeout=10)
        report = verify_store(store)  # what the next start does: repair, then check
        assert report.ok, f"{where}\n{report.render()}"
        now = kept_pages(store)
        for before in snapshots:
            # every page kept before a kill is still there, under the same document
            assert {u: now.get(u) for u in before} == before, where
        snapshots.append(now)
    assert killed_mid_crawl >= 3, f"most kills must land while crawling {where}"

    summary = run_to_the_end(site, store)
    final = kept_pages(store)
    assert final.keys() == uninterrupted["kept"].keys(), where
    for before in snapshots:
        assert {u: final.get(u) for u in before} == before, where
    report = verify_store(store)
    assert report.ok, f"{where}\n{report.render()}"
    assert report.pages == report.warc_records == 131
    assert summary["decided"] + summary["already_decided"] == 161, where
    if last_killed:  # (a last run that finished on its own left no marker behind)
        assert any("did not stop cleanly" in note for note in summary["notes"]), summary["notes"]

    # every URL is decided once in the store, and logged at most once over all the runs;
    # no log line names a page the store lost
    with Store.open(store, readonly=True) as opened:
        decided = Counter(record.url for _, record in opened.documents())
    assert len(decided) == 161 and set(decided.values()) == {1}, where
    lines = list(read_log(store / "logs"))
    logged = Counter(e["url"] for e in lines)
    assert max(logged.values()) == 1, where
    assert {e["url"] for e in lines if e["decision"] == "kept"} <= final.keys(), where
