"""Commands take what ``neardup log`` prints: the full URL, the path under "URLs on host", a cell
log cut in the middle, the start of a path, or a unique part; on stores of real crawls."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo.server import serve
from crawler.review.urls import AmbiguousURL, UnknownURL, resolve
from storage.store import Store
from tests.crawler.test_explain_command import neardup

MOSSOP = "/archive/mossop-beck-waterfalls.html"
#: a row of log's table begins with its time (the day left out when all rows share one)
ROW = re.compile(r"^(\d{4}-)?(\d\d-\d\d )?\d\d:\d\d:\d\d  ")

#: a second site, on another port (another host to the store): one path of its own, and two
#: paths the demo site has too
OTHER_SITE = {
    "/": '<html><body><p>Fell runners of the north.</p><a href="/only-here.html">results</a> '
    '<a href="/club/about.html">about</a></body></html>',
    "/only-here.html": "<html><body><p>Race results from the spring fell race, "
    "with every runner's time and the course record.</p></body></html>",
    "/club/about.html": "<html><body><p>A running club, not the walking club of the other "
    "site, meeting on Tuesday evenings at the fell foot.</p></body></html>",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store of one host: ``neardup demo``'s real crawl of the demo site."""
    store = tmp_path_factory.mktemp("urls") / "demo"
    proc = neardup("demo", "--store", str(store), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"store": str(store), "base": json.loads(proc.stdout)["site"]}


@pytest.fixture(scope="module")
def other_site() -> Iterator[str]:
    with serve(OTHER_SITE) as base:
        yield base


