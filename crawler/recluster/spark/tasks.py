"""The input cut into executor tasks on the driver, without reading a page; each task read in
an executor, start to end.

One task per WARC or JSON Lines file (a file is a unit of work, its records in order), and
chunks of ``TASK_DOCUMENTS`` HTML files or store pages, or for ``--diff`` document ids
(:func:`diff_tasks`); the pages of several node stores are chunked in the crawl's order
(:func:`storage.nodes.in_crawl_order`), each item naming its store. A document's key is its
task's ordinal in the high bits and its place in the task in the low (:func:`document_key`):
the input's order, whatever partition reads it.
A plain path is the driver's, relative to its working directory or not; a task carries that
directory (:meth:`Task.located`), while ids keep the path as given, as the local engine's do.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from crawler.recluster.inputs import (
    FileContent,
    InputError,
    SourceDocument,
    StorePaths,
    _check_archive_start,
    crawl_stores,
    store_paths,
    read_html_files,
    read_jsonl_file,
    read_jsonl_stream,
    read_warc,
    read_warc_stream,
    stored_page,
)

__all__ = [
    "RECORD_BITS", "TASK_DOCUMENTS", "Task", "diff_tasks", "document_key", "read_task", "remote",
    "tasks",
]

#: a document's key: its task's ordinal in the high bits, its ordinal in the task in the low
RECORD_BITS = 32
#: HTML files or store pages per task: a task costs tens of milliseconds however little it
#: holds, a few hundred pages' worth of sketching
TASK_DOCUMENTS = 1024


def document_key(task: int, ordinal: int) -> int:
    """The key of the ``ordinal``-th document of task ``task``.

    >>> document_key(0, 5) < document_key(1, 0) < document_key(1, 1)
    True
    """
    return (task << RECORD_BITS) + ordinal


@dataclass(frozen=True)
class Task:
    """One executor task's share of the input: ``kind`` and what it reads."""

    ordinal: int
    kind: str  # "warc", "jsonl", "html", "store", "diff"
    #: the file read (store, diff: the store, of one store)
    path: str = ""
    #: html: the files; store: (k, url, page location) of each page; diff: (k, document id)
    #: of each document, ``k`` its store's place in ``stores``
    items: tuple[Any, ...] = ()
    #: store, diff: the store directories the items name
    stores: tuple[str, ...] = ()
    id_field: str = "id"
    text_field: str = "text"
    #: diff: the unit the re-clustering tokenises by (a kept text has lines only in a line store)
    unit: str = ""
    #: the driver's working directory, where a relative plain path is
    base: str = ""

    def located(self, path: str) -> str:
        """Where an executor opens ``path`` of this task: a relative plain path joined to the
        driver's working directory (a URL, or an absolute path, as it is).

        >>> Task(0, "jsonl", "in/a.jsonl", base="/data").located("in/a.jsonl")
        '/data/in/a.jsonl'
        >>> Task(0, "warc", base="/data").located("/x.warc"), Task(0, "warc").located("x.warc")
        ('/x.warc', 'x.warc')
        """
        return path if remote(path) or not self.base else os.path.join(self.base, path)


def tasks(
    *,
    store: StorePaths | None = None,
    warc: Iterable[str] = (),
    jsonl: Iterable[str] = (),
    html: Iterable[str] = (),
    id_field: str = "id",
    text_field: str = "text",
) -> list[Task]:
    """The tasks of an input, in input order (store, WARC, JSON Lines, HTML, as the local engine
    chains them; ``store``: one store, or the stores of a distributed crawl's nodes). Reads no
    page: a missing file, or a file that does not begin like a WARC, is an :class:`InputError`
    here, before any work, as in the local engine."""
    out: list[Task] = []
    base = os.getcwd()
    if store:
        stores = tuple(store_paths(store))
        path = stores[0] if len(stores) == 1 else ""
        for chunk in _chunks(_store_pages(stores), TASK_DOCUMENTS):
            out.append(Task(len(out), "store", path, tuple(chunk), stores=stores, base=base))
    for path in warc:
        local = _local_path(path)
        if local is not None:
            try:
                with open(local, "rb") as stream:
                    _check_archive_start(stream, path)
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror}") from None
        out.append(Task(len(out), "warc", str(path), base=base))
    for path in jsonl:
        local = _local_path(path)
        if local is not None and not Path(local).is_file():
            raise InputError(f"cannot read {path}: no such file")
        out.append(Task(len(out), "jsonl", str(path), id_field=id_field, text_field=text_field,
                        base=base))
    files = [doc.content.path for doc in read_html_files(html)]  # type: ignore[union-attr]
    for chunk in _chunks(files, TASK_DOCUMENTS):
        out.append(Task(len(out), "html", items=tuple(chunk), base=base))
    return out


