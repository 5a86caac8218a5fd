"""A page as the crawl's dedup work needs it: plain data, whatever the item's class.

The stages accept our spider's :class:`~crawler.items.PageItem` or any item with a ``url`` and a
token stream, a body, HTML or text (:mod:`crawler.pipelines`). They read each item once into a
:class:`PageView`, which is what crosses the pipe to the worker process
(:mod:`crawler.work.process`): a flat tuple, the tokens in their joined form (one object to
pickle instead of hundreds). The worker process imports this module to read pages back, so it
imports nothing of Scrapy (``itemadapter`` loads Scrapy: it is imported only to read an item of
another class).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crawler.items import PageItem
from crawler.work.refusal import refused
from dedup.params import ContentArea
from dedup.units import JoinedTokens

__all__ = ["PageView", "empty_detail"]


@dataclass
class PageView:
    """What the stages read from an item, whatever its class (plain data: it is pickled to the
    worker)."""

    url: str
    #: None when the item carries no token stream (the dedup stage canonicalises then); joined,
    #: the form the sketch reads, unless a token holds the joining NUL (another spider's item)
    tokens: Sequence[str] | JoinedTokens | None
    skip_reason: str | None
    skip_detail: str | None
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    #: "html" or "text": how to canonicalise ``body`` when there are no tokens
    kind: str
    fetched_at: float | None
    canonicalise_seconds: float
    #: the run of the link path that led to the page (crawler.work.links), None for none
    run: tuple[int, int] | None = None
    #: how many links the page has that the crawl may follow (its maker decides which)
    links: int = 0
    #: False when the skip reason was found here (:func:`_refusal`), not by the item's maker,
    #: which counts ``neardup/skipped/<reason>`` for its own
    skip_counted: bool = True
    #: its link depth from the start URLs (None: the item's maker did not say)
    depth: int | None = None

    def to_wire(self) -> tuple[Any, ...]:
        """The page as a flat tuple for the worker's pipe.

        >>> page = PageView("http://a.test/", _joined(["a", "rose"]), None, None, 200, [], b"",
        ...                 "html", None, 0.0)
        >>> PageView.from_wire(page.to_wire()).tokens
        JoinedTokens(data=b'a\\x00rose', count=2)
        """
        return (self.url, self.tokens, self.skip_reason, self.skip_detail, self.status,
                self.headers, self.body, self.kind, self.fetched_at,
                self.canonicalise_seconds, self.run, self.links, self.skip_counted,
                self.depth)  # fmt: skip

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...]) -> PageView:
        """The page back from :meth:`to_wire`."""
        return cls(*wire)

    @classmethod
    def of(cls, item: Any) -> PageView:
        if type(item) is PageItem:  # our spider's item: plain attributes, no adapter needed
            return cls(
                url=item.url,
                tokens=item.tokens,
                skip_reason=item.skip_reason or None,
                skip_detail=item.skip_detail or None,
                # 0: no response (the spider's failed request), not an HTTP status to default
                status=item.status or (0 if item.skip_reason else 200),
                headers=_header_pairs(item.headers),
                body=item.body,
                kind="html",
                fetched_at=item.fetched_at or None,
                canonicalise_seconds=item.canonicalise_seconds,
                run=item.run,
                links=len(item.links),
                depth=item.depth,
            )
        from itemadapter import ItemAdapter  # it loads Scrapy, which the worker does without

        a = ItemAdapter(item)
        body: Any = a.get("body")
        kind = "html"
        if body is None and a.get("html") is not None:
            body = a.get("html")
        if body is None and a.get("text") is not None:
            body, kind = a.get("text"), "text"
        if isinstance(body, str):
            body = body.encode("utf-8")
        body = bytes(body or b"")
        tokens = a.get("tokens")
        headers = _header_pairs(a.get("headers"))
        status = _status(a.get("status"))
        reason, detail = a.get("skip_reason") or None, a.get("skip_detail") or None
        found_here = reason is None
        if found_here:
            reason, detail = _refusal(a.get("status"), status, headers, body, kind, tokens)
        return cls(
            url=str(a.get("url") or ""),
            tokens=None if tokens is None or isinstance(tokens, str) else _joined(tokens),
            skip_reason=reason,
            skip_detail=detail,
            status=200 if status is None else status,
            headers=headers,
            body=body,
            kind=kind,
            fetched_at=a.get("fetched_at") or None,
            canonicalise_seconds=float(a.get("canonicalise_seconds") or 0.0),
            skip_counted=not found_here,
        )

    def content_type(self) -> str:
        """The Content-Type header's value ("" when there is none)."""
        return _content_type(self.headers)


def _status(value: Any) -> int | None:
    """Another spider's ``status`` as an HTTP status (200 when absent), None if it is none."""
    if value is None or value == "":
        return 200
    try:
        status = int(value)
    except (TypeError, ValueError):
        return None
    return status if 100 <= status <= 999 else None


def _refusal(
    given: Any, status: int | None, headers: list[tuple[str, str]], body: bytes, kind: str,
    tokens: Any,
) -> tuple[str | None, str | None]:
    """Why another spider's page cannot be compared, as our spider says it of its own responses
    (:func:`crawler.work.refusal.refused`): its status, and for HTML its Content-Type and body;
    or an item that is malformed. (None, None) for a page to decide. A 304 is left to the work,
    which knows whether the store has the page."""
    if status is None:
        return "bad_status", f"status {given!r} is not an HTTP status"
    if isinstance(tokens, str):
        return "bad_tokens", "tokens is one string: give a list of tokens (or the text as text)"
    if status == 304:
        return None, None
    if tokens is not None or kind == "text":
        reason, detail = ("", "") if 200 <= status < 300 else refused(status, "", b"")
    else:
        reason, detail = refused(status, _content_type(headers), body)
    return (reason, detail) if reason else (None, None)


def _joined(tokens: Iterable[str] | JoinedTokens) -> Sequence[str] | JoinedTokens:
    """Another spider's tokens in the joined form, unless one holds the joining NUL."""
    if isinstance(tokens, JoinedTokens):
        return tokens
    listed = [str(t) for t in tokens]
    return listed if any("\x00" in t for t in listed) else JoinedTokens.of(listed)


def _header_pairs(value: Any) -> list[tuple[str, str]]:
    """Headers as (name, value) strings from pairs, a dict, or Scrapy's Headers."""
    if not value:
        return [("Content-Type", "text/html; charset=utf-8")]
    pairs: Iterable[Any] = value.items() if isinstance(value, Mapping) else value
    out = []
    for name, values in pairs:
        for v in values if isinstance(values, (list, tuple)) else [values]:
            out.append((_text(name), _text(v)))
    return out


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else str(value)


def _content_type(headers: list[tuple[str, str]]) -> str:
    return next((value for name, value in headers if name.lower() == "content-type"), "")


def empty_detail(area: ContentArea) -> str:
    """Why a page is skipped as ``empty``; with a content area, the place that held no text.

    >>> empty_detail(ContentArea()), empty_detail(ContentArea("main"))
    ('no text after canonicalisation', 'no text in the content area (main)')
    """
    if area.is_whole_page:
        return "no text after canonicalisation"
    return f"no text in the content area ({area.describe()})"
