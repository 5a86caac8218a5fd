"""The crawl-time dedup stage and storage stage, as Scrapy item pipelines for any project.

::

    ITEM_PIPELINES = {"crawler.pipelines.DedupPipeline": 300,
                      "crawler.pipelines.StoragePipeline": 400}
    NEARDUP_STORE = "neardup-store"

:class:`DedupPipeline` gives every page one decision (DESIGN.md): ``kept``, ``exact_duplicate``,
``near_duplicate``, ``contained`` or ``skipped`` with a reason. A duplicate is dropped with a
:class:`~scrapy.exceptions.DropItem` subclass whose message names the page it matched and the
estimated resemblance, so Scrapy counts ``item_dropped_reasons_count/NearDuplicate`` and so on.
:class:`StoragePipeline` writes each kept page to the store's WARC files. Anything placed after
them (a feed export, a database) sees kept pages only.

**Items.** :class:`~crawler.items.PageItem` from our spider, or any item with a ``url`` and
either ``tokens`` (a canonical token stream), ``body``/``html`` (HTML, bytes or text) or
``text``; ``status``, ``headers`` and ``skip_reason``/``skip_detail`` are used when present.

**Decision, then storage, in one batch.** The dedup stage both decides and *applies* the
decision to the LMDB index, and records the document (without a page): so the next page is
decided against an index that already holds this one, even if pages were to interleave between
the stages, and a crawl without the storage stage still keeps a complete index. The storage
stage then appends the page and records where it is. Both write into the session's open batch
(:mod:`crawler.session`), which commits them together, WARC first.

**Already decided.** A URL the store already has a document for (a resumed crawl, a repeated
one) is not decided again: it is dropped with :class:`AlreadyDecided` at DEBUG level, counted as
``neardup/already_decided``, and not logged, so no page is ever stored twice.

Settings (defaults in :mod:`crawler.settings`): ``NEARDUP_ENABLED``, ``NEARDUP_STORE`` (a
relative path goes under the project's ``.scrapy/``, as ``HTTPCACHE_DIR`` does),
``NEARDUP_SKETCH``, ``NEARDUP_THRESHOLD``, ``NEARDUP_CONTAINMENT``,
``NEARDUP_REPRESENTATIVE``, ``NEARDUP_CANONICALISER``, ``NEARDUP_BATCH_SIZE``,
``NEARDUP_BATCH_SECONDS``, ``NEARDUP_KEEP_TEXT`` and ``NEARDUP_MAX_TEXT_BYTES`` (the
canonical text of each dropped page, kept compressed in the store for ``neardup explain``, cut
to that many bytes); also ``NEARDUP_CAP`` (clusters read per fingerprint, default 64) and
``NEARDUP_RUN_ID`` (the dedup log's file name; default: start time and process id).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem, NotConfigured

from crawler.review import stored_text
from crawler.session import DedupSession, Pending
from dedup.canonical import html_tokens, text_tokens
from storage.records import DocumentRecord

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    # typing.Self requires Python 3.11
    from typing_extensions import Self

    from dedup.cluster import Decision
    from dedup.document import DocumentSketch

logger = logging.getLogger(__name__)

__all__ = [
    "AlreadyDecided",
    "Contained",
    "DedupDrop",
    "DedupPipeline",
    "ExactDuplicate",
    "NearDuplicate",
    "Skipped",
    "StoragePipeline",
]


class DedupDrop(DropItem):
    """Base of every drop the dedup stage makes."""


class Skipped(DedupDrop):
    """The page cannot be compared (not HTML, empty, an HTTP error, ...); the message says why."""


class ExactDuplicate(DedupDrop):
    """The page's canonical token stream equals a stored page's."""


class NearDuplicate(DedupDrop):
    """The page's estimated resemblance to a cluster's representative reached the threshold."""


class Contained(DedupDrop):
    """The page is contained in a cluster's representative at least NEARDUP_CONTAINMENT."""


