"""Stores of real crawls, carried on to the shapes the recrawl and the distributed crawl write.

The review commands read what a recrawl (run 2 of a store) and the nodes of a distributed crawl
write. Until those crawls write it for real, tests make it from a real crawl with the real
writers: :func:`second_run` appends a recrawl's run to a crawled store (its documents through
:class:`~storage.store.Store`, its log lines through :class:`~storage.log.DedupLog`, the pages'
new content canonicalised and sketched as the crawl does it), and :func:`split_into_nodes` deals
the documents and log lines of one crawl of several hosts out to one store per node, as the
nodes of a distributed crawl would have kept them (their cluster ids the whole crawl's, each
line with its node and its place in the crawl's order).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from crawler.review.log import LoggedDecision, decisions
from dedup.canonical import document_tokens
from dedup.document import DocumentSketch, Sketcher
from dedup.estimators import estimate
from dedup.html_text import charset_of
from storage.nodes import CrawlNode
from storage.records import DocumentRecord
from storage.store import Store
from storage.texts import stored_text


# --- a second run --------------------------------------------------------------------------------


@dataclass
class Page:
    """What a crawl knows of one URL: its current document and its last log line."""

    url: str
    doc_id: int
    record: DocumentRecord
    line: dict[str, Any]


@dataclass
class SecondRun:
    """What :func:`second_run` wrote: every line of run 2 in order, and the URLs by what
    happened to them."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    #: url -> the resemblance of its new content to its old one, estimated from the sketches
    changed: dict[str, float] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    redecided: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: url -> its document in run 2
    doc_ids: dict[str, int] = field(default_factory=dict)


def pages_of(store: Store) -> dict[str, Page]:
    """Every URL of a crawled store with its current document and its last log line."""
    pages: dict[str, Page] = {}
    for logged in decisions(store):
        doc_id = store.find_url(logged.url)
        record = store.document(doc_id) if doc_id is not None else None
        if record is not None and doc_id is not None:
            pages[logged.url] = Page(logged.url, doc_id, record, _as_written(logged))
    return pages


def _as_written(logged: LoggedDecision) -> dict[str, Any]:
    """A line as it was written (without what the reader adds): the keywords that write it
    again."""
    line: dict[str, Any] = json.loads(logged.line)
    return line


def edited(body: bytes, seed: int, *, share: float) -> bytes:
    """``body`` with the words of ``share`` of its paragraphs (one at least, spread over the
    page) replaced by seeded random words; the markup and the other paragraphs as they were."""
    rng = random.Random(seed)
    text = body.decode("utf-8")
    found = list(re.finditer(r"(<p[^>]*>)(.*?)</p>", text, flags=re.DOTALL))
    assert found, "the page has no paragraph to edit"
    count = max(1, round(share * len(found)))
    chosen = {round(i * len(found) / count) for i in range(count)}
    out, at = [], 0
    for number, match in enumerate(found):
        if number not in chosen:
            continue
        words = max(len(match.group(2).split()), 12)
        new = " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9)))
                       for _ in range(words))  # fmt: skip
        out += [text[at : match.start()], match.group(1), new, "</p>"]
        at = match.end()
    out.append(text[at:])
    return "".join(out).encode("utf-8")


def _sketched(store: Store, body: bytes, headers: list[tuple[str, str]]) -> tuple[
    list[str], DocumentSketch
]:
    """The page canonicalised and sketched with the store's parameters, as the crawl does."""
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    tokens = document_tokens(
        body, "html", store.params.unit, encoding=charset_of(content_type),
        area=store.manifest.canonical,
    ).tokens()  # fmt: skip
    return tokens, Sketcher(store.params).sketch(tokens)


