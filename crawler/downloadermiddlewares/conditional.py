"""Conditional requests for a recrawl: each URL the store knows is asked for only if it changed.

The store keeps, for every URL a crawl run decided, the validators of its last response that
had any (:mod:`storage.history`). A later run sends them back as ``If-None-Match`` and
``If-Modified-Since``, as Heritrix's FetchHTTP does by default, so that a server whose page did
not change answers ``304 Not Modified`` without a body, and the crawl's dedup work keeps the
page's decision and cluster (:mod:`crawler.work.recrawl`). The page's payload digest goes with
the request (``request.meta["neardup_known_digest"]``), so that the spider need not
canonicalise a body the store already has (a server without validators sends it again).

No validators are sent for a page the store holds no content of (skipped: an error status, a
timeout, not HTML, ...), since a 304 would confirm nothing: the validators it has may be those
of a response before the error, and the page that comes back must be decided again; nor for a
page the store is waiting to fetch in full (kept by a re-decision, its body never stored), nor
for a page the open run decided: that run is being resumed after a kill, which lost its queue,
and only the page's body holds the links the run may not have followed yet (a 304 has none);
nor for a request that asks for the whole page
(``request.meta["neardup_full_fetch"]``).

Apache's compressing filters (mod_deflate, mod_brotli; Debian enables mod_deflate for HTML by
default) add a suffix to the entity tag of what they compress (``"44eb-5f1a2b3c-gzip"``) and do
not take it off the ``If-None-Match`` that comes back, so such a server never answers 304 to
the tag it sent (Apache bug 45023). The request therefore names the tag without the suffix
too (:func:`if_none_match`): the server's tag for the same file, uncompressed. A server whose
tags merely end that way matches none it did not make.

The store is read in the crawl's own process, read-only, beside the worker that writes it; what
it reads is the last committed state.

Settings: ``NEARDUP_STORE`` (the store), ``NEARDUP_CONDITIONAL`` (True by default; False sends
every request unconditionally).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler import settings as defaults
from storage.errors import StoreError
from storage.store import Store, url_key

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    # typing.Self requires Python 3.11
    from typing_extensions import Self

__all__ = ["FULL_FETCH", "KNOWN_DIGEST", "ConditionalGetMiddleware", "if_none_match"]

logger = logging.getLogger(__name__)

#: request.meta: fetch the whole page, whatever the store has of it
FULL_FETCH = "neardup_full_fetch"
#: request.meta: the payload digest of the URL's last body (storage.pages.payload_digest)
KNOWN_DIGEST = "neardup_known_digest"
#: an entity tag with the suffix of Apache's compressing filters (DeflateAlterETag and
#: BrotliAlterETag, AddSuffix by default): weakness, opaque part, suffix
_SUFFIXED_TAG = re.compile(r'^(W/)?"(.+)-(?:gzip|br)"$')


def if_none_match(etag: str) -> str:
    """The ``If-None-Match`` value for a stored entity tag: the tag, and for one a compressing
    Apache filter suffixed, the tag of the uncompressed file too (module doc).

    >>> if_none_match('"44eb-5f1a2b3c-gzip"')
    '"44eb-5f1a2b3c-gzip", "44eb-5f1a2b3c"'
    >>> if_none_match('W/"x-br"'), if_none_match('"44eb-5f1a2b3c"'), if_none_match('"-gzip"')
    ('W/"x-br", W/"x"', '"44eb-5f1a2b3c"', '"-gzip"')
    """
    suffixed = _SUFFIXED_TAG.match(etag)
    if suffixed is None:
        return etag
    weak, opaque = suffixed.groups()
    return f'{etag}, {weak or ""}"{opaque}"'


class ConditionalGetMiddleware:
    """Adds the store's validators of a URL to its request (module doc)."""

    def __init__(self, store: str) -> None:
        self.store_path = store
        self._store: Store | None = None
        self._absent = False
        #: the store's last run if it has not finished (this crawl resumes it), else None
        self._open_run: int | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("NEARDUP_CONDITIONAL", defaults.NEARDUP_CONDITIONAL):
            raise NotConfigured("NEARDUP_CONDITIONAL is False")
        from scrapy.utils.project import data_path

        middleware = cls(data_path(settings.get("NEARDUP_STORE", defaults.NEARDUP_STORE)))
        crawler.signals.connect(middleware.close, signal=signals.spider_closed)
        return middleware

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if request.meta.get(FULL_FETCH) or request.method != "GET":
            return
        store = self._open()
        if store is None:
            return
        try:
            state = store.history.get(url_key(request.url))
            if state is None or state.awaiting_body or state.run == self._open_run:
                return
            record = store.document(state.doc_id)
        except StoreError:
            return
        if record is None or record.decision == "skipped":
            return
        for name, value in state.validators().items():
            if name not in request.headers:
                request.headers[name] = if_none_match(value) if name == "If-None-Match" else value
        if state.payload_digest:
            request.meta[KNOWN_DIGEST] = state.payload_digest

    def _open(self) -> Store | None:
        """The store, read-only, opened at the first request (after the crawl made it)."""
        if self._store is None and not self._absent:
            if not Store.exists(self.store_path):
                return None  # not made yet: nothing to ask about
            try:
                store = Store.open(self.store_path, readonly=True)
            except (StoreError, OSError) as exc:
                logger.warning("neardup: no conditional requests: %s", exc)
                self._absent = True
                return None
            run = store.history.run()
            self._open_run = None if run is None or run.finished else run.number
            self._store = store
        return self._store

    def close(self, **_: Any) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()
