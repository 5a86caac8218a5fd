"""The progress of ``neardup recluster``: a bar redrawn in place on a terminal, whole lines in a
file (a job's log), where redraws would make one endless line."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import subprocess
import sys
import termios

from crawler.cli import main
from crawler.cli.progress_bar import LOG_INTERVAL, progress_bar
from tests.crawler.test_faults import ROOT, child_env

PAGES = 600


def _pages(directory):
    directory.mkdir()
    for n in range(PAGES):
        (directory / f"p{n}.html").write_text(
            f"<html><body><p>page {n} of a site, with words enough to shingle: "
            f"{' '.join(f'w{n * 7 + k}' for k in range(30))}</p></body></html>"
        )
    return directory


def test_in_a_file_the_bar_is_lines_the_first_and_the_last_state(tmp_path, capsys):
    pages = _pages(tmp_path / "pages")
    assert main(["recluster", "--html", str(pages), "-o", str(tmp_path / "c.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("\n"), repr(err[-200:])
    lines = [line for line in err.splitlines() if " docs" in line]
    assert lines[0].startswith("0 docs"), lines
    assert lines[-1].startswith(f"{PAGES} docs"), lines


def test_on_a_terminal_the_bar_is_redrawn_in_place(tmp_path):
    pages = _pages(tmp_path / "pages")
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    try:
        done = subprocess.run(
            [sys.executable, "-m", "crawler.cli", "recluster", "--html", str(pages),
             "-o", str(tmp_path / "c.jsonl")],
            stderr=follower, stdout=subprocess.DEVNULL, cwd=ROOT, env=child_env(), timeout=120,
            check=False,
        )  # fmt: skip
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed: all of it is read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    text = shown.decode()
    assert f"\r{PAGES} docs" in text, repr(text[-300:])
    assert "\n0 docs" not in text and not text.startswith("0 docs\n")


def test_a_line_per_phase_one_at_most_every_interval_and_the_last_state():
    stream = io.StringIO()
    bar = progress_bar(stream, total=300, unit=" docs")
    for phase in ("reading", "clustering", "writing"):
        bar.set_description_str(phase, refresh=False)
        bar.refresh()
        for _ in range(100):
            bar.update(1)
    bar.close()
    lines = stream.getvalue().splitlines()
    # well within LOG_INTERVAL: the bar as it started, each phase as it began, the end
    phases = [line.split(":")[0] for line in lines[1:]]
    assert phases == ["reading", "clustering", "writing", "writing"], lines
    assert lines[-1].startswith("writing: 100%") and "300/300" in lines[-1], lines
    assert LOG_INTERVAL >= 5


def test_within_a_phase_a_line_every_interval(monkeypatch):
    stream = io.StringIO()
    now = [0.0]
    monkeypatch.setattr("crawler.cli.progress_bar.monotonic", lambda: now[0])
    bar = progress_bar(stream, unit=" docs")
    for _ in range(21):  # a redraw every 3 seconds
        now[0] += 3
        bar.n += 1
        bar.refresh()
    bar.close()
    counts = [int(line.split()[0]) for line in stream.getvalue().splitlines()]
    # the start, then the first redraw at least LOG_INTERVAL after the line before, each time,
    # and the last state
    assert LOG_INTERVAL == 10.0
    assert counts == [0, 4, 8, 12, 16, 20, 21], counts
