"""Which responses the crawl can compare: an HTML page with a 2xx status. The one rule for our
spider's responses and for the items another spider hands the pipelines (:mod:`.page`), so a
404 page or a stylesheet is skipped with its reason whoever fetched it.

It imports nothing of Scrapy: the worker process and the pipelines of any project load it.
"""

from __future__ import annotations

from dedup.canonical import looks_like_html
from dedup.html_text import looks_binary

__all__ = ["HTML_TYPES", "VAGUE_TYPES", "media_type_of", "refused"]

#: media types canonicalised as HTML
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: media types that say nothing about the content: the body is sniffed instead
VAGUE_TYPES = frozenset(
    {"", "application/octet-stream", "binary/octet-stream", "application/unknown",
     "unknown/unknown"}
)  # fmt: skip


def media_type_of(content_type: str) -> str:
    """The media type of a Content-Type value, lower case, without parameters.

    >>> media_type_of("Text/HTML; charset=utf-8")
    'text/html'
    """
    return content_type.split(";", 1)[0].strip().lower()


def refused(status: int, content_type: str, body: bytes) -> tuple[str, str]:
    """("", "") for an HTML page to canonicalise, else (skip reason, detail).

    >>> refused(404, "text/html", b"<p>gone</p>")
    ('http_404', 'HTTP status 404')
    >>> refused(200, "text/css", b"p { color: red }")
    ('not_html', 'Content-Type text/css')
    >>> refused(200, "", b"<html><body><p>a page</p></body></html>")
    ('', '')
    """
    if not 200 <= status < 300:
        return f"http_{status}", f"HTTP status {status}"
    if not body:
        return "empty", "empty body"
    ctype = media_type_of(content_type)
    if ctype not in HTML_TYPES:
        if ctype not in VAGUE_TYPES:
            return "not_html", f"Content-Type {ctype}"
        if looks_binary(body) or not looks_like_html(body[:4096]):
            what = f"Content-Type {ctype}" if ctype else "no Content-Type"
            return "not_html", f"{what} and the body does not look like HTML"
    if looks_binary(body):
        return "binary", f"binary bytes served as {ctype or 'HTML'}"
    return "", ""
