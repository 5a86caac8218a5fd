"""What the spider hands to the pipelines: one item per fetched (or failed) URL."""

from __future__ import annotations

from dataclasses import dataclass, field

from dedup.units import JoinedTokens


@dataclass
class PageItem:
    """A page as fetched, with its canonical tokens, or the reason it cannot be compared.

    The spider canonicalises (so the pipelines stay about decisions and storage); an item with a
    ``skip_reason`` is logged as ``skipped`` and never stored.
    """

    url: str
    status: int = 0
    #: the response headers as received, in order (for the WARC record)
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    #: canonical token stream (``dedup.canonical.document_tokens``, joined: the form a sketch
    #: reads and the worker's pipe carries); empty when skipped; None for a body the store has
    #: already (a recrawl's unchanged page: the work canonicalises it only if it must)
    tokens: JoinedTokens | None = field(default_factory=lambda: JoinedTokens(b"", 0))
    #: seconds since the epoch when the response arrived
    fetched_at: float = 0.0
    depth: int = 0
    #: short machine-readable reason, e.g. "not_html", "empty", "too_large", "http_404"
    skip_reason: str | None = None
    #: one human line saying more, e.g. "Content-Type image/png"
    skip_detail: str | None = None
    #: seconds spent canonicalising (for the per-page cost split)
    canonicalise_seconds: float = 0.0
    #: the page's links the spider follows once the page is decided (canonical, in scope)
    links: list[str] = field(default_factory=list)
    #: the run of the link path that led here (crawler.work.links): (cluster, count) or None
    run: tuple[int, int] | None = None