@pytest.fixture(scope="module")
def two_hosts(demo_site: str, other_site: str, tmp_path_factory) -> dict[str, Any]:
    """A store of two hosts: one real crawl of the demo site and the second site."""
    store = tmp_path_factory.mktemp("urls") / "two"
    proc = neardup("crawl", demo_site + "/", other_site + "/", "--store", str(store), "--quiet",
                   "--set", "crawl.autothrottle=false")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"store": str(store), "demo": demo_site, "other": other_site}


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def log_table(capsys, store: str, *argv: str) -> tuple[str | None, list[str]]:
    """``neardup log``'s host line ("URLs on ...") and its URL cells, as printed."""
    assert main(["log", "--store", store, *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    host = re.search(r"URLs on (\S+)", lines[0])
    start = next(n for n, line in enumerate(lines) if line.startswith("---"))
    # the URL column is where the dashes of its rule are
    rule = [m.span() for m in re.finditer(r"-+", lines[start])]
    left, right = rule[2]
    rows = [line for line in lines[start + 1 :] if ROW.match(line)]
    cells = [line[left:right].strip() for line in rows]
    return (host.group(1) if host else None), cells


def explained(capsys, what: str, store: str) -> str:
    """The URL ``neardup explain WHAT`` explains."""
    assert main(["explain", what, "--store", store, "--json"]) == 0, capsys.readouterr().err
    return str(json.loads(capsys.readouterr().out)["url"])


def refused(capsys, what: str, store: str) -> str:
    """The one-line error of ``neardup explain WHAT`` (exit 2, nothing on stdout)."""
    assert main(["explain", what, "--store", store]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("neardup explain: error: ")
    return err


def test_the_full_url_as_crawled(demo, capsys):
    assert explained(capsys, demo["base"] + MOSSOP, demo["store"]) == demo["base"] + MOSSOP


def test_every_path_log_prints_explains_its_own_page(demo, capsys):
    host, wide = log_table(capsys, demo["store"], "--width", "200")
    assert host == demo["base"]  # one host: said above the table, the rows are paths
    assert MOSSOP in wide and all(cell.startswith("/") for cell in wide)
    for cell in wide:
        assert explained(capsys, cell, demo["store"]) == host + cell


def test_a_cell_log_cut_in_the_middle_explains_its_own_page(demo, capsys):
    host, wide = log_table(capsys, demo["store"], "--width", "200")
    _, narrow = log_table(capsys, demo["store"])  # 80 columns: long paths are cut with …
    cut = [(short, full) for short, full in zip(narrow, wide) if short != full]
    assert cut and all("…" in short for short, _ in cut)
    for short, full in cut:
        assert explained(capsys, short, demo["store"]) == host + full


def test_a_unique_part_or_the_start_of_a_path(demo, capsys):
    base, store = demo["base"], demo["store"]
    assert explained(capsys, "Leading-A", store) == base + "/club/leading-a-walk.html"  # case-blind
    # "/walks/wenlow" is also inside /mirror/walks/wenlow-tarn.html: a path starts at the host
    assert explained(capsys, "/walks/wenlow", store) == base + "/walks/wenlow-tarn.html"
    with Store.open(store, readonly=True) as opened:
        found = resolve(opened, "/walks/wenlow")
        assert (found.how, found.doc_id) == ("start", opened.find_url(found.url))
        assert resolve(opened, "leading").how == "part"
        assert resolve(opened, MOSSOP).how == "path"


def test_an_ambiguous_part_lists_the_matches_and_exits_2(demo, capsys):
    base, store = demo["base"], demo["store"]
    err = refused(capsys, "mossop", store)
    assert "'mossop' is part of 2 URLs" in err
    assert base + MOSSOP in err and base + "/walks/mossop-beck-waterfalls.html" in err
    with Store.open(store, readonly=True) as opened:
        total = sum(1 for _, url in opened.urls() if "html" in url)
        with pytest.raises(AmbiguousURL) as many:
            resolve(opened, "html")
    assert many.value.count == total > 10 and len(many.value.matches) == total
    err = refused(capsys, "html", store)
    assert f"is part of {total} URLs" in err and f"and {total - 10} more" in err
    assert err.count("http://") == 10


def test_no_match_says_so_and_suggests_the_closest(demo, capsys):
    base, store = demo["base"], demo["store"]
    err = refused(capsys, "/walks/wenlow-tarn.hmtl", store)
    assert "no page in store" in err and "did you mean: " + base + "/walks/wenlow-tarn.html" in err
    # a URL on a host the store does not have: the same page on the store's host is suggested
    err = refused(capsys, "http://127.0.0.1:1/club/junior-section.html", store)
    assert "did you mean: " + base + "/club/junior-section.html" in err
    err = refused(capsys, "zzz-nothing-like-it", store)
    assert "no page in store" in err and f"neardup log --store {store}" in err
    with Store.open(store, readonly=True) as opened, pytest.raises(UnknownURL) as exc:
        resolve(opened, "zzz-nothing-like-it")
    assert not isinstance(exc.value, AmbiguousURL)


def test_two_hosts_a_path_found_on_one_host_only(two_hosts, capsys):
    store, other = two_hosts["store"], two_hosts["other"]
    host, cells = log_table(capsys, store, "--width", "200")
    assert host is None and other + "/only-here.html" in cells  # two hosts: whole URLs
    # filtered to one host, log says it above the table and prints paths: they work as given
    host, cells = log_table(capsys, store, "--width", "200", "--url-contains", other)
    assert host == other and "/only-here.html" in cells
    assert explained(capsys, "/only-here.html", store) == other + "/only-here.html"


def test_two_hosts_a_path_on_both_lists_both(two_hosts, capsys):
    store, demo, other = two_hosts["store"], two_hosts["demo"], two_hosts["other"]
    err = refused(capsys, "/club/about.html", store)
    assert "the path /club/about.html is on 2 hosts" in err
    assert demo + "/club/about.html" in err and other + "/club/about.html" in err
    assert explained(capsys, other + "/club/about.html", store) == other + "/club/about.html"


def test_help_shows_the_forms(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    for needle in ("the path log prints", "a unique part of the URL", "URLs on http://host"):
        assert needle in out, needle


#: a site whose paths hold letters beyond ASCII and a space, as many real sites' paths do; the
#: server sees them percent-encoded, as the crawl writes them
CAFE, INDEX = "/café-au-bord-de-la-rivière.html", "/日本語の文書/索引のページ.html"
NAMED_PATHS = {CAFE: "/caf%C3%A9-au-bord-de-la-rivi%C3%A8re.html", "/a%20b.html": "/a%20b.html",
               "/copié.html": "/copi%C3%A9.html",
               INDEX: "/%E6%97%A5%E6%9C%AC%E8%AA%9E%E3%81%AE%E6%96%87%E6%9B%B8/"
                      "%E7%B4%A2%E5%BC%95%E3%81%AE%E3%83%9A%E3%83%BC%E3%82%B8.html"}  # fmt: skip
NAMED_SITE = {
    "/": f'<html><body><p>Pages with names.</p><a href="{CAFE}">café</a> '
    f'<a href="{INDEX}">索引</a> <a href="/a b.html">a b</a> <a href="/copié.html">copie</a>'
    "</body></html>",
    NAMED_PATHS[CAFE]: "<html><body><p>A page about a café by the river, open from eight in "
    "the morning.</p></body></html>",
    "/copi%C3%A9.html": "<html><body><p>A page about a café by the river, open from eight in "
    "the morning.</p></body></html>",
    NAMED_PATHS[INDEX]: "<html><body><p>日本語の索引のページ。 An index of the pages in "
    "Japanese.</p></body></html>",
    "/a%20b.html": "<html><body><p>A page whose name has a space in it, as files copied "
    "from a desktop often do.</p></body></html>",
}


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    store = tmp_path_factory.mktemp("urls") / "named"
    with serve(NAMED_SITE) as base:
        proc = neardup("crawl", base + "/", "--store", str(store), "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield {"store": str(store), "base": base}


def test_paths_beyond_ascii_read_as_a_browser_shows_them_and_are_taken_back(named, capsys):
    """log shows ``/café-….html``, not ``/caf%C3%A9-….html`` (``%20`` stays: decoded it would
    read as two words); what it shows, cut or whole, and the names as a user types them (a
    space, letters beyond ASCII; in a path, a part or a whole URL) all find their page."""
    store, base = named["store"], named["base"]
    host, wide = log_table(capsys, store, "--width", "200")
    assert host == base and sorted(wide) == sorted(["/", *NAMED_PATHS]), wide
    for shown, crawled in NAMED_PATHS.items():
        assert explained(capsys, shown, store) == base + crawled
    _, narrow = log_table(capsys, store, "--width", "50")  # long paths are cut with …
    cut = [(short, full) for short, full in zip(narrow, wide) if short != full]
    assert len(cut) >= 2 and all("…" in short for short, _ in cut), narrow
    for short, full in cut:
        assert explained(capsys, short, store) == base + NAMED_PATHS[full]
    assert explained(capsys, "café", store) == base + NAMED_PATHS[CAFE]
    assert explained(capsys, "/a b.html", store) == base + "/a%20b.html"
    assert explained(capsys, base + INDEX, store) == base + NAMED_PATHS[INDEX]
    _, listed = log_table(capsys, store, "--url-contains", "索引", "--width", "200")
    assert listed == [INDEX]
    # the report's links go to the URL as crawled, and read as log shows it (the copy's
    # original is a link)
    out = named["store"] + "-report.html"
    assert main(["report", "--store", store, "-o", out]) == 0
    page = Path(out).read_text(encoding="utf-8")
    assert f'href="{base}{NAMED_PATHS[CAFE]}"' in page and f">{base}{CAFE}</a>" in page
    assert f">{base}/copié.html</a>" in page
