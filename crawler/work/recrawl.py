"""The next crawl run of a store: what changed for a URL since the store last decided it.

A store remembers, for every URL a crawl run decided, its current document and what the run
saw (:class:`storage.history.UrlState`). When a later run meets the URL again, the page is one
of (``change`` in its decision line, ``docs/crawling.md``):

* ``new``: the store has no document for the URL;
* ``unchanged``: the server answered 304 to the validators the store sent back, or sent a body
  whose payload digest is the one the store has (for a URL skipped before, the same answer
  again: the same status). Its decision and its cluster stay; its document stays where it is
  in the greedy order;
* ``changed``: another body (or, for a page that had content, a page that cannot be compared
  any more, or the other way round): the page is decided again as a new document
  (:mod:`dedup.changes`);
* ``gone``: a page that had content answers 404 or 410, or does not answer at all.

This module holds the rules, as functions of plain values; :mod:`crawler.work.steps` applies
them to the store. It imports nothing of Scrapy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from storage.history import Capture, UrlState
from storage.pages import Captured
from storage.records import DocumentRecord

__all__ = ["GONE", "Prior", "capture_of", "change_of", "refreshed_headers", "state_after"]

#: the skip reasons that mean the page is no longer there
GONE = frozenset({"http_404", "http_410", "dns_error", "connection_error", "timeout"})
#: headers a 304 does not update in the stored response (RFC 9111 §4.3.4, and the body's own)
_NOT_REFRESHED = frozenset({"content-length", "content-encoding", "transfer-encoding",
                            "content-type", "content-range"})  # fmt: skip


@dataclass(frozen=True)
class Prior:
    """What the store holds for a URL before this page: its current document and state."""

    doc_id: int
    record: DocumentRecord
    #: None for a store made before it kept the history
    state: UrlState | None

    @property
    def had_content(self) -> bool:
        """True when the URL was compared last time (not skipped): it is in a cluster."""
        return self.record.decision != "skipped"

    def decided_in(self, run: int) -> bool:
        return self.state is not None and self.state.run == run


def change_of(
    prior: Prior | None, status: int, skip_reason: str | None, digest: str | None
) -> str | None:
    """The change a page makes to what the store holds, or None while it depends on the
    page's canonical text (a store without the URL's digest compares content hashes).

    >>> kept = Prior(0, DocumentRecord("http://a.test/", "kept", 0.0, 0, 1),
    ...              UrlState(1, 0, 200, 0.0, payload_digest="sha1:A"))
    >>> change_of(None, 200, None, "sha1:B"), change_of(kept, 304, None, None)
    ('new', 'unchanged')
    >>> change_of(kept, 200, None, "sha1:A"), change_of(kept, 200, None, "sha1:B")
    ('unchanged', 'changed')
    >>> change_of(kept, 404, "http_404", "sha1:C"), change_of(kept, 200, "not_html", "sha1:C")
    ('gone', 'changed')
    """
    if prior is None:
        return "new"
    if status == 304:
        return "unchanged"
    if prior.had_content:
        if skip_reason is not None:
            return "gone" if skip_reason in GONE else "changed"
        if prior.state is None or prior.state.payload_digest is None:
            return None
        return "unchanged" if digest == prior.state.payload_digest else "changed"
    if skip_reason is None:
        return "changed"  # skipped before, comparable now
    if prior.state is None:
        return "unchanged"
    return "unchanged" if prior.state.status == status else "changed"


def state_after(
    prior: UrlState | None,
    *,
    run: int,
    doc_id: int,
    status: int,
    headers: Iterable[tuple[str, str]],
    fetched_at: float,
    digest: str | None,
    capture: Capture | None,
    awaiting_body: bool = False,
    duplicate_run: tuple[int, int] | None = None,
    depth: int | None = None,
) -> UrlState:
    """The URL's state once this run decided it. A 304 confirms the content the state had
    (its status, digest and capture carry forward); validators come from this response, or
    from the last one that had any; the depth is the least the URL was found at."""
    etag = _header(headers, "etag")
    modified = _header(headers, "last-modified")
    if prior is not None:
        etag = etag or prior.etag
        modified = modified or prior.last_modified
    if status == 304 and prior is not None:
        status, digest = prior.status, prior.payload_digest
        capture = capture or prior.capture
    if prior is not None and prior.depth is not None:
        depth = prior.depth if depth is None else min(depth, prior.depth)
    return UrlState(run, doc_id, status, fetched_at, etag, modified, digest, capture,
                    awaiting_body, duplicate_run, depth)  # fmt: skip


def capture_of(captured: Captured) -> Capture:
    """The history's form of a response record just written."""
    where = captured.location
    return Capture(where.number, where.offset, where.length, captured.date, captured.record_id)


def refreshed_headers(
    stored: Iterable[tuple[str, str]], not_modified: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The stored response's headers as a 304 refreshes them (RFC 9111 §4.3.4): each header the
    304 sends replaces the stored ones of its name, but those that describe the body.

    >>> refreshed_headers([("Content-Type", "text/html"), ("ETag", '"a"'), ("Date", "x")],
    ...                   [("ETag", '"b"'), ("Date", "y"), ("Content-Length", "0")])
    [('Content-Type', 'text/html'), ('ETag', '"b"'), ('Date', 'y')]
    """
    fresh = [(k, v) for k, v in not_modified if k.lower() not in _NOT_REFRESHED]
    names = {k.lower() for k, _ in fresh}
    kept = [(k, v) for k, v in stored if k.lower() not in names]
    return kept + fresh


def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None
