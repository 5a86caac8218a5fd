"""``neardup log``, ``explain`` and ``report`` on a store crawled twice: the changes of a recrawl.

The store is a real crawl of the demo site (``neardup demo``), and its second run is appended
as a recrawl logs and stores it (:func:`tests.crawler.review_stores.second_run`): two kept pages
edited (one so much that the page dropped as its near duplicate is decided again and kept), a
near duplicate that becomes an exact copy of another page, a page gone (404), a new page, and
every other page unchanged. The expected values below are derived from what that run wrote.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.cli.explain import _when
from crawler.review.facts import collect
from crawler.review.log import CHANGES
from storage.log import read_log
from tests.crawler.review_stores import second_run
from tests.crawler.test_explain_command import neardup
from tests.crawler.test_log_command import neardup as neardup_bytes

MOSSOP = "/walks/mossop-beck-waterfalls.html"
MOSSOP_COPY = "/archive/mossop-beck-waterfalls.html"
ABOUT = "/club/about.html"
NEWS = "/news/2024/harrow-fell-ridge.html"
PACKING = "/guides/packing-list.html"
BOOTS = "/guides/boots-and-blisters.html"
NEW = "/walks/new-fell-walk.html"
NEW_PAGE = (b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>A new walk</title></head>"
            b"<body><h1>Over Hobcarton</h1><p>A new route from the club hut over the crags to "
            b"the tarn and back by the old drove road, eleven miles with two steep climbs and "
            b"a long descent through the forest above the beck.</p></body></html>")  # fmt: skip


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="module")
def recrawl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("runs") / "demo"
    proc = neardup("demo", "--store", str(store), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    base = json.loads(proc.stdout)["site"]
    before = neardup("log", "--store", str(store), "--width", "200")
    assert before.returncode == 0
    time.sleep(1.1)  # the second run's lines a second later than the first's, to tell apart
    run = second_run(
        store,
        changed={base + MOSSOP: 0.9, base + ABOUT: 0.15},
        copied={base + NEWS: base + PACKING},
        gone=[base + BOOTS],
        new={base + NEW: NEW_PAGE},
    )
    first: dict[str, dict[str, Any]] = {}
    last: dict[str, dict[str, Any]] = {}
    for line in run.lines:
        first.setdefault(line["url"], line)  # what the URL was in run 1
        last[line["url"]] = line  # what it is at the end of run 2
    return {"store": str(store), "base": base, "run": run, "first": first, "last": last,
            "first_table": before.stdout}  # fmt: skip


def log(capsys, store: str, *argv: str) -> str:
    assert main(["log", "--store", store, "--width", "200", *argv]) == 0
    return capsys.readouterr().out


def table(out: str) -> list[dict[str, str]]:
    """``neardup log``'s rows as {column: cell}, the columns where the rule's dashes are."""
    lines = out.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("---"))
    spans = [m.span() for m in re.finditer(r"-+", lines[at])]
    spans[-1] = (spans[-1][0], 10_000)
    head = [lines[at - 1][a:b].strip() for a, b in spans]
    rows = []
    for line in lines[at + 1 :]:
        if not re.match(r"^(\d{4}-)?(\d\d-\d\d )?\d\d:\d\d:\d\d  ", line):
            break
        rows.append({name: line[a:b].strip() for name, (a, b) in zip(head, spans)})
    return rows


# --- neardup log ---------------------------------------------------------------------------------


def test_change_filters_the_pages_that_changed(recrawl, capsys):
    base, run = recrawl["base"], recrawl["run"]
    out = log(capsys, recrawl["store"], "--change", "changed")
    rows = table(out)
    assert f"URLs on {base}" in out.splitlines()[0]
    assert {base + r["URL"] for r in rows} == set(run.changed)
    for r in rows:  # each with the resemblance of its new content to its old, as logged
        assert r["change"] == f"changed {run.changed[base + r['URL']]:.2f}"
    gone = table(log(capsys, recrawl["store"], "-c", "gone"))
    assert [(r["URL"], r["decision"], r["duplicate of"]) for r in gone] == [
        (BOOTS, "skipped", "(http_404)")
    ]
    some = log(capsys, recrawl["store"], "-c", "gone,changed", "-c", "new", "--run", "2")
    assert table(some) == [
        r for r in table(log(capsys, recrawl["store"], "--run", "2"))
        if r["change"].split()[0] in ("gone", "changed", "new")
    ]  # fmt: skip


def test_run_picks_one_run_and_last_is_the_latest(recrawl, capsys):
    store, base, run = recrawl["store"], recrawl["base"], recrawl["run"]
    second = table(log(capsys, store, "--run", "2"))
    assert [base + r["URL"] for r in second] == [line["url"] for line in run.lines]
    assert second == table(log(capsys, store, "--run", "last"))
    assert "run" not in second[0]  # one run: no run column
    # the page decided again says so, after its first line of the run
    copy = [r for r in second if r["URL"] == MOSSOP_COPY]
    assert [r["change"] for r in copy] == ["unchanged", "re-decided", "unchanged"]
    assert [r["decision"] for r in copy] == ["near dup", "kept", "kept"]
    # run 1 is the table as it was before the recrawl: no change column, row for row
    before = recrawl["first_table"]
    assert table(log(capsys, store, "--run", "1")) == table(before)
    assert "change" not in table(before)[0]
    # every run: a run column, run 1 then run 2
    both = table(log(capsys, store))
    assert [r["run"] for r in both] == ["1"] * len(table(before)) + ["2"] * len(second)


def test_the_summary_counts_the_changes(recrawl, capsys):
    run = recrawl["run"]
    out = log(capsys, recrawl["store"], "--run", "2")
    counts = Counter("re-decided" if line.get("redecided") else line["change"]
                     for line in run.lines)  # fmt: skip
    order = [*CHANGES, "re-decided"]
    expected = ", ".join(f"{name} {counts[name]}" for name in order if counts[name])
    assert out.splitlines()[-1] == f"changes: {expected}"
    assert counts["re-decided"] == 1 and counts["changed"] == 3 and counts["gone"] == 1


def test_json_passes_the_lines_of_the_run_through(recrawl):
    logs = sorted((Path(recrawl["store"]) / "logs").glob("*.jsonl"))
    raw = logs[-1].read_bytes()
    proc = neardup_bytes("log", "--store", recrawl["store"], "--json", "--run", "last", "-c",
                         "changed")
    wanted = [line for line in raw.splitlines(keepends=True)
              if json.loads(line)["change"] == "changed"]  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == b"".join(wanted) and len(wanted) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--change", "modified"], "--change: unknown change 'modified' (known: new, unchanged"),
        (["--run", "0"], "--run: a crawl run is a number from 1"),
        (["--run", "second"], "a crawl run is a number from 1 (1 the first crawl) or 'last'"),
        (["--store", "{store}", "--store", "{store}/"], "is given twice"),
    ],
)
def test_a_bad_change_or_run_is_one_line(tmp_path, argv, message, capsys):
    store = tmp_path / "store"
    (store / "logs").mkdir(parents=True)
    argv = [a.format(store=store) for a in argv]
    if "--store" not in argv:
        argv = ["--store", str(store), *argv]
    assert main(["log", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err, err


def test_nothing_in_a_run_is_said_in_one_line(recrawl, capsys):
    out = log(capsys, recrawl["store"], "--run", "7")
    assert out.strip() == (
        f"No decisions in {recrawl['store']} match --run 7. "
        "Loosen a filter, or see them all with: neardup log"
    )


# --- neardup report ------------------------------------------------------------------------------


def test_the_report_counts_each_url_by_its_last_line_of_the_latest_run(recrawl):
    run, last, base = recrawl["run"], recrawl["last"], recrawl["base"]
    data = collect(recrawl["store"], threshold=0.9)
    ch = data.changes
    assert ch is not None and ch.run == 2 and ch.previous == 1
    assert data.crawl_runs == [1, 2]
    assert ch.counts == {c: sum(line["change"] == c for line in last.values()) for c in CHANGES}
    assert ch.urls == len(last) and ch.redecided == len(run.redecided) == 1
    before = {url: line["previous_cluster_id"] for url, line in recrawl["first"].items()}
    moved = [url for url, line in last.items()
             if None not in (line["cluster_id"], before[url])
             and line["cluster_id"] != before[url]]  # fmt: skip
    assert [p.url for p in ch.moved] == moved
    assert set(moved) == {base + MOSSOP_COPY, base + NEWS} and ch.moved_total == 2
    assert [(p.url, p.change_resemblance) for p in ch.changed_most] == sorted(
        run.changed.items(), key=lambda item: item[1]
    )
    # each URL counts by its current document; the earlier ones stay as history
    assert data.fetched == len(last) == 32
    assert data.retired == len(run.changed) + len(run.redecided) + len(run.gone)
    assert data.decisions == Counter(line["decision"] for line in last.values())
    assert any("earlier decision(s)" in note for note in data.notes)
    # the plot of estimates: one per page dropped as a near duplicate now, from its last line
    near = [line for line in last.values() if line["decision"] in ("near_duplicate", "contained")]
    assert near and sorted(data.near_estimates) == sorted(line["resemblance"] for line in near)
    assert sum(data.sample_sizes.values()) == len(near)


def test_the_report_page_shows_what_changed(recrawl, tmp_path):
    run, base = recrawl["run"], recrawl["base"]
    out = tmp_path / "report.html"
    assert main(["report", "--store", recrawl["store"], "-o", str(out), "-q"]) == 0
    page = _Page.of(out.read_text(encoding="utf-8"))
    assert "What changed since the previous run" in page.headings
    counts = {row[0]: row[1] for row in page.tables["changes-table"]}
    last = recrawl["last"]
    assert counts["decided in run 2"] == str(len(last))
    assert counts["changed"] == str(sum(line["change"] == "changed" for line in last.values()))
    assert counts["gone (no page now)"] == "1" and counts["new (not known to the store)"] == "1"
    assert counts["re-decided (the kept page of their cluster changed or is gone)"] == "1"
    # the pages that moved: the exact copy now dropped links to its explanation in the page,
    # the page decided again and kept links to itself
    rows = page.tables["moved-table"]
    moved = {row[0].split()[0]: (row, page.links["moved-table"][n]) for n, row in enumerate(rows)}
    assert set(moved) == {base + MOSSOP_COPY, base + NEWS}
    news_line = recrawl["last"][base + NEWS]
    row, links = moved[base + NEWS]
    assert links[0] == f"#doc-{news_line['doc_id']}" and f"doc-{news_line['doc_id']}" in page.ids
    assert row[1:] == ["changed", f"near duplicate cluster {news_line['previous_cluster_id']}",
                       f"exact duplicate cluster {news_line['cluster_id']}"]  # fmt: skip
    row, links = moved[base + MOSSOP_COPY]
    assert links[0] == base + MOSSOP_COPY
    assert row[0] == f"{base + MOSSOP_COPY} re-decided: its kept page {base + MOSSOP} changed"
    assert row[1] == "re-decided"
    # cluster links go to a cluster the page lists, and only then
    for targets in page.links["moved-table"]:
        for href in targets[1:]:
            assert href.startswith("#cluster-") and href[1:] in page.ids
    changed = page.tables["changed-table"]
    assert [row[1] for row in changed] == [
        f"{r:.2f}" for _, r in sorted(run.changed.items(), key=lambda item: item[1])
    ]
    assert len(page.ids) == len(set(page.ids))


def test_report_json_is_the_collected_facts(recrawl, capsys):
    assert main(["report", "--store", recrawl["store"], "--json", "-q"]) == 0
    facts = json.loads(capsys.readouterr().out)
    expected = collect(recrawl["store"]).to_dict()
    facts.pop("generated"), expected.pop("generated")
    assert facts == json.loads(json.dumps(expected))
    assert facts["crawl_runs"] == [1, 2]
    assert facts["changes"]["counts"]["changed"] == 3
    assert [p["url"] for p in facts["changes"]["changed_most"]][0] == recrawl["base"] + NEWS


def test_a_store_of_one_run_has_no_change_section(tmp_path):
    proc = neardup("demo", "--store", str(tmp_path / "demo"), "--json", "--quiet")
    assert proc.returncode == 0
    data = collect(tmp_path / "demo", threshold=0.9)
    assert data.changes is None and data.crawl_runs == [1] and data.retired == 0
    report = tmp_path / "r.json"
    assert main(["report", "--store", str(tmp_path / "demo"), "--json", "-o", str(report),
                 "-q"]) == 0  # fmt: skip
    facts = json.loads(report.read_text(encoding="utf-8"))
    assert facts["changes"] is None and facts["fetched"] == 31
    assert facts["summary"]["duplicate_clusters"] == data.summary.duplicate_clusters


# --- neardup explain -----------------------------------------------------------------------------


def explain(capsys, store: str, what: str, *argv: str) -> str:
    assert main(["explain", what, "--store", store, "--width", "200", *argv]) == 0
    return capsys.readouterr().out


def test_explain_says_what_changed_and_what_the_page_was(recrawl, capsys):
    store, base, last = recrawl["store"], recrawl["base"], recrawl["last"]
    line = last[base + MOSSOP]
    out = explain(capsys, store, MOSSOP)
    assert re.search(r"decided       \S+ \S+, run 2$", out, re.M)
    assert (f"  change        changed since run 1: resemblance "
            f"{line['change_resemblance']:.2f} to its previous content") in out  # fmt: skip
    assert f"  previously    run 1: kept, cluster {line['previous_cluster_id']}\n" in out
    cluster = line["cluster_id"]
    runs = f"  runs          1: kept (cluster {cluster}); 2: kept (changed, cluster {cluster})"
    assert runs in out

    copy, was = last[base + MOSSOP_COPY], recrawl["first"][base + MOSSOP_COPY]
    out = explain(capsys, store, MOSSOP_COPY)
    assert "  change        unchanged since run 1; decided again, for the kept page" in out
    # what it was in run 1, though its last line (the full fetch) names the re-decision
    assert copy["previous_decision"] == "kept"
    assert (f"  previously    run 1: near_duplicate, cluster {was['previous_cluster_id']} "
            f"(now {copy['cluster_id']})") in out  # fmt: skip
    assert f"re-decided: its kept page {base + MOSSOP} changed" in out

    # an unchanged page was decided when its line of the latest run was written
    url = next(u for u, e in last.items() if e["change"] == "unchanged" and e["decision"] == "kept")
    times = {e["crawl_run"]: e["time"] for e in read_log(Path(store) / "logs") if e["url"] == url}
    out = explain(capsys, store, url.removeprefix(base))
    shown = [_when(times[run]) for run in (1, 2)]
    assert shown[0] != shown[1] and f"  decided       {shown[1]}, run 2\n" in out, out

    out = explain(capsys, store, BOOTS)
    assert "skipped (http_404)" in out and "  change        gone since run 1" in out
    out = explain(capsys, store, NEW)
    assert "  change        new in run 2" in out and "previously" not in out


def test_explain_json_has_the_history(recrawl, capsys):
    store, base, last = recrawl["store"], recrawl["base"], recrawl["last"]
    found = json.loads(explain(capsys, store, NEWS, "--json"))
    line = last[base + NEWS]
    assert (found["run"], found["change"]) == (2, "changed")
    assert (found["previous_decision"], found["previous_cluster_id"]) == (
        "near_duplicate", line["previous_cluster_id"]
    )
    assert [(h["run"], h["decision"], h["change"], h["cluster_id"]) for h in found["history"]] == [
        (1, "near_duplicate", "new", line["previous_cluster_id"]),
        (2, "exact_duplicate", "changed", line["cluster_id"]),
    ]
    # the page it duplicates now is the one it was made a copy of
    assert found["duplicate_of"]["url"] == base + PACKING
    assert found["comparison"]["exact"]["resemblance"] == 1.0
    unchanged = json.loads(explain(capsys, store, "/walks/wenlow-tarn.html", "--json"))
    assert unchanged["change"] == "unchanged"
    assert [h["run"] for h in unchanged["history"]] == [1, 2]


# --- helpers -----------------------------------------------------------------------------------


class _Page(HTMLParser):
    """The report's headings, the ids of its elements, and its tables by id: each row's cells
    as text (a header row left out), and the links of each row."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.ids: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.links: dict[str, list[list[str]]] = {}
        self._heading: list[str] | None = None
        self._table: str | None = None
        self._row: list[str] | None = None
        self._row_links: list[str] = []
        self._cell: list[str] | None = None
        self._depth = 0

    @classmethod
    def of(cls, text: str) -> _Page:
        page = cls()
        page.feed(text)
        page.close()
        return page

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if named.get("id"):
            self.ids.append(str(named["id"]))
        if tag in ("h2", "h3"):
            self._heading = []
        if tag == "table":
            self._depth += 1
            if self._depth == 1 and named.get("id"):
                self._table = str(named["id"])
                self.tables[self._table], self.links[self._table] = [], []
        elif self._table and tag == "tr":
            self._row, self._row_links = [], []
        elif self._row is not None and tag == "td":
            self._cell = []
        elif self._row is not None and tag == "a" and named.get("href"):
            self._row_links.append(str(named["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "h3") and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()))
            self._heading = None
        if tag == "table":
            self._depth -= 1
            if self._depth == 0:
                self._table = None
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row.append(" ".join(" ".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._table and self._row is not None:
            if self._row:  # a row of th only is the header
                self.tables[self._table].append(self._row)
                self.links[self._table].append(self._row_links)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading.append(data)
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.parametrize(
    ("command", "needles"),
    [
        ("log", ("--change", "--run", "last", "re-decided", "--store node1 --store node2")),
        ("report", ("--json", "What changed since the previous run", "--store node1",
                    "--top-changed")),
        ("explain", ("what changed since the", "Several --store", "--store node1")),
    ],
)
def test_help_teaches_runs_and_nodes(command, needles, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for needle in needles:
        assert needle in out, needle
