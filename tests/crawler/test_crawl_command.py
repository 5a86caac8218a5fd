"""``neardup crawl`` as a user runs it: the end summary, Ctrl-C and resume, one-line errors."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo.server import Route, serve
from dedup.params import SketchParams
from storage.log import read_log
from storage.store import Store
from storage.verify import verify_store
from tests.crawler.test_faults import ORDERLY, ROOT, child_env, fault_site, kept_pages

DEMO_OPTIONS = ["--set", "crawl.concurrency=1", "--set", "crawl.autothrottle=false",
                "--set", "crawl.download_delay=0"]  # fmt: skip


def neardup(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crawler.cli", *argv], check=False, cwd=ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def crawled(demo_site: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("command") / "store"
    proc = neardup("crawl", demo_site + "/", "--store", str(store), *DEMO_OPTIONS)
    return {"store": store, "proc": proc, "base": demo_site}


def test_the_end_summary_says_what_happened_and_where(crawled):
    proc, store = crawled["proc"], crawled["store"]
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("crawl finished: 31 pages decided in ")
    lines = {line.split()[0] + " " + line.split()[1]: line for line in out.splitlines()[1:6]}
    assert lines["kept 21"].endswith(f"stored in {store / 'pages'}")
    assert "exact duplicates 3" in " ".join(out.split())
    assert "near duplicates 4" in " ".join(out.split())
    assert "skipped 3 not_html 2, robots_txt 1" in " ".join(out.split())
    log = next(line.split(None, 2)[2] for line in out.splitlines() if line.startswith("dedup log"))
    assert Path(log).parent == store / "logs" and Path(log).is_file()
    assert len(Path(log).read_text().splitlines()) == 31
    assert f"neardup verify --store {store}" in out
    # the progress line goes to stderr (plain lines: stderr is not a terminal here)
    assert "31 responses" in proc.stderr and "kept 21 | dropped 7 (exact 3, near 4)" in proc.stderr
    assert "Traceback" not in proc.stderr and "WARNING" not in proc.stderr
    assert verify_store(store).ok


def test_json_summary_and_a_repeated_crawl(crawled):
    proc = neardup("crawl", crawled["base"] + "/", "--store", str(crawled["store"]),
                   *DEMO_OPTIONS, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert proc.stderr == ""  # --json: no progress line
    # the first crawl finished: the same command is the store's next run, a recrawl, which
    # finds every page unchanged (the demo's server answers its validators with 304)
    assert again["crawl_run"] == 2 and again["already_decided"] == 0 and again["decided"] == 31
    assert again["changes"] == {"new": 0, "unchanged": 31, "changed": 0, "gone": 0,
                                "redecided": 0}  # fmt: skip
    assert again["reason"] == "finished" and again["interrupted"] is False
    assert again["decisions"] == {"kept": 21, "exact_duplicate": 3, "near_duplicate": 4,
                                  "contained": 0, "skipped": 3}  # fmt: skip
    report = verify_store(crawled["store"])
    assert report.ok, report.render()
    # no page is stored again: each kept page has a revisit record, and the byte-identical
    # mirror one in each run
    assert report.warc_records == 21 and report.revisit_records == 21 + 2


def crawl_stopped_by_ctrl_c(command: list[str], store: Path, decided: int,
                            stop: str = "ctrl_c") -> dict:
    """``neardup COMMAND`` in a child process, stopped once its dedup log holds ``decided``
    lines: its JSON summary, after it exited with 130. ``stop`` is how: ``ctrl_c``, SIGINT to
    the command; ``sigterm_group``, SIGTERM to every process of the command's group, as
    ``timeout``, ``kill -TERM -PGID`` and a stopped systemd service send it."""
    proc = subprocess.Popen([sys.executable, "-m", "crawler.cli", *command], cwd=ROOT,
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=stop == "sigterm_group")  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        logs = list((store / "logs").glob("*.jsonl")) if (store / "logs").is_dir() else []
        if logs and logs[0].read_bytes().count(b"\n") >= decided:
            break
        time.sleep(0.01)
    if stop == "sigterm_group":
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-3000:]
    return json.loads(out)


@pytest.mark.parametrize("stop", ["ctrl_c", pytest.param("sigterm_group", marks=pytest.mark.slow)])
def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(tmp_path, stop):
    """Ctrl-C, and SIGTERM to the crawl's whole process group (its worker process included),
    stop the crawl the same way: cleanly, and the same command resumes."""
    store = tmp_path / "store"
    with serve(fault_site()) as base:
        command = ["crawl", base + "/", "--store", str(store), *ORDERLY]
        first = crawl_stopped_by_ctrl_c(command, store, decided=24, stop=stop)
        assert first["interrupted"] is True and first["reason"] == "shutdown"
        assert 24 <= first["decided"] < 161
        assert (store / "jobdir").is_dir() and not (store / "crawl.running").exists()
        # the queue, kept in memory while the crawl ran, was saved as it stopped
        assert json.loads((store / "jobdir" / "requests.queue" / "active.json").read_text())
        assert verify_store(store).ok

        resumed = neardup(*command)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        second = json.loads(resumed.stdout)
    assert second["resumed"] is True and second["notes"][0].startswith("resuming")
    # the queue carried on: nothing decided twice, nothing missed, little fetched again
    assert first["decided"] + second["decided"] == 161
    assert second["already_decided"] <= 2
    assert second["responses"] <= 161 - first["decided"] + 2
    # breadth first, one request at a time: each original is met before its copies
    kept = kept_pages(store)
    assert len(kept) == 131
    assert all("/mirror/" not in url and "/near/" not in url for url in kept)
    assert not (store / "jobdir").exists()  # finished: nothing left to resume


@pytest.mark.slow
def test_max_pages_holds_across_ctrl_c_and_the_resume(tmp_path):
    """crawl.max_pages counts what the crawl scheduled before Ctrl-C too: the resumed crawl
    schedules only the rest, and the two decide the cap's number of pages together."""
    store = tmp_path / "store"
    with serve(fault_site()) as base:
        command = ["crawl", base + "/", "--store", str(store), *ORDERLY,
                   "--set", "crawl.max_pages=60"]  # fmt: skip
        first = crawl_stopped_by_ctrl_c(command, store, decided=20)
        assert first["interrupted"] is True and first["decided"] < 60
        resumed = neardup(*command)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        second = json.loads(resumed.stdout)
    assert second["resumed"] is True
    assert first["decided"] + second["decided"] == 60
    assert verify_store(store).ok