class AlreadyDecided(DedupDrop):
    """The store already holds a decision for this URL (a resumed or repeated crawl)."""


class StoreFailed(DedupDrop):
    """Writing to the store failed earlier; the crawl is stopping and decides nothing more."""


_DROPS: dict[str, type[DedupDrop]] = {
    "exact_duplicate": ExactDuplicate,
    "near_duplicate": NearDuplicate,
    "contained": Contained,
}


@dataclass
class PageView:
    """What the stages read from an item, whatever its class."""

    url: str
    #: None when the item carries no token stream (the dedup stage canonicalises then)
    tokens: list[str] | None
    skip_reason: str | None
    skip_detail: str | None
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    #: "html" or "text": how to canonicalise ``body`` when there are no tokens
    kind: str
    fetched_at: float | None
    canonicalise_seconds: float

    @classmethod
    def of(cls, item: Any) -> PageView:
        a = ItemAdapter(item)
        body: Any = a.get("body")
        kind = "html"
        if body is None and a.get("html") is not None:
            body = a.get("html")
        if body is None and a.get("text") is not None:
            body, kind = a.get("text"), "text"
        if isinstance(body, str):
            body = body.encode("utf-8")
        tokens = a.get("tokens")
        return cls(
            url=str(a.get("url") or ""),
            tokens=None if tokens is None else list(tokens),
            skip_reason=a.get("skip_reason") or None,
            skip_detail=a.get("skip_detail") or None,
            status=int(a.get("status") or 200),
            headers=_header_pairs(a.get("headers")),
            body=bytes(body or b""),
            kind=kind,
            fetched_at=a.get("fetched_at") or None,
            canonicalise_seconds=float(a.get("canonicalise_seconds") or 0.0),
        )


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


def _entry(url: str, decision: str, **fields: Any) -> dict[str, Any]:
    """A dedup-log line (storage.log.DedupLog.write's keywords), decided now."""
    return {"url": url, "decision": decision, "time": time.time(), **fields}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


