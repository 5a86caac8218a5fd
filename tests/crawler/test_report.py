"""``neardup report`` on a store made by a real crawl of a local site: numbers, escaping, plots.

The site is the bundled demo site (whose truth is known: 21 originals and printable versions,
3 exact mirrors, 4 near duplicates, 3 pages to skip) plus three hostile pages: a page titled
``<script>…</script>``, a near duplicate of it with the same title, and a file whose
Content-Type header carries markup, which the crawl skips and whose skip detail the report
lists. It is served on 127.0.0.1 and crawled by ``neardup crawl`` in a child process, once per
test session (:func:`crawled_site`, shared with the browser and ``--diff`` tests).
"""

from __future__ import annotations

import json
import mimetypes
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo import SITE_DIR
from crawler.review.facts import collect, page_title
from crawler.review.report import CSP, aligned, render
from crawler.demo.server import Route, serve
from storage.store import Store

ROOT = Path(__file__).resolve().parents[2]

#: the title of the hostile page: if it ever ran, the report's own title would change
EVIL_TITLE = "<script>document.title='PWNED'</script>"
#: a Content-Type with markup in its media type; it ends up in the skip detail (lower case)
EVIL_TYPE = "application/x-<img src=x onerror=document.title='pwned'>"
CRAWL_OPTIONS = ["--set", "crawl.concurrency=1", "--set", "crawl.autothrottle=false",
                 "--set", "crawl.download_delay=0"]  # fmt: skip


@dataclass(frozen=True)
class CrawledSite:
    store: Path
    base: str
    #: the crawl's dedup log lines, by URL path
    log: dict[str, dict[str, Any]]


