"""SIGKILL ``neardup crawl`` at random moments, restart it each time, and lose nothing.

The crawl runs as a user runs it (``python -m crawler.cli crawl``, a child process) against a
site of 161 pages served from this process. One request at a time and breadth first, so an
uninterrupted crawl and a crawl restarted from its start URLs meet the pages in the same order,
and greedy clustering must end with the same kept set. Small batches (8 pages) put many
commits in each run, so the kills land before, during and after commits.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crawler.cli.crawl import MARKER
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
        # server's separate header and body writes meet Nagle and delayed ACKs (~40 ms a page).
        # An ETag, as real servers send: a restarted crawl asking with it gets a 304, no links
        routes[path] = Route(headers=HTML, body=body, delay=delay, send_length=False,
                             etag="auto")

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


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(site, uninterrupted, tmp_path):
    seed = int(os.environ.get("NEARDUP_FAULT_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    where = f"(NEARDUP_FAULT_SEED={seed})"
    store = tmp_path / "killed"
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
        _wait_for_decisions(proc, store, rng.randint(0, 20), deadline)
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


def _wait_for_decisions(proc: subprocess.Popen[bytes], store: Path, decisions: int,
                        deadline: float) -> None:
    """Return once the crawl ``proc`` has logged ``decisions`` lines of its own (lines appear
    as batches commit), or has ended, or ``deadline`` (a monotonic time) has passed."""
    marker = store / "crawl.running"
    log = None
    while time.monotonic() < deadline and proc.poll() is None:
        if log is None:
            try:
                running = json.loads(marker.read_text())
                if running["pid"] == proc.pid:
                    log = store / "logs" / f"{running['run_id']}.jsonl"
            except (OSError, ValueError, KeyError):
                pass
        elif log.exists() and log.read_bytes().count(b"\n") >= decisions:
            return
        time.sleep(0.005)


@pytest.mark.slow
def test_a_crawl_killed_early_resumes_to_every_page_though_the_server_answers_304s(
        site, uninterrupted, tmp_path):
    """The server sends validators, so the restarted crawl could ask for the pages the killed
    one decided with them and get 304s, which carry no links: the links the kill left
    unfollowed (its queue is lost) would never be found. Those pages are fetched in full."""
    store = tmp_path / "killed-early"
    proc = subprocess.Popen(crawl_command(site, store), cwd=ROOT, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _wait_for_decisions(proc, store, 16, time.monotonic() + 30)
    assert proc.poll() is None, "the crawl ended before the kill"
    proc.kill()
    proc.wait(timeout=10)
    summary = run_to_the_end(site, store)
    assert summary["already_decided"] >= 16
    assert summary["decided"] + summary["already_decided"] == 161
    assert kept_pages(store).keys() == uninterrupted["kept"].keys()
    assert verify_store(store).ok


# --- a store that cannot be written --------------------------------------------------------------
#
# What the user sees, as the command runs: one line on stderr naming the cause and the place,
# exit status 1, a summary that counts only what was committed; and the next run, once the
# store can be written, passes over what was committed and finishes the crawl.


def crawl_proc(base: str, store: Path, *, preexec: Any = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(crawl_command(base, store), check=False, cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec)  # fmt: skip


def assert_one_line_failure(proc: subprocess.CompletedProcess[str], cause: str,
                            store: Path) -> dict[str, Any]:
    """The failed crawl's JSON summary, once its exit status and its one line are checked."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"neardup crawl: error: {cause}: {store}"), lines
    assert "Traceback" not in proc.stderr and "Logging error" not in proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout)
    assert summary["error"] == proc.stderr.strip().removeprefix("neardup crawl: error: ")
    return summary


def assert_counts_what_was_committed(summaries: list[dict[str, Any]], store: Path) -> None:
    """The runs' summaries, added up, count exactly what the store holds: no more."""
    report = verify_store(store)
    assert report.ok, report.render()
    assert sum(s["decided"] for s in summaries) == report.documents
    assert sum(s["decisions"]["kept"] for s in summaries) == report.warc_records


def assert_the_next_run_finishes(site: str, store: Path, uninterrupted: dict[str, Any]) -> None:
    summary = run_to_the_end(site, store)
    assert summary["error"] is None and summary["reason"] == "finished"
    assert summary["decided"] + summary["already_decided"] == 161
    report = verify_store(store)
    assert report.ok, report.render()
    assert kept_pages(store).keys() == uninterrupted["kept"].keys()


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 512 KB tmpfs: room for about a third of the fault site's store."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)],
                             check=False, capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False, capture_output=True)


