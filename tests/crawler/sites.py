"""Test sites: route tables for :func:`crawler.demo.server.serve`, each page with what a crawl of it
must produce (a skip reason, or tokens containing some words).

The bad-input site is everything a crawler meets on the open web and must survive: malformed and
absurdly deep HTML, binary bytes labelled ``text/html``, empty bodies, bodies over the size
limit (with and without a Content-Length), a gzip bomb, wrong and missing charsets, redirect
loops, error statuses and a server that never answers.
"""

from __future__ import annotations

import functools
import gzip
import random
from dataclasses import dataclass

from crawler.demo.server import Route

#: the crawl settings the expectations below assume
BAD_SITE_SETTINGS = {
    "DOWNLOAD_MAXSIZE": 1_500_000,
    "DOWNLOAD_WARNSIZE": 1_000_000,
    "DOWNLOAD_TIMEOUT": 2.0,
    "REDIRECT_MAX_TIMES": 3,
}
_LIMIT = BAD_SITE_SETTINGS["DOWNLOAD_MAXSIZE"]

HTML = (("Content-Type", "text/html; charset=utf-8"),)
PLAIN_HTML = (("Content-Type", "text/html"),)


@dataclass(frozen=True)
class Case:
    """One page of a test site and what its item must be."""

    path: str
    route: Route
    #: the item's skip_reason, or None for a page with tokens
    reason: str | None = None
    #: words that must be among the tokens (reason None)
    words: tuple[str, ...] = ()
    #: the URL path of the item, when it is not ``path`` (a redirect that is followed)
    item_path: str | None = None
    #: linked from the index page (redirect targets are not: the redirect must find them)
    linked: bool = True


def _page(text: str) -> str:
    return f"<!DOCTYPE html><html><head><title>t</title></head><body><p>{text}</p></body></html>"


def _deep(depth: int) -> str:
    return "<html><body>" + "<div>" * depth + "deep down here" + "</div>" * depth + "</body></html>"


def _binary() -> bytes:
    data = bytearray(random.Random(7).randbytes(6000))
    data[100] = 0  # certainly a NUL, as in any image or archive
    return bytes(data)


def _controls() -> bytes:
    # no NUL, but text no reader could want: control bytes throughout
    return b"<html>" + bytes(random.Random(3).choice(range(1, 9)) for _ in range(3000)) + b"</html>"


@functools.lru_cache(maxsize=1)
def _bomb() -> bytes:
    # 40 MB of markup compressed to about 40 KB: within the download limit, far over it inflated
    return gzip.compress(b"<p>" + b"ha " * 13_000_000 + b"</p>", compresslevel=9)


