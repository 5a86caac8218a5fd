"""Why a page was kept or dropped: the facts ``neardup explain`` and ``neardup report`` format.

(*What* was decided is :mod:`crawler.review.log`'s question.)

:func:`explain` gives an :class:`Explanation`: for a dropped
  page, the page it duplicated, resemblance and both containments estimated from the two stored
  sketches (with how many sketch entries matched) and computed exactly from the two canonical
  token streams, and the passages where the streams differ; for a kept page, its cluster and
  every page dropped into it.

**Where the canonical text comes from.** A kept page's from its stored WARC record,
canonicalised again with the store's parameters and the charset of its ``Content-Type`` (the
spider's rule), and checked against the content hash recorded when it was decided. A dropped
page never reaches the WARC files, so the crawl keeps its canonical token stream, compressed, in
the store's ``texts`` database (``review.keep_text``, cut at ``review.max_text_bytes``): see
:func:`~storage.texts.stored_text`. When no text is there (the switch was off, the store
predates it) the explanation says so and still gives the estimates, which need only the
sketches.

**Runs.** A URL crawled again is decided in each run; :attr:`Explanation.history` is its state
at the end of each run (its last line there), and the page's own line says what changed since
the previous run, with the decision and cluster it had then.

**The nodes of a distributed crawl** each keep a store, and a page can duplicate a page of
another node: ``explain(store, url, elsewhere=others)`` looks for the original (and, for a kept
page, the members of its cluster, whose ids are the whole crawl's) in the other stores too.

Everything here only reads: open the store read-only and it works while a crawl writes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from crawler.review.changes import RunState, run_states
from crawler.review.log import LoggedDecision, crawl_run_of, logged_lines
from crawler.review.textdiff import Passage, differences
from dedup.canonical import document_tokens
from dedup.document import Sketcher, content_hash
from dedup.estimators import estimate, exact_containment, exact_resemblance
from dedup.html_text import charset_of
from dedup.params import ContentArea, SketchParams
from storage.errors import StoreError
from storage.records import DROPPED, DocumentRecord
from storage.store import Store
from storage.texts import tokens_of_text

__all__ = [
    "ClusterFacts",
    "Comparison",
    "Explanation",
    "Member",
    "PageFacts",
    "UnknownURL",
    "explain",
]


class UnknownURL(LookupError):
    """The store has no decision for this URL; the message says how to find the right one."""


# --- explaining one decision --------------------------------------------------------------------


@dataclass(frozen=True)
class PageFacts:
    """One page of an explanation: its record, and its canonical text when it can be had."""

    url: str
    doc_id: int
    decision: str
    #: when it was decided, seconds since the epoch
    time: float
    cluster_id: int | None
    #: where its page is in the page store, ``file:offset`` (kept pages only)
    page: str | None
    #: distinct shingles, from its stored sketch (None without a sketch)
    shingles: int | None
    #: the canonical token stream, or None when it cannot be had (see ``text_note``)
    tokens: tuple[str, ...] | None = field(default=None, repr=False)
    #: "page store" (re-canonicalised from the WARC record) or "kept text" (the texts db)
    text_source: str | None = None
    #: False when the text is only a prefix of the stream that was sketched
    text_complete: bool = False
    #: one line: why there is no text, or why it is incomplete
    text_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "doc_id": self.doc_id,
            "decision": self.decision,
            "time": self.time,
            "cluster_id": self.cluster_id,
            "page": self.page,
            "tokens": None if self.tokens is None else len(self.tokens),
            "shingles": self.shingles,
            "text_source": self.text_source,
            "text_complete": self.text_complete,
            "text_note": self.text_note,
        }


@dataclass(frozen=True)
class Comparison:
    """A page (A) against the page it duplicated (B): estimated, exact, and where they differ.

    Estimates come from the two stored sketches (Theorem 1); ``matches`` of ``sample_size``
    sketch entries agreed (MIN_s: among the first s' of the merged sketches). Exact values come
    from the full shingle sets of the two token streams, and are None without both texts;
    ``exact_partial`` says a text was cut (``review.max_text_bytes``), so the exact values are
    those of the kept prefixes. ``differences`` are the passages where the streams differ.
    """

    estimated_resemblance: float | None
    estimated_containment_a_in_b: float | None
    estimated_containment_b_in_a: float | None
    matches: int | None
    sample_size: int | None
    exact_resemblance: float | None = None
    exact_containment_a_in_b: float | None = None
    exact_containment_b_in_a: float | None = None
    shared_shingles: int | None = None
    exact_partial: bool = False
    differences: tuple[Passage, ...] = ()
    #: tokens the two streams share, in the alignment of ``differences``
    shared_tokens: int | None = None

    @property
    def has_exact(self) -> bool:
        return self.exact_resemblance is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": {
                "resemblance": self.estimated_resemblance,
                "containment_a_in_b": self.estimated_containment_a_in_b,
                "containment_b_in_a": self.estimated_containment_b_in_a,
                "matches": self.matches,
                "sample_size": self.sample_size,
            },
            "exact": None
            if not self.has_exact
            else {
                "resemblance": self.exact_resemblance,
                "containment_a_in_b": self.exact_containment_a_in_b,
                "containment_b_in_a": self.exact_containment_b_in_a,
                "shared_shingles": self.shared_shingles,
                "partial": self.exact_partial,
            },
            "shared_tokens": self.shared_tokens,
            "differences": [p.to_dict() for p in self.differences],
        }


@dataclass(frozen=True)
class Member:
    """A page of a cluster, with its estimated resemblance to the page being explained."""

    url: str
    doc_id: int
    decision: str
    time: float
    resemblance: float | None
    matches: int | None
    sample_size: int | None
    #: the store that holds it, when it is another node's than the page explained
    store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "doc_id": self.doc_id,
            "decision": self.decision,
            "time": self.time,
            "resemblance": self.resemblance,
            "matches": self.matches,
            "sample_size": self.sample_size,
            "store": self.store,
        }


@dataclass(frozen=True)
class ClusterFacts:
    """A cluster: its first page and every other member (the pages dropped into it)."""

    cluster_id: int
    size: int
    #: True while every member has the first member's canonical text
    identical: bool
    first_doc: int
    first_url: str | None
    #: every member but the explained page, in decision order
    members: tuple[Member, ...]
    #: the store that holds the first page, when it is another node's than the page explained
    first_store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "size": self.size,
            "identical": self.identical,
            "first_doc": self.first_doc,
            "first_url": self.first_url,
            "first_store": self.first_store,
            "members": [m.to_dict() for m in self.members],
        }


@dataclass(frozen=True)
class Explanation:
    """Why one page got its decision; :meth:`to_dict` is the ``--json`` form.

    ``page`` is the page asked about (A). For a dropped page, ``original`` is the page it
    duplicated (B) and ``comparison`` compares the two. ``cluster`` is the page's cluster (for
    a kept page: the pages dropped into it). ``log`` is the page's dedup-log line, if the log
    has it (``reason`` and ``duplicate_of`` come from there). ``notes`` are one-line caveats
    (a text not kept, a text cut, an original found without the log, ...). ``history`` is the
    URL's state at the end of each crawl run that decided it, oldest first (the last is the
    page's own line); ``store`` the store that holds it, when several were searched.
    """

    page: PageFacts
    params: SketchParams
    log: dict[str, Any] | None = None
    original: PageFacts | None = None
    comparison: Comparison | None = None
    cluster: ClusterFacts | None = None
    notes: tuple[str, ...] = ()
    #: which part of each page was compared (the store's content area)
    area: ContentArea = ContentArea()
    history: tuple[RunState, ...] = ()
    store: str | None = None
    #: the store that holds the original, when it is another than the page's
    original_store: str | None = None

    @property
    def dropped(self) -> bool:
        return self.page.decision in DROPPED

    @property
    def reason(self) -> str | None:
        """Why it has its decision: its line's reason (of the line of its run that gave it the
        decision, should a later one only confirm it)."""
        latest = self.latest
        return None if latest is None else latest.reason

    @property
    def latest(self) -> RunState | None:
        """The URL's state at the end of the run its line is of: from all its lines of that
        run when the history was read, else from its line alone (None without a line)."""
        if self.log is None:
            return None
        run = crawl_run_of(self.log)
        if self.history and self.history[-1].run == run:
            return self.history[-1]
        return RunState.of(LoggedDecision("", "", self.log))

    @property
    def previous_decision(self) -> str | None:
        """The URL's decision at the end of the run before, if it had one."""
        latest = self.latest
        return None if latest is None else latest.previous_decision

    @property
    def previous_cluster_id(self) -> int | None:
        latest = self.latest
        return None if latest is None else latest.previous_cluster_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.page.url,
            "decision": self.page.decision,
            "reason": self.reason,
            "page": self.page.to_dict(),
            "duplicate_of": None if self.original is None else self.original.to_dict(),
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
            "cluster": None if self.cluster is None else self.cluster.to_dict(),
            "log": self.log,
            "notes": list(self.notes),
            "parameters": self.params.to_dict(),
            "canonical": self.area.to_dict(),
            "run": None if self.log is None else crawl_run_of(self.log),
            "change": None if self.latest is None else self.latest.change,
            "previous_decision": self.previous_decision,
            "previous_cluster_id": self.previous_cluster_id,
            "history": [h.to_dict() for h in self.history],
            "store": self.store,
            "original_store": self.original_store,
        }


