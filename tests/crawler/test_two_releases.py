"""A site's next release beside the last: the duplicate budget loses no unique page.

The site is two real releases of one documentation site, cairomm's Doxygen reference for 1.14
and for 1.16 (Debian's packages, :data:`benchmarks.corpus.RELEASE_PACKAGES`), served as they are
installed, under ``/1.14/`` and ``/1.16/``, by a server this process starts on 127.0.0.1, with a
home page that links both releases' index pages. Many pages of one release are near copies of
the other's (a class whose members hardly changed), each of a *different* page: what the budget
must tell from a spider trap, and follow. Doxygen draws its menus with JavaScript, so a crawl
reaches the pages the pages themselves link to, a little over half of each release.

Crawls run as users run them (``neardup crawl``, a child process): once with the built-in
defaults, once with no budget (``crawl.duplicate_link_budget=null``), which follows the links of
every page. Greedy clustering depends on the order pages arrive in, and 8 requests at a time
make that order vary, so the crawls are compared by content, not by URL: every page the crawl
without a budget kept has a kept page in the default crawl with the same canonical text or an
estimated resemblance at the threshold, from the stores' own sketches.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from benchmarks.corpus import RELEASE_PACKAGES, reference_dir
from crawler.demo.server import Exchange, serve
from dedup.estimators import estimate
from dedup.params import DedupParams
from storage.log import read_log
from storage.store import Store
from storage.verify import verify_store
from tests.conftest import html_corpus_or_skip
from tests.crawler.test_traps import crawl

RELEASES = dict(zip(("1.14", "1.16"), RELEASE_PACKAGES))
DROPPED = ("exact_duplicate", "near_duplicate", "contained")


@pytest.fixture
def releases_site(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """The site's folder (each release a link to its installed reference) and each release's
    number of pages."""
    pages = html_corpus_or_skip(200, RELEASE_PACKAGES)
    site = tmp_path / "site"
    site.mkdir()
    counts = {}
    for release, package in RELEASES.items():
        folder = reference_dir(package)
        assert (folder / "index.html").is_file(), folder
        (site / release).symlink_to(folder, target_is_directory=True)
        counts[release] = sum(folder in page.parents for page in pages)
    links = "".join(f'<li><a href="/{r}/index.html">cairomm {r}</a></li>' for r in RELEASES)
    (site / "index.html").write_text(
        "<!DOCTYPE html><html><head><title>cairomm</title></head><body>"
        f"<h1>The cairomm reference manuals</h1><ul>{links}</ul></body></html>"
    )
    return site, counts


def release_of(url: str) -> str:
    """The release a page of the site belongs to ("" for the home page)."""
    path = url.split("/", 3)[3]
    return path.split("/", 1)[0] if "/" in path else ""


class Crawl(NamedTuple):
    summary: dict[str, Any]
    log: list[dict[str, Any]]
    #: URL → the page it was first requested from (its Referer; "" for the start URL)
    first_from: dict[str, str]


def crawled(site: Path, store: Path, *options: str) -> Crawl:
    """One crawl of ``site``, from a server of its own, into ``store``."""
    exchanges: list[Exchange] = []
    with serve(site, exchanges=exchanges) as base:
        summary = crawl(base, store, *options)
    assert summary["reason"] == "finished"
    assert verify_store(store).ok
    first_from: dict[str, str] = {}
    for exchange in exchanges:
        first_from.setdefault(base + exchange.path, exchange.headers.get("referer", ""))
    return Crawl(summary, list(read_log(store / "logs")), first_from)


def check_counts(summary: dict[str, Any], log: list[dict[str, Any]]) -> None:
    """The summary counts what the log holds: decisions, and the links not followed."""
    decided = Counter(e["decision"] for e in log)
    assert {k: v for k, v in summary["decisions"].items() if v} == dict(decided)
    held = [e for e in log if e.get("links_not_followed")]
    assert all(e["decision"] in DROPPED for e in held)
    links = summary["links_not_followed"]
    assert links["duplicate_budget"] == sum(e["links_not_followed"] for e in held)
    assert links["duplicate_budget_pages"] == len(held)


def cross_release(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pages dropped as a copy of a page of the other release."""
    return [e for e in log if e["decision"] in DROPPED and release_of(e["url"])
            and release_of(e["duplicate_of"]) not in ("", release_of(e["url"]))]  # fmt: skip


def unique_pages_lost(without: Path, default: Path) -> list[str]:
    """The pages kept in the store ``without`` a budget that have no kept page in the
    ``default`` store with the same canonical text or a resemblance at the threshold."""
    threshold = DedupParams().threshold
    with Store.open(without, readonly=True) as off, Store.open(default, readonly=True) as on:
        kept = [(r.content_hash, on.sketch(d)) for d, r in on.current_documents()
                if r.decision == "kept"]  # fmt: skip
        lost = []
        for doc_id, record in off.current_documents():
            if record.decision != "kept":
                continue
            sketch = off.sketch(doc_id)
            assert sketch is not None, record.url
            if not any(h == record.content_hash or estimate(sketch, s).resemblance >= threshold
                       for h, s in kept):  # fmt: skip
                lost.append(record.url)
    return lost


@pytest.mark.slow
def test_the_duplicate_budget_loses_no_unique_page_of_two_real_releases(releases_site, tmp_path):
    site, pages = releases_site
    with ThreadPoolExecutor(2) as pool:  # the two crawls side by side
        with_defaults = pool.submit(crawled, site, tmp_path / "default")
        with_none = pool.submit(crawled, site, tmp_path / "without",
                                "--set", "crawl.duplicate_link_budget=null")  # fmt: skip
        default, without = with_defaults.result(), with_none.result()
    for summary, log, _ in (default, without):
        check_counts(summary, log)
        # each release crawled, a little over half of it (the rest is behind Doxygen's
        # JavaScript menus), and many of its pages matched with the other release's
        reached = Counter(release_of(e["url"]) for e in log)
        assert all(reached[r] >= pages[r] / 2 for r in RELEASES), (reached, pages)
        assert len(cross_release(log)) >= min(reached[r] for r in RELEASES) / 4
    assert not any(without.summary["links_not_followed"].values())
    # no real path repeats itself, or runs deep enough to be refused
    held_paths = default.summary["links_not_followed"]
    assert held_paths["repeated_path"] == held_paths["too_many_segments"] == 0
    # the budget was put to work: with the defaults, the links of duplicates were followed,
    # and led to pages that were kept
    decision = {e["url"]: e["decision"] for e in default.log}
    found_through_copies = [
        url
        for url, referer in default.first_from.items()
        if decision.get(url) == "kept" and decision.get(referer) in DROPPED
    ]
    assert found_through_copies
    # and lost no page: whatever the crawl without a budget kept, the default crawl kept too,
    # or a page with its text (or close enough to be its duplicate)
    assert unique_pages_lost(tmp_path / "without", tmp_path / "default") == []
