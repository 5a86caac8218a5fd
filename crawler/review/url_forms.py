"""A URL as people read and type it, and as the crawl writes it.

The crawl keeps URLs canonical (w3lib's ``canonicalize_url``): letters beyond ASCII and spaces
percent-encoded, ``/caf%C3%A9.html``. People read and type ``/café.html``. :func:`readable` is
what the review commands show; :func:`as_crawled` turns what a person typed back into what the
store holds, for :mod:`crawler.review.urls` and ``neardup log --url-contains``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from w3lib.url import canonicalize_url, safe_url_string

__all__ = ["ELLIPSIS", "as_crawled", "readable"]

#: what ``neardup log`` puts where it cut a URL in the middle (see ``truncate_middle``)
ELLIPSIS = "…"


def readable(text: str) -> str:
    """``text`` (a URL, or a part of one) as a browser shows it: the letters beyond ASCII that
    a URL percent-encodes, decoded; every other escape stays (``%20``, ``%2F``: decoded, they
    would read as another URL). :func:`as_crawled` takes the result back.

    >>> readable("/uni/caf%C3%A9.html"), readable("/a%20b%2Fc"), readable("/bad%C3%28")
    ('/uni/café.html', '/a%20b%2Fc', '/bad%C3%28')
    """
    return _ESCAPED_BEYOND_ASCII.sub(_decoded, text)


#: a run of percent-escaped bytes of 0x80 and above: UTF-8 for letters beyond ASCII
_ESCAPED_BEYOND_ASCII = re.compile(r"(?:%[89A-Fa-f][0-9A-Fa-f])+")


def _decoded(escaped: re.Match[str]) -> str:
    try:
        text = bytes.fromhex(escaped.group().replace("%", "")).decode("utf-8")
    except UnicodeDecodeError:
        return escaped.group()
    return text if text.isprintable() else escaped.group()


def as_crawled(text: str) -> str:
    """``text`` as the crawl writes URLs: a whole URL canonical (as the spider makes it,
    w3lib's ``canonicalize_url``), a part of one with what a URL cannot hold (letters beyond
    ASCII, spaces) percent-encoded; log's ``…`` stays.

    >>> as_crawled("café"), as_crawled("/uni/a b.html"), as_crawled("/日本…語.html")
    ('caf%C3%A9', '/uni/a%20b.html', '/%E6%97%A5%E6%9C%AC…%E8%AA%9E.html')
    >>> as_crawled("http://a.test/é?b=2&a=1"), as_crawled("/caf%C3%A9.html")
    ('http://a.test/%C3%A9?a=1&b=2', '/caf%C3%A9.html')
    """
    try:
        parts = urlsplit(text)
        if parts.scheme and parts.netloc:
            return canonicalize_url(text)
    except ValueError:  # not a URL that can be read: matched as typed
        return text
    return ELLIPSIS.join(safe_url_string(piece) for piece in text.split(ELLIPSIS))