class DedupPipeline:
    """The dedup stage: one decision per page; duplicates and unusable pages are dropped."""

    def __init__(self, crawler: Crawler, session: DedupSession) -> None:
        self.crawler = crawler
        self.session = session

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("NEARDUP_ENABLED", True):
            raise NotConfigured("NEARDUP_ENABLED is False")
        session = DedupSession.of(crawler)
        if "storage" in session.stages:
            raise ValueError(
                "ITEM_PIPELINES: DedupPipeline must come before StoragePipeline "
                "(give it the smaller number)"
            )
        session.stages.append("dedup")
        return cls(crawler, session)

    def open_spider(self) -> None:
        self.session.open()

    def close_spider(self) -> None:
        self.session.close()

    def process_item(self, item: Any) -> Any:
        s = self.session
        stats = self.crawler.stats
        if not s.clean:
            raise StoreFailed("not decided: the store failed and the crawl is stopping")
        page = PageView.of(item)
        if not page.url:
            stats.inc_value("neardup/no_url")
            raise Skipped("skipped (no_url): the item has no url field", log_level="WARNING")
        store = s.store
        assert store is not None, "open_spider was not called"
        known = store.find_url(page.url)
        if known is not None:
            stats.inc_value("neardup/already_decided")
            s.tally.already_decided += 1
            raise AlreadyDecided(
                f"already decided: {page.url} is document {known} of the store", log_level="DEBUG"
            )
        if page.skip_reason:
            # the item's maker (our spider) counts neardup/skipped/<reason> for its own reasons
            self._skip(page, page.skip_reason, page.skip_detail, count_reason=False)
        tokens = page.tokens
        if tokens is None:
            tokens = self._canonicalise(page)
        else:
            s.spent("canonicalise", page.canonicalise_seconds)
        if not tokens:
            self._skip(page, "empty", "no text after canonicalisation")

        started = time.perf_counter()
        try:
            made = s.sketcher.sketch(tokens)
        except Exception as exc:  # a sketching bug is this page's problem, not the crawl's
            logger.exception("Could not sketch %s", page.url)
            self._skip(page, "sketch_error", f"{type(exc).__name__}: {exc}")
        sketched = time.perf_counter()
        assert s.clusterer is not None
        decision = s.clusterer.decide(made.sketch, made.content_hash)
        try:
            store = s.writing()
            doc_id = store.next_doc_id()
            assignment = s.clusterer.apply(doc_id, made.sketch, made.content_hash, decision)
            applied = time.perf_counter()
            kind = "kept" if decision.kind == "new" else decision.kind
            record = DocumentRecord(
                page.url, kind, time.time(), assignment.cluster_id, made.content_hash
            )
            store.put_document(doc_id, record, made.sketch)
            if kind != "kept" and s.config.keep_text:
                # a dropped page reaches no WARC file: keep its text so the drop can be explained
                unit = s.config.sketch.unit
                store.put_text(doc_id, stored_text(tokens, unit, s.config.max_text_bytes))
            duplicate_of = None
            if decision.duplicate_of is not None:
                original = store.document(decision.duplicate_of)
                duplicate_of = original.url if original is not None else None
        except Exception as exc:
            s.fail(exc)
            raise
        s.spent("sketch", sketched - started)
        s.spent("index", applied - sketched)
        s.spent("store", time.perf_counter() - applied)
        stats.inc_value("neardup/decided")
        entry = _decision_entry(page, kind, doc_id, assignment.cluster_id, made, decision,
                                duplicate_of, self.session.config.dedup.threshold,
                                self.session.config.dedup.containment)  # fmt: skip
        if kind == "kept":
            if s.storing:
                s.pending[page.url] = Pending(doc_id, record, entry)
            else:
                stats.inc_value("neardup/kept")
                s.queue(entry)
                self._done()
            return item
        stats.inc_value(f"neardup/{kind}")
        s.queue(entry)
        self._done()
        raise _DROPS[kind](_drop_message(kind, duplicate_of, decision), log_level="INFO")

    def _canonicalise(self, page: PageView) -> list[str]:
        started = time.perf_counter()
        unit = self.session.config.sketch.unit
        try:
            if page.kind == "text":
                tokens = text_tokens(page.body.decode("utf-8", "replace"), unit=unit)
            else:
                engine = self.session.config.dedup.canonicaliser
                tokens = html_tokens(page.body, unit=unit, engine=engine)
        except Exception as exc:
            logger.exception("Could not canonicalise %s", page.url)
            self._skip(page, "unparseable", f"{type(exc).__name__}: {exc}")
        self.session.spent("canonicalise", time.perf_counter() - started)
        return tokens

    def _skip(
        self, page: PageView, reason: str, detail: str | None, *, count_reason: bool = True
    ) -> NoReturn:
        """Record the page as skipped (so a resumed crawl does not decide it again), drop it.

        ``neardup/skipped`` counts every skip; ``neardup/skipped/<reason>`` is counted here
        for the reasons this stage finds, and by the spider for the reasons it gives.
        """
        s = self.session
        try:
            store = s.writing()
            doc_id = store.next_doc_id()
            store.put_document(doc_id, DocumentRecord(page.url, "skipped", time.time()))
        except Exception as exc:
            s.fail(exc)
            raise
        s.queue(_entry(page.url, "skipped", reason=reason, doc_id=doc_id, detail=detail,
                       status=page.status))  # fmt: skip
        self.crawler.stats.inc_value("neardup/skipped")
        if count_reason:
            self.crawler.stats.inc_value(f"neardup/skipped/{reason}")
        self._done()
        raise Skipped(f"skipped ({reason}): {detail or reason}", log_level="DEBUG")

    def _done(self) -> None:
        try:
            self.session.item_done()
        except Exception as exc:
            self.session.fail(exc)
            raise