def _article(seed: int, words: int = 600) -> list[str]:
    """A text no other page shares: seeded random words from a fixed vocabulary."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 8)))
                  for _ in range(3000)]  # fmt: skip
    return [rng.choice(vocabulary) for _ in range(words)]


def _evil_page(words: list[str]) -> str:
    paragraphs = "".join(f"<p>{' '.join(words[i : i + 60])}</p>" for i in range(0, len(words), 60))
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{EVIL_TITLE}</title>"
            f"</head><body><h1>Hostile titles</h1>{paragraphs}</body></html>")  # fmt: skip


def site_routes() -> dict[str, Route]:
    """The demo site as a route table, plus the hostile pages linked from its home page."""
    routes: dict[str, Route] = {}
    for path in sorted(SITE_DIR.rglob("*")):
        if not path.is_file():
            continue
        url = "/" + path.relative_to(SITE_DIR).as_posix()
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if ctype.startswith("text/"):
            ctype += "; charset=utf-8"
        routes[url] = Route(headers=(("Content-Type", ctype),), body=path.read_bytes())
        if path.name == "index.html":
            routes[url[: -len("index.html")]] = routes[url]
    words = _article(20250101)
    copy = list(words)
    copy[150], copy[450] = "changedone", "changedtwo"  # two substitutions: resemblance 0.97
    links = ('<p><a href="/hostile/title.html">t</a> <a href="/hostile/title-copy.html">c</a> '
             '<a href="/hostile/odd-type">o</a></p></body>')  # fmt: skip
    home = routes["/"].body_bytes().decode("utf-8").replace("</body>", links, 1)
    routes["/"] = routes["/index.html"] = Route(body=home)
    routes["/hostile/title.html"] = Route(body=_evil_page(words))
    routes["/hostile/title-copy.html"] = Route(body=_evil_page(copy))
    routes["/hostile/odd-type"] = Route(headers=(("Content-Type", EVIL_TYPE),), body=b"\x00\x01")
    return routes


def crawled_site(tmp_path_factory: pytest.TempPathFactory) -> CrawledSite:
    """The crawl of :func:`site_routes`, made once per test session and reused after."""
    home = tmp_path_factory.getbasetemp() / "report-site-crawl"
    done = home / "crawl.json"
    if not done.is_file():
        store = home / "store"
        with serve(site_routes()) as base:
            proc = subprocess.run(
                [sys.executable, "-m", "crawler.cli", "crawl", base + "/", "--store", str(store),
                 *CRAWL_OPTIONS],
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                text=True, timeout=120, check=False,
            )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        done.write_text(json.dumps({"store": str(store), "base": base}))
    info = json.loads(done.read_text())
    with Store.open(info["store"], readonly=True) as opened:
        log = {e["url"][len(info["base"]) :]: e for e in opened.read_log()}
    return CrawledSite(Path(info["store"]), info["base"], log)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> CrawledSite:
    return crawled_site(tmp_path_factory)


@pytest.fixture(scope="module")
def report(site: CrawledSite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("report") / "report.html"
    code = main(["report", "--store", str(site.store), "-o", str(out)])
    return {"code": code, "path": out, "html": out.read_text(encoding="utf-8")}


# --- the crawl is what the test assumes ----------------------------------------------------------


def test_the_crawl_decided_the_hostile_pages_as_expected(site):
    log = site.log
    assert log["/hostile/title.html"]["decision"] == "kept"
    copy = log["/hostile/title-copy.html"]
    assert copy["decision"] == "near_duplicate"
    assert copy["duplicate_of"] == site.base + "/hostile/title.html"
    odd = log["/hostile/odd-type"]
    assert (odd["decision"], odd["reason"]) == ("skipped", "not_html")
    assert "<img src=x" in odd["detail"]


# --- the numbers -------------------------------------------------------------------------------


def test_collect_counts_the_paper_table(site):
    data = collect(site.store, threshold=0.9)
    assert data.fetched == 34
    assert dict(data.decisions) == {"kept": 22, "exact_duplicate": 3, "near_duplicate": 5,
                                    "skipped": 4}  # fmt: skip
    assert dict(data.skipped) == {"not_html": 3, "robots_txt": 1}
    s = data.summary
    # every kept page starts a cluster; every dropped one joins one
    assert (s.clusters, s.documents, s.singletons) == (22, 30, 14)
    assert (s.duplicate_clusters, s.duplicate_documents) == (8, 16)
    assert (s.identical_clusters, s.identical_documents) == (3, 6)
    assert (s.mixed_clusters, s.mixed_documents) == (5, 10)
    assert data.sizes == {1: 14, 2: 8}
    assert data.dropped_total == 8 and len(data.dropped) == 8
    assert sorted(data.near_estimates) == sorted(
        e["resemblance"] for e in site.log.values() if e["decision"] == "near_duplicate"
    )
    # the time span is the crawl's: first and last decision
    times = [e["time"] for e in site.log.values()]
    assert data.first_time == pytest.approx(min(times), abs=1.0)
    assert data.last_time == pytest.approx(max(times), abs=1.0)


def test_largest_clusters_list_their_members_with_titles(site):
    data = collect(site.store, threshold=0.9, top_clusters=3)
    assert [c.size for c in data.largest] == [2, 2, 2]
    ids = [c.cluster_id for c in data.largest]
    assert ids == sorted(ids)  # equal sizes: the oldest clusters first
    for cluster in data.largest:
        assert cluster.members[0].decision == "kept"
        assert cluster.members[0].title  # read from the stored page
    everything = collect(site.store, threshold=0.9, top_clusters=100)
    hostile = next(c for c in everything.largest
                   if c.members[0].url.endswith("/hostile/title.html"))  # fmt: skip
    assert hostile.members[0].title == EVIL_TITLE
    assert not hostile.identical


def test_each_dropped_page_has_what_explain_says(site, report):
    from crawler.review.explain import explain

    data = collect(site.store, threshold=0.9)
    views = {v.row.url[len(site.base) :]: v for v in data.dropped}
    copy = views["/hostile/title-copy.html"]
    assert copy.error is None and copy.explanation is not None
    with Store.open(site.store, readonly=True) as store:
        expected = explain(store, site.base + "/hostile/title-copy.html")
    c = copy.explanation.comparison
    assert c == expected.comparison
    # the report reads the logs once and hands each page its line: the line explain finds
    with Store.open(site.store, readonly=True) as store:
        for view in data.dropped:
            assert view.explanation is not None
            assert view.explanation.log == explain(store, view.row.url).log, view.row.url
            assert view.explanation.log is not None
    assert c is not None and c.exact_resemblance is not None
    assert c.estimated_resemblance is not None
    # two words of 600 changed: 8 of 604 distinct 4-shingles differ
    assert c.exact_resemblance == pytest.approx(588 / 604, abs=0.01)
    assert abs(c.estimated_resemblance - c.exact_resemblance) < 0.1  # 4 sd of MIN_100
    assert sorted(data.near_exact) == sorted(
        r
        for v in data.dropped
        if v.row.decision == "near_duplicate" and (r := v.exact_resemblance) is not None
    )
    assert len(data.near_exact) == 5  # every near duplicate's text was kept
    page = report["html"]
    section = page[page.index(f'id="doc-{copy.row.doc_id}"') :]
    section = section[: section.index("</section>")]
    assert f"{c.estimated_resemblance:.4f} / {c.exact_resemblance:.4f}" in section
    assert f"{c.matches} of {c.sample_size}" in section
    assert "<th>containment of the original</th>" in section
    assert "<del>changedone</del>" in section and "<del>changedtwo</del>" in section
    texts = section[section.index('<div class="texts">') :]
    assert texts.count("<ins>") == 2  # the two words the copy replaced
    mirror = page[page.index("/mirror/walks/wenlow-tarn.html</a></h3>") :]
    assert "identical canonical texts" in mirror[: mirror.index("</section>")]


def test_the_threshold_is_the_crawls_as_logged_unless_given(site):
    data = collect(site.store, configured=0.5)
    assert (data.threshold, data.threshold_source) == (0.9, "the dedup log")
    given = collect(site.store, threshold=0.8, max_dropped=0)
    assert (given.threshold, given.threshold_source) == (0.8, "--threshold")
    assert given.notes == ["the dedup log says the crawl used threshold 0.9"]


def test_max_dropped_limits_the_pages_explained(site):
    data = collect(site.store, threshold=0.9, max_dropped=2)
    assert data.dropped_total == 8 and len(data.dropped) == 2
    assert "The first 2 are shown" in render(data, plots={})


# --- the page ----------------------------------------------------------------------------------


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_title:
            self.title += data


def _parse(page: str) -> _Elements:
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser


def test_the_command_writes_one_self_contained_page(report, site):
    assert report["code"] == 0
    page = report["html"]
    parsed = _parse(page)
    tags = [t for t, _ in parsed.tags]
    csp = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv")]
    assert csp == [{"http-equiv": "Content-Security-Policy", "content": CSP}]
    assert tags.index("meta") < tags.index("title")  # the policy is in force before anything
    # nothing that loads: no script, no external style sheet, image, frame, object or font
    assert not {"script", "link", "img", "iframe", "object", "embed", "base"} & set(tags)
    for tag, attrs in parsed.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)  # no event handlers anywhere
            if name in ("src", "srcset", "data", "action", "poster"):
                pytest.fail(f"<{tag} {name}={value!r}> would load something")
            if name == "href" and value and not value.startswith("#"):
                assert tag == "a" and value.startswith(site.base + "/"), (tag, value)
    assert "url(" not in re.sub(r"url\(#", "", page)  # CSS and SVG refer to nothing outside
    assert "@import" not in page
    assert parsed.title == f"neardup report: {site.store}"
    assert tags.count("svg") == 3


#: an apostrophe as a character reference, as either escaper writes it
_APOS = "(?:&#x27;|&#39;)"


def test_crawled_strings_are_escaped(report):
    page = report["html"]
    parsed = _parse(page)
    assert EVIL_TITLE in "".join(parsed.text)  # shown, as text
    assert re.search(f"&lt;script&gt;document.title={_APOS}PWNED{_APOS}&lt;/script&gt;", page)
    assert "<script" not in page.lower()
    # the skip detail with an <img onerror> is text too
    assert re.search(f"&lt;img src=x onerror=document.title={_APOS}pwned{_APOS}&gt;", page)
    assert not any(t == "img" for t, _ in parsed.tags)


#: what a hostile crawl could put in every string the report shows: markup that would close the
#: element or attribute it lands in, an event handler, and template syntax that must stay text
HOSTILE = "\"'></title></script></pre><script>alert(1)</script><img src=x onerror=alert(2)>{{ 7*7 }}{% if 1 %}"


def test_every_crawled_string_is_escaped_wherever_it_lands(site):
    from collections import Counter
    from dataclasses import replace

    from crawler.review.facts import DroppedView
    from crawler.review.textdiff import differences

    data = collect(site.store, threshold=0.9, top_clusters=100)

    def evil(where: str) -> str:
        return f"{where}:{HOSTILE}"

    url = "http://127.0.0.1/" + evil("url")
    data.store = evil("store")
    data.threshold_source = evil("source")
    data.notes = [evil("note")]
    data.runs = [evil("run")]
    data.skipped = Counter({evil("reason"): 1})
    cluster = data.largest[0]
    cluster.members[0].url, cluster.members[0].title = url, evil("title")
    view = data.dropped[0]
    ex = view.explanation
    assert ex is not None and ex.comparison is not None and ex.original is not None
    a, b = ("same", evil("token"), "end"), ("same", "other", "end")
    ex = replace(
        ex,
        page=replace(ex.page, url=url, tokens=a),
        original=replace(ex.original, url=evil("original"), tokens=b),
        comparison=replace(ex.comparison, differences=tuple(differences(a, b))),
        notes=(evil("explain-note"),),
    )
    data.dropped[0] = DroppedView(replace(view.row, duplicate_of=evil("duplicate-of")), ex)
    data.dropped[1] = DroppedView(replace(data.dropped[1].row, reason=evil("log-reason")), None,
                                  evil("error"))  # fmt: skip
    first, second = data.skipped_pages[:2]
    first.reason, first.detail = evil("skip-reason"), evil("detail")
    second.url = "javascript:alert(document.domain)//" + evil("js")

    page = render(data)
    parsed = _parse(page)
    tags = {t for t, _ in parsed.tags}
    assert not {"script", "img", "iframe", "object", "embed"} & tags
    for tag, attrs in parsed.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        href = attrs.get("href")
        # links go to a section of the page or to an http(s) URL: never javascript:
        assert href is None or href.startswith(("#", "http://", "https://")), href
    assert ("a", {"class": "url", "href": url, "rel": "noreferrer noopener"}) in parsed.tags
    text = "".join(parsed.text)
    for where in ("url", "store", "source", "note", "run", "reason", "title", "token", "original",
                  "explain-note", "duplicate-of", "log-reason", "error", "skip-reason", "detail",
                  "js"):  # fmt: skip
        assert evil(where) in text, where  # shown whole, as text: nothing ran or was cut
    assert parsed.title == f"neardup report: {evil('store')}"


def test_the_page_shows_the_summary_plots_clusters_and_drops(report, site):
    page = report["html"]
    text = " ".join(" ".join(_parse(page).text).split())
    assert "pages fetched (decided) 34" in text
    assert "kept (stored) 22" in text and "exact duplicates dropped 3" in text
    assert "near duplicates dropped 5" in text and "skipped 4 not_html 3 robots_txt 1" in text
    assert "clusters of 2 or more 8 16" in text
    assert "identical pages only 3 6" in text and "mixed (near duplicates) 5 10" in text
    assert "MIN_100 over 4-word shingles" in text
    assert "threshold 0.9 (from the dedup log)" in text
    assert re.search(r"crawl time span \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC to ", text)
    for label in ("cluster-sizes", "resemblance", "s-curve"):
        assert f'aria-label="{label}"' in page
    assert "The S-curve, S = 100, K = 90" not in text  # drawn as paths: no text in the SVG
    assert "at least 90 of 100 sketch entries" in text
    # every dropped page has its section, and the clusters link to it
    for entry in site.log.values():
        if entry["decision"] in ("exact_duplicate", "near_duplicate"):
            assert f'id="doc-{entry["doc_id"]}"' in page
            assert f'href="#doc-{entry["doc_id"]}"' in page
    # plot ids are unique across the three inline SVGs
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_the_report_is_reproducible(site, tmp_path):
    data = collect(site.store, threshold=0.9, now=0.0)
    again = collect(site.store, threshold=0.9, now=0.0)
    assert render(data) == render(again)


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", "--store", str(tmp_path / "none"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neardup report: error: no store at ") and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def test_the_report_can_go_to_stdout(site, capsys):
    assert main(["report", "--store", str(site.store), "-o", "-", "--max-dropped", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and out.endswith("</html>\n")
    assert "8 page(s) dropped" in out and "The first 0 are shown" in out


def test_an_empty_store_makes_a_report(tmp_path):
    Store.open(tmp_path / "empty").close()
    page = render(collect(tmp_path / "empty", threshold=0.9))
    assert "No page was dropped." in page and "No cluster has two or more members." in page
    assert "no pages decided" in page


# --- helpers -----------------------------------------------------------------------------------


def test_page_title_reads_what_a_browser_shows():
    assert page_title(b"<TITLE lang=en>\n A  &lt;b&gt; </TITLE>") == "A <b>"
    assert page_title(b"<title></title>") is None
    assert page_title(("<title>" + "x" * 500 + "</title>").encode()) == "x" * 159 + "…"


def test_aligned_texts_mark_changes_escape_and_cut_long_shared_runs():
    left, right, differ = aligned(
        ["one", "two", "three", "four"], ["one", "2", "three", "four", "<5>"]
    )
    assert differ
    assert left == "one <del>two</del> three four"
    assert right == "one <ins>2</ins> three four <ins>&lt;5&gt;</ins>"
    a = [f"w{i}" for i in range(100)]
    b = a[:50] + ["new"] + a[51:]
    left, right, _ = aligned(a, b, context=3)
    assert left.split("<del>")[0].endswith("… 47 shared …</span> w47 w48 w49 ")
    assert "<del>w50</del> w51 w52 w53 <span" in left and "<ins>new</ins>" in right
    assert "… 46 shared …" in left and "w99" not in left
