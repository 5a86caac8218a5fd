"""A site that changes between two crawls, with the truth a recrawl of it must find.

Every page is real text (the demo site's articles, :mod:`crawler.demo.build`) and comes with
what the second crawl must say of its URL (:class:`Expect`): its ``change``, its decision, and
where its cluster goes. The first version is crawled, the site moves to its second version,
and the same command crawls again; a third crawl of the unchanged second version must write no
``response`` record and move nothing.

The cases (``v1`` → ``v2``):

* pages that do not change, served with an ETag, with a Last-Modified only, and with no
  validators at all (the body is sent again and its digest is the same);
* a kept page with a small edit, and a kept page replaced by other content;
* a byte-identical mirror of a kept page, and a near copy of one (both unchanged);
* a near copy whose original changes away: the copy is re-decided and kept, and so fetched
  in full although it answered 304;
* a kept page that becomes an exact copy of another kept page, and the near copy it had;
* pages that go 404, one still linked and one no longer linked;
* new pages: a unique one, and a near copy of an old one.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from crawler.demo.build import Article, read_articles
from crawler.demo.server import Route

__all__ = ["Expect", "SitePage", "recrawl_site"]

#: one fixed Last-Modified for the pages that do not change (an HTTP date)
OLD_DATE = "Mon, 02 Nov 2026 09:00:00 GMT"
NEW_DATE = "Tue, 01 Dec 2026 09:00:00 GMT"


@dataclass(frozen=True)
class Expect:
    """What the second crawl must record for one URL."""

    change: str
    decision: str
    #: "same": the cluster of the first crawl; "new": a cluster no page of the first crawl was
    #: in; "of:<path>": the cluster of that page in the second crawl; None: no cluster (skipped)
    cluster: str | None
    #: whether the second crawl's first request of it carried conditional headers (None: it
    #: depends on whether its original was decided before it was requested)
    conditional: bool | None = False
    #: whether the second crawl received its whole body, at least once (None: not checked)
    full_body: bool | None = True
    #: the WARC record the second crawl writes for it: "response", a revisit profile's last
    #: word ("server-not-modified", "identical-payload-digest"), or None
    record: str | None = None


@dataclass(frozen=True)
class SitePage:
    path: str
    v1: Route | None
    v2: Route | None
    #: the first crawl's decision
    first: str
    second: Expect
    #: linked from the index page in each version
    linked: tuple[bool, bool] = (True, True)


def html_page(title: str, paragraphs: tuple[str, ...], extra: str = "") -> str:
    body = "\n".join(f"<p>{html.escape(p, quote=False)}</p>" for p in paragraphs)
    return (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title></head><body><h1>{html.escape(title)}</h1>"
        f"{body}{extra}</body></html>"
    )


def _edited(paragraphs: tuple[str, ...], words: int) -> tuple[str, ...]:
    """The paragraphs with ``words`` words of the first paragraph replaced (a small edit)."""
    first = paragraphs[0].split()
    for i in range(min(words, len(first))):
        first[3 * i % len(first)] = f"altered{i}"
    return (" ".join(first), *paragraphs[1:])


def _route(text: str, *, etag: bool = True, modified: str | None = OLD_DATE) -> Route:
    return Route(body=text, etag="auto" if etag else None, last_modified=modified)


def recrawl_site() -> list[SitePage]:
    """The pages of the site, both versions, each with its truth."""
    a: list[Article] = list(read_articles().values())
    same = html_page(a[0].title, a[0].paragraphs)
    lm_only = html_page(a[1].title, a[1].paragraphs)
    no_validators = html_page(a[2].title, a[2].paragraphs)
    edited_v1 = html_page(a[3].title, a[3].paragraphs)
    edited_v2 = html_page(a[3].title, _edited(a[3].paragraphs, 3))
    replaced_v1 = html_page(a[4].title, a[4].paragraphs)
    replaced_v2 = html_page(a[5].title, a[5].paragraphs)
    original = html_page(a[6].title, a[6].paragraphs)
    near_of_same = html_page(a[0].title, a[0].paragraphs, "<p>Copyright the club, 2026.</p>")
    moving_v1 = html_page(a[7].title, a[7].paragraphs)
    moving_v2 = html_page(a[8].title, a[8].paragraphs)
    follower = html_page(a[7].title, a[7].paragraphs, "<p>Shared from the club's pages.</p>")
    becomes_v1 = html_page(a[9].title, a[9].paragraphs)
    becomes_copy = html_page(a[10].title, a[10].paragraphs)
    near_of_becomes = html_page(a[9].title, a[9].paragraphs, "<p>Printed for members.</p>")
    doomed = html_page(a[11].title, a[11].paragraphs)
    forgotten = html_page(a[12].title, a[12].paragraphs)
    unique_new = html_page(a[13].title, a[13].paragraphs)
    near_new = html_page(a[1].title, a[1].paragraphs, "<p>Reprinted with permission.</p>")

    revisit_304 = "server-not-modified"
    revisit_same = "identical-payload-digest"
    return [
        SitePage("/same.html", _route(same), _route(same), "kept",
                 Expect("unchanged", "kept", "same", True, False, revisit_304)),
        SitePage("/last-modified.html", _route(lm_only, etag=False),
                 _route(lm_only, etag=False), "kept",
                 Expect("unchanged", "kept", "same", True, False, revisit_304)),
        SitePage("/no-validators.html", _route(no_validators, etag=False, modified=None),
                 _route(no_validators, etag=False, modified=None), "kept",
                 Expect("unchanged", "kept", "same", False, True, revisit_same)),
        SitePage("/edited.html", _route(edited_v1), _route(edited_v2, modified=NEW_DATE), "kept",
                 Expect("changed", "kept", "same", True, True, "response")),
        SitePage("/replaced.html", _route(replaced_v1), _route(replaced_v2, modified=NEW_DATE),
                 "kept", Expect("changed", "kept", "same", True, True, "response")),
        SitePage("/original.html", _route(original), _route(original), "kept",
                 Expect("unchanged", "kept", "same", True, False, revisit_304)),
        SitePage("/mirror/original.html", _route(original), _route(original), "exact_duplicate",
                 Expect("unchanged", "exact_duplicate", "of:/original.html", True, False,
                        revisit_same)),
        SitePage("/near-same.html", _route(near_of_same), _route(near_of_same), "near_duplicate",
                 Expect("unchanged", "near_duplicate", "of:/same.html", True, False)),
        SitePage("/moving.html", _route(moving_v1), _route(moving_v2, modified=NEW_DATE), "kept",
                 Expect("changed", "kept", "same", True, True, "response")),
        SitePage("/follower.html", _route(follower), _route(follower), "near_duplicate",
                 Expect("unchanged", "kept", "new", None, True, "response")),
        SitePage("/becomes-copy.html", _route(becomes_v1), _route(becomes_copy, modified=NEW_DATE),
                 "kept", Expect("changed", "exact_duplicate", "of:/copied.html", True, True,
                                revisit_same)),
        SitePage("/copied.html", _route(becomes_copy), _route(becomes_copy), "kept",
                 Expect("unchanged", "kept", "same", True, False, revisit_304)),
        SitePage("/near-becomes.html", _route(near_of_becomes), _route(near_of_becomes),
                 "near_duplicate", Expect("unchanged", "kept", "same", None, True, "response")),
        SitePage("/doomed.html", _route(doomed), None, "kept",
                 Expect("gone", "skipped", None, True, None)),
        SitePage("/forgotten.html", _route(forgotten), None, "kept",
                 Expect("gone", "skipped", None, True, None), linked=(True, False)),
        SitePage("/unique-new.html", None, _route(unique_new), "absent",
                 Expect("new", "kept", "new", False, True, "response"), linked=(False, True)),
        SitePage("/near-new.html", None, _route(near_new), "absent",
                 Expect("new", "near_duplicate", "of:/last-modified.html", False, True),
                 linked=(False, True)),
    ]


def routes(pages: list[SitePage], version: int) -> dict[str, Route]:
    """The route table of ``version`` (1 or 2): every page of it and an index linking those
    that version links."""
    table: dict[str, Route] = {}
    links = []
    for page in pages:
        route = page.v1 if version == 1 else page.v2
        if route is not None:
            table[page.path] = route
        if page.linked[version - 1]:
            links.append(f'<li><a href="{page.path}">{page.path}</a></li>')
    index = html_page("Index", ("The pages of this site.",), "<ul>" + "".join(links) + "</ul>")
    table["/"] = Route(body=index)  # no validators: the index is read in full every time
    return table