#: ``explain(log=...)``'s default: read the page's line from the dedup logs
READ_LOG: Any = object()


def explain(
    store: Store,
    url: str,
    *,
    log: dict[str, Any] | None = READ_LOG,
    elsewhere: Sequence[Store] = (),
    cluster: bool = True,
) -> Explanation:
    """Explain the decision the store holds for ``url`` (exactly this string).

    Raises :class:`UnknownURL` when the store has no decision for it. Reads the index, the
    page store and the dedup logs; writes nothing. A caller that explains many pages (the
    report) has read the logs once already and passes each page's ``log`` line (or None),
    instead of a scan of every log per page; the URL's ``history`` comes from that scan, so it
    is left empty then.

    ``elsewhere`` are the other stores of the crawl (the other nodes): the original of a
    dropped page is looked for there too, and a kept page's cluster, when its own index does
    not hold it, is gathered from the documents of every store (a scan of them all;
    ``cluster=False`` leaves the cluster out, for a caller that lists clusters itself).
    """
    doc_id = store.find_url(url)
    record = store.document(doc_id) if doc_id is not None else None
    if doc_id is None or record is None:
        raise UnknownURL(
            f"no decision for {url} in store {store.path} (the exact URL; find it with: "
            f"neardup log --store {store.path} --url-contains TEXT, or from a path or a part "
            "of it with crawler.review.urls.resolve)"
        )
    notes: list[str] = []
    history: tuple[RunState, ...] = ()
    if log is READ_LOG:
        log, history = _log_lines(store, url, doc_id)
    dropped = record.decision in DROPPED
    page = _facts(store, doc_id, record, notes, "this page", with_text=dropped)
    original = comparison = None
    original_store: Store | None = None
    if dropped:
        found = _original(store, record, doc_id, log, notes, elsewhere)
        original_record = found[0].document(found[1]) if found is not None else None
        if found is not None and original_record is not None:
            original_store, original_id = found
            original = _facts(original_store, original_id, original_record, notes, "the original")
            comparison = _compare(store, page, original_store, original, notes)
        else:
            named = (log or {}).get("duplicate_of")
            what = f"the page it duplicated ({named})" if named else "the page it duplicated"
            where = "these stores" if elsewhere else "the store"
            hint = ("" if elsewhere or store.crawl_node is None else
                    ": a node's store; give the other nodes' stores too (--store repeated)")
            notes.append(f"{what} could not be found in {where}{hint}")
    several = bool(elsewhere)
    return Explanation(
        page=page,
        params=store.params,
        area=store.manifest.canonical,
        log=log,
        original=original,
        comparison=comparison,
        cluster=_cluster(store, doc_id, record, elsewhere) if cluster else None,
        notes=tuple(notes),
        history=history,
        store=str(store.path) if several else None,
        original_store=str(original_store.path)
        if original_store is not None and original_store is not store
        else None,
    )


