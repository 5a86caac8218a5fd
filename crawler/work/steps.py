"""The work of the crawl's two stages on one open store: decide, store, commit, log.

The dedup stage decides, the storage stage stores, and both must write into the *same* LMDB
write transaction: a page's index entries and its WARC record commit together or not at all.
So the pieces live in one :class:`StoreWork` per crawler: the open :class:`~storage.store.Store`,
the :class:`~dedup.document.Sketcher`, the :class:`~dedup.cluster.GreedyClusterer` over the
store's LMDB index, the current write batch, and the dedup-log lines waiting for it to commit.
Each step takes a :class:`~crawler.work.page.PageView` and gives back an
:class:`~crawler.work.outcome.Outcome`, plain data that the session
(:mod:`crawler.pipelines.session`) turns into the item or its drop. The work runs in the worker
process (:mod:`crawler.work.process`), or inline on the caller's thread; it imports nothing of
Scrapy, so that the worker starts without it.

**Fused storage.** When the storage stage comes directly after the dedup stage in
``ITEM_PIPELINES`` (nothing can come between them), a kept page is stored in the same step that
decides it, and the storage stage only passes the item on. Otherwise the page waits between
the stages (:class:`Pending`) and the storage stage stores it in a step of its own.

**When a batch commits.** After ``NEARDUP_BATCH_SIZE`` decisions, or once
``NEARDUP_BATCH_SECONDS`` have passed since the batch began (checked after every decision and
by a timer, so a slow crawl still commits), and when the spider closes. Never while a kept page
is between the two stages: its index entries are already in the batch and its page is not yet.
So that such pages cannot hold a commit back for ever, a decision that arrives once the batch
is full counting them is *held* (later ones queue behind it, in order) until they have been
stored and the batch has committed, or for at most ``max(1, 2 x NEARDUP_BATCH_SECONDS)`` s
(:meth:`StoreWork.must_hold` says when; the worker holds).

**The dedup log is written after the commit that makes it true.** Decisions are queued while
the batch is open and written (and flushed) only once it has committed. A crash therefore
never leaves a log line naming a page the store lost, and never makes a page logged twice: the
lines of the batch it interrupted are lost with the batch, and the next crawl decides those
pages again (they are not in the store's URL table) and logs them then. The price is the
instant between a commit and the writing of its lines: a kill exactly there leaves committed
decisions without their lines (the store, which is the record of what was kept, has them).
The other order would instead leave lines for pages that were never stored, and log them a
second time when they are decided again. (``storage.log``'s docstring describes that other
order as possible; this work does not use it.)

**Failures.** Three kinds, each met where it can happen, so that one is never reported as
another:

* *A page's problem* (its HTML cannot be canonicalised, its tokens cannot be sketched): the page
  is skipped with a reason and the crawl goes on. Nothing of the page has reached the batch
  yet, so skipping it loses only that page. A URL that cannot be written as UTF-8 (a lone
  surrogate another pipeline put there) is dropped the same way, without a record, since no
  record can hold it.
* *A store failure* (``OSError``, ``lmdb.Error`` or a :class:`~storage.errors.StoreError` while
  reading or writing the store: a full disk, a read-only directory, a file that cannot grow):
  the batch is aborted and its queued log lines discarded, the step's outcome carries the
  :class:`Failure` (the session stops the crawl), and every later step is a one-line drop
  (``StoreFailed``), so that nothing after it is decided against a store that is not what the
  session believes.
* *A bug* (any other exception while a decision is being made or written: ours, or a value
  another pipeline put in the item that the store cannot take): handled exactly as a store
  failure, but named as what it is, with the page's URL and the traceback. It stops the crawl
  rather than skipping the page because the batch may already hold half of the page's index
  entries, so it must be aborted, which loses the other decisions of the batch too; and because
  a bug in deciding or recording is seldom about one page: skipping would record page after page
  as skipped, and a resumed crawl passes over recorded pages for good. Stopped, the store stays
  at its last commit and the next crawl, once the bug is fixed, decides those pages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from crawler.work.links import DUPLICATE_DECISIONS, Run, follows_links, run_after
from crawler.work.outcome import STORE_FAILURES, Failure, Outcome, Tally
from crawler.work.page import empty_detail
from crawler.work.recrawl import (
    Prior,
    capture_of,
    change_of,
    refreshed_headers,
    state_after,
)
from dedup.canonical import document_tokens
from dedup.changes import Redecision, Stored, replace as replace_document
from dedup.cluster import GreedyClusterer
from dedup.document import Sketcher
from dedup.estimators import estimate
from dedup.html_text import DocumentTooDeep, charset_of
from dedup.units import JoinedTokens
from storage.history import Capture, UrlState
from storage.pages import IDENTICAL_PAYLOAD, SERVER_NOT_MODIFIED, payload_digest
from storage.records import DocumentRecord
from storage.store import Store, url_key
from storage.texts import stored_text

if TYPE_CHECKING:
    from crawler.work.page import PageView
    from crawler.work.settings import SessionSettings
    from crawler.work.shared import SharedIndex
    from dedup.cluster import Decision
    from dedup.document import DocumentSketch
    from storage.log import DedupLog

__all__ = ["STOPPING", "Pending", "StoreWork"]

logger = logging.getLogger(__name__)

@dataclass
class Pending:
    """A kept page between the stages: its document is in the batch, its page not yet."""

    doc_id: int
    record: DocumentRecord
    entry: dict[str, Any]
    #: the URL's state, written again with the page's capture once it is stored
    state: UrlState


_DECIDED = ("neardup/decided",)
_KEPT = ("neardup/decided", "neardup/kept")
_SKIPPED = ("neardup/skipped",)
#: the drop of every page that arrives after the store failed
STOPPING = "not decided: the store failed and the crawl is stopping"


class StoreWork:
    """The work of both stages on one open store, in arrival order: decide, store, commit, log.

    Runs in the worker process, or inline (module doc). Not thread-safe: one caller at a time.
    """

    def __init__(self, config: SessionSettings, *, storing: bool, fused: bool, run_id: str) -> None:
        self.config = config
        self.storing = storing
        self.fused = fused
        self.run_id = run_id
        self.sketcher = Sketcher(config.sketch)
        self.store: Store | None = None
        self.clusterer: GreedyClusterer | None = None
        self.log: DedupLog | None = None
        #: kept pages between the dedup and the storage stage, by URL
        self.pending: dict[str, Pending] = {}
        self.tally = Tally()
        #: False once a write failed or the final commit did not happen
        self.clean = True
        #: why the work stopped (None while it is clean)
        self.failure: Failure | None = None
        self.seconds: dict[str, float] = {}
        self.not_stored_count = 0
        self._batch: AbstractContextManager[Store] | None = None
        self._batch_started = 0.0
        self._batch_items = 0
        self._queued: list[dict[str, Any]] = []
        #: what this process counted before of the URLs the queued lines decide again (a copy
        #: decided again after its own request was): their decision, and the change to take
        #: back (None: keep it, the URL's content did not change); a summary counts pages
        self._replaced: list[tuple[str, str | None]] = []
        #: the queued re-decisions (by ``id``) of URLs whose change this process counted before
        self._recounted: set[int] = set()
        self._told_foreign = False
        #: the store's crawl run (storage.history): set when the store is opened
        self.run = 0
        self._made_at = time.time()
        #: pages this run fetched before this time were counted by another process
        self._counted_since = 0.0
        #: the URLs this process decided again (a few: those of pages that changed or went),
        #: each with the duplicate run it had before: its own request, if it brings a new body,
        #: continues that run, not the one the re-decision added to
        self._redecided_keys: dict[bytes, Run | None] = {}
        #: a node of a distributed crawl: the crawl's index in Redis (crawler.work.shared)
        self.shared: SharedIndex | None = None
        #: URLs whose pages are settled in the store since the last look (:meth:`take_durable`)
        self._durable: list[str] = []

    def open(self) -> list[str]:
        """Open the store and the run's dedup log; what opening repaired, one line each.

        A node of a distributed crawl decides against the crawl's index in Redis
        (:mod:`crawler.work.shared`) and its store records which node it is."""
        store = Store.open(self.config.store, self.config.sketch, area=self.config.area)
        self.store = store
        node = self.config.crawl_node
        store.check_crawl_node(node)
        if node is not None:
            from crawler.work.shared import SharedIndex  # redis only for a distributed crawl

            self.shared = SharedIndex.open(self.config)
        index = store.index if self.shared is None else self.shared.index
        self.clusterer = GreedyClusterer(index, self.config.dedup)
        self.log = store.log(self.run_id)
        with store.batch():  # the crawl run this work belongs to: a new one, or the unfinished
            if node is not None:
                store.join_crawl(node)
            run, resumed = store.history.begin_run(time.time())
            self.run = run.number
            if resumed:  # what the killed process decided is not in this one's tally
                self._counted_since = self._made_at
                self.tally.run_resumed = True
        return list(store.repairs)

    # --- the steps ----------------------------------------------------------------------------

    def decide(self, page: PageView) -> Outcome:
        """The dedup stage's step: one decision (and, fused, the kept page stored).

        In three parts, one job each: :meth:`_answer_without_deciding` (the pages that need no
        decision), :meth:`_sketched` (the page's sketch, or its skip), :meth:`_record` (the
        decision, made and written into the batch). Only the first and the last touch the
        store, so only they can fail it (module doc, *Failures*).
        """
        before = self.guarded(page.url, lambda: self._answer_without_deciding(page))
        if isinstance(before, Outcome):
            return before
        prior = before
        made = self._sketched(page, prior)
        if isinstance(made, Outcome):
            return made
        tokens, sketched, started = made
        return self.guarded(page.url,
                            lambda: self._record(page, tokens, sketched, started, prior))  # fmt: skip

    def _answer_without_deciding(self, page: PageView) -> Outcome | Prior | None:
        """The outcome of a page that needs no decision of its own, or what the store holds
        of its URL (None: nothing) for the parts that decide it: the work has stopped, the
        page has no URL or one the store cannot write, this run decided it before, it is
        unchanged since an earlier run, or the item's maker skipped it
        (:mod:`crawler.work.recrawl`)."""
        if not self.clean:
            return self.stopped()
        if not page.url:
            return Outcome(drop="skipped", message="skipped (no_url): the item has no url field",
                           level="WARNING", counts=("neardup/no_url",))  # fmt: skip
        if not _writable(page.url):
            # a lone surrogate (another pipeline's doing): no record can hold it, so it has none
            return Outcome(
                drop="skipped",
                message=f"skipped (bad_url): {page.url!r} is not valid Unicode text",
                level="WARNING",
                counts=("neardup/bad_url",),
            )
        prior = self._prior(page.url)
        if prior is not None and self.shared is not None:
            # a node's store is not recrawled: what it decided stays (docs/distributed.md)
            return self._already_decided(page, prior)
        has_body = 200 <= page.status < 300 and not page.skip_reason
        digest = payload_digest(page.body) if has_body else None
        awaiting = prior is not None and prior.state is not None and prior.state.awaiting_body
        if awaiting and has_body and digest == prior.state.payload_digest:  # type: ignore[union-attr]
            return self._store_awaited(page, prior)  # type: ignore[arg-type]
        if prior is not None and prior.decided_in(self.run):
            went = page.skip_reason is not None and prior.had_content
            if not (went or _other_body(prior, digest)):
                return self._already_decided(page, prior)
            # decided earlier in this run from what its URL served before (a re-decision, or
            # the run a kill interrupted): it now serves another body, or none to compare (an
            # error status, a redirect: it went), decided as a change; passed over, a copy
            # whose page went with its original would stay in the store as a page it holds
            if self._counted_here(prior):  # as an unchanged copy decided again
                self._replaced.append((prior.record.decision, "unchanged"))
        elif awaiting and not has_body:
            return self._already_decided(page, prior)  # type: ignore[arg-type]
        if page.run is None and prior is not None and prior.state is not None:
            # requested without the page that led to it (a recrawl asks for every URL it
            # knows): met again, a duplicate is one more of its cluster in a row, so that a
            # trap's pages cannot start their runs afresh in every run; once a run, whether
            # or not this run decided it again from its old content first
            page.run = self._redecided_keys.get(url_key(page.url), prior.state.duplicate_run)
        if page.skip_reason:
            # the item's maker (our spider) counts neardup/skipped/<reason> for its own reasons
            return self._skip(page, page.skip_reason, page.skip_detail,
                              count_reason=not page.skip_counted, prior=prior)  # fmt: skip
        change = change_of(prior, page.status, None, digest)
        if change == "unchanged":
            assert prior is not None
            return self._unchanged(page, prior)
        if page.status == 304:  # a 304 for a URL the store has no content of: nothing to keep
            return self._skip(page, "http_304", "304 for a URL without stored content")
        return prior

    def _prior(self, url: str) -> Prior | None:
        """What the store holds of ``url``: its current document and state, or None."""
        store = self.store
        assert store is not None, "open_spider was not called"
        known = store.find_url(url)
        if known is None:
            return None
        record = store.document(known)
        assert record is not None
        return Prior(known, record, store.history.get(url_key(url)))

    def _already_decided(self, page: PageView, prior: Prior) -> Outcome:
        """This run decided the page before (a resumed crawl), or, on a node's store, any run
        did: nothing is decided again."""
        self.tally.already_decided += 1
        self._durable.append(page.url)  # nothing of it waits for a commit
        # its links are followed as they were when it was decided: a resumed crawl
        # re-derives them, and stops at a trap where the first crawl stopped
        record = prior.record
        copied = record.decision in DUPLICATE_DECISIONS
        if page.run is None and prior.state is not None:  # as it was when this run decided it
            run = prior.state.duplicate_run
        else:
            run = run_after(page.run, record.cluster_id if copied else None)
        return Outcome(
            drop="already_decided",
            message=f"already decided: {page.url} is document {prior.doc_id} of the store",
            level="DEBUG",
            counts=("neardup/already_decided",),
            run=run,
            follow_links=follows_links(run, self.config.duplicate_budget),
        )

    def _sketched(
        self, page: PageView, prior: Prior | None
    ) -> tuple[Sequence[str] | JoinedTokens, DocumentSketch, float] | Outcome:
        """(tokens, sketch, when sketching began), or the page skipped with the reason it
        cannot be compared. An error here is the page's problem: nothing of it is written."""
        tokens = page.tokens
        if tokens is None:
            try:
                tokens = self._canonicalise(page)
            except DocumentTooDeep as exc:
                deep = str(exc)
                return self.guarded(page.url,
                                    lambda: self._skip(page, "too_deep", deep, prior=prior))
            except Exception as exc:
                logger.exception("Could not canonicalise %s", page.url)
                detail = f"{type(exc).__name__}: {exc}"
                return self.guarded(page.url,
                                    lambda: self._skip(page, "unparseable", detail, prior=prior))
        else:
            self.spent("canonicalise", page.canonicalise_seconds)
        if not tokens:
            detail = empty_detail(self.config.area)
            return self.guarded(page.url, lambda: self._skip(page, "empty", detail, prior=prior))
        started = time.perf_counter()
        try:
            made = self.sketcher.sketch(tokens)
        except Exception as exc:  # a sketching bug is this page's problem, not the crawl's
            logger.exception("Could not sketch %s", page.url)
            detail = f"{type(exc).__name__}: {exc}"
            return self.guarded(page.url,
                                lambda: self._skip(page, "sketch_error", detail, prior=prior))
        return tokens, made, started

    def _record(
        self,
        page: PageView,
        tokens: Sequence[str] | JoinedTokens,
        made: DocumentSketch,
        started: float,
        prior: Prior | None,
    ) -> Outcome:
        """Decide the sketched page against the index and write the decision into the batch
        (fused: with the kept page); queue its log line. A page whose URL the store had
        content for is decided again as a new document, its old one taken out and the pages
        that duplicated it decided again too (:mod:`dedup.changes`)."""
        sketched = time.perf_counter()
        assert self.clusterer is not None
        store = self.writing()
        if prior is not None and prior.had_content and made.content_hash == (
            prior.record.content_hash
        ) and (prior.state is None or prior.state.payload_digest is None):
            # a URL whose body the store never saw the digest of: the same text is the same
            if prior.state is not None and prior.state.awaiting_body:
                return self._store_awaited(page, prior)
            return self._unchanged(page, prior)
        old = self._stored(prior.doc_id) if prior is not None and prior.had_content else None
        order: int | None = None
        redecided: Sequence[Redecision] = ()
        if self.shared is None:
            doc_id = store.next_doc_id()
            done = replace_document(self.clusterer, old,
                                    Stored(doc_id, made.sketch, made.content_hash),
                                    load=self._stored, new_doc_id=store.next_doc_id)  # fmt: skip
            assignment, redecided = done.assignment, done.redecided
            assert assignment is not None
        else:  # a node of a distributed crawl: the crawl's decision, in its order
            decided = self.shared.assign(self.clusterer, page.url, made.sketch, made.content_hash)
            if decided.adopted and decided.node != self.shared.node.node:
                return self._decided_elsewhere(page, decided.node)
            doc_id, order, assignment = store.next_doc_id(), decided.order, decided.assignment
        decision = assignment.decision
        applied = time.perf_counter()
        kind = decision.kind
        captured = None
        if kind == "kept" and self.fused:
            # the storage stage comes next and nothing can come between: store it now
            captured = store.pages.capture(
                page.url, page.status, page.headers, page.body, time=page.fetched_at
            )
        location = captured.location if captured is not None else None
        record = DocumentRecord(
            page.url, kind, time.time(), assignment.cluster_id, made.content_hash, location
        )
        store.put_document(doc_id, record, made.sketch)
        if order is not None:
            store.put_order(doc_id, order)
        digest = payload_digest(page.body)
        run = run_after(page.run, assignment.cluster_id if kind != "kept" else None)
        state = self._remember(page, prior, doc_id, digest,
                               capture_of(captured) if captured is not None else None,
                               run)  # fmt: skip
        if kind != "kept" and self.config.keep_text:
            # a dropped page reaches no WARC file: keep its text so the drop can be explained
            unit = self.config.sketch.unit
            store.put_text(doc_id, stored_text(tokens, unit, self.config.max_text_bytes))
        duplicate_of = self._decided_url(decision.duplicate_of)
        if kind == "exact_duplicate":
            self._mirror(page, self._local_doc(decision.representative_doc), digest, page.status,
                         page.headers)  # fmt: skip
        self.spent("sketch", sketched - started)
        self.spent("index", applied - sketched)
        self.spent("store", time.perf_counter() - applied)
        entry = _decision_entry(page, kind, doc_id, assignment.cluster_id, made, decision,
                                duplicate_of, self.config.dedup.threshold,
                                self.config.dedup.containment)  # fmt: skip
        change = "new" if prior is None else "changed"
        similar = None if old is None else estimate(made.sketch, old.sketch).resemblance
        entry.update(self._change_fields(prior, change, similar))
        if order is not None:
            entry["order"] = order
        fetch = self._redecided(redecided, page.url, "changed")
        follow = follows_links(run, self.config.duplicate_budget)
        if not follow and page.links:
            entry["links_not_followed"] = page.links  # the duplicate budget (crawler.work.links)
        counts = ("neardup/decided", f"neardup/change/{change}")
        if kind == "kept" and location is None and self.storing:
            self.pending[page.url] = Pending(doc_id, record, entry, state)
            return Outcome(counts=counts, fetch=fetch)
        if location is not None:
            entry["page"] = f"{location.file}:{location.offset}"
        self.queue(entry)
        self.item_done()
        if kind == "kept":
            return Outcome(counts=(*counts, "neardup/kept"), fetch=fetch,
                           stored_bytes=location.length if location else 0)  # fmt: skip
        return Outcome(drop=kind, message=_drop_message(kind, duplicate_of, decision),
                       level="INFO", counts=(*counts, f"neardup/{kind}"),
                       run=run, follow_links=follow, fetch=fetch)  # fmt: skip

    # --- a recrawl: what the store held of the URL ------------------------------------------

    def _unchanged(self, page: PageView, prior: Prior) -> Outcome:
        """A page the server confirms (304) or sends again (same digest): its document stays,
        with its decision and cluster; a kept page gets a revisit record naming the capture
        that holds its content, a byte-identical mirror one naming its original's."""
        store = self.writing()
        record, state = prior.record, prior.state
        capture = None
        stored_bytes = 0
        if record.decision == "kept" and record.page is not None:
            capture, digest = self._content_capture(prior)
            status, headers = self._revisit_head(page, record)
            where = store.pages.revisit(
                page.url,
                profile=SERVER_NOT_MODIFIED if page.status == 304 else IDENTICAL_PAYLOAD,
                status=status, headers=headers, refers_to_uri=page.url,
                refers_to_date=capture.date, refers_to_id=capture.record_id, digest=digest,
                time=page.fetched_at,
            )  # fmt: skip
            stored_bytes = where.length
        body_digest = payload_digest(page.body) if page.status != 304 else None
        if record.decision == "exact_duplicate" and record.cluster_id is not None:
            assert self.clusterer is not None
            first = self.clusterer.index.cluster(record.cluster_id).first_doc
            digest = body_digest or (state.payload_digest if state else None)
            status, headers = self._revisit_head(page, store.document(first))
            if digest is not None:
                self._mirror(page, first, digest, status, headers)
        kind = record.decision
        run = run_after(page.run, record.cluster_id if kind in DUPLICATE_DECISIONS else None)
        self._remember(page, prior, prior.doc_id, body_digest, capture, run)
        entry = self._unchanged_entry(page, prior)
        self.queue(entry)
        self.item_done()
        counts = ("neardup/skipped" if kind == "skipped" else "neardup/decided",
                  "neardup/change/unchanged")  # fmt: skip
        if kind == "kept":
            return Outcome(counts=(*counts, "neardup/kept"), stored_bytes=stored_bytes)
        return Outcome(drop=kind, message=f"unchanged: {entry.get('reason') or kind}",
                       level="INFO", counts=counts if kind == "skipped" else
                       (*counts, f"neardup/{kind}"), run=run,
                       follow_links=follows_links(run, self.config.duplicate_budget))  # fmt: skip

    def _unchanged_entry(self, page: PageView, prior: Prior) -> dict[str, Any]:
        """The log line of an unchanged page: its decision as it stands, estimated again
        against its cluster's representative for a dropped one."""
        record = prior.record
        fields: dict[str, Any] = {"doc_id": prior.doc_id, "cluster_id": record.cluster_id,
                                  "status": page.status, "reason": None}  # fmt: skip
        if record.decision in DUPLICATE_DECISIONS and record.cluster_id is not None:
            assert self.store is not None and self.clusterer is not None
            index = self.clusterer.index
            first = index.cluster(record.cluster_id).first_doc
            sketch = self.store.sketch(prior.doc_id)
            exact = None
            if record.decision == "exact_duplicate" and record.content_hash is not None:
                exact = index.find_exact(record.content_hash)
            if exact is not None:  # what it is identical to, as when it was decided
                first = exact[0]
                fields.update(resemblance=1.0, containment=1.0)
                if sketch is not None:  # the original's sketch is this one
                    est = estimate(sketch, sketch)
                    fields.update(matches=est.matches, sample_size=est.sample_size)
            elif sketch is not None:
                est = estimate(sketch, index.representative(record.cluster_id))
                fields.update(resemblance=_round(est.resemblance),
                              containment=_round(est.containment_a_in_b),
                              matches=est.matches, sample_size=est.sample_size)  # fmt: skip
            fields["duplicate_of"] = self._url_of(first)
            fields["reason"] = "unchanged since the store's last run"
        entry = _entry(page.url, record.decision, **fields)
        entry.update(self._change_fields(prior, "unchanged", None))
        return entry

    def _store_awaited(self, page: PageView, prior: Prior) -> Outcome:
        """The body of a page kept by a re-decision, fetched in full: stored in its document."""
        store = self.writing()
        captured = store.pages.capture(page.url, page.status, page.headers, page.body,
                                       time=page.fetched_at)  # fmt: skip
        store.put_document(prior.doc_id, replace(prior.record, page=captured.location))
        self._remember(page, prior, prior.doc_id, captured.payload_digest, capture_of(captured))
        where = captured.location
        entry = _entry(page.url, "kept", doc_id=prior.doc_id, cluster_id=prior.record.cluster_id,
                       reason="stored: fetched in full once it was decided again",
                       status=page.status, page=f"{where.file}:{where.offset}",
                       refetched=True)  # fmt: skip
        # the body of the page its re-decision kept, earlier in this run: what it was in the
        # previous run is on that line
        entry.update(self._change_fields(None, "unchanged", None))
        self.queue(entry)
        self.item_done()
        return Outcome(counts=("neardup/refetched", "neardup/kept"), stored_bytes=where.length)

    def _redecided(
        self, redecisions: Sequence[Redecision], cause: str, what: str
    ) -> tuple[str, ...]:
        """Record the orphans of a page's old document, each decided again as a new document
        (their content did not change); the URLs of those now kept, whose bodies the store
        does not have: the crawl fetches them in full."""
        store = self.store
        assert store is not None
        fetch = []
        for again in redecisions:
            old = store.document(again.old_doc)
            assert old is not None
            assignment = again.assignment
            kind = assignment.decision.kind
            record = DocumentRecord(old.url, kind, time.time(), assignment.cluster_id,
                                    old.content_hash, None)  # fmt: skip
            store.put_document(again.new_doc, record, store.sketch(again.old_doc))
            if kind == "kept":
                fetch.append(old.url)
            else:
                text = store.text(again.old_doc)
                if text is not None:
                    store.put_text(again.new_doc, text)
            key = url_key(old.url)
            state = store.history.get(key)
            entry = self._redecision_entry(old, again, cause, what)
            if self._counted_here(Prior(again.old_doc, old, state)):
                self._replaced.append((old.decision, None))
                self._recounted.add(id(entry))
            self._redecided_keys.setdefault(key, state.duplicate_run if state else None)
            awaiting = kind == "kept"
            # decided in this run: its own request, later in the run, passes it over (an
            # unchanged 304 would put its previous decision back in the log and the WARC
            # files), with the duplicate run that request would have given it
            copied = assignment.cluster_id if kind != "kept" else None
            own_run = run_after(state.duplicate_run if state is not None else None, copied)
            if state is None:
                state = UrlState(self.run, again.new_doc, 200, old.time, awaiting_body=awaiting,
                                 duplicate_run=own_run)  # fmt: skip
            else:
                state = replace(state, run=self.run, doc_id=again.new_doc,
                                awaiting_body=awaiting, duplicate_run=own_run)  # fmt: skip
            store.history.put(key, state)
            self.queue(entry)
            self._batch_items += 1
        return tuple(fetch)

    def _counted_here(self, prior: Prior) -> bool:
        """True when this process counted the URL's decision in this run (not the killed
        process whose run it resumes): a later decision of the URL replaces it in the tally."""
        state = prior.state
        return state is not None and state.run == self.run and (
            url_key(prior.record.url) in self._redecided_keys
            or state.fetched_at >= self._counted_since
        )

    def _redecision_entry(
        self, old: DocumentRecord, again: Redecision, cause: str, what: str
    ) -> dict[str, Any]:
        decision = again.assignment.decision
        entry = _entry(
            old.url,
            decision.kind,
            reason=f"re-decided: its kept page {cause} {what}",
            doc_id=again.new_doc,
            cluster_id=again.assignment.cluster_id,
            duplicate_of=self._url_of(decision.duplicate_of),
            resemblance=1.0 if decision.kind == "exact_duplicate" else _round(decision.resemblance),
            containment=_round(decision.containment),
            matches=decision.matches,
            sample_size=decision.sample_size,
            redecided=True,
        )
        prior = Prior(again.old_doc, old, None)
        entry.update(self._change_fields(prior, "unchanged", None))
        return entry

    def _stored(self, doc_id: int) -> Stored:
        """A document as :mod:`dedup.changes` decides it again: its sketch and content hash."""
        store = self.store
        assert store is not None
        record, sketch = store.document(doc_id), store.sketch(doc_id)
        assert record is not None and record.content_hash is not None and sketch is not None
        return Stored(doc_id, sketch, record.content_hash)

    def _remember(
        self,
        page: PageView,
        prior: Prior | None,
        doc_id: int,
        digest: str | None,
        capture: Capture | None,
        own_run: tuple[int, int] | None = None,
    ) -> UrlState:
        """Write what this run saw of the page's URL (storage.history), with its duplicate
        run (crawler.work.links)."""
        assert self.store is not None
        state = state_after(
            prior.state if prior is not None else None, run=self.run, doc_id=doc_id,
            status=page.status, headers=page.headers,
            fetched_at=page.fetched_at or time.time(), digest=digest, capture=capture,
            duplicate_run=own_run, depth=page.depth,
        )  # fmt: skip
        self.store.history.put(url_key(page.url), state)
        return state

    def _content_capture(self, prior: Prior) -> tuple[Capture, str]:
        """The capture holding a kept page's content, and its payload digest."""
        state, page = prior.state, prior.record.page
        if state is not None and state.capture is not None and state.payload_digest:
            return state.capture, state.payload_digest
        assert self.store is not None and page is not None
        found = self.store.pages.captured(page)  # a store made before the history
        return capture_of(found), found.payload_digest

    def _revisit_head(
        self, page: PageView, stored: DocumentRecord | None
    ) -> tuple[int, list[tuple[str, str]]]:
        """The status and headers a revisit record gives for the page: its own, or for a 304
        the stored response's as the 304 refreshed them (storage.pages.revisit_record)."""
        if page.status != 304 or stored is None or stored.page is None:
            return page.status, page.headers
        assert self.store is not None
        held = self.store.pages.read_head(stored.page)
        return held.status, refreshed_headers(held.headers, page.headers)

    def _mirror(
        self,
        page: PageView,
        original_doc: int | None,
        digest: str,
        status: int,
        headers: list[tuple[str, str]],
    ) -> None:
        """A URL-agnostic revisit for an exact duplicate whose body is byte for byte its kept
        original's (a mirror), so that replay serves the mirror's URL too."""
        store = self.store
        assert store is not None
        original = store.document(original_doc) if original_doc is not None else None
        if original is None or original.decision != "kept" or original.page is None:
            return
        state = store.history.get(url_key(original.url))
        capture, held = self._content_capture(Prior(original_doc, original, state))  # type: ignore[arg-type]
        if held != digest:
            return
        store.pages.revisit(page.url, profile=IDENTICAL_PAYLOAD, status=status, headers=headers,
                            refers_to_uri=original.url, refers_to_date=capture.date,
                            refers_to_id=capture.record_id, digest=digest,
                            time=page.fetched_at)  # fmt: skip

    def _url_of(self, doc_id: int | None) -> str | None:
        if doc_id is None or self.store is None:
            return None
        record = self.store.document(doc_id)
        return record.url if record is not None else None

    def _decided_url(self, doc_id: int | None) -> str | None:
        """The URL of a document the clusterer names: the store's, or on a node of a
        distributed crawl the crawl's (a decision's order, of a page on any node)."""
        if self.shared is not None:
            return self.shared.url_of(doc_id)
        return self._url_of(doc_id)

    def _local_doc(self, doc_id: int | None) -> int | None:
        """The store's document for a document the clusterer names (None: another node's)."""
        if self.shared is None or doc_id is None:
            return doc_id
        url = self.shared.url_of(doc_id)
        local = self.store.find_url(url) if url is not None and self.store is not None else None
        if local is None or self.store is None or self.store.order_of(local) != doc_id:
            return None
        return local

    def _decided_elsewhere(self, page: PageView, node: int) -> Outcome:
        """A URL another node of the crawl decided (one redirect leads to from its own host):
        it is that node's, and this one keeps nothing of it."""
        self.tally.already_decided += 1
        self._durable.append(page.url)
        assert self.shared is not None
        return Outcome(
            drop="already_decided",
            message=f"already decided: {page.url} by node {node}/{self.shared.node.nodes}",
            level="DEBUG",
            counts=("neardup/already_decided",),
            follow_links=False,
        )

    def _change_fields(
        self, prior: Prior | None, change: str, similar: float | None
    ) -> dict[str, Any]:
        """The recrawl's fields of a decision line (docs/crawling.md)."""
        return {
            "crawl_run": self.run,
            "change": change,
            "previous_decision": prior.record.decision if prior is not None else None,
            "previous_cluster_id": prior.record.cluster_id if prior is not None else None,
            "change_resemblance": _round(similar),
        }

    def store_page(self, page: PageView) -> Outcome:
        """The storage stage's step (unfused): append the kept page, record where it is."""
        if not self.clean:
            return self.stopped()
        pending = self.pending.get(page.url)
        if pending is None:
            # not a page the dedup stage kept: a pipeline between them made another item
            if not self._told_foreign:
                logger.warning("StoragePipeline: %s was not kept by DedupPipeline; not stored",
                               page.url)  # fmt: skip
                self._told_foreign = True
            return Outcome()
        return self.guarded(page.url, lambda: self._store_pending(page, pending))

    def _store_pending(self, page: PageView, pending: Pending) -> Outcome:
        started = time.perf_counter()
        store = self.writing()
        captured = store.pages.capture(
            page.url, page.status, page.headers, page.body, time=page.fetched_at
        )
        location = captured.location
        store.put_document(pending.doc_id, replace(pending.record, page=location))
        store.history.put(url_key(page.url), replace(pending.state, capture=capture_of(captured)))
        del self.pending[page.url]
        pending.entry["page"] = f"{location.file}:{location.offset}"
        self.spent("store", time.perf_counter() - started)
        self.queue(pending.entry)
        self.item_done()
        return Outcome(counts=("neardup/kept",), stored_bytes=location.length)

    def not_stored(self, url: str, why: str) -> Outcome:
        """A kept page that will not reach the storage stage: decided, recorded, not stored.

        Its document stays (page-less, as in a dedup-only crawl), so its copies are still
        recognised; its log line says why it has no page.
        """
        pending = self.pending.pop(url, None) if self.clean else None
        if pending is None:
            return Outcome()
        pending.entry["reason"] = f"not stored: {why}"
        self.not_stored_count += 1
        self.queue(pending.entry)
        return self.guarded(url, self._item_done_outcome)

    def tick(self) -> Outcome:
        """The timer's step: commit an idle batch that is old enough."""
        if self.clean and self._batch is not None and self._batch_age() >= (
            self.config.batch_seconds
        ):
            return self.guarded(None, self._commit_outcome)
        return Outcome()

    def finish(self) -> dict[str, Any]:
        """The last step: settle pages left between the stages, commit, close the store.

        Returns the run's totals (:meth:`totals`), ``error``, the :class:`Failure` of a
        final commit that did not happen (None when it committed, or when the work had stopped
        already: that failure was reported then), and ``durable``, the URLs the last commit
        settled (:meth:`take_durable`).
        """
        was_clean = self.clean
        try:
            if self.clean:
                for url in list(self.pending):  # pages that never reached the storage stage
                    self.not_stored(url, "the crawl closed before it reached the storage stage")
            if self.clean:
                self.commit()
        except Exception as exc:  # noqa: BLE001 - named by Failure.of, reported by the session
            self.fail(Failure.of(exc, None, self.config.store))
        finally:
            self.abort()
        sizes = self.store.stats() if self.store is not None and self.clean else {}
        try:
            self.close()
        except STORE_FAILURES as exc:
            self.fail(Failure.of(exc, None, self.config.store))
        error = self.failure if was_clean and not self.clean else None
        return {**self.totals(), "sizes": sizes, "error": error, "durable": self.take_durable()}

    def totals(self) -> dict[str, Any]:
        """The counters the stats and the command's summary show (``cpu``: this process's CPU
        seconds, reported by the worker process only)."""
        return {"tally": self.tally, "seconds": dict(self.seconds), "clean": self.clean,
                "not_stored": self.not_stored_count, "cpu": None,
                "crawl_run": self.run}  # fmt: skip

    def close(self) -> None:
        """Close the log and the store. After a failure they may fail to close too (the disk
        that refused the batch refuses their last flush): that is logged, not raised, since
        the failure was reported already and the next open repairs what is left."""
        self.abort()
        log, self.log = self.log, None
        store, self.store = self.store, None
        shared, self.shared = self.shared, None
        if shared is not None:
            shared.close()
        for part in (log, store):
            if part is None:
                continue
            try:
                part.close()
            except STORE_FAILURES as exc:
                if self.clean:
                    raise
                logger.debug("neardup: closing %s after a failure: %s", type(part).__name__, exc)

    # --- failures -------------------------------------------------------------------------------

    def guarded(self, url: str | None, step: Callable[[], Outcome | None]) -> Any:
        """``step()``, or, when it raises, the work stopped with the :class:`Failure` that the
        exception means (a store failure or a bug: module doc, *Failures*)."""
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - each kind is named by Failure.of
            return self.failed(Failure.of(exc, url, self.config.store))

    def failed(self, failure: Failure) -> Outcome:
        """Stop the work for ``failure``: abort the batch, forget its log lines and the pages
        between the stages; the outcome that reports it (the session stops the crawl)."""
        if failure.kind == "bug":
            logger.debug("neardup: %s\n%s", failure.line, failure.details)
        self.fail(failure)
        return Outcome(drop="store_failed", message=failure.drop_message, level="INFO",
                       failure=failure)  # fmt: skip

    def stopped(self) -> Outcome:
        """The drop of a page that arrives once the work has stopped; it carries the failure
        again, so that whichever outcome the session reads first stops the crawl."""
        return Outcome(drop="store_failed", message=STOPPING, level="INFO",
                       failure=self.failure)  # fmt: skip

    def _item_done_outcome(self) -> Outcome:
        self.item_done()
        return Outcome()

    def _commit_outcome(self) -> Outcome:
        self.commit()
        return Outcome()

    def _canonicalise(self, page: PageView) -> JoinedTokens:
        started = time.perf_counter()
        # the charset the headers name, as the spider and re-clustering the stored page read it
        encoding = charset_of(page.content_type()) if page.kind == "html" else None
        tokens = document_tokens(
            page.body,
            page.kind,
            self.config.sketch.unit,
            self.config.dedup.canonicaliser,
            encoding=encoding,
            area=self.config.area,
        )
        self.spent("canonicalise", time.perf_counter() - started)
        return tokens

    def _skip(
        self,
        page: PageView,
        reason: str,
        detail: str | None,
        *,
        count_reason: bool = True,
        prior: Prior | None = None,
    ) -> Outcome:
        """Record the page as skipped (so a resumed crawl does not decide it again); drop it.

        A URL the store had content for leaves its cluster, and the pages that duplicated it
        are decided again (its page ``gone``, or ``changed`` into one that cannot be
        compared); one skipped before for the same answer keeps its document (``unchanged``).
        ``neardup/skipped`` counts every skip; ``neardup/skipped/<reason>`` is counted here
        for the reasons this stage finds, and by the spider for the reasons it gives. Call it
        through :meth:`guarded`: it writes to the store.
        """
        store = self.writing()
        change = change_of(prior, page.status, reason, None) or "changed"
        fetch: tuple[str, ...] = ()
        if prior is not None and change == "unchanged":
            doc_id = prior.doc_id
        else:
            doc_id = store.next_doc_id()
            if prior is not None and prior.had_content:
                assert self.clusterer is not None
                done = replace_document(self.clusterer, self._stored(prior.doc_id), None,
                                        load=self._stored, new_doc_id=store.next_doc_id)  # fmt: skip
                what = "is gone" if change == "gone" else "changed"
                fetch = self._redecided(done.redecided, page.url, what)
            store.put_document(doc_id, DocumentRecord(page.url, "skipped", time.time()))
        body = payload_digest(page.body) if page.body else None
        self._remember(page, prior, doc_id, body, None)
        entry = _entry(page.url, "skipped", reason=reason, doc_id=doc_id, detail=detail,
                       status=page.status)  # fmt: skip
        if self.shared is not None:  # its place in the crawl's order, as every decision has
            entry["order"] = order = self.shared.take_order()
            store.put_order(doc_id, order)
        entry.update(self._change_fields(prior, change, None))
        self.queue(entry)
        self.item_done()
        counts = ("neardup/skipped", f"neardup/skipped/{reason}") if count_reason else _SKIPPED
        # a page the spider skipped comes without links; one skipped here (it could not be
        # sketched) is no copy of anything, and its links are followed
        return Outcome(drop="skipped", message=f"skipped ({reason}): {detail or reason}",
                       level="DEBUG", counts=(*counts, f"neardup/change/{change}"),
                       follow_links=True, fetch=fetch)  # fmt: skip

    # --- the batch ------------------------------------------------------------------------------

    def writing(self) -> Store:
        """The store, with a write batch open (begun here if there is none)."""
        store = self.store
        if store is None:
            raise RuntimeError("the neardup session is not open (open_spider was not called)")
        if self._batch is None:
            batch = store.batch()
            batch.__enter__()
            self._batch = batch
            self._batch_started = time.monotonic()
            self._batch_items = 0
        return store

    def spent(self, part: str, seconds: float) -> None:
        """Add to the per-page cost split, ``neardup/seconds/<part>`` (cumulative seconds)."""
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds

    def queue(self, entry: dict[str, Any]) -> None:
        """A decision's log line, written (and counted) once the batch holding it has
        committed; on a node of a distributed crawl it names the node (``I/K``)."""
        node = self.config.crawl_node
        if node is not None:
            entry["node"] = node.label
        self._queued.append(entry)

    def take_durable(self) -> list[str]:
        """The URLs whose pages the store has settled since the last call: decided and
        committed, or passed over (nothing to write). A distributed crawl's frontier
        acknowledges each only then (crawler.frontier.acks)."""
        durable, self._durable = self._durable, []
        return durable

    def item_done(self) -> None:
        """One decision is complete; commit if the batch is full or old enough."""
        self._batch_items += 1
        if self._batch_items >= self.config.batch_size or self._batch_age() >= (
            self.config.batch_seconds
        ):
            self.commit()

    def must_hold(self) -> bool:
        """True when a new decision should wait: the batch is full counting the kept pages
        between the stages, which hold its commit back (module doc)."""
        if not self.pending or self._batch is None:
            return False
        return self._batch_items + len(self.pending) >= self.config.batch_size or (
            self._batch_age() >= self.config.batch_seconds
        )

    def commit(self) -> bool:
        """Commit the batch (WARC fsync, then LMDB), then write its log lines.

        Returns False, doing nothing, while a kept page is between the stages.
        """
        if self.pending:
            return False
        if self._batch is not None:
            started = time.perf_counter()
            batch, self._batch = self._batch, None
            batch.__exit__(None, None, None)  # a failure: fail() forgets the queued lines
            self.tally.commits += 1
            self.spent("store", time.perf_counter() - started)
        queued, self._queued = self._queued, []
        replaced, self._replaced = self._replaced, []
        recounted, self._recounted = self._recounted, set()
        for decision, change in replaced:
            self.tally.decisions[decision] -= 1
            if change is not None:
                self.tally.changes[change] -= 1
        self._durable.extend(entry["url"] for entry in queued if not entry.get("redecided"))
        for entry in queued:
            if entry.get("refetched"):  # the body of a page decided (and counted) before
                continue
            self.tally.decisions[entry["decision"]] += 1
            if entry.get("redecided"):
                self.tally.changes["redecided"] += 1
            if entry.get("change") and id(entry) not in recounted:
                self.tally.changes[entry["change"]] += 1
            if entry["decision"] == "skipped":
                self.tally.skipped[entry["reason"] or "unknown"] += 1
        if self.log is not None and queued:
            self.log.write_many(queued)
        return True

    def commit_if_due(self) -> None:
        """Commit a full or old batch between steps (the worker's hold); a failure stops the
        work, and the next step's outcome reports it (:meth:`stopped`)."""
        if self.clean and not self.pending and self._batch is not None and (
            self._batch_items >= self.config.batch_size
            or self._batch_age() >= self.config.batch_seconds
        ):
            self.guarded(None, self._commit_outcome)

    def fail(self, failure: Failure) -> None:
        """The work stops: abort the batch, forget its log lines and the pages between."""
        self.clean = False
        if self.failure is None:
            self.failure = failure
        self.abort()
        self.tally.not_committed += len(self._queued) + len(self.pending)
        self._queued.clear()
        self._replaced.clear()
        self._recounted.clear()
        self.pending.clear()

    def abort(self) -> None:
        """Abort the open batch, if any. The store cuts off what the batch wrote; where it
        cannot (the disk that failed the batch fails the repair too), the next open does."""
        batch, self._batch = self._batch, None
        if batch is not None:
            error = RuntimeError("batch aborted")
            try:
                batch.__exit__(type(error), error, None)
            except Exception as exc:  # noqa: BLE001 - the failure itself is reported elsewhere
                if exc is not error:
                    logger.debug("neardup: aborting the batch: %s", exc, exc_info=True)

    def _batch_age(self) -> float:
        return time.monotonic() - self._batch_started if self._batch is not None else 0.0


def _writable(url: str) -> bool:
    """True when ``url`` can be written as UTF-8 (a lone surrogate cannot)."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _entry(url: str, decision: str, **fields: Any) -> dict[str, Any]:
    """A dedup-log line (storage.log.DedupLog.write's keywords), decided now."""
    return {"url": url, "decision": decision, "time": time.time(), **fields}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


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
    matches = decision.matches
    reason = None
    if kind == "exact_duplicate":
        # identical canonical streams: both are exactly 1, every sketch entry matches (the
        # estimate against the cluster's representative, which may be another member, is not
        # what this page matched)
        resemblance = containment = 1.0
        matches = decision.sample_size
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
        matches=matches,
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


def _other_body(prior: Prior, digest: str | None) -> bool:
    """True when a body came (``digest``) that is not the one the URL's state records."""
    known = prior.state.payload_digest if prior.state is not None else None
    return digest is not None and known is not None and digest != known
