"""The content area through a real crawl: different pages on one template, and true copies.

A local site whose pages share a large template (navigation, sidebar, footer) around a few
words of their own, as a documentation site's reference pages do ("Size: 4 dwords" against
"Size: 2 dwords"). Crawled with the defaults (``all``: the paper's reading of whole pages) the
thin pages are near duplicates of the first; with ``canonical.content_area: main`` each is kept,
while a mirror (the same bytes) and a version (one sentence added) are still dropped. Then the
store's content area is a store parameter: explain and the report name it, a crawl asking for
another is refused in one line, and ``recluster --store`` re-analyses the kept pages with
another area.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawler.cli import main
from crawler.demo.server import Route, serve
from storage.store import Store
from tests.crawler.test_crawl_command import DEMO_OPTIONS, neardup

THIN = 8  # different pages on the template
TEMPLATE_WORDS = 2000  # enough that 4-word shingles of the content are ~2% of a page


def _template(content: str, title: str) -> str:
    words = [f"menu{i}" for i in range(TEMPLATE_WORDS)]
    nav = "".join(f'<li><a href="#{w}">{w}</a></li>' for w in words[:800])
    side = " ".join(words[800:1400])
    foot = " ".join(words[1400:])
    return (
        f"<!DOCTYPE html><html><head><title>Reference</title></head><body>"
        f"<header>Instruction set reference</header><nav><ul>{nav}</ul></nav>"
        f'<div class="sidebar">{side}</div>'
        f"<main><h1>{title}</h1>{content}</main>"
        f"<footer>{foot}</footer></body></html>"
    )


def _site() -> dict[str, Route]:
    pages: dict[str, str] = {}
    for k in range(THIN):
        pages[f"/op{k}.html"] = _template(
            f"<p>Operand op{k}: size {k + 1} dwords, encoding form{k}, latency cycle{k}.</p>",
            f"Operand op{k}",
        )
    article = " ".join(f"word{i}" for i in range(300))
    pages["/article.html"] = _template(f"<p>{article}</p>", "A long article")
    pages["/article-v2.html"] = _template(
        f"<p>{article}</p><p>Reviewed again for this release.</p>", "A long article"
    )
    pages["/mirror/op0.html"] = pages["/op0.html"]
    links = "".join(f'<a href="{path}">{path}</a> ' for path in pages)
    routes = {path: Route(body=body) for path, body in pages.items()}
    routes["/"] = Route(body=f"<!DOCTYPE html><html><body><p>Index</p>{links}</body></html>")
    return routes


def _decisions(store: Path) -> dict[str, str]:
    with Store.open(store, readonly=True) as opened:
        return {
            record.url.split("/", 3)[3]: record.decision for _, record in opened.documents()
        }


@pytest.fixture(scope="module")
def crawls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("content-area")
    out: dict[str, Any] = {}
    with serve(_site()) as base:
        for area in ("all", "main"):
            store = root / area
            settings = [] if area == "all" else ["--set", "canonical.content_area=main"]
            proc = neardup("crawl", base + "/", "--store", str(store), *DEMO_OPTIONS, *settings,
                           "--set", "crawl.robots_txt=false", "--json")  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            out[area] = store
        # a crawl of the main store that asks for the whole page is refused in one line
        out["mismatch"] = neardup("crawl", base + "/", "--store", str(out["main"]),
                                  *DEMO_OPTIONS)  # fmt: skip
    out["root"] = root
    return out


def test_with_the_defaults_different_pages_on_one_template_are_near_duplicates(crawls):
    decisions = _decisions(crawls["all"])
    thin = [decisions[f"op{k}.html"] for k in range(THIN)]
    assert thin[0] == "kept"
    assert thin[1:] == ["near_duplicate"] * (THIN - 1)
    assert decisions["mirror/op0.html"] == "exact_duplicate"
    assert decisions["article-v2.html"] == "near_duplicate"


def test_with_main_they_are_kept_and_true_copies_still_dropped(crawls):
    decisions = _decisions(crawls["main"])
    assert [decisions[f"op{k}.html"] for k in range(THIN)] == ["kept"] * THIN
    assert decisions["article.html"] == "kept"
    assert decisions["mirror/op0.html"] == "exact_duplicate"
    assert decisions["article-v2.html"] == "near_duplicate"


def test_the_store_records_its_area_and_refuses_another(crawls):
    with Store.open(crawls["main"], readonly=True) as store:
        assert store.manifest.canonical.content_area == "main"
    manifest = json.loads((crawls["main"] / "manifest.json").read_text())
    assert manifest["canonical"] == {"content_area": "main", "include": [], "exclude": []}
    proc = crawls["mismatch"]
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"neardup crawl: error: store {crawls['main']} was made with canonical.content_area=main; "
        "this run asks for all (use another --store, or re-analyse this one: "
        "neardup recluster --store)"
    ]


def test_explain_and_the_report_name_the_area(crawls, capsys):
    store = str(crawls["main"])
    url = next(u for u in _urls(crawls["main"]) if u.endswith("/article-v2.html"))
    assert main(["explain", url, "--store", store]) == 0
    assert "content area: main" in capsys.readouterr().out
    assert main(["explain", url, "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["canonical"]["content_area"] == "main"
    report = crawls["root"] / "report.html"
    assert main(["report", "--store", store, "-o", str(report)]) == 0
    capsys.readouterr()
    assert "<dt>content area</dt><dd>main</dd>" in report.read_text(encoding="utf-8")


def _urls(store: Path) -> list[str]:
    with Store.open(store, readonly=True) as opened:
        return [record.url for _, record in opened.documents()]


def _recluster(capsys, tmp: Path, *argv: str) -> dict[str, str]:
    out = tmp / f"clusters-{len(list(tmp.glob('clusters-*')))}.jsonl"
    assert main(["recluster", *argv, "-o", str(out), "--quiet", "--jobs", "1"]) == 0
    capsys.readouterr()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return {line["id"].split("/", 3)[3]: line["decision"] for line in lines}


def test_recluster_re_analyses_the_kept_pages_with_another_area(crawls, capsys, tmp_path):
    store = str(crawls["main"])
    # by default, the store's own area: the crawl's decisions again
    same = _recluster(capsys, tmp_path, "--store", store)
    assert [same[f"op{k}.html"] for k in range(THIN)] == ["kept"] * THIN
    # the whole page: the thin pages are near duplicates of the first, without re-crawling
    whole = _recluster(capsys, tmp_path, "--store", store, "--content-area", "all")
    assert [whole[f"op{k}.html"] for k in range(THIN)] == ["kept"] + ["near_duplicate"] * 7
    # selectors: only the <h1> titles ("Operand opK") are the content; every title differs
    titles = _recluster(capsys, tmp_path, "--store", store, "--include", "main h1")
    assert [titles[f"op{k}.html"] for k in range(THIN)] == ["kept"] * THIN
    assert titles["article.html"] == "kept"
    # the whole page less the template's elements, by selectors: as good as main here
    template = ["--exclude", "nav", "--exclude", ".sidebar", "--exclude", "footer"]
    bare = _recluster(capsys, tmp_path, "--store", store, "--content-area", "all", *template)
    assert [bare[f"op{k}.html"] for k in range(THIN)] == ["kept"] * THIN
    # leaving out only the navigation is not enough: sidebar and footer are 1,200 words
    nav_only = _recluster(capsys, tmp_path, "--store", store, "--content-area", "all",
                          "--exclude", "nav")  # fmt: skip
    assert [nav_only[f"op{k}.html"] for k in range(1, THIN)] == ["near_duplicate"] * 7
    with Store.open(store, readonly=True) as opened:  # the store itself is untouched
        assert opened.manifest.canonical.content_area == "main"


def test_a_bad_selector_is_one_line(crawls, capsys):
    assert main(["recluster", "--store", str(crawls["main"]), "--exclude", "div[", "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "neardup recluster: error: canonical.exclude: not a CSS selector both engines "
        "read: 'div['"
    ]


def test_diff_with_another_area_is_refused_in_one_line(crawls, capsys):
    # --diff compares with the dropped pages' kept text, which is of the store's own area
    argv = ["recluster", "--store", str(crawls["main"]), "--diff", "--content-area", "all", "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("neardup recluster: error: --diff compares with")
    # the store's own area, named or not, is fine, and its pages are read in it, as the crawl
    # read them: the crawl's own parameters change no decision
    assert main([*argv[:4], "--content-area", "main", "-q", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compared"] > 0 and report["changed"] == 0
