"""``neardup recluster --store DIR --diff``: which crawl-time decisions other parameters change.

The store's pages are clustered again (:func:`crawler.recluster.recluster`, the crawl's own
decision path) with the new parameters, in the order the crawl decided them (document id
order, which is the order greedy clustering is defined by), and each page's new decision is
compared with the one the crawl recorded. The stores of a distributed crawl's nodes
(``--store`` repeated, every node's) are clustered together in the crawl's one order of
decisions (:func:`storage.nodes.in_crawl_order`), and each change names its node:

* **would now be dropped**: kept at crawl time, not the representative of its cluster now;
* **would now be kept**: dropped at crawl time (exact, near duplicate or contained), the
  representative of a cluster of its own now.

**What --diff can see.** A kept page is re-canonicalised from its stored copy, exactly as the
crawl did. A dropped page has no stored copy; it takes part only when the store kept its
canonical text (``review.keep_text``, read with ``Store.text``), which is re-tokenised: a
canonical stream is a fixed point of canonicalisation, so words and characters come out as
the crawl made them. An exact duplicate whose text was not kept is given the stored copy of the
first page with its content hash, which has the same canonical text by definition.

**What it cannot see**, and says so (``not_compared``, by reason):

* pages skipped at crawl time (not HTML, robots.txt, HTTP errors, empty): no text to cluster;
* dropped pages whose text was not kept (``review.keep_text: false``, or a store made before
  texts were kept); they are left out of the re-clustering. With the "first" representative
  rule a dropped page never represents a cluster, so leaving it out changes no other page's
  decision, except that a page identical to it is then found by its resemblance rather than by
  its content hash; with the "popular" rule members shape representatives, and the answer is
  approximate;
* kept pages whose copy was not stored (a dedup-only crawl);
* a text cut at ``review.max_text_bytes`` is clustered as cut, so the page's estimate can differ
  a little from the one a crawl would make;
* the ``line`` unit, for a store crawled by words or characters: its kept texts have no line
  breaks, so line tokens cannot be rebuilt (the other way round works: a line store's texts
  keep their lines, and words and characters come out of them as the crawl made them).

**Both engines.** :func:`diff_documents` is what is read, one document per record, whether
the local engine reads the whole store (:func:`diff_store`) or Spark's executors read chunks of
document ids (:func:`crawler.recluster.spark.diff.diff_store_spark`); what could not be compared
travels as the documents' skip reasons, so the driver reads records, never pages. Both hand
their clusters.jsonl lines to :func:`compare`: the same lines give the same report.

Only the decision is compared; a page dropped then and dropped now, but into another cluster
(a near duplicate now of another page), counts as unchanged. A re-clustering with the crawl's
own parameters therefore reports no change at all: the tests check that.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.recluster.inputs import (
    SourceDocument,
    StorePaths,
    crawl_stores,
    store_page_document,
    store_paths,
)
from dedup.params import ContentArea, DedupParams, SketchParams

if TYPE_CHECKING:
    from crawler.recluster.run import ReclusterResult
    from storage.records import DocumentRecord

__all__ = ["Change", "DiffResult", "compare", "diff_documents", "diff_store"]

#: why a page could not be compared, by the key its skip reason ends with
NOT_COMPARED = {
    "skipped": "skipped at crawl time (no text to cluster)",
    "no_text": "dropped at crawl time, canonical text not kept",
    "no_page": "kept at crawl time, page not stored",
    "empty": "no tokens with the new parameters",
    "line_unit": "dropped at crawl time; its kept text has no line breaks for the line unit",
}
#: the skip reason of a page that cannot be compared: this, then its key in NOT_COMPARED
NOT_COMPARED_REASON = "not compared: "
#: the skip reason of the note that follows a page compared by a text cut at max_text_bytes
CUT_TEXT = "cut text"


@dataclass(frozen=True)
class Change:
    """One page whose decision the new parameters change."""

    url: str
    doc_id: int
    #: what the crawl decided: kept, exact_duplicate, near_duplicate, contained
    crawl_decision: str
    #: what the re-clustering decides (clusters.jsonl's "decision": kept, near_duplicate, ...)
    new_decision: str
    new_cluster: int
    #: the estimate against the new cluster's representative (1.0 for a representative)
    resemblance: float | None
    #: the URL of the new cluster's representative (None for a page kept now)
    duplicate_of: str | None
    #: for a page dropped then, the URL it duplicated at crawl time (from the dedup log)
    crawl_duplicate_of: str | None = None
    #: of several node stores, the node (``I/K``) whose store holds the page
    node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "url": self.url,
            "doc_id": self.doc_id,
            "crawl_decision": self.crawl_decision,
            "new_decision": self.new_decision,
            "new_cluster": self.new_cluster,
            "resemblance": self.resemblance,
            "duplicate_of": self.duplicate_of,
            "crawl_duplicate_of": self.crawl_duplicate_of,
        }
        if self.node is not None:
            out["node"] = self.node
        return out


@dataclass
class DiffResult:
    #: the store compared (of several node stores, the first)
    store: str
    parameters: dict[str, Any]
    #: the node stores compared, when there are several
    stores: list[str] = field(default_factory=list)
    compared: int = 0
    now_dropped: list[Change] = field(default_factory=list)
    now_kept: list[Change] = field(default_factory=list)
    #: pages compared whose decision stays: "kept" and "dropped"
    unchanged: Counter[str] = field(default_factory=Counter)
    #: pages that could not be compared, by reason (keys of NOT_COMPARED)
    not_compared: Counter[str] = field(default_factory=Counter)
    #: dropped pages compared by a text cut at review.max_text_bytes (their estimate may differ)
    cut_texts: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> int:
        return len(self.now_dropped) + len(self.now_kept)

    def to_dict(self) -> dict[str, Any]:
        several = {"stores": self.stores} if self.stores else {}
        return {
            "store": self.store,
            **several,
            "parameters": self.parameters,
            "compared": self.compared,
            "changed": self.changed,
            "now_dropped": [c.to_dict() for c in self.now_dropped],
            "now_kept": [c.to_dict() for c in self.now_kept],
            "unchanged": {"kept": self.unchanged["kept"], "dropped": self.unchanged["dropped"]},
            "not_compared": {k: {"count": n, "why": NOT_COMPARED[k]}
                             for k, n in sorted(self.not_compared.items())},
            "cut_texts": self.cut_texts,
            "seconds": round(self.seconds, 3),
        }  # fmt: skip

    def render(self) -> str:
        """Two tables for people: pages now dropped, pages now kept; then what was not seen."""
        counts = (
            f"{self.compared:,} pages compared: {len(self.now_dropped):,} would now be dropped, "
            f"{len(self.now_kept):,} would now be kept, "
            f"{self.unchanged['kept']:,} stay kept, {self.unchanged['dropped']:,} stay dropped"
        )
        lines = [counts]
        if self.now_dropped:
            lines += ["", "would now be dropped (kept at crawl time):"]
            lines += self._changes(
                ["url", "now", "resemblance", "duplicate of"], self.now_dropped,
                lambda c: [c.url, c.new_decision, _r(c.resemblance), c.duplicate_of or ""],
            )  # fmt: skip
        if self.now_kept:
            lines += ["", "would now be kept (dropped at crawl time):"]
            lines += self._changes(
                ["url", "crawl decision", "duplicate of at crawl time"], self.now_kept,
                lambda c: [c.url, c.crawl_decision, c.crawl_duplicate_of or ""],
            )  # fmt: skip
        if self.cut_texts:
            cut = (
                f"{self.cut_texts:,} dropped pages were compared by their kept text, "
                "cut at review.max_text_bytes: their estimates may differ a little"
            )
            lines += ["", cut]
        if self.not_compared:
            lines += ["", "not compared:"]
            lines += [f"  {n:>6,}  {NOT_COMPARED[k]}" for k, n in
                      sorted(self.not_compared.items(), key=lambda kv: (-kv[1], kv[0]))]  # fmt: skip
        return "\n".join(lines)


    def _changes(
        self, head: list[str], changes: list[Change], row: Callable[[Change], list[str]]
    ) -> list[str]:
        """The table of ``changes``, a ``row`` each; of several node stores, each page's node
        first."""
        if not self.stores:
            return _table(head, [row(c) for c in changes])
        return _table(["node", *head], [[c.node or "", *row(c)] for c in changes])


def _r(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return out


def _was_cut(text: str, unit: str, recorded: int | None) -> bool:
    """True when a kept text is not the whole stream the crawl hashed (review.max_text_bytes)."""
    from dedup.document import content_hash
    from storage.texts import tokens_of_text

    return recorded is not None and content_hash(tokens_of_text(text, unit)) != recorded


def document_name(k: int, doc_id: int) -> str:
    """The id in clusters.jsonl of document ``doc_id`` of the ``k``-th store compared.

    >>> document_name(2, 17), document_of(document_name(2, 17))
    ('2:17', (2, 17))
    """
    return f"{k}:{doc_id}"


def document_of(name: str) -> tuple[int, int]:
    """``(k, doc_id)`` of a :func:`document_name`."""
    k, _, doc_id = name.partition(":")
    return int(k), int(doc_id)


def diff_documents(
    stores: Sequence[Any], entries: Iterable[tuple[int, int, DocumentRecord]], unit: str
) -> Iterator[SourceDocument]:
    """What the re-clustering reads for ``entries`` (``(k, doc_id, record)``: a record of the
    ``k``-th of the open ``stores``), in their order.

    One document per record, named by its store and document id (:func:`document_name`: the
    comparison reads the record back by it, so a URL decided twice is never mistaken for the
    other); a page that cannot be compared is a skipped document whose reason says why
    (:data:`NOT_COMPARED_REASON`), and a page compared by a cut text is followed by a skipped
    note (:data:`CUT_TEXT`). The skip reasons are the one thing both engines hand back about
    every document, so the counts come out the same whether this runs here or in Spark's
    executors.
    """
    for k, doc_id, record in entries:
        store = stores[k]
        text_of = getattr(store, "text", None)  # stores before texts were kept: None
        # a text keeps its unit's separators: lines survive only in a line store
        lines_lost = unit == "line" and store.params.unit != "line"
        name = document_name(k, doc_id)
        if record.decision == "skipped":
            yield _not_compared(name, "skipped")
            continue
        if record.page is not None:
            yield _page_source(store, name, record.page)
            continue
        text = text_of(doc_id) if text_of is not None else None
        source: SourceDocument | None = None
        if text is not None and not lines_lost:
            yield SourceDocument(name, "text", text)
            if _was_cut(text, store.params.unit, record.content_hash):
                yield SourceDocument(name, "text", "", skip_reason=CUT_TEXT)
            continue
        if record.decision == "exact_duplicate" and record.content_hash is not None:
            source = _identical_source(store, name, record.content_hash)
        if source is not None:
            yield source
        elif record.decision == "kept" and text is None:
            yield _not_compared(name, "no_page")
        else:
            yield _not_compared(name, "line_unit" if text is not None else "no_text")


def _not_compared(name: str, reason: str) -> SourceDocument:
    return SourceDocument(name, "text", "", skip_reason=NOT_COMPARED_REASON + reason)


def _page_source(store: Any, name: str, location: Any) -> SourceDocument:
    page = store.read_page(location)
    return store_page_document(name, page.headers, page.body)


def _identical_source(store: Any, name: str, content_hash: int) -> SourceDocument | None:
    """An exact duplicate, given the stored copy of the first page with its canonical text."""
    found = store.index.find_exact(content_hash)
    if found is None:
        return None
    first = store.document(found[0])
    if first is None or first.page is None:
        return None
    return _page_source(store, name, first.page)


def _sources(paths: StorePaths, unit: str) -> Iterator[SourceDocument]:
    """:func:`diff_documents` of every current record of the stores, in the crawl's order
    (:func:`storage.nodes.in_crawl_order`: one store's document id order).

    The stores are opened on the first ``next()``, in the process that reads the sources, so
    the re-clustering's worker processes never inherit their LMDB environments.
    """
    from storage.nodes import in_crawl_order

    with crawl_stores(paths) as stores:
        yield from diff_documents(stores, in_crawl_order(stores), unit)


def check_store(paths: StorePaths) -> None:
    """Before any work: a missing store is a :class:`~storage.errors.StoreNotFoundError`; the
    stores of a distributed crawl must be every node's, since each node decided against the
    pages of all (:class:`~storage.errors.StoreMismatchError` naming the nodes missing)."""
    from storage.errors import StoreMismatchError, StoreNotFoundError

    for path in store_paths(paths):
        if not Path(path).is_dir():
            raise StoreNotFoundError(f"no store at {path}")
    with crawl_stores(paths) as stores:
        nodes = [store.crawl_node for store in stores]
    if nodes[0] is None:
        return
    missing = sorted(set(range(1, nodes[0].nodes + 1)) - {node.node for node in nodes if node})
    if missing:
        labels = ", ".join(f"{n}/{nodes[0].nodes}" for n in missing)
        raise StoreMismatchError(
            f"--diff compares with the decisions of {nodes[0].describe()}, made against the "
            f"pages of all {nodes[0].nodes} nodes: give the stores of node {labels} too"
        )


def diff_store(
    paths: StorePaths,
    params: SketchParams,
    dedup: DedupParams,
    *,
    jobs: int | None = None,
    index_dir: str | Path | None = None,
    area: ContentArea | None = None,
) -> DiffResult:
    """Re-cluster the store at ``paths`` (or the stores of every node of a distributed crawl)
    with ``params``/``dedup`` (HTML read with the content area ``area``: the store's own, for
    pages read as the crawl read them); compare with the crawl. On Spark:
    :func:`crawler.recluster.spark.diff.diff_store_spark`."""
    from crawler.recluster.run import recluster

    check_store(paths)
    out = io.StringIO()
    result = recluster(_sources(paths, params.unit), params, dedup, out=out, jobs=jobs,
                       index_dir=index_dir, area=area)  # fmt: skip
    return compare(paths, params, dedup, out.getvalue().splitlines(), result)


def compare(
    paths: StorePaths,
    params: SketchParams,
    dedup: DedupParams,
    lines: Iterable[str],
    result: ReclusterResult,
) -> DiffResult:
    """The re-clustering of :func:`diff_documents` (its clusters.jsonl ``lines``, in input
    order, and its ``result``) against the crawl's decisions, read from the stores' records."""
    from storage.log import read_log

    given = store_paths(paths)
    several = len(given) > 1
    diff = DiffResult(
        store=given[0],
        stores=given if several else [],
        parameters={
            "sketch": params.to_dict(),
            "threshold": dedup.threshold,
            "containment": dedup.containment,
            "representative": dedup.representative,
        },
        seconds=result.seconds,
    )
    for reason, n in result.skipped.items():
        if reason.startswith(NOT_COMPARED_REASON):
            diff.not_compared[reason[len(NOT_COMPARED_REASON) :]] += n
        elif reason == CUT_TEXT:
            diff.cut_texts += n
        else:  # the re-clustering skipped it: no tokens now (or too deep to read)
            diff.not_compared["empty"] += n
    crawl_duplicate_of: dict[str, str | None] = {}
    for path in given:  # a URL is one node's: the logs of several stores name each URL once
        try:
            for entry in read_log(Path(path) / "logs"):
                if isinstance(entry.get("url"), str):
                    crawl_duplicate_of[entry["url"]] = entry.get("duplicate_of")
        except (OSError, ValueError):
            pass  # the log only adds the crawl's "duplicate of" to the table

    representative: dict[int, str] = {}
    with crawl_stores(given) as stores:
        nodes = [store.crawl_node.label if several else None for store in stores]
        for line in lines:
            row = json.loads(line)
            (k, doc_id), cluster = document_of(row["id"]), int(row["cluster"])
            is_rep = bool(row["representative"])
            record = stores[k].document(doc_id)
            assert record is not None, f"document {doc_id} was re-clustered, so it is recorded"
            url, then = record.url, record.decision
            if is_rep:
                representative[cluster] = url
            diff.compared += 1
            kept_then = then == "kept"
            now = row["decision"]
            if kept_then and not is_rep:
                diff.now_dropped.append(Change(url, doc_id, then, now, cluster, row["resemblance"],
                                               representative.get(cluster), None, nodes[k]))
            elif not kept_then and is_rep:
                diff.now_kept.append(Change(url, doc_id, then, now, cluster, None, None,
                                            crawl_duplicate_of.get(url), nodes[k]))
            else:
                diff.unchanged["kept" if kept_then else "dropped"] += 1
    return diff
