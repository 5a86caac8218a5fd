"""Content areas: ``all`` (the default, unchanged), ``main``, ``include`` and ``exclude``, through
both canonicaliser engines, which must give the same tokens (their selector engines, lexbor's
and soupsieve, must match the same elements of the same HTML5 tree)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser, LexborNode

from dedup import html_text
from dedup.canonical import UNITS, document_tokens, html_text as visible_text, html_tokens
from dedup.content_area import (
    MAIN_BOILERPLATE, MAIN_CANDIDATES, STANDARDS_MODE, context, resolve, selector_error,
)
from dedup.html_text import BLOCK_TAGS, PRE_TAGS, REMOVED_TAGS, DocumentTooDeep
from dedup.lexbor_text import LexborText
from dedup.params import ContentArea
from tests.conftest import html_corpus_or_skip
from tests.dedup.test_canonical import ENGINES, soup_text

PAGE = (
    "<!DOCTYPE html><html><head><title>Site</title></head><body>"
    "<header>Banner words</header><nav><a href='/'>Home</a> <a href='/b'>Blog</a></nav>"
    "<main><h1>The title</h1><p>First <b>para</b>graph.</p><aside>Related reading</aside>"
    "<div class='ad'>Buy now</div><pre>line one\nline two</pre></main>"
    "<div id='sidebar'>Side bar</div><footer>Copyright</footer></body></html>"
)


def both(html: str | bytes, unit: str = "word", **area: object) -> list[str]:
    """The tokens of ``html`` in ``ContentArea(**area)``, the same from both engines."""
    chosen = ContentArea(**area)  # type: ignore[arg-type]
    fast, reference = (html_tokens(html, unit, engine, area=chosen) for engine in ENGINES)
    assert fast == reference, unit
    return fast


def test_the_default_is_the_whole_page_as_before() -> None:
    whole = html_tokens(PAGE)
    assert both(PAGE) == whole
    assert document_tokens(PAGE.encode(), area=ContentArea()).tokens() == whole
    assert whole[:4] == ["site", "banner", "words", "home"]


def test_main_leaves_out_the_template() -> None:
    assert both(PAGE, content_area="main") == [
        "the", "title", "first", "paragraph", "buy", "now", "line", "one", "line", "two"
    ]  # fmt: skip
    assert both(PAGE, "line", content_area="main") == [
        "the title", "first paragraph", "buy now", "line one", "line two"
    ]


def test_main_falls_back_in_order() -> None:
    # no <main>: role=main; then <article>s (each of them); then <body> less its boilerplate
    html = "<nav>n</nav><div role=main>m</div><article>a</article>"
    assert both(html, content_area="main") == ["m"]
    assert both("<nav>n</nav><article>a</article><p>x</p><article>b</article>",
                content_area="main") == ["a", "b"]  # fmt: skip
    assert both("<body><header>h</header><nav>n</nav><p>text</p><div class='footer'>f</div>",
                content_area="main") == ["text"]  # fmt: skip
    # a <header> inside the content is the content's (its title), not the site's banner
    assert both("<main><header>Title</header>x</main>", content_area="main") == ["title", "x"]


@pytest.mark.parametrize("layout", [
    "<body class='no-sidebar'>{}</body>",  # Apache httpd's manual
    "<body class='home page has-sidebar right-sidebar'>{}</body>",  # WordPress themes
    "<body><div id='page' class='site has-sidebar'><main>{}</main></div></body>",
])  # fmt: skip
def test_main_never_leaves_out_the_page_that_a_layout_names_for_its_sidebar(layout) -> None:
    """A class that says the layout has (or has no) sidebar is on the body or a wrapper of the
    content, not on a sidebar: ``main`` leaves out the boilerplate inside, never what holds
    the content."""
    content = "<nav>n</nav><p>The page's own words.</p><div class='sidebar'>s</div>"
    assert both(layout.format(content), content_area="main") == ["the", "page", "s", "own",
                                                                 "words"]  # fmt: skip


def test_main_reads_a_real_page_of_apache_s_manual() -> None:
    """Apache's manual marks each page's body ``no-sidebar``: ``main`` once read nothing of
    its pages, and a crawl skipped them as empty."""
    pages = html_corpus_or_skip(1, packages=("apache2-doc",))
    page = next(p for p in pages if p.parts[-2:] == ("en", "license.html"))
    words = both(page.read_bytes(), content_area="main")
    assert "apache license" in " ".join(words) and len(words) > 1000, len(words)


def test_include_and_exclude() -> None:
    assert both(PAGE, include=["h1", "pre"]) == ["the", "title", "line", "one", "line", "two"]
    assert both(PAGE, exclude=["nav", "footer", "#sidebar", ".ad", "head"]) == [
        "banner", "words", "the", "title", "first", "paragraph", "related", "reading", "line",
        "one", "line", "two",
    ]  # fmt: skip
    # include replaces main's choice of the content; main's boilerplate still goes
    assert both(PAGE, content_area="main", include=["main", "#sidebar"]) == [
        "the", "title", "first", "paragraph", "buy", "now", "line", "one", "line", "two"
    ]  # fmt: skip
    assert both(PAGE, content_area="main", exclude=[".ad", "pre"]) == [
        "the", "title", "first", "paragraph"
    ]


def test_roots_are_blocks_in_document_order_and_counted_once() -> None:
    html = "<p>x<span class=k>ab</span><span class=k>cd</span><b class=k>e<i class=k>f</i></b></p>"
    # each root is a block of its own: inline roots side by side do not join their words;
    # a root inside another is read once, with it
    assert both(html, include=[".k"]) == ["ab", "cd", "ef"]
    assert both(html, include=["i", "p"]) == ["xabcdef"]
    # a root that is left out, or inside what is left out, gives nothing
    assert both(html, include=[".k"], exclude=["b"]) == ["ab", "cd"]
    assert both(html, include=["i"], exclude=["b"]) == []
    assert both(html, include=["section"]) == []  # nothing matches: no content at all


def test_a_root_inside_pre_keeps_its_lines() -> None:
    html = "<pre>one\n<code>two\nthree</code>\nfour</pre>"
    assert both(html, "line", include=["code"]) == ["two", "three"]
    assert visible_text(html, area=ContentArea(include=["code"])) == "two\nthree"


def test_selectors_match_as_in_standards_mode_in_both_engines() -> None:
    # without a doctype a page is in quirks mode, where lexbor matches class and id names
    # case-insensitively and soupsieve does not; an area reads every page in standards mode
    quirky = "<div class=Note id=Top>kept</div><p>x</p>"
    assert both(quirky, exclude=[".note", "#top"]) == ["kept", "x"]
    assert both(quirky, exclude=[".Note"]) == ["x"]
    # HTML attribute names are case-insensitive, in both
    assert both(quirky, exclude=["[CLASS=Note]"]) == ["x"]
    # the one tree difference: in standards mode a <table> closes an open <p>, so "c" (after
    # the table) is no longer in the paragraph; the whole page's tokens are the same either way
    html = "<p>a<table><tr><td>b</td></tr></table>c"
    assert both(html, include=["p"]) == ["a"]
    assert both(html, exclude=["template"]) == html_tokens(html) == ["a", "b", "c"]


def test_too_deep_is_too_deep_in_any_area() -> None:
    deep = "<div>" * (html_text.MAX_DEPTH + 1) + "x"
    for engine in ENGINES:
        with pytest.raises(DocumentTooDeep):
            html_tokens(deep, engine=engine, area=ContentArea("main"))
        with pytest.raises(DocumentTooDeep):  # even when the deep part is left out
            html_tokens("<p>y</p>" + deep, engine=engine, area=ContentArea(include=["p"]))


def test_text_documents_have_no_elements() -> None:
    text = b"<nav> is no tag in a text document"
    main = ContentArea("main")
    assert document_tokens(text, "text", area=main) == document_tokens(text, "text")


def test_the_built_in_selectors_are_read_by_both_engines() -> None:
    for selector in (*MAIN_CANDIDATES, *MAIN_BOILERPLATE):
        assert selector_error(selector) is None, selector


@pytest.mark.parametrize(
    ("area", "message"),
    [
        ({"content_area": "body"}, "canonical.content_area must be one of all, main; got 'body'"),
        ({"include": "main"}, "canonical.include must be a list of CSS selectors; got 'main'"),
        ({"exclude": ["div["]}, "canonical.exclude: not a CSS selector both engines read: 'div['"),
        ({"exclude": [""]}, "canonical.exclude: not a CSS selector both engines read: ''"),
        ({"include": [3]}, "canonical.include: not a CSS selector both engines read: 3"),
        # soupsieve reads this one, lexbor does not: refused, as the engines could not agree
        ({"include": ["p:contains(x)"]}, "canonical.include: not a CSS selector both engines"),
    ],
)
def test_bad_areas_are_one_line(area: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as err:
        ContentArea(**area)  # type: ignore[arg-type]
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_round_trip_and_describe() -> None:
    area = ContentArea("main", include=["article"], exclude=[".ad", "#comments"])
    assert ContentArea.from_dict(area.to_dict()) == area
    assert area.describe() == "main, include: article, exclude: .ad; #comments"
    with pytest.raises(ValueError, match="unknown canonical parameter 'area'"):
        ContentArea.from_dict({"area": "main"})


# -- the engines agree on generated pages --------------------------------------------------------

SELECTORS = [
    "main", "nav", "p", "div", ".a", ".B", "#x", "#X", "[role=main]", "[class~=a]", "[id*=x]",
    "div > p", "li + li", "ul li", "td:first-child", "p:not(.a)", ":is(h1, h2)", "div:has(p)",
    "li:nth-child(2n+1)", "p:empty", "[lang|=en]", "[class^=a]", "section, aside", "*",
    "table td", "option", "body > *", "pre", "b",
]  # fmt: skip
AREA_TAGS = ["main", "nav", "p", "div", "li", "ul", "section", "aside", "footer", "header",
             "article", "h1", "h2", "table", "tr", "td", "pre", "b", "span", "select", "option",
             "template", "script", "body", "html", "head", "title"]  # fmt: skip
area_attributes = st.sampled_from(
    ["", " class=a", " class='a b'", " class=B", " id=x", " id=X", " role=main", " lang=en-GB",
     " class=footer", " id=sidebar", " hidden"]
)  # fmt: skip
area_piece = st.one_of(
    soup_text,
    st.builds(lambda t, a: f"<{t}{a}>", st.sampled_from(AREA_TAGS), area_attributes),
    st.builds(lambda t: f"</{t}>", st.sampled_from(AREA_TAGS)),
    st.sampled_from(["<!DOCTYPE html>", "<!-- c -->", "\n", " "]),
)
area_soup = st.lists(area_piece, max_size=30).map("".join)
areas = st.builds(
    ContentArea,
    st.sampled_from(["all", "main"]),
    st.lists(st.sampled_from(SELECTORS), max_size=2),
    st.lists(st.sampled_from(SELECTORS), max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(area_soup, areas)
@example("<pre>a\n<b class=a>b\nc</b></pre>", ContentArea(include=[".a"]))
@example("<table><p>moved</p><tr><td>cell</td></tr></table>", ContentArea(include=["p"]))
@example("<div class=B>x</div><p>y", ContentArea(exclude=[".b"]))
@example("<select><div>in</div></select>", ContentArea(include=["div"]))
@example("<main>x</main>", ContentArea(include=["main", "main"]))
@example("<p class=a>x</p>", ContentArea(include=["p", ".a", "*"]))
@example("<table>&#13;<!DOCTYPE html>0", ContentArea())
def test_engines_agree_on_generated_pages(html: str, area: ContentArea) -> None:
    # the visible text, not the marked text: where whitespace-only text in a table goes when a
    # stray doctype follows it differs between the parsers, in the whole page too
    # ("<table>&#13;<!DOCTYPE html>0"), which no token sees
    fast, reference = (visible_text(html, engine, area=area) for engine in ENGINES)
    assert fast == reference
    for unit in UNITS:
        assert html_tokens(html, unit, "fast", area=area) == html_tokens(
            html, unit, "reference", area=area
        ), unit


# -- the C walk of an area is the Python walk's twin ---------------------------------------------

C_WALK = LexborText(BLOCK_TAGS, REMOVED_TAGS, PRE_TAGS)
PYTHON_WALK = LexborText(BLOCK_TAGS, REMOVED_TAGS, PRE_TAGS, use_c=False)


def _starts(nodes: list[LexborNode]) -> list[tuple[LexborNode, int, int]]:
    name = lambda node: node.tag if node.is_element_node else None  # noqa: E731
    return [(node, *context(node, lambda n: n.parent, name, PRE_TAGS)) for node in nodes]


@pytest.mark.skipif(C_WALK.implementation != "C", reason="dedup._lexbor_text is not in use")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(area_soup, areas, st.sampled_from(SELECTORS), st.sampled_from(SELECTORS))
@example("<pre>a\n<b class=a>b\rc</b></pre>", ContentArea(include=[".a"]), "b", "li")
@example("<ul><li>a<li class=a>b</ul>", ContentArea(exclude=[".a"]), "ul", "li + li")
@example("<div><div><b>too deep, if left out</b></div></div>", ContentArea(), "div", "b")
@example("<pre>a<pre>b\nc<b>d\ne</b></pre></pre>", ContentArea(include=["b"]), "pre", "p")
def test_the_c_and_python_walks_of_an_area_agree(
    html: str, area: ContentArea, roots: str, skipped: str
) -> None:
    tree = LexborHTMLParser(STANDARDS_MODE + html_text._prepare(html))
    chosen, skip = resolve(area, tree.css, lambda node: node.mem_id, lambda node: node.parent)
    # the roots resolve() chooses, and any (one inside another, some left out, repeated)
    raw_skip = frozenset(node.mem_id for node in tree.css(skipped))
    walks = [
        (None if chosen is None else _starts(chosen), skip),
        (_starts(tree.css(roots)), raw_skip),
        (None, raw_skip),
    ]
    for starts, left_out in walks:
        for lines in (True, False):
            for max_depth in (html_text.MAX_DEPTH, 4):  # 4: <html><body> and two more
                c_text = C_WALK.tree_text(tree, lines, max_depth, starts, left_out)
                python_text = PYTHON_WALK.tree_text(tree, lines, max_depth, starts, left_out)
                assert c_text == python_text