def diff_tasks(store: StorePaths, unit: str) -> list[Task]:
    """The tasks of ``neardup recluster --store DIR --diff`` on Spark: every document id of the
    store's current documents (what its latest crawl run holds; of several node stores, every
    node's, in the crawl's order), in order, in chunks of ``TASK_DOCUMENTS``, each read in an
    executor as the local engine reads the store
    (:func:`crawler.recluster.diff.diff_documents`). No page and no text is read here."""
    stores = tuple(store_paths(store))
    path = stores[0] if len(stores) == 1 else ""
    ids = ((k, doc_id) for k, doc_id, _ in _store_records(stores))
    return [Task(n, "diff", path, tuple(chunk), unit=unit, stores=stores, base=os.getcwd())
            for n, chunk in enumerate(_chunks(ids, TASK_DOCUMENTS))]  # fmt: skip


def remote(path: str) -> bool:
    """A Hadoop file system URL (hdfs://, s3a://, file://, ...): read by Spark's own file
    systems (``binaryFile``), not by ``open``; a plain path is opened where it is read.

    >>> remote("s3a://commoncrawl/x.warc.gz"), remote("file:///data/x.warc"), remote("x.warc")
    (True, True, False)
    """
    return "://" in str(path)


def _local_path(path: str) -> str | None:
    """Where a WARC file is on this machine (a plain path or a file:// URL), else None: a
    file on another file system is checked by Spark when it reads it."""
    if not remote(path):
        return str(path)
    parsed = urlparse(str(path))
    return parsed.path if parsed.scheme == "file" else None


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    rest = iter(items)
    while chunk := list(islice(rest, size)):
        yield chunk


def _store_pages(paths: tuple[str, ...]) -> Iterator[tuple[int, str, Any]]:
    """(k, url, page location) of the stores' current kept pages (a recrawl's older captures
    are history), in the crawl's order; no page is read."""
    for k, _, record in _store_records(paths):
        if record.page is not None:
            yield k, record.url, record.page


def _store_records(paths: tuple[str, ...]) -> Iterator[Any]:
    """``(k, doc_id, record)`` of the current documents of the stores at ``paths`` opened
    read-only, in the crawl's order (:func:`storage.nodes.in_crawl_order`); a missing or
    unreadable store, or stores that are not the nodes of one crawl, an :class:`InputError`."""
    from storage.errors import StoreError
    from storage.nodes import in_crawl_order

    try:
        with crawl_stores(paths) as stores:
            yield from in_crawl_order(stores)
    except StoreError as exc:
        raise InputError(str(exc)) from None


def read_task(task: Task, content: bytes | None = None) -> Iterator[SourceDocument]:
    """The documents of one task, in order (``content``: the bytes of a WARC or JSON Lines
    file that Spark read from a Hadoop file system). A file that breaks off yields, after the
    documents before the break, one skipped document that says why: the job goes on."""
    try:
        if task.kind == "warc":
            if content is not None:
                yield from read_warc_stream(io.BytesIO(content), task.path)
            else:
                yield from read_warc([task.located(task.path)])
        elif task.kind == "jsonl":
            if content is not None:
                yield from read_jsonl_stream(io.BytesIO(content), task.path, task.id_field,
                                             task.text_field)  # fmt: skip
            else:
                yield from read_jsonl_file(task.located(task.path), task.path, task.id_field,
                                           task.text_field)
        elif task.kind == "html":
            # listed on the driver: a file that cannot be read now is that document's skip
            for path in task.items:
                yield SourceDocument(path, "html", FileContent(task.located(path)))
        elif task.kind == "store":
            yield from _read_store_pages(task, task.items)
        elif task.kind == "diff":
            yield from _read_diff_documents(task, task.items, task.unit)
    except Exception as exc:  # a corrupt or vanished file: say so, keep what came before
        reason = f"unreadable_{task.kind} ({type(exc).__name__})"
        named = task.path or ", ".join(task.stores) or task.kind
        yield SourceDocument(named, "html", b"", skip_reason=reason)


def _read_store_pages(task: Task, items: tuple[Any, ...]) -> Iterator[SourceDocument]:
    with crawl_stores([task.located(path) for path in task.stores]) as stores:
        for k, url, location in items:
            yield stored_page(stores[k], url, location)


def _read_diff_documents(
    task: Task, refs: tuple[tuple[int, int], ...], unit: str
) -> Iterator[SourceDocument]:
    from crawler.recluster.diff import diff_documents

    with crawl_stores([task.located(path) for path in task.stores]) as stores:
        entries = ((k, doc_id, stores[k].document(doc_id)) for k, doc_id in refs)
        yield from diff_documents(stores, entries, unit)