def _log_lines(
    store: Store, url: str, doc_id: int
) -> tuple[dict[str, Any] | None, tuple[RunState, ...]]:
    """The page's dedup-log line (the last one for its document, should a run repeat it), and
    the URL's state at the end of each run (its last line in each).

    Lines are decoded only when they contain the URL as JSON writes it, so a long log costs
    one substring test per line.
    """
    needle = json.dumps(url, ensure_ascii=False)
    found: dict[str, Any] | None = None
    mine = []
    for logged in logged_lines(store):
        if needle not in logged.line or logged.entry.get("url") != url:
            continue
        mine.append(logged)
        if logged.entry.get("doc_id") in (doc_id, None):
            found = logged.entry
    states = run_states(mine)
    return found, tuple(states[run] for run in sorted(states))


def _facts(
    store: Store,
    doc_id: int,
    record: DocumentRecord,
    notes: list[str],
    who: str,
    *,
    with_text: bool = True,
) -> PageFacts:
    sketch = store.sketch(doc_id)
    page = f"{record.page.file}:{record.page.offset}" if record.page is not None else None
    tokens, source, complete, note = None, None, False, None
    if with_text:
        tokens, source, complete, note = _tokens(store, doc_id, record)
    if note is not None:
        notes.append(f"{who}: {note}")
    return PageFacts(
        url=record.url,
        doc_id=doc_id,
        decision=record.decision,
        time=record.time,
        cluster_id=record.cluster_id,
        page=page,
        shingles=None if sketch is None else int(sketch.n),
        tokens=None if tokens is None else tuple(tokens),
        text_source=source,
        text_complete=complete,
        text_note=note,
    )


