"""``neardup log`` as a user runs it, on the store of a real crawl of the demo site."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo import load_truth
from crawler.review.textdiff import width_of

ROOT = Path(__file__).resolve().parents[2]
TRUTH = load_truth()["pages"]


def neardup(*argv: str) -> subprocess.CompletedProcess[bytes]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "crawler.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, timeout=120, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("log") / "demo"
    proc = neardup("demo", "--store", str(store), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return {"store": str(store), "base": report["site"], "log": Path(report["log"])}


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def log(capsys, *argv: str) -> str:
    assert main(["log", *argv]) == 0
    return capsys.readouterr().out


def rows(out: str) -> list[str]:
    """The table's rows (between the rule under the header and the count line)."""
    lines = out.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("----"))
    return [line for line in lines[start + 1 :] if line[:1].isdigit() and ":" in line[:8]]


def test_the_table_shows_every_decision_in_80_columns(demo, capsys):
    out = log(capsys, "--store", demo["store"])
    lines = out.splitlines()
    assert all(width_of(line) <= 80 for line in lines), max(lines, key=width_of)
    # every URL on the one demo host: said once, rows show paths
    assert f"URLs on {demo['base']}" in lines[0]
    assert lines[1].split() == ["time", "decision", "URL", "duplicate", "of", "res."]
    table = rows(out)
    assert len(table) == 31
    assert lines[-1] == "31 decisions: kept 21, skipped 3, exact dup 3, near dup 4"
    near = [r for r in table if " near dup " in r]
    assert len(near) == 4 and all(r.split()[-1].startswith("0.9") for r in near)
    skipped = [r for r in table if " skipped " in r]
    assert sorted(r.split()[-1] for r in skipped) == ["(not_html)", "(not_html)", "(robots_txt)"]


def test_a_wide_terminal_gets_whole_urls(demo, capsys):
    out = log(capsys, "--store", demo["store"], "--width", "120", "-d", "near_duplicate")
    for path, truth in TRUTH.items():
        if truth["kind"] == "near_duplicate":
            assert any(r.split()[3:5] == [path, truth["of"]] for r in rows(out)), out


def test_filters(demo, capsys):
    store = demo["store"]
    near = rows(log(capsys, "--store", store, "--decision", "near_duplicate"))
    assert len(near) == 4 and all(" near dup " in r for r in near)
    dropped = rows(log(capsys, "--store", store, "-d", "dropped"))
    assert len(dropped) == 7
    assert rows(log(capsys, "--store", store, "-d", "exact_duplicate,near_duplicate")) == dropped
    assert rows(log(capsys, "--store", store, "-d", "exact_duplicate", "-d", "near_duplicate")) == (
        dropped
    )
    archive = rows(log(capsys, "--store", store, "--url-contains", "ARCHIVE/", "--width", "120"))
    assert len(archive) == 2 and all("/archive/" in r for r in archive)
    first = log(capsys, "--store", store, "--limit", "2")
    assert [r.split() for r in rows(first)] == [
        r.split() for r in rows(log(capsys, "--store", store))[:2]
    ]
    assert "more decisions match: raise --limit" in first
    assert len(rows(log(capsys, "--store", store, "--since", "1h"))) == 31
    assert len(rows(log(capsys, "--store", store, "--since", "2000-01-01"))) == 31


def test_nothing_matches_is_a_friendly_line(demo, capsys):
    out = log(capsys, "--store", demo["store"], "--since", "2999-01-01", "-d", "kept")
    assert out.strip() == (
        f"No decisions in {demo['store']} match --decision kept --since 2999-01-01. "
        "Loosen a filter, or see them all with: neardup log"
    )
    assert main(["log", "--store", demo["store"], "-u", "no-such-page", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no decisions match" in captured.err


def test_json_passes_the_log_lines_through_byte_for_byte(demo):
    raw = demo["log"].read_bytes()
    proc = neardup("log", "--store", demo["store"], "--json")
    assert proc.returncode == 0 and proc.stdout == raw
    proc = neardup("log", "--store", demo["store"], "--json", "-d", "near_duplicate", "-n", "3")
    wanted = [line for line in raw.splitlines(keepends=True)
              if json.loads(line)["decision"] == "near_duplicate"][:3]  # fmt: skip
    assert proc.stdout == b"".join(wanted) and len(wanted) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--store", "/nonexistent/store"], "no store at /nonexistent/store"),
        (["-d", "nearly"], "--decision: unknown decision 'nearly' (known: kept, exact_duplicate"),
        (["--since", "last tuesday"], "--since: cannot read 'last tuesday' as a time"),
        (["--limit", "-1"], "--limit must be 0 or more"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(demo, argv, message, capsys):
    if "--store" not in argv:
        argv = ["--store", demo["store"], *argv]
    assert main(["log", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("neardup log: error: ") and message in err


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["log", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for needle in ("--decision", "--url-contains", "--since", "--limit", "--json", "2h", "jq",
                   "dropped", "examples:", "neardup explain"):  # fmt: skip
        assert needle in out, needle


@pytest.mark.parametrize("argv", [["log", "--json"], ["log"], ["explain", "/sitemap.html"]])
def test_output_to_a_full_disk_is_one_line(demo, argv):
    """``neardup log --json > decisions.jsonl`` on a full disk (``/dev/full`` is one): one line
    that says so and exit status 1, not a traceback; a short output that fails only as it is
    flushed says the same."""
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "crawler.cli", *argv, "--store", demo["store"]],
                              cwd=ROOT, stdout=full, stderr=subprocess.PIPE, timeout=120,
                              check=False)  # fmt: skip
    said = proc.stderr.decode()
    assert proc.returncode == 1, said
    assert said == f"neardup {argv[0]}: error: cannot write the output: No space left on device\n"