def bad_cases() -> list[Case]:
    big = _page("big " * (_LIMIT // 4 + 1000))
    latin1 = _page("Caf\xe9 cr\xe8me br\xfbl\xe9e").encode("latin-1")
    return [
        Case("/malformed.html",
             Route(headers=HTML,
                   body="<html><body><p>Unclosed <b>bold <i>italic <div>nested</p></b> text "
                        "& more <<>> </table></td><p>tail <a href='/missing.html'>words</a>"),
             words=("unclosed", "bold", "italic", "nested", "tail")),
        Case("/deep.html", Route(headers=HTML, body=_deep(3_000)), words=("deep", "down")),
        Case("/too-deep.html", Route(headers=HTML, body=_deep(100_000)), reason="too_deep"),
        Case("/binary.html", Route(headers=HTML, body=_binary()), reason="binary"),
        Case("/controls.html", Route(headers=HTML, body=_controls()), reason="binary"),
        Case("/empty.html", Route(headers=HTML, body=b""), reason="empty"),
        Case("/blank.html", Route(headers=HTML, body="<html><body> \n <!-- x --> </body></html>"),
             reason="empty"),
        Case("/too-large.html", Route(headers=HTML, body=big), reason="too_large"),
        Case("/too-large-unknown-length.html", Route(headers=HTML, body=big, send_length=False),
             reason="too_large"),
        Case("/bomb.html",
             Route(headers=(*HTML, ("Content-Encoding", "gzip")), body=_bomb()),
             reason="decompression_bomb"),
        Case("/gzipped.html",
             Route(headers=(*HTML, ("Content-Encoding", "gzip")),
                   body=gzip.compress(_page("squeezed but fine").encode())),
             words=("squeezed", "fine")),
        Case("/latin1-no-charset.html", Route(headers=PLAIN_HTML, body=latin1),
             words=("café", "crème", "brûlée")),
        Case("/wrong-charset.html",
             Route(headers=HTML, body=_page("Menu du jour: caf\xe9 au lait").encode("latin-1")),
             words=("menu", "jour", "au", "lait")),
        Case("/unknown-charset.html",
             Route(headers=(("Content-Type", "text/html; charset=x-no-such-charset"),),
                   body=_page("déjà vu").encode("utf-8")),
             words=("déjà", "vu")),
        Case("/utf16.html", Route(headers=PLAIN_HTML, body=_page("sixteen bits").encode("utf-16")),
             words=("sixteen", "bits")),
        Case("/no-content-type", Route(headers=(), body=_page("sniffed as markup")),
             words=("sniffed", "markup")),
        Case("/no-content-type.txt", Route(headers=(), body="just a line of plain text"),
             reason="not_html"),
        Case("/page.xhtml", Route(headers=(("Content-Type", "application/xhtml+xml"),),
                                  body=_page("extensible markup")), words=("extensible",)),
        Case("/data.json", Route(headers=(("Content-Type", "application/json"),), body="{}"),
             reason="not_html"),
        Case("/picture.png", Route(headers=(("Content-Type", "image/png"),),
                                   body=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
             reason="not_html"),
        Case("/missing.html", Route(status=404, headers=HTML, body=_page("not here")),
             reason="http_404"),
        Case("/broken.html", Route(status=500, headers=HTML, body=_page("oops")),
             reason="http_500"),
        Case("/stall.html", Route(stall=True), reason="timeout"),
        Case("/slow.html", Route(headers=HTML, body=_page("patience pays"), delay=0.3),
             words=("patience",)),
        Case("/self-loop", Route(redirect="/self-loop"), reason="redirect_loop"),
        Case("/loop-a", Route(redirect="/loop-b"), reason="redirect_loop"),
        Case("/loop-b", Route(redirect="/loop-a"), linked=False),
        Case("/chain-1", Route(redirect="/chain-2", status=301), reason="too_many_redirects"),
        Case("/chain-2", Route(redirect="/chain-3", status=307), linked=False),
        Case("/chain-3", Route(redirect="/chain-4", status=308), linked=False),
        Case("/chain-4", Route(redirect="/chain-5", status=303), linked=False),
        Case("/chain-5", Route(headers=HTML, body=_page("end of the chain")), linked=False),
        Case("/moved", Route(redirect="/moved-here.html", status=301), item_path="/moved-here.html",
             words=("arrived",)),
        Case("/moved-here.html", Route(headers=HTML, body=_page("arrived safely")), linked=False),
        Case("/offsite-redirect", Route(redirect="http://127.0.0.1:9/elsewhere"),
             reason="redirect"),
        Case("/private/secret.html", Route(headers=HTML, body=_page("secret")),
             reason="robots_txt"),
    ]  # fmt: skip


def bad_routes() -> dict[str, Route | str]:
    """The bad-input site's route table: the cases, an index linking them, and robots.txt."""
    cases = bad_cases()
    links = "".join(f'<li><a href="{c.path}">{c.path}</a></li>' for c in cases if c.linked)
    # the same host on another port is another site: never followed
    links += '<li><a href="http://127.0.0.1:9/other-port.html">elsewhere</a></li>'
    # longer than URLLENGTH_LIMIT: refused by the spider (Scrapy would drop it without a word)
    links += f'<li><a href="/long?{"x" * 2100}">long</a></li>'
    index = _page(f"index of bad input</p><ul>{links}</ul><p>end")
    routes: dict[str, Route | str] = {c.path: c.route for c in cases}
    routes["/"] = Route(headers=HTML, body=index)
    routes["/robots.txt"] = Route(
        headers=(("Content-Type", "text/plain"),), body="User-agent: *\nDisallow: /private/\n"
    )
    return routes


def expected_items(cases: list[Case]) -> dict[str, Case]:
    """URL path of each item the crawl must yield -> its case (the index included)."""
    out = {"/": Case("/", Route(), words=("index", "bad", "input"))}
    for case in cases:
        if case.linked:
            out[case.item_path or case.path] = case
    return out
