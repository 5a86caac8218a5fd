"""Which page a user means: the full URL, the path ``neardup log`` printed, or a part of a URL.

``neardup log`` says the scheme and host once above its table when every row shares them
("URLs on http://host") and prints each URL as the rest: :func:`printed` is that cell. A user
copies a cell, or types a piece of a URL they remember, and hands it to a command that takes a
URL; :func:`resolve` turns it into the one URL the store holds, in this order:

1. **the full URL**, exactly as crawled: one hash lookup (:meth:`storage.store.Store.find_url`);
2. **the path as log prints it** (it begins with ``/``): the URL whose part after its scheme and
   host is exactly that. On a store of one host that is the host's page; on a store of several
   hosts it is found when only one host has that path, and listed as ambiguous when several do
   (log prints a path only when the rows it shows share one host, but a filtered table can show
   one host of many);
3. **a cell log cut in the middle** (``/archive/mos…falls.html``): the URLs whose cell begins
   and ends as the pieces around the ``…`` do;
4. **a part of a URL**: the URLs that contain it, case-blind, as ``log --url-contains`` matches.

Text that matches nothing as typed is tried once more as the crawl writes URLs
(:func:`crawler.review.url_forms.as_crawled`): ``café.html`` or ``a b.html`` find
``caf%C3%A9.html`` and ``a%20b.html``.

Given the stores of a distributed crawl's nodes (a URL belongs to one node), each step looks in
every store, and the answer names the store that holds the page.

Steps 2 to 4 read every URL of the store once (:meth:`~storage.store.Store.urls`: a million
URLs is a fraction of a second), and only when the exact lookup failed. One match is the
answer; several raise :class:`AmbiguousURL`, whose message lists the first few; none raises
:class:`~crawler.review.explain.UnknownURL`, whose message suggests the closest URLs when the
store is small enough to compare them all.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from crawler.review.explain import UnknownURL
from crawler.review.url_forms import ELLIPSIS, as_crawled
from storage.store import Store

__all__ = [
    "AmbiguousURL",
    "Resolved",
    "UnknownURL",
    "common_origin",
    "origin",
    "printed",
    "resolve",
]

#: matches named in an ambiguity's message
SHOWN = 10
#: matches kept while scanning (enough to name them and to tell one from several)
_KEPT = 1000
#: the most URLs compared with an unknown one for suggestions (difflib is quadratic per pair)
_SUGGEST_AMONG = 20_000


class AmbiguousURL(UnknownURL):
    """Several URLs of the store match; ``matches`` are the first of them, ``count`` says how
    many there are (URLs decided twice are counted twice past the first thousand)."""

    def __init__(self, message: str, matches: tuple[str, ...], count: int) -> None:
        super().__init__(message)
        self.matches = matches
        self.count = count


@dataclass(frozen=True)
class Resolved:
    """The URL a user meant, the document the store holds for it, and how it was found:
    ``url`` (exactly), ``path`` (as log prints it), ``cut`` (a cell log cut with …), ``start``
    (the start of a path) or ``part`` (a part of the URL); and the store that holds it."""

    url: str
    doc_id: int
    how: str
    store: Store | None = field(default=None, compare=False, repr=False)


def origin(url: str) -> str | None:
    """``scheme://host[:port]`` of a URL, or None for something that is not one.

    >>> origin("http://127.0.0.1:8000/a/b.html?x=1"), origin("doc-17")
    ('http://127.0.0.1:8000', None)
    """
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def common_origin(urls: Iterable[str]) -> str | None:
    """The origin every one of ``urls`` shares, or None (none, or more than one).

    >>> common_origin(["http://a.test/x", "http://a.test/"])
    'http://a.test'
    >>> common_origin(["http://a.test/", "http://b.test/"]) is None
    True
    """
    origins = {origin(url) for url in urls}
    return origins.pop() if len(origins) == 1 else None


def printed(url: str, host: str | None = None) -> str:
    """The URL as ``neardup log`` prints it under "URLs on ``host``": the rest after the host,
    ``/`` for the host itself; whole when it is on another host, or when ``host`` is None.

    ``printed(url, origin(url))`` is the path a user copies from log's table.

    >>> printed("http://a.test/x?y=1", "http://a.test"), printed("http://a.test", "http://a.test")
    ('/x?y=1', '/')
    >>> printed("http://b.test/x", "http://a.test")
    'http://b.test/x'
    """
    if host and url.startswith(host) and url[len(host) : len(host) + 1] in ("", "/", "?", "#"):
        return url[len(host) :] or "/"
    return url


def resolve(stores: Store | Sequence[Store], text: str) -> Resolved:
    """The one URL of ``stores`` (a store, or the stores of one crawl's nodes) that ``text``
    names (see the module's docstring for how).

    Raises :class:`AmbiguousURL` when several URLs match and
    :class:`~crawler.review.explain.UnknownURL` when none does; both messages are one line.
    """
    listed = [stores] if isinstance(stores, Store) else list(stores)
    if not text.strip():
        raise UnknownURL("give a URL, the path neardup log prints, or a part of a URL")
    written = as_crawled(text)
    try:
        return _resolve(listed, text)
    except AmbiguousURL:
        raise
    except UnknownURL:
        if written == text:
            raise
    return _resolve(listed, written)  # café.html, a b.html: as the crawl wrote them


def _resolve(listed: Sequence[Store], text: str) -> Resolved:
    """:func:`resolve` for ``text`` as given."""
    for store in listed:
        doc_id = store.find_url(text)
        if doc_id is not None:
            return Resolved(text, doc_id, "url", store)
    scan = _Scan(text)
    for number, store in enumerate(listed):
        for _, url in store.urls():
            scan.add(url, number)
    for how in ("path", "cut", "start", "part"):
        found: _Matches = getattr(scan, how)
        if found.count == 1:
            url, number = next(iter(found.urls.items()))
            doc_id = listed[number].find_url(url)
            if doc_id is not None:  # None only if the URL vanished since (it never does)
                return Resolved(url, doc_id, how, listed[number])
        if found.count > 1:
            raise _ambiguous(text, how, tuple(found.urls), found.count, listed)
    raise UnknownURL(_unknown(text, scan, listed))


def _where(stores: Sequence[Store]) -> str:
    """``store DIR``, or ``stores DIR, DIR`` for several."""
    if len(stores) == 1:
        return f"store {stores[0].path}"
    return "stores " + ", ".join(str(s.path) for s in stores)


def _store_flags(stores: Sequence[Store]) -> str:
    return " ".join(f"--store {s.path}" for s in stores)


class _Matches:
    """The URLs that match in one way: how many, and the first thousand of them."""

    def __init__(self) -> None:
        self.count = 0
        #: URL → the number of the store that holds it, in store order
        self.urls: dict[str, int] = {}

    def add(self, url: str, store: int = 0) -> None:
        if url not in self.urls:  # a URL decided twice counts once (among the first thousand)
            self.count += 1
            if len(self.urls) < _KEPT:
                self.urls[url] = store


class _Scan:
    """What one pass over the store's URLs finds for ``text``, in each way it can match."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.is_path = text.startswith("/")
        self.folded = text.casefold()
        self.pieces = text.split(ELLIPSIS) if ELLIPSIS in text else None
        self.path, self.cut, self.start, self.part = _Matches(), _Matches(), _Matches(), _Matches()
        #: every URL while the store is small enough to suggest from; None past that
        self.seen: dict[str, None] | None = {}

    def add(self, url: str, store: int = 0) -> None:
        text = self.text
        # each test begins with a cheap string test, so most URLs are never split
        if text == "/":  # every path begins so; the host's own page is http://a.test(/)
            if "://" in url:
                self.start.add(url, store)
                slashes = url.count("/")
                if slashes == 2 or (slashes == 3 and url.endswith("/")):
                    self.path.add(url, store)
        elif self.is_path and text in url:
            cell = printed(url, origin(url))
            if cell == text:
                self.path.add(url, store)
            if cell.startswith(text):
                self.start.add(url, store)
        if self.pieces is not None and url.endswith(self.pieces[-1]):
            if _fits(printed(url, origin(url)) if self.is_path else url, self.pieces):
                self.cut.add(url, store)
        if self.folded in url.casefold():
            self.part.add(url, store)
        if self.seen is not None:
            self.seen[url] = None
            if len(self.seen) > _SUGGEST_AMONG:
                self.seen = None


def _fits(cell: str, pieces: list[str]) -> bool:
    """Whether ``cell`` begins with the first piece, ends with the last, and holds the others
    in order between them: what log's middle cut of ``cell`` could have left.

    >>> _fits("/archive/mossop-beck-waterfalls.html", ["/archive/mos", "falls.html"])
    True
    >>> _fits("/archive/other.html", ["/archive/mos", ".html"])
    False
    """
    first, last = pieces[0], pieces[-1]
    if len(cell) < len(first) + len(last) or not (cell.startswith(first) and cell.endswith(last)):
        return False
    at, end = len(first), len(cell) - len(last)
    for piece in pieces[1:-1]:
        at = cell.find(piece, at, end)
        if at < 0:
            return False
        at += len(piece)
    return True


def _listed(urls: tuple[str, ...], count: int) -> str:
    shown = ", ".join(urls[:SHOWN])
    return shown + (f" and {count - SHOWN:,} more" if count > SHOWN else "")


def _ambiguous(
    text: str, how: str, urls: tuple[str, ...], count: int, stores: Sequence[Store]
) -> AmbiguousURL:
    what = {
        "path": f"the path {text} is on {count:,} hosts",
        "cut": f"{text} fits {count:,} URLs",
        "start": f"{count:,} paths begin with {text}",
        "part": f"{text!r} is part of {count:,} URLs",
    }[how]
    return AmbiguousURL(
        f"{what} in {_where(stores)}: {_listed(urls, count)}; give the whole URL, or more of it",
        urls,
        count,
    )


def _unknown(text: str, scan: _Scan, stores: Sequence[Store]) -> str:
    message = f"no page in {_where(stores)} matches {text!r}"
    if scan.seen:
        # a path (or a URL on a host the store lacks) is compared with the paths
        host = origin(text)
        by_path = scan.is_path or host is not None
        forms = {(printed(url, origin(url)) if by_path else url): url for url in scan.seen}
        wanted = printed(text, host) if host else text
        close = difflib.get_close_matches(wanted, list(forms), n=3, cutoff=0.6)
        if close:
            return f"{message}; did you mean: {', '.join(forms[c] for c in close)}"
    if not scan.seen and scan.seen is not None:
        return f"{message}: the store holds no pages yet" if len(stores) == 1 else (
            f"{message}: the stores hold no pages yet"
        )
    return (
        f"{message} (as a URL, a path, or a part of a URL); "
        f"list its pages with: neardup log {_store_flags(stores)}"
    )