def _tokens(
    store: Store, doc_id: int, record: DocumentRecord
) -> tuple[list[str] | None, str | None, bool, str | None]:
    """(tokens, source, complete, note): from the page store if it has the page, else the
    texts database; complete when they hash to the content hash recorded at decision time."""
    params = store.params
    if record.page is not None:
        try:
            _, _, headers, body = store.read_page(record.page)
        except (StoreError, OSError) as exc:
            return None, None, False, f"its stored page cannot be read ({exc})"
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        tokens = document_tokens(
            body,
            "html",
            params.unit,
            encoding=charset_of(content_type),
            area=store.manifest.canonical,
        ).tokens()
        if record.content_hash is not None and content_hash(tokens) != record.content_hash:
            return tokens, "page store", False, (
                "its stored page canonicalises differently now than when it was decided "
                "(another canonicaliser version?); exact values are of today's text"
            )
        return tokens, "page store", True, None
    text = store.text(doc_id)
    if text is None:
        if record.decision == "kept":
            return None, None, False, "kept without its page (a crawl without the storage stage)"
        return None, None, False, (
            "its canonical text was not kept (review.keep_text was off, or the store "
            "predates it); only the estimates from the sketches are shown"
        )
    tokens = tokens_of_text(text, params.unit)
    if record.content_hash is not None and content_hash(tokens) != record.content_hash:
        return tokens, "kept text", False, (
            f"only the first {len(tokens):,} tokens of its text were kept "
            "(review.max_text_bytes); exact values are of that part"
        )
    return tokens, "kept text", True, None


def _original(
    store: Store,
    record: DocumentRecord,
    doc_id: int,
    log: dict[str, Any] | None,
    notes: list[str],
    elsewhere: Sequence[Store] = (),
) -> tuple[Store, int] | None:
    """The page a dropped page duplicated, and the store that holds it: the log's
    ``duplicate_of`` (in this store, else in the others); without it, the first page with the
    same text (exact duplicates) or the cluster's first page."""
    named = log.get("duplicate_of") if log is not None else None
    if isinstance(named, str):
        for holder in (store, *elsewhere):
            found = holder.find_url(named)
            if found is not None:
                return holder, found
    if record.decision == "exact_duplicate" and record.content_hash is not None:
        exact = store.index.find_exact(record.content_hash)
        if exact is not None and exact[0] != doc_id:
            notes.append("the dedup log has no line for this page: the original is the first "
                         "page with the same canonical text")  # fmt: skip
            return store, exact[0]
    if record.cluster_id is not None:
        try:
            first = store.index.cluster(record.cluster_id).first_doc
        except KeyError:
            return None
        if first != doc_id:
            notes.append("the dedup log has no line for this page: the original shown is its "
                         "cluster's first page")  # fmt: skip
            return store, first
    return None


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _compare(
    store: Store, a: PageFacts, b_store: Store, b: PageFacts, notes: list[str]
) -> Comparison:
    sketch_a, sketch_b = store.sketch(a.doc_id), b_store.sketch(b.doc_id)
    est: dict[str, Any] = dict.fromkeys(
        ("resemblance", "a_in_b", "b_in_a", "matches", "sample_size")
    )
    if sketch_a is not None and sketch_b is not None:
        e = estimate(sketch_a, sketch_b)
        est = {
            "resemblance": _number(e.resemblance),
            "a_in_b": _number(e.containment_a_in_b),
            "b_in_a": _number(e.containment_b_in_a),
            "matches": e.matches,
            "sample_size": e.sample_size,
        }
    else:
        notes.append("a sketch is missing from the store: no estimates")
    exact: dict[str, Any] = {}
    if a.tokens is not None and b.tokens is not None:
        sketcher = Sketcher(store.params)
        set_a, set_b = sketcher.exact_shingles(a.tokens), sketcher.exact_shingles(b.tokens)
        unit = store.params.unit
        found = differences(a.tokens, b.tokens, unit)
        changed = sum(p.a_end - p.a_start for p in found)
        exact = {
            "exact_resemblance": exact_resemblance(set_a, set_b),
            "exact_containment_a_in_b": exact_containment(set_a, set_b),
            "exact_containment_b_in_a": exact_containment(set_b, set_a),
            "shared_shingles": len(set_a & set_b),
            "exact_partial": not (a.text_complete and b.text_complete),
            "differences": tuple(found),
            "shared_tokens": len(a.tokens) - changed,
        }
    return Comparison(
        estimated_resemblance=est["resemblance"],
        estimated_containment_a_in_b=est["a_in_b"],
        estimated_containment_b_in_a=est["b_in_a"],
        matches=est["matches"],
        sample_size=est["sample_size"],
        **exact,
    )


