"""The two HTML engines give the same token streams on a real corpus (≥ 500 real pages).

The corpus is Debian's Python and PostgreSQL documentation (benchmarks/corpus.py: ~1,700 pages,
67 MB, Sphinx and DocBook HTML). The reference engine (BeautifulSoup, and soupsieve for a
content area's selectors) is the slow side, so by default every third page is compared (≥ 500
pages, every kind of page in it). ``NEARDUP_CORPUS_PAGES=all`` compares every page.

The reference is parsed once per page and gives both the word and the line streams, through the
same functions ``html_tokens`` uses after ``extract``; the fast engine goes through the public
``html_tokens`` for each unit, as the crawler does, from the page's bytes and from its decoded
text. Each content area is compared on every sixth of those pages.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.corpus import html_corpus
from dedup import canonical
from dedup.canonical import decode_html, html_joined_tokens, html_tokens
from dedup.html_text import BREAK, extract_utf8
from dedup.params import ContentArea
from dedup.units import JoinedTokens
from tests.conftest import html_corpus_or_skip

MIN_PAGES = 500
STRIDE = 3  # compare every third page unless NEARDUP_CORPUS_PAGES=all


@pytest.fixture(scope="module")
def pages() -> list[Path]:
    every = html_corpus_or_skip(MIN_PAGES)
    if os.environ.get("NEARDUP_CORPUS_PAGES", "").lower() == "all":
        return every
    chosen = every[::STRIDE]
    assert len(chosen) >= MIN_PAGES, f"only {len(chosen)} of {len(every)} pages chosen"
    return chosen


def _first_difference(fast: list[str], reference: list[str]) -> str:
    """Where two streams part, with the tokens around it."""
    at = next(
        (i for i, (a, b) in enumerate(zip(fast, reference)) if a != b),
        min(len(fast), len(reference)),
    )
    lo = max(0, at - 5)
    return (
        f"first difference at token {at} (fast {len(fast)} tokens, reference {len(reference)})\n"
        f"      fast: {fast[lo : at + 5]}\n"
        f"  reference: {reference[lo : at + 5]}"
    )


@pytest.mark.slow
def test_engines_agree_on_real_pages(pages: list[Path]) -> None:
    differences = []
    tokens = 0
    for page in pages:
        data = page.read_bytes()
        html = decode_html(data)
        marked = extract_utf8(html, "reference")
        expected = {"word": canonical._words(marked), "line": canonical._lines(marked, BREAK)}
        tokens += len(expected["word"])
        for unit, reference in expected.items():
            # from the decoded str, and from the bytes as a crawl has them (UTF-8 pages skip
            # the decode and re-encode)
            for source, what in ((html, "str"), (data, "bytes")):
                fast = html_tokens(source, unit, "fast")
                if fast != reference:
                    difference = _first_difference(fast, reference)
                    differences.append(f"{page} [{unit}, {what}]: {difference}")
            # and the sketching path's joined form, made without the list
            joined = html_joined_tokens(data, unit, "fast")
            if joined != JoinedTokens.of(reference):
                differences.append(f"{page} [{unit}, joined]: {joined.count} tokens, "
                                   f"{len(reference)} in the reference")
    if differences:
        listing = "\n".join(differences)
        pytest.fail(f"{len(differences)} differing streams in {len(pages)} pages:\n{listing}")
    # the pages are real documents, not empty shells
    assert tokens > 1000 * len(pages)


def test_corpus_is_installed_once(pages: list[Path]) -> None:
    again = html_corpus(min_pages=MIN_PAGES)
    assert set(pages) <= set(again)
    assert all(page.suffix == ".html" and page.is_file() for page in again)
    assert again == sorted(again)


#: content areas the engines must agree on, page by page: the built-in main content, and
#: selectors of the corpus's own templates (Sphinx and DocBook) and of structure
AREAS = (
    ContentArea("main"),
    ContentArea(include=["div.body", "div.sect1", "div.chapter", "h1"]),
    ContentArea(exclude=["div.sphinxsidebar", ".navheader", ".navfooter", "a", "td:first-child",
                         "li:nth-child(2n)", "h2 + p", "div:has(> pre)"]),  # fmt: skip
)
AREA_STRIDE = 6  # every sixth page of those above (≥ 90 pages), for each area


@pytest.mark.slow
def test_engines_agree_on_every_content_area(pages: list[Path]) -> None:
    chosen = pages[::AREA_STRIDE]
    assert len(chosen) >= 90
    differences = []
    dropped = 0
    for page in chosen:
        data = page.read_bytes()
        html = decode_html(data)
        whole = len(canonical._words(extract_utf8(html, "fast")))
        for area in AREAS:
            marked = extract_utf8(html, "reference", area=area)
            if extract_utf8(html, "fast", area=area) != marked:
                fast = canonical._lines(extract_utf8(html, "fast", area=area), BREAK)
                difference = _first_difference(fast, canonical._lines(marked, BREAK))
                differences.append(f"{page} [{area.describe()}]: {difference}")
            words = canonical._words(marked)
            if html_joined_tokens(data, "word", "fast", area=area) != JoinedTokens.of(words):
                differences.append(f"{page} [{area.describe()}, joined from bytes]")
            dropped += whole - len(words)
    if differences:
        listing = "\n".join(differences)
        pytest.fail(f"{len(differences)} differing areas in {len(chosen)} pages:\n{listing}")
    assert dropped > 0  # the areas left something out: the selectors matched