def second_run(
    path: Path,
    *,
    changed: dict[str, float],
    copied: dict[str, str],
    gone: Iterable[str],
    new: dict[str, bytes],
    run: int = 2,
    log_id: str = "29990101T000000Z-2",
) -> SecondRun:
    """Append run ``run`` of a recrawl to the crawled store at ``path``.

    ``changed``: kept pages whose content changes (URL -> the share of paragraphs edited); each
    keeps its cluster (a changed kept page takes its own cluster over), and the pages that were
    dropped as its duplicates are decided again, kept in a cluster of their own.
    ``copied``: pages whose content becomes a copy of another page's (URL -> that page's URL):
    dropped as its exact duplicate, in its cluster. ``gone``: pages that answer 404 now.
    ``new``: pages not known before (URL -> body). Every other URL is unchanged. The lines
    follow run 1's order, a re-decision right after the line of the page that caused it, new
    pages last.
    """
    written = SecondRun()
    gone = set(gone)
    with Store.open(path) as store:
        pages = pages_of(store)
        clusters = {p.record.cluster_id for p in pages.values() if p.record.cluster_id is not None}
        next_cluster = max(clusters, default=-1) + 1
        members = {url: [m for m in pages.values() if m.line.get("duplicate_of") == url]
                   for url in changed}  # fmt: skip
        redecided = {m.url for listed in members.values() for m in listed}
        with store.batch():
            for url, page in pages.items():
                if url in redecided:
                    continue  # decided right after the kept page that changed
                line = {**page.line, "crawl_run": run, "change": "unchanged",
                        "previous_decision": page.record.decision,
                        "previous_cluster_id": page.record.cluster_id,
                        "change_resemblance": None}  # fmt: skip
                if url in changed:
                    line = _changed(store, page, line, changed[url])
                    written.changed[url] = line["change_resemblance"]
                    written.lines.append(line)
                    for member in members[url]:
                        written.lines += _redecided(store, member, page, run, next_cluster)
                        written.redecided.append(member.url)
                        next_cluster += 1
                    continue
                if url in copied:
                    line = _copied(store, page, pages[copied[url]], line)
                    written.changed[url] = line["change_resemblance"]
                elif url in gone:
                    doc_id = store.next_doc_id()
                    store.put_document(doc_id, DocumentRecord(url, "skipped", _now()))
                    line.update(decision="skipped", reason="http_404", doc_id=doc_id,
                                cluster_id=None, duplicate_of=None, resemblance=None,
                                change="gone", detail="404 Not Found")  # fmt: skip
                    written.gone.append(url)
                else:
                    written.unchanged.append(url)
                written.lines.append(line)
            for url, body in new.items():
                headers = [("Content-Type", "text/html; charset=utf-8")]
                tokens, made = _sketched(store, body, headers)
                doc_id = store.next_doc_id()
                location = store.pages.append(url, 200, headers, body)
                store.put_document(doc_id, DocumentRecord(url, "kept", _now(), next_cluster,
                                                          made.content_hash, location), made.sketch)
                written.lines.append({"url": url, "decision": "kept", "doc_id": doc_id,
                                      "cluster_id": next_cluster, "tokens": len(tokens),
                                      "shingles": made.shingles, "crawl_run": run, "change": "new",
                                      "previous_decision": None, "previous_cluster_id": None,
                                      "change_resemblance": None})  # fmt: skip
                written.new.append(url)
                next_cluster += 1
        for line in written.lines:
            line.pop("time", None)  # decided now
        with store.log(log_id) as log:  # after the commit, as the crawl writes its lines
            log.write_many(written.lines)
        written.doc_ids = {line["url"]: line["doc_id"] for line in written.lines}
    return written


def _now() -> float:
    return time.time()


def _changed(store: Store, page: Page, line: dict[str, Any], share: float) -> dict[str, Any]:
    assert page.record.page is not None, f"{page.url} has no stored page to change"
    url, status, headers, body = store.read_page(page.record.page)
    new_body = edited(body, seed=len(url), share=share)
    tokens, made = _sketched(store, new_body, headers)
    old = store.sketch(page.doc_id)
    assert old is not None
    doc_id = store.next_doc_id()
    location = store.pages.append(url, status, headers, new_body)
    record = replace(page.record, time=_now(), content_hash=made.content_hash, page=location)
    store.put_document(doc_id, record, made.sketch)
    return {**line, "doc_id": doc_id, "change": "changed", "tokens": len(tokens),
            "shingles": made.shingles,
            "change_resemblance": float(estimate(old, made.sketch).resemblance)}  # fmt: skip


