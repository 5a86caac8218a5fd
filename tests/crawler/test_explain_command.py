"""``neardup explain URL`` as a user runs it, on stores of real crawls of the demo site."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo import SITE_DIR, load_truth
from crawler.review.textdiff import width_of
from storage.records import DocumentRecord
from storage.store import Store

ROOT = Path(__file__).resolve().parents[2]
TRUTH = load_truth()["pages"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MOSSOP = "/archive/mossop-beck-waterfalls.html"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env.pop("COLUMNS", None)
    return env


def neardup(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crawler.cli", *argv], cwd=ROOT, env=_env(**env),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def on_a_terminal(*argv: str) -> str:
    """Run the command with a pseudo-terminal as its standard output; what it printed."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:  # a terminal's buffer is small: read while the command writes
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the writing end is closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    saved = sys.stdout
    with open(slave, "w", encoding="utf-8", closefd=True) as terminal:
        sys.stdout = terminal
        try:
            assert main(list(argv)) == 0
        finally:
            terminal.flush()
            sys.stdout = saved
    reader.join(timeout=10)
    os.close(master)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("explain") / "demo"
    proc = neardup("demo", "--store", str(store), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"store": str(store), "base": json.loads(proc.stdout)["site"]}


@pytest.fixture(scope="module")
def textless(demo_site: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real crawl with review.keep_text off."""
    store = tmp_path_factory.mktemp("explain") / "textless"
    proc = neardup("crawl", demo_site + "/", "--store", str(store), "--quiet",
                   "--set", "crawl.concurrency=1", "--set", "crawl.autothrottle=false",
                   "--set", "review.keep_text=false")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"store": str(store), "base": demo_site}


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def explain(capsys, url: str, *argv: str) -> str:
    assert main(["explain", url, *argv]) == 0
    return capsys.readouterr().out


def _compare(capsys, a: str, b: str) -> dict[str, Any]:
    site = [str(SITE_DIR / p.lstrip("/")) for p in (a, b)]
    assert main(["compare", *site, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _numbers(out: str, label: str) -> tuple[float, float]:
    line = next(line for line in out.splitlines() if line.strip().startswith(label))
    estimate, exact = line.split()[-2:]
    return float(estimate), float(exact)


def test_a_near_duplicate_names_its_original_with_the_numbers_and_the_changed_words(demo, capsys):
    out = explain(capsys, demo["base"] + MOSSOP, "--store", demo["store"])
    lines = out.splitlines()
    original = TRUTH[MOSSOP]["of"]
    assert lines[0] == demo["base"] + MOSSOP
    assert lines[1].split() == ["decision", "near_duplicate", "(dropped)"]
    assert lines[2].split()[0] == "why" and "resemblance 0.98 >= threshold 0.9" in lines[2]
    assert f"duplicate of  {demo['base']}{original} (kept)" in out
    compared = _compare(capsys, MOSSOP, original)
    exact, est = compared["exact"], compared["estimate"]
    # exact values equal neardup compare's on the two files; estimates are the crawl's sketches'
    assert _numbers(out, "resemblance r(A,B)") == (
        round(est["resemblance"], 4), round(exact["resemblance"], 4))  # fmt: skip
    assert _numbers(out, "containment c(A,B)")[1] == round(exact["containment_a_in_b"], 4)
    assert _numbers(out, "containment c(B,A)")[1] == round(exact["containment_b_in_a"], 4)
    assert f"{est['matches']} of 100 sketch entries matched" in out
    assert f"{exact['shared_shingles']} shingles shared" in out
    # side by side: each changed word marked in its own column, on a line flagged with *
    for old, new in (("five", "six"), ("four", "three"), ("april", "march")):
        line = next(line for line in lines if f"[-{old}-]" in line)
        assert f"{{+{new}+}}" in line and " * " in line
    assert "3 only in A and 3 only in B, in 3 differing passages" in " ".join(out.split())
    assert "shared words ..." in out  # long shared passages are cut to the context
    assert "\x1b[" not in out  # not a terminal: no colour
    assert all(width_of(line) <= 80 for line in lines), max(lines, key=width_of)


def test_full_shows_every_word_and_no_text_none(demo, capsys):
    url = demo["base"] + MOSSOP
    full = explain(capsys, url, "--store", demo["store"], "--full")
    assert "shared words ..." not in full
    left = " ".join(line[:38] for line in full.splitlines() if line[38:41] in (" | ", " * "))
    assert "next meets saturday" in " ".join(left.split())  # the text's last words
    brief = explain(capsys, url, "--store", demo["store"], "--no-text")
    assert "[-five-]" not in brief and "resemblance r(A,B)" in brief


def test_json_is_the_explanation(demo, capsys):
    url = demo["base"] + MOSSOP
    out = json.loads(explain(capsys, url, "--store", demo["store"], "--json"))
    compared = _compare(capsys, MOSSOP, TRUTH[MOSSOP]["of"])
    assert out["decision"] == "near_duplicate"
    assert out["duplicate_of"]["url"] == demo["base"] + TRUTH[MOSSOP]["of"]
    assert out["comparison"]["exact"]["resemblance"] == compared["exact"]["resemblance"]
    assert out["comparison"]["estimate"]["sample_size"] == 100
    assert [d["a_text"] for d in out["comparison"]["differences"]] == ["five", "four", "april"]
    assert out["log"]["duplicate_of"] == out["duplicate_of"]["url"]


def test_an_exact_mirror_is_identical_text(demo, capsys):
    path = next(p for p, t in TRUTH.items() if t["kind"] == "exact_mirror")
    out = explain(capsys, demo["base"] + path, "--store", demo["store"])
    assert "exact_duplicate (dropped)\n  why           identical canonical text" in out
    assert _numbers(out, "resemblance r(A,B)") == (1.0, 1.0)
    assert "The canonical texts are identical" in out and "[-" not in out


def test_a_kept_page_lists_the_pages_dropped_into_it(demo, capsys):
    original = TRUTH[MOSSOP]["of"]
    out = explain(capsys, demo["base"] + original, "--store", demo["store"])
    assert "decision      kept: stored at pages-00001.warc.gz:" in out
    assert "pages dropped into it (1):" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("near dup"))
    assert row.split()[-1] == demo["base"] + MOSSOP and 0.9 <= float(row.split()[2]) <= 1.0
    lonely = next(p for p, t in TRUTH.items() if t["kind"] == "printable")
    out = explain(capsys, demo["base"] + lonely, "--store", demo["store"])
    assert "No page has been dropped into its cluster." in out


def test_a_skipped_page_says_why(demo, capsys):
    url = demo["base"] + "/private/committee-minutes.html"
    out = explain(capsys, url, "--store", demo["store"])
    assert "skipped (robots_txt)" in out and "not compared with anything" in out
    assert "note:" not in out


def test_without_kept_text_it_says_so_in_one_line_and_still_estimates(textless, capsys):
    out = explain(capsys, textless["base"] + MOSSOP, "--store", textless["store"])
    notes = [line for line in out.splitlines() if "not kept" in line]
    assert len(notes) == 1 and "review.keep_text" in notes[0]
    estimate, exact = out.split("resemblance r(A,B)")[1].split()[:2]
    assert float(estimate) >= 0.9 and exact == "n/a"
    assert "sketch entries matched" in out and "[-" not in out


def test_colour_only_on_a_terminal(demo, monkeypatch, capsys):
    url, store = demo["base"] + MOSSOP, demo["store"]
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = on_a_terminal("explain", url, "--store", store)
    assert "\x1b[1;31mfive\x1b[0m" in coloured and "\x1b[1;32msix\x1b[0m" in coloured
    assert "[-five-]" not in coloured
    # the colour codes take no room: the lines still fit the (80-column default) terminal
    assert all(width_of(ANSI.sub("", line)) <= 80 for line in coloured.splitlines())
    monkeypatch.setenv("NO_COLOR", "1")
    plain = on_a_terminal("explain", url, "--store", store)
    assert "\x1b[" not in plain and "[-five-]" in plain
    # not a terminal (capsys): plain, unless asked for
    assert "\x1b[" not in explain(capsys, url, "--store", store)
    forced = explain(capsys, url, "--store", store, "--color", "always")
    assert "\x1b[1;31mfive" in forced


def test_it_reads_while_a_crawl_writes(demo, capsys):
    url = demo["base"] + MOSSOP
    before = explain(capsys, url, "--store", demo["store"])
    with Store.open(demo["store"]) as store:  # the writer, holding the store mid-batch
        with pytest.raises(RuntimeError, match="left uncommitted"), store.batch():
            doc_id = store.next_doc_id()
            store.put_document(doc_id, DocumentRecord("http://x.test/", "skipped", time.time()))
            proc = neardup("explain", url, "--store", demo["store"])
            logged = neardup("log", "--store", demo["store"], "-d", "near_duplicate")
            raise RuntimeError("left uncommitted")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == before
    assert logged.returncode == 0 and "4 decisions" in logged.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["http://127.0.0.1:1/nowhere.html"], "no page in store"),
        (["http://x.test/", "--store", "/nonexistent/store"], "no store at /nonexistent/store"),
        ([MOSSOP, "--context", "-1"], "--context must be 0 or more"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(demo, argv, message, capsys):
    if "--store" not in argv:
        argv = [*argv, "--store", demo["store"]]
    assert main(["explain", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("neardup explain: error: ") and message in err


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for needle in ("URL", "--store", "--json", "--full", "--context", "--color", "NO_COLOR",
                   "resemblance", "containment", "review.keep_text", "examples:",
                   "neardup log --url-contains"):  # fmt: skip
        assert needle in out, needle
