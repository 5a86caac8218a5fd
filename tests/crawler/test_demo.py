"""``neardup demo`` end to end: serve the bundled site, crawl it, explain it, agree with TRUTH."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo import load_truth
from storage.store import Store
from storage.verify import verify_store
from tests.crawler.test_crawl_command import neardup


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("demo") / "demo-store"
    started = time.monotonic()
    text = neardup("demo", "--store", str(store))
    text_seconds = time.monotonic() - started
    # again, over the store the first run left: the demo replaces its own store
    as_json = neardup("demo", "--store", str(store), "--json")
    return {"store": store, "text": text, "json": as_json, "seconds": text_seconds}


def test_the_demo_finishes_quickly_and_agrees_with_the_truth(demo):
    assert demo["text"].returncode == 0, demo["text"].stderr[-3000:]
    assert demo["seconds"] < 30  # "well under a minute", with room for a loaded machine
    report = json.loads(demo["json"].stdout)
    assert demo["json"].returncode == 0 and report["matches_truth"] and not report["mismatches"]
    truth = load_truth()["pages"]
    rows = {row["path"]: row for row in report["pages"]}
    assert set(rows) == set(truth) - {"/robots.txt"}
    for path, page in truth.items():
        row = rows.get(path)
        if page["kind"] == "exact_mirror":
            assert (row["decision"], row["duplicate_of"]) == ("exact_duplicate", page["of"])
        elif page["kind"] == "near_duplicate":
            assert (row["decision"], row["duplicate_of"]) == ("near_duplicate", page["of"])
            assert abs(row["resemblance"] - page["resemblance"]) < 0.1  # 4 sd of MIN_100
        elif page["kind"] in ("original", "printable"):
            assert row["decision"] == "kept"
    # the JSON run replaced the text run's store: one run's log, 21 pages, consistent
    assert len(list((demo["store"] / "logs").glob("*.jsonl"))) == 1
    report = verify_store(demo["store"])
    assert report.ok and report.warc_records == 21


def test_the_demo_explains_each_decision(demo):
    out = demo["text"].stdout
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("path "))
    assert lines[header].split() == ["path", "decision", "duplicate", "of", "resemblance"]
    row = next(line for line in lines if line.startswith("/mirror/walks/wenlow-tarn.html "))
    assert row.split()[:4] == ["/mirror/walks/wenlow-tarn.html", "exact_duplicate",
                               "/walks/wenlow-tarn.html", "1.00"]  # fmt: skip
    row = next(line for line in lines if line.startswith("/archive/mossop-beck-waterfalls.html"))
    assert "near_duplicate" in row and "(exact 0.94: three words changed)" in row
    row = next(line for line in lines if line.startswith("/media/ashgill-trail-map.png "))
    assert "skipped" in row and "not_html: Content-Type image/png" in row
    assert "TRUTH.json agrees: all 31 decisions" in out
    assert f"neardup verify --store {demo['store']}" in out
    assert "crawl finished: 31 pages decided" in out


def test_the_demo_leaves_other_directories_alone(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["demo", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"neardup demo: error: --store {tmp_path} exists and is not a neardup store; "
        "name another directory\n"
    )
    assert (tmp_path / "notes.txt").read_text() == "mine"
    crawl_store = tmp_path / "my-crawl"
    Store.open(crawl_store).close()
    assert main(["demo", "--store", str(crawl_store)]) == 2
    assert capsys.readouterr().err == (
        f"neardup demo: error: --store {crawl_store} is a neardup store the demo did not make; "
        "name another directory\n"
    )
    assert (crawl_store / "index" / "data.mdb").is_file()