def _cluster(
    store: Store, doc_id: int, record: DocumentRecord, elsewhere: Sequence[Store] = ()
) -> ClusterFacts | None:
    """The page's cluster, each other member with its estimated resemblance to the page: from
    the store's index; for a store whose index does not hold it (a node of a distributed crawl,
    whose index is shared), from the documents of every store."""
    if record.cluster_id is None:
        return None
    try:
        info = store.index.cluster(record.cluster_id)
    except KeyError:
        if not elsewhere:
            return None
        return _cluster_across(store, doc_id, record.cluster_id, elsewhere)
    own = store.sketch(doc_id)
    members = []
    for member_id in store.index.members(record.cluster_id):
        if member_id == doc_id:
            continue
        member = store.document(member_id)
        if member is not None:
            members.append(_member(store, member_id, member, own))
    first = store.document(info.first_doc)
    return ClusterFacts(
        cluster_id=info.cluster_id,
        size=info.size,
        identical=info.identical,
        first_doc=info.first_doc,
        first_url=None if first is None else first.url,
        members=tuple(members),
    )


def _member(
    store: Store, member_id: int, member: DocumentRecord, own: Any, named: str | None = None
) -> Member:
    sketch = store.sketch(member_id)
    r = matches = size = None
    if own is not None and sketch is not None:
        e = estimate(sketch, own)
        r, matches, size = _number(e.resemblance), e.matches, e.sample_size
    return Member(member.url, member_id, member.decision, member.time, r, matches, size, named)


def _cluster_across(
    store: Store, doc_id: int, cluster_id: int, elsewhere: Sequence[Store]
) -> ClusterFacts | None:
    """A cluster of the whole crawl, from the current documents of every store that hold its
    id. Its first page is its kept one (the earliest decided, without one)."""
    own = store.sketch(doc_id)
    found: list[tuple[Store, int, DocumentRecord]] = []
    for holder in (store, *elsewhere):
        for member_id, member in holder.current_documents():
            if member.cluster_id == cluster_id:
                found.append((holder, member_id, member))
    if not found:
        return None
    found.sort(key=lambda m: (m[2].decision != "kept", m[2].time))
    first_store, first_id, first = found[0]
    hashes = {m.content_hash for _, _, m in found}
    members = [
        _member(holder, member_id, member, own, None if holder is store else str(holder.path))
        for holder, member_id, member in sorted(found, key=lambda m: m[2].time)
        if not (holder is store and member_id == doc_id)
    ]
    return ClusterFacts(
        cluster_id=cluster_id,
        size=len(found),
        identical=len(hashes) == 1 and None not in hashes,
        first_doc=first_id,
        first_url=first.url,
        members=tuple(members),
        first_store=None if first_store is store else str(first_store.path),
    )