@pytest.mark.slow
def test_a_resumed_crawl_s_progress_line_counts_the_queue_it_read_back(tmp_path):
    """The queue saved by Ctrl-C comes back from the JOBDIR, outside the scheduler's enqueued
    stats: the progress line still says how many requests wait."""
    store = tmp_path / "store"
    with serve(fault_site()) as base:
        command = ["crawl", base + "/", "--store", str(store), *ORDERLY]
        crawl_stopped_by_ctrl_c(command, store, decided=24)
        shown = [arg for arg in command if arg not in ("--quiet", "--json")]
        resumed = neardup(*shown, "-sNEARDUP_PROGRESS_INTERVAL=0.05")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    queued = [int(m.group(1).replace(",", "")) for m in
              re.finditer(r"\| queued ([\d,]+)$", resumed.stderr, re.MULTILINE)]  # fmt: skip
    assert queued and queued[0] > 0 and queued[-1] == 0, resumed.stderr[-3000:]


@pytest.mark.slow
def test_an_idle_batch_commits_on_the_clock(tmp_path):
    store = tmp_path / "store"
    text = " ".join(f"word{i}" for i in range(60))
    routes = {
        "/": Route(body=f'<html><body><p>{text}</p><a href="/slow.html">slow</a></body></html>'),
        "/slow.html": Route(body="<html><body><p>at last</p></body></html>", delay=3.0),
    }
    with serve(routes) as base:
        command = ["crawl", base + "/", "--store", str(store), "--json",
                   "--set", "crawl.batch_size=1000", "--set", "crawl.batch_seconds=0.3",
                   "--set", "crawl.robots_txt=false", "--set", "crawl.autothrottle=false"]  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "crawler.cli", *command], cwd=ROOT,
                                env=child_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 30
        logged = False
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list((store / "logs").glob("*.jsonl")) if (store / "logs").is_dir() else []
            if logs and logs[0].read_bytes().count(b"\n") >= 1:
                logged = True
                break
            time.sleep(0.01)
        # the first page's decision was committed (and logged) while the slow page was still
        # being fetched: by the clock, as no further decision arrived to trigger a commit
        still_crawling = proc.poll() is None
        out, err = proc.communicate(timeout=30)
    assert logged and still_crawling, err[-3000:]
    summary = json.loads(out)
    assert summary["decisions"]["kept"] == 2 and summary["stats"]["neardup/commits"] >= 2


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["crawl", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup crawl: error: "), captured.err
    return lines[0].removeprefix("neardup crawl: error: ")


def test_mistakes_are_one_line(tmp_path, capsys):
    store = str(tmp_path / "store")
    assert one_line_error(capsys, "ftp://example.org/", "--store", store) == (
        "not an http(s) URL: 'ftp://example.org/' (e.g. https://example.org/)"
    )
    assert "not an http(s) URL: 'example.org'" in one_line_error(capsys, "example.org")
    assert "'http://[::1'" in one_line_error(capsys, "http://[::1")
    assert "unknown key 'crawl.concurency'" in one_line_error(
        capsys, "http://127.0.0.1:9/", "--store", store, "--set", "crawl.concurency=2"
    )
    assert "crawl.concurrency must be a number >= 1; got 0" in one_line_error(
        capsys, "http://127.0.0.1:9/", "--store", store, "--set", "crawl.concurrency=0"
    )
    missing = str(tmp_path / "nope.yaml")
    assert f"cannot read config file {missing}" in one_line_error(
        capsys, "http://127.0.0.1:9/", "--config", missing
    )
    assert not Path(store).exists()  # nothing was created for a command that was refused


def test_store_mistakes_are_one_line(tmp_path, capsys):
    other = tmp_path / "other"
    with Store.open(other, SketchParams(size=50)):
        pass
    message = one_line_error(capsys, "http://127.0.0.1:9/", "--store", str(other))
    assert "size" in message and "50" in message
    afile = tmp_path / "a-file"
    afile.write_text("x")
    assert "is not a directory" in one_line_error(capsys, "http://127.0.0.1:9/",
                                                  "--store", str(afile))  # fmt: skip
    busy = tmp_path / "busy"
    busy.mkdir()
    with open(busy / "crawl.lock", "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(b"4242")
        held.flush()
        assert one_line_error(capsys, "http://127.0.0.1:9/", "--store", str(busy)) == (
            f"store {busy} is being crawled by another process (pid 4242)"
        )


def test_a_lower_threshold_than_the_store_was_indexed_for_is_one_line(crawled):
    """The crawl's store indexes the part of each representative that threshold 0.9 needs; a
    crawl at 0.8 would miss clusters it cannot see, so it is refused before Scrapy starts,
    given as --set or as Scrapy's -s setting; so is a sketch other than the store's."""
    store = crawled["store"]
    runs = sorted((store / "logs").glob("*.jsonl"))
    said = ("neardup crawl: error: this index holds the part of each representative that finds "
            "clusters at resemblance 0.9 or more; threshold 0.8 needs more of it: cluster into "
            "a new store (or re-cluster this one with neardup recluster --store)")  # fmt: skip
    for given in (["--set", "dedup.threshold=0.8"], ["-s", "NEARDUP_THRESHOLD=0.8"]):
        proc = neardup("crawl", crawled["base"] + "/", "--store", str(store), *DEMO_OPTIONS,
                       *given)  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [said]
    proc = neardup("crawl", crawled["base"] + "/", "--store", str(store), *DEMO_OPTIONS,
                   "-s", 'NEARDUP_SKETCH={"size": 50}')  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"neardup crawl: error: store {store} was made with sketch.size=100; this run asks "
        "for 50 (use another --store, or the same parameters)"]
    assert sorted((store / "logs").glob("*.jsonl")) == runs  # no run begun for any of them
    assert verify_store(store).ok


def test_help_names_the_resume_and_the_log():
    proc = neardup("crawl", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Ctrl-C stops cleanly; the same command then resumes" in text
    assert "<store>/logs/<run>.jsonl" in text


@pytest.mark.slow
def test_the_links_of_a_page_decided_while_ctrl_c_stops_the_crawl_are_kept_for_the_resume(
    tmp_path,
):
    """A chain of pages, each linking only to the next: links are requested once a page is
    decided, and the page in flight at Ctrl-C is decided while the crawl closes. Its link must
    reach the saved queue, or the resumed crawl ends there."""
    store = tmp_path / "store"
    pages = 30
    routes: dict[str, Route | str] = {
        f"/{n}.html": Route(
            body=f"<html><body><p>page {n} " + " ".join(f"w{n}x{i}" for i in range(60))
            + (f' <a href="/{n + 1}.html">next</a>' if n + 1 < pages else "")
            + "</p></body></html>",
            delay=0.05,
        )
        for n in range(pages)
    }
    with serve(routes) as base:
        command = ["crawl", base + "/0.html", "--store", str(store), *ORDERLY]
        first = crawl_stopped_by_ctrl_c(command, store, decided=8)
        assert 8 <= first["decided"] < pages
        resumed = neardup(*command)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        second = json.loads(resumed.stdout)
    assert second["resumed"] is True
    assert first["decided"] + second["decided"] == pages  # the chain was followed to its end
    assert verify_store(store).documents == pages


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_start_url_that_gives_nothing_is_one_line_and_exit_status_1(tmp_path):
    """A start URL that does not answer, or answers 404: the summary, then one line that names
    it and why, and exit status 1; Scrapy's own lines about the failed requests stay in its
    log (the page is logged as skipped, with the reason)."""
    dead = f"http://127.0.0.1:{_closed_port()}/"
    proc = neardup("crawl", dead, "--store", str(tmp_path / "dead"), "--quiet",
                   "-sRETRY_TIMES=0")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    refused = ("DownloadConnectionRefusedError: Connection was refused by other side: 111: "
               "Connection refused.")  # fmt: skip
    line = f"neardup crawl: error: nothing was crawled: {dead} was skipped (connection_error: {refused})"
    assert proc.stderr.splitlines() == [line], proc.stderr
    assert "skipped                  1   connection_error 1" in proc.stdout
    with serve({"/": Route(body="<html><body><p>a page</p></body></html>")}) as base:
        proc = neardup("crawl", base + "/missing.html", "--store", str(tmp_path / "missing"),
                       "--json")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    missing = f"{base}/missing.html was skipped (http_404: HTTP status 404)"
    assert summary["nothing_crawled"] == missing
    assert proc.stderr.splitlines() == [
        f"neardup crawl: error: nothing was crawled: {summary['nothing_crawled']}"
    ], proc.stderr
    assert verify_store(tmp_path / "missing").ok
    entry = next(read_log(tmp_path / "dead" / "logs"))  # no response: status 0, not HTTP's 200
    assert (entry["reason"], entry["status"]) == ("connection_error", 0)
