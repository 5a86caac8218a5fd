"""``neardup recluster --store DIR --diff``: which crawl-time decisions other parameters change.

The store's pages are clustered again (:func:`crawler.recluster.recluster`, the crawl's own
decision path) with the new parameters, in the order the crawl decided them (document id
order, which is the order greedy clustering is defined by), and each page's new decision is
compared with the one the crawl recorded:

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

Only the decision is compared; a page dropped then and dropped now, but into another cluster
(a near duplicate now of another page), counts as unchanged. A re-clustering with the crawl's
own parameters therefore reports no change at all: the tests check that.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.recluster.inputs import SourceDocument
from dedup.html_text import charset_of
from dedup.params import DedupParams, SketchParams

__all__ = ["Change", "DiffResult", "diff_store"]

#: crawl-time decisions of pages dropped into another page's cluster

NOT_COMPARED = {
    "skipped": "skipped at crawl time (no text to cluster)",
    "no_text": "dropped at crawl time, canonical text not kept",
    "no_page": "kept at crawl time, page not stored",
    "empty": "no tokens with the new parameters",
    "line_unit": "dropped at crawl time; its kept text has no line breaks for the line unit",
}


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "doc_id": self.doc_id,
            "crawl_decision": self.crawl_decision,
            "new_decision": self.new_decision,
            "new_cluster": self.new_cluster,
            "resemblance": self.resemblance,
            "duplicate_of": self.duplicate_of,
            "crawl_duplicate_of": self.crawl_duplicate_of,
        }


@dataclass
class DiffResult:
    store: str
    parameters: dict[str, Any]
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
        return {
            "store": self.store,
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
            lines += _table(
                ["url", "now", "resemblance", "duplicate of"],
                [[c.url, c.new_decision, _r(c.resemblance), c.duplicate_of or ""]
                 for c in self.now_dropped],
            )  # fmt: skip
        if self.now_kept:
            lines += ["", "would now be kept (dropped at crawl time):"]
            lines += _table(
                ["url", "crawl decision", "duplicate of at crawl time"],
                [[c.url, c.crawl_decision, c.crawl_duplicate_of or ""] for c in self.now_kept],
            )
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


def _r(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return out


@dataclass
class _Seen:
    """What the source generator learned about each page while feeding the re-clustering."""

    #: (URL, doc id, crawl decision) of each page fed to the re-clustering, in order
    order: list[tuple[str, int, str]] = field(default_factory=list)
    not_compared: Counter[str] = field(default_factory=Counter)
    cut_texts: int = 0


def _was_cut(text: str, unit: str, recorded: int | None) -> bool:
    """True when a kept text is not the whole stream the crawl hashed (review.max_text_bytes)."""
    from dedup.document import content_hash
    from storage.texts import tokens_of_text

    return recorded is not None and content_hash(tokens_of_text(text, unit)) != recorded


def _sources(path: str | Path, unit: str, seen: _Seen) -> Iterator[SourceDocument]:
    """Every page the store can show, in crawl (document id) order.

    The store is opened on the first ``next()``, so the re-clustering's worker processes,
    started before that, never inherit its LMDB environment.
    """
    from storage.store import Store

    with Store.open(path, readonly=True) as store:
        text_of = getattr(store, "text", None)  # stores before texts were kept: None
        for doc_id, record in store.documents():
            if record.decision == "skipped":
                seen.not_compared["skipped"] += 1
                continue
            source: SourceDocument | None = None
            if record.page is not None:
                source = _page_source(store, record.url, record.page)
            else:
                text = text_of(doc_id) if text_of is not None else None
                # a text keeps its unit's separators: lines survive only in a line store
                lines_lost = unit == "line" and store.params.unit != "line"
                if text is not None and not lines_lost:
                    source = SourceDocument(record.url, "text", text)
                    if _was_cut(text, store.params.unit, record.content_hash):
                        seen.cut_texts += 1
                elif record.decision == "exact_duplicate" and record.content_hash is not None:
                    source = _identical_source(store, record.url, record.content_hash)
                if source is None:
                    if record.decision == "kept" and text is None:
                        reason = "no_page"
                    else:
                        reason = "line_unit" if text is not None else "no_text"
                    seen.not_compared[reason] += 1
                    continue
            seen.order.append((record.url, doc_id, record.decision))
            yield source


def _page_source(store: Any, url: str, location: Any) -> SourceDocument:
    page = store.read_page(location)
    ctype = next((v for k, v in page[2] if k.lower() == "content-type"), None)
    return SourceDocument(url, "html", page[3], encoding=charset_of(ctype or ""))


def _identical_source(store: Any, url: str, content_hash: int) -> SourceDocument | None:
    """An exact duplicate, given the stored copy of the first page with its canonical text."""
    found = store.index.find_exact(content_hash)
    if found is None:
        return None
    first = store.document(found[0])
    if first is None or first.page is None:
        return None
    return _page_source(store, url, first.page)


def diff_store(
    path: str | Path,
    params: SketchParams,
    dedup: DedupParams,
    *,
    jobs: int | None = None,
    index_dir: str | Path | None = None,
) -> DiffResult:
    """Re-cluster the store at ``path`` with ``params``/``dedup``; compare with the crawl."""
    from crawler.recluster.run import recluster
    from storage.log import read_log

    if not Path(path).is_dir():
        from storage.errors import StoreNotFoundError

        raise StoreNotFoundError(f"no store at {path}")
    seen = _Seen()
    out = io.StringIO()
    result = recluster(
        _sources(path, params.unit, seen), params, dedup, out=out, jobs=jobs,
        index_dir=index_dir, feed_here=True,  # _sources fills `seen`: it must run here
    )  # fmt: skip
    crawl_duplicate_of: dict[str, str | None] = {}
    try:
        for entry in read_log(Path(path) / "logs"):
            if isinstance(entry.get("url"), str):
                crawl_duplicate_of[entry["url"]] = entry.get("duplicate_of")
    except (OSError, ValueError):
        pass  # the log only adds the crawl's "duplicate of" to the table

    diff = DiffResult(
        store=str(path),
        parameters={
            "sketch": params.to_dict(),
            "threshold": dedup.threshold,
            "containment": dedup.containment,
            "representative": dedup.representative,
        },
        seconds=result.seconds,
    )
    diff.not_compared.update(seen.not_compared)
    diff.cut_texts = seen.cut_texts
    diff.not_compared["empty"] += sum(result.skipped.values())
    if not diff.not_compared["empty"]:
        del diff.not_compared["empty"]
    representative: dict[int, str] = {}
    pending = iter(seen.order)
    for line in out.getvalue().splitlines():
        row = json.loads(line)
        url, cluster, is_rep = row["id"], int(row["cluster"]), bool(row["representative"])
        if is_rep:
            representative[cluster] = url
        # lines come in input order; a page without tokens now has no line
        _, doc_id, then = next(p for p in pending if p[0] == url)
        diff.compared += 1
        kept_then = then == "kept"
        if kept_then and not is_rep:
            diff.now_dropped.append(Change(url, doc_id, then, row["decision"], cluster,
                                           row["resemblance"], representative.get(cluster)))  # fmt: skip
        elif not kept_then and is_rep:
            diff.now_kept.append(Change(url, doc_id, then, row["decision"], cluster, None, None,
                                        crawl_duplicate_of.get(url)))  # fmt: skip
        else:
            diff.unchanged["kept" if kept_then else "dropped"] += 1
    return diff