@pytest.mark.slow
def test_a_full_disk_stops_the_crawl_in_one_line_and_the_next_run_resumes(
    site, uninterrupted, small_disk
):
    store = small_disk / "store"
    first = assert_one_line_failure(crawl_proc(site, store), "no space left on device", store)
    assert first["reason"] == "neardup_store_error" and 0 < first["decided"] < 161
    assert first["not_committed"] > 0  # the batch that failed, counted apart
    assert_counts_what_was_committed([first], store)
    # again on the full disk: the same one line (not the log file's "--- Logging error ---")
    proc = crawl_proc(site, store)
    if proc.stdout:
        again = assert_one_line_failure(proc, "no space left on device", store)
        # it passes over what was committed (the URLs the store knows fill the queue, so the
        # full disk stops it at least as soon)
        assert 0 < again["already_decided"] <= first["decided"]
        assert_counts_what_was_committed([first, again], store)
    else:  # the disk was too full for the crawl to start: the same line, and no summary
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert proc.stderr.startswith(f"neardup crawl: error: no space left on device: {store}")
        assert len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
        assert_counts_what_was_committed([first], store)
    grown = subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=False)
    assert grown.returncode == 0
    assert_the_next_run_finishes(site, store, uninterrupted)


def _no_bigger_files_than(limit: int) -> Any:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


@pytest.mark.slow
def test_a_store_that_cannot_grow_stops_the_crawl_in_one_line_and_the_next_run_resumes(
    site, uninterrupted, tmp_path
):
    """The process may write no file over 150 KB: the store's index reaches that first."""
    store = tmp_path / "store"
    proc = crawl_proc(site, store, preexec=_no_bigger_files_than(150 * 1024))
    first = assert_one_line_failure(proc, "file too large", store)
    assert 0 < first["decided"] < 161
    assert_counts_what_was_committed([first], store)
    assert_the_next_run_finishes(site, store, uninterrupted)


def _without_dac_override() -> None:
    """preexec_fn: a root child without CAP_DAC_OVERRIDE, so that file modes bind it as they
    bind any user (dropped from the bounding set, the exec'd program never has it)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE = 24, 1


def _worker_has_opened(store: Path, timeout: float = 20) -> None:
    """Wait until the crawl's worker process holds the run's dedup log open: it has opened the
    store, and writes through what it holds open (a mode changed now binds new files only)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            run = json.loads((store / MARKER).read_text())["run_id"]
            text = (store / "logs" / f"{run}.scrapy.log").read_text()
            found = re.search(r"in worker process (\d+)", text)
            fds = Path(f"/proc/{found.group(1)}/fd").iterdir() if found else iter(())
            held = {os.readlink(fd) for fd in fds}
        except (OSError, ValueError, KeyError):
            held = set()
        if held and str(store / "logs" / f"{run}.jsonl") in held:
            return
        time.sleep(0.02)
    raise AssertionError("the crawl's worker never opened its dedup log")


def _chmod_tree(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


@pytest.mark.slow
def test_a_store_made_read_only_mid_crawl_stops_in_one_line_and_the_next_run_resumes(
    uninterrupted, tmp_path
):
    if os.geteuid() == 0 and sys.platform != "linux":
        pytest.skip("dropping root's override of file modes needs Linux")
    store = tmp_path / "store"
    # the first page comes late, so the store can be made read-only before its first page:
    # the WARC file that page needs is created (opened) then, and cannot be
    routes = fault_site()
    routes["/"] = replace(routes["/"], delay=3.0)  # type: ignore[arg-type]
    with serve(routes) as base:
        proc = subprocess.Popen(crawl_command(base, store), cwd=ROOT, env=child_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_without_dac_override)  # fmt: skip
        try:
            _worker_has_opened(store)
            _chmod_tree(store, writable=False)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _chmod_tree(store, writable=True)
        failed = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        first = assert_one_line_failure(failed, "permission denied", store / "pages")
        assert first["decided"] == 0  # the first page could not be stored
        assert_counts_what_was_committed([first], store)
        summary = run_to_the_end(base, store)
    assert summary["reason"] == "finished" and summary["decided"] == 161
    assert any("did not stop cleanly" in note for note in summary["notes"])  # its marker stayed
    report = verify_store(store)
    assert report.ok and report.warc_records == len(uninterrupted["kept"]) == 131