def _decision_entry(
    page: PageView,
    kind: str,
    doc_id: int,
    cluster_id: int,
    made: DocumentSketch,
    decision: Decision,
    duplicate_of: str | None,
    threshold: float,
    containment_rule: float | None,
) -> dict[str, Any]:
    resemblance, containment = _round(decision.resemblance), _round(decision.containment)
    reason = None
    if kind == "exact_duplicate":
        # identical canonical streams: both are exactly 1 (the estimate against the cluster's
        # representative, which may be another member, is not what this page matched)
        resemblance = containment = 1.0
        reason = "identical canonical text"
    elif kind == "near_duplicate":
        reason = f"estimated resemblance {resemblance} >= threshold {threshold}"
    elif kind == "contained":
        reason = f"estimated containment {containment} >= {containment_rule}"
    return _entry(
        page.url,
        kind,
        reason=reason,
        doc_id=doc_id,
        cluster_id=cluster_id,
        duplicate_of=duplicate_of,
        resemblance=resemblance,
        containment=containment,
        tokens=made.tokens,
        shingles=made.shingles,
        matches=decision.matches,
        sample_size=decision.sample_size,
        status=page.status,
    )


def _drop_message(kind: str, duplicate_of: str | None, decision: Decision) -> str:
    """The DropItem message: what the page matched, and how alike they are."""
    r, c = decision.resemblance, decision.containment
    sample = (
        f"{decision.matches} of {decision.sample_size} sketch entries"
        if decision.sample_size
        else "no sketch entries"
    )
    if kind == "exact_duplicate":
        return f"exact duplicate of {duplicate_of} (resemblance 1.00: identical canonical text)"
    if kind == "near_duplicate":
        return f"near duplicate of {duplicate_of} (estimated resemblance {r:.2f}, {sample})"
    return (
        f"contained in {duplicate_of} (estimated containment {c:.2f}, "
        f"estimated resemblance {r:.2f})"
    )


class StoragePipeline:
    """The storage stage: each kept page into the store's WARC files, with the original
    status, headers and body, in the same batch as its index entries."""

    def __init__(self, crawler: Crawler, session: DedupSession) -> None:
        self.crawler = crawler
        self.session = session
        self._told_foreign = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("NEARDUP_ENABLED", True):
            raise NotConfigured("NEARDUP_ENABLED is False")
        session = DedupSession.of(crawler)
        session.stages.append("storage")
        return cls(crawler, session)

    def open_spider(self) -> None:
        if "dedup" not in self.session.stages:
            raise ValueError(
                "ITEM_PIPELINES: StoragePipeline needs crawler.pipelines.DedupPipeline "
                "before it (it stores the pages the dedup stage keeps)"
            )
        self.session.open()

    def close_spider(self) -> None:
        self.session.close()

    def process_item(self, item: Any) -> Any:
        s = self.session
        url = str(ItemAdapter(item).get("url") or "")
        pending = s.pending.get(url)
        if pending is None:
            # not a page the dedup stage kept: a pipeline between them made another item
            if not self._told_foreign:
                logger.warning("StoragePipeline: %s was not kept by DedupPipeline; not stored",
                               url)  # fmt: skip
                self._told_foreign = True
            return item
        page = PageView.of(item)
        started = time.perf_counter()
        try:
            store = s.writing()
            location = store.pages.append(
                url, page.status, page.headers, page.body, time=page.fetched_at
            )
            store.put_document(pending.doc_id, replace(pending.record, page=location))
        except Exception as exc:
            s.fail(exc)
            raise
        del s.pending[url]
        pending.entry["page"] = f"{location.file}:{location.offset}"
        stats = self.crawler.stats
        s.spent("store", time.perf_counter() - started)
        stats.inc_value("neardup/kept")
        stats.inc_value("neardup/stored_bytes", location.length)
        s.queue(pending.entry)
        try:
            s.item_done()
        except Exception as exc:
            s.fail(exc)
            raise
        return item