def _redecided(
    store: Store, member: Page, kept: Page, run: int, cluster: int
) -> list[dict[str, Any]]:
    """A duplicate of a kept page that changed away: first unchanged (as it is), then decided
    again from its stored sketch and text, kept in a cluster of its own, then fetched in full."""
    unchanged = {**member.line, "crawl_run": run, "change": "unchanged",
                 "previous_decision": member.record.decision,
                 "previous_cluster_id": member.record.cluster_id,
                 "change_resemblance": None}  # fmt: skip
    doc_id = store.next_doc_id()
    store.put_document(doc_id, replace(member.record, decision="kept", time=_now(),
                                       cluster_id=cluster, page=None),
                       store.sketch(member.doc_id))  # fmt: skip
    text = store.text(member.doc_id)
    if text is not None:
        store.put_text(doc_id, text)
    again = {**unchanged, "decision": "kept", "doc_id": doc_id, "cluster_id": cluster,
             "duplicate_of": None, "resemblance": None, "containment": None,
             "redecided": True,
             "reason": f"re-decided: its kept page {kept.url} changed"}  # fmt: skip
    for key in ("matches", "sample_size"):
        again.pop(key, None)
    # kept again, its body is fetched in full: a third line, whose previous state is the
    # re-decision's, as the crawl writes it
    fetched = {**again, "redecided": None, "refetched": True,
               "reason": "stored: fetched in full once it was decided again",
               "previous_decision": "kept", "previous_cluster_id": cluster}  # fmt: skip
    return [unchanged, again, fetched]


def _copied(store: Store, page: Page, original: Page, line: dict[str, Any]) -> dict[str, Any]:
    """A page whose content is now an exact copy of ``original``'s: dropped into its cluster,
    its text kept, as the crawl keeps a dropped page's."""
    assert original.record.page is not None
    _, _, headers, body = store.read_page(original.record.page)
    tokens, made = _sketched(store, body, headers)
    old = store.sketch(page.doc_id)
    assert old is not None
    doc_id = store.next_doc_id()
    store.put_document(doc_id, DocumentRecord(page.url, "exact_duplicate", _now(),
                                              original.record.cluster_id, made.content_hash),
                       made.sketch)  # fmt: skip
    store.put_text(doc_id, stored_text(tokens, store.params.unit, 1 << 20))
    for key in ("matches", "sample_size", "containment"):
        line.pop(key, None)
    return {**line, "decision": "exact_duplicate", "doc_id": doc_id,
            "cluster_id": original.record.cluster_id, "duplicate_of": original.url,
            "resemblance": 1.0, "reason": "same canonical text as an earlier page",
            "change": "changed", "tokens": len(tokens), "shingles": made.shingles,
            "change_resemblance": float(estimate(old, made.sketch).resemblance)}  # fmt: skip


# --- nodes -------------------------------------------------------------------------------------


def split_into_nodes(source: Path, nodes: list[Path], node_of: Callable[[str], int]) -> None:
    """Deal the documents of the crawled store ``source`` out to one store per node, as a
    distributed crawl's nodes keep them: node ``node_of(url)`` (0-based) gets the URL's
    document (its record with its cluster id, its sketch, its kept text, its page re-written
    to the node's own WARC files) under the node's own next document id, and its log line with
    ``node`` (``I/K``) and ``order`` (its place in the whole crawl: the source's line order).
    The nodes' own cluster indexes stay empty: the whole crawl's index is shared."""
    with Store.open(source, readonly=True) as crawled, ExitStack() as stores:
        lines = [_as_written(logged) for logged in decisions(crawled)]
        opened = [stores.enter_context(Store.open(path, params=crawled.params,
                                                  area=crawled.manifest.canonical))
                  for path in nodes]  # fmt: skip
        written: list[list[dict[str, Any]]] = [[] for _ in nodes]
        with ExitStack() as batches:
            for k, store in enumerate(opened, 1):  # each a node of one crawl, as a node records
                batches.enter_context(store.batch())
                store.join_crawl(CrawlNode("split", k, len(opened)))
            for order, line in enumerate(lines):
                n = node_of(line["url"])
                node = opened[n]
                line = {**line, "node": f"{n + 1}/{len(nodes)}", "order": order}
                source_id = line.get("doc_id")
                record = crawled.document(source_id) if isinstance(source_id, int) else None
                if record is not None:
                    doc_id = node.next_doc_id()
                    if record.page is not None:
                        url, status, headers, body = crawled.read_page(record.page)
                        record = replace(record, page=node.pages.append(url, status, headers,
                                                                        body, time=record.time))
                    node.put_document(doc_id, record, crawled.sketch(source_id))
                    text = crawled.text(source_id)
                    if text is not None:
                        node.put_text(doc_id, text)
                    line["doc_id"] = doc_id
                written[n].append(line)
        for n, store in enumerate(opened):
            with store.log(f"29990101T000000Z-{n + 1}") as log:
                log.write_many(written[n])
