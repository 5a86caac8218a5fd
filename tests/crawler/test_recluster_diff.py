"""``neardup recluster --store DIR --diff``: what other parameters would change in a real crawl.

The store is the crawl of the demo site plus hostile pages (:func:`crawled_site`, shared with
the report's tests), whose decisions are known: 22 kept (originals and two printable versions
that resemble their originals about 0.7), 3 exact mirrors, 5 near duplicates (estimates 0.94 to
0.98), 4 skipped. The re-clustering uses the crawl's own sketches (the same parameters give
the same sketches), so which page crosses which threshold is certain, not random.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from crawler.cli import main
from crawler.recluster.diff import NOT_COMPARED, diff_store
from dedup.params import DedupParams, SketchParams
from storage.records import DocumentRecord
from storage.store import Store
from tests.crawler.test_report import CrawledSite, crawled_site

PRINTABLE = {"/print/walks/skelly-crag-scramble.html": "/walks/skelly-crag-scramble.html",
             "/print/guides/weather-on-the-tops.html": "/guides/weather-on-the-tops.html"}  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> CrawledSite:
    return crawled_site(tmp_path_factory)


def diff(site: CrawledSite, capsys: Any, *flags: str) -> dict[str, Any]:
    argv = ["recluster", "--store", str(site.store), "--diff", "--json", "-q", "-j", "1", *flags]
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def paths(site: CrawledSite, changes: list[dict[str, Any]]) -> set[str]:
    return {c["url"][len(site.base) :] for c in changes}


def near_duplicates(site: CrawledSite) -> dict[str, dict[str, Any]]:
    return {p: e for p, e in site.log.items() if e["decision"] == "near_duplicate"}


def test_the_crawls_own_parameters_change_nothing(site, capsys):
    report = diff(site, capsys)
    assert report["changed"] == 0 and report["now_dropped"] == report["now_kept"] == []
    # every kept page, every exact mirror, every near duplicate (its canonical text was kept)
    assert report["compared"] == 22 + 3 + 5
    assert report["unchanged"] == {"kept": 22, "dropped": 8}
    assert report["not_compared"] == {"skipped": {"count": 4, "why": NOT_COMPARED["skipped"]}}
    assert report["cut_texts"] == 0  # every text whole: it hashes to what the crawl hashed
    assert report["parameters"]["threshold"] == 0.9
    assert report["parameters"]["sketch"]["size"] == 100


def test_a_lower_threshold_would_drop_the_printable_versions(site, capsys):
    report = diff(site, capsys, "--threshold", "0.6")
    assert report["now_kept"] == []
    assert paths(site, report["now_dropped"]) == set(PRINTABLE)
    for change in report["now_dropped"]:
        path = change["url"][len(site.base) :]
        assert change["crawl_decision"] == "kept"
        assert change["new_decision"] == "near_duplicate"
        assert change["duplicate_of"] == site.base + PRINTABLE[path]
        # at least the new threshold; below the crawl's, or the crawl would have dropped it
        assert 0.6 <= change["resemblance"] < 0.9
    assert report["unchanged"] == {"kept": 20, "dropped": 8}


def test_a_higher_threshold_would_keep_the_near_duplicates(site, capsys):
    near = near_duplicates(site)
    assert len(near) == 5 and max(e["resemblance"] for e in near.values()) < 0.99
    report = diff(site, capsys, "--threshold", "0.99")
    assert report["now_dropped"] == []
    assert paths(site, report["now_kept"]) == set(near)
    for change in report["now_kept"]:
        entry = near[change["url"][len(site.base) :]]
        assert change["crawl_decision"] == "near_duplicate"
        assert change["new_decision"] == "kept"
        assert change["crawl_duplicate_of"] == entry["duplicate_of"]
    # exact mirrors are exact duplicates at any threshold
    assert report["unchanged"] == {"kept": 22, "dropped": 3}


def test_the_table_names_the_changed_pages(site, capsys):
    argv = ["recluster", "--store", str(site.store), "--diff", "-q", "-j", "1",
            "--threshold", "0.6"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"re-clustered {site.store} with MIN_100 over 4-word shingles")
    assert lines[0].endswith("; threshold 0.6")
    assert ("30 pages compared: 2 would now be dropped, 0 would now be kept, 20 stay kept, "
            "8 stay dropped") in out  # fmt: skip
    start = lines.index("would now be dropped (kept at crawl time):")
    assert lines[start + 1].split() == ["url", "now", "resemblance", "duplicate", "of"]
    rows = {
        line.split()[0][len(site.base) :]: line.split() for line in lines[start + 2 : start + 4]
    }
    assert set(rows) == set(PRINTABLE)
    for path, row in rows.items():
        assert row[1] == "near_duplicate" and row[3] == site.base + PRINTABLE[path]
    assert "would now be kept (dropped at crawl time):" not in lines
    assert f"       4  {NOT_COMPARED['skipped']}" in lines


def test_worker_processes_give_the_same_answer(site, capsys):
    one = diff(site, capsys, "--threshold", "0.6")
    two = diff(site, capsys, "--threshold", "0.6", "-j", "2")
    one.pop("seconds"), two.pop("seconds")
    assert one == two


def test_what_diff_cannot_see_is_counted(tmp_path):
    """A store made by hand: a kept page without a stored copy, a dropped page without text,
    one with text, and an exact duplicate whose original is unknown."""
    path = tmp_path / "store"
    now = time.time()
    words = " ".join(f"word{i}" for i in range(200))
    with Store.open(path) as store, store.batch():
        store.put_document(0, DocumentRecord("http://a.test/kept", "kept", now, 0, 11))
        store.put_document(1, DocumentRecord("http://a.test/near", "near_duplicate", now, 0, 12))
        store.put_document(2, DocumentRecord("http://a.test/texted", "near_duplicate", now, 0, 13))
        store.put_text(2, words)
        store.put_document(3, DocumentRecord("http://a.test/exact", "exact_duplicate", now, 0, 14))
        store.put_document(4, DocumentRecord("http://a.test/skip", "skipped", now))
    result = diff_store(path, SketchParams(), DedupParams(), jobs=1)
    assert dict(result.not_compared) == {"no_page": 1, "no_text": 2, "skipped": 1}
    # the one page with a text is alone now: its original is not there to be matched
    assert [(c.url, c.crawl_decision, c.new_decision) for c in result.now_kept] == [
        ("http://a.test/texted", "near_duplicate", "kept")
    ]
    assert result.compared == 1 and result.now_dropped == []
    # its text does not hash to the recorded content hash: a cut text, and the table says so
    assert result.cut_texts == 1
    assert "1 dropped pages were compared by their kept text, cut at" in result.render()
    lines = result.render().splitlines()
    assert f"       2  {NOT_COMPARED['no_text']}" in lines
    # line tokens cannot be rebuilt from a text without its lines
    by_line = diff_store(path, SketchParams(unit="line"), DedupParams(), jobs=1)
    assert by_line.not_compared["line_unit"] == 1 and by_line.compared == 0


def test_diff_needs_a_store_and_nothing_else(site, tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": 1, "text": "a b c"}\n')
    assert main(["recluster", "--diff", "--jsonl", str(corpus), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neardup recluster: error: --diff compares a store's crawl")
    # other inputs beside the store are refused, not left out without a word
    assert main(["recluster", "--diff", "--store", str(site.store), "--html", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("neardup recluster: error: --diff compares a store")
    assert main(["recluster", "--diff", "--store", str(tmp_path / "none"), "-q"]) == 2
    assert "no store at" in capsys.readouterr().err
    # it writes no clusters file: an -o is refused, not ignored without a word
    out = tmp_path / "clusters.jsonl"
    assert main(["recluster", "--diff", "--store", str(site.store), "-o", str(out), "-q"]) == 2
    assert capsys.readouterr().err.strip() == ("neardup recluster: error: --diff writes no "
                                               "clusters file, only its report (on stdout): "
                                               "drop -o")  # fmt: skip
    assert not out.exists()
