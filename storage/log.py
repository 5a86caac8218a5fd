"""The dedup log: one JSON object per decision, one file per run, in the store's ``logs/``.

Every page gets a line, dropped ones too, so "why was this page dropped?" can be answered after
the crawl (``neardup log``, ``neardup explain``). Lines are flushed as they are written, so a
crashed run leaves a log up to its last decision; a line cut by the crash is skipped on reading.

The crawl (``crawler.pipelines.session``) writes a batch's lines right after the commit that makes them
true, so the log never names a page the store lost in a crash; a kill between a commit and its
lines can only leave stored pages without a line. The store is the record of what was kept; the
log is the record of what was decided.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     with DedupLog(d, run_id="run-1") as log:
...         _ = log.write("http://a.test/", "kept", doc_id=0, cluster_id=0, tokens=120)
...     [(e["run"], e["url"], e["decision"], e["reason"]) for e in read_log(d)]
[('run-1', 'http://a.test/', 'kept', None)]
"""

from __future__ import annotations

import json
import os
import re
import time as _time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from storage.errors import StoreWriteError

#: the keys every line has (None where not computed), in the order they are written
FIELDS = (
    "time",
    "url",
    "decision",
    "reason",
    "doc_id",
    "cluster_id",
    "duplicate_of",
    "resemblance",
    "containment",
    "tokens",
    "shingles",
)

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def new_run_id() -> str:
    """A run id that sorts by start time and differs between processes, e.g.
    ``20250102T030405Z-1234``."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{os.getpid()}"


class DedupLog:
    """Appends decisions to ``<directory>/<run_id>.jsonl``."""

    def __init__(self, directory: str | os.PathLike[str], run_id: str | None = None) -> None:
        run_id = new_run_id() if run_id is None else run_id
        if not _RUN_ID.match(run_id):
            raise ValueError(
                f"run id must be letters, digits, '.', '_' or '-' (a file name); got {run_id!r}"
            )
        self.run_id = run_id
        self.directory = Path(directory)
        self.path = self.directory / f"{run_id}.jsonl"
        with self._writing():
            self.directory.mkdir(parents=True, exist_ok=True)
            self._out = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115

    def write(
        self,
        url: str,
        decision: str,
        *,
        reason: str | None = None,
        doc_id: int | None = None,
        cluster_id: int | None = None,
        duplicate_of: str | None = None,
        resemblance: float | None = None,
        containment: float | None = None,
        tokens: int | None = None,
        shingles: int | None = None,
        time: float | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Append one decision and flush it; return the object written.

        ``duplicate_of`` is the URL of the page this one matched. Keyword arguments beyond the
        contract's keys are written too (after them), e.g. ``matches`` or ``sample_size``.
        """
        entry = _entry(url, decision, reason, doc_id, cluster_id, duplicate_of, resemblance,
                       containment, tokens, shingles, time, extra)  # fmt: skip
        with self._writing():
            self._out.write(_dumps(entry) + "\n")
            self._out.flush()
        return entry

    def write_many(self, entries: Iterable[Mapping[str, Any]]) -> int:
        """Append several decisions, each given as :meth:`write`'s keywords, with one write
        and one flush (a batch's lines, after its commit); return how many.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     with DedupLog(d, run_id="r") as log:
        ...         log.write_many([{"url": "http://a.test/", "decision": "kept"},
        ...                         {"url": "http://b.test/", "decision": "skipped",
        ...                          "reason": "not_html"}])
        ...     [e["decision"] for e in read_log(d)]
        2
        ['kept', 'skipped']
        """
        lines = []
        for keywords in entries:
            fields = dict(keywords)
            extra = {k: fields.pop(k) for k in list(fields) if k not in _KEYWORDS}
            entry = _entry(extra=extra, **fields)
            lines.append(_dumps(entry) + "\n")
        if lines:
            with self._writing():
                self._out.write("".join(lines))
                self._out.flush()
        return len(lines)

    def close(self) -> None:
        if not self._out.closed:
            try:
                with self._writing():
                    self._out.flush()
                    os.fsync(self._out.fileno())
            finally:
                try:
                    self._out.close()
                except OSError:
                    pass  # what it buffered is what failed above

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Name a failed write by its cause and file (:class:`StoreWriteError`)."""
        try:
            yield
        except OSError as exc:
            raise StoreWriteError.of(exc, self.path) from exc

    def __enter__(self) -> DedupLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


#: the keywords of DedupLog.write other than its extras
_KEYWORDS = frozenset((*FIELDS, "time"))
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=lambda value: _plain(value))


def _entry(
    url: str,
    decision: str,
    reason: str | None = None,
    doc_id: int | None = None,
    cluster_id: int | None = None,
    duplicate_of: str | None = None,
    resemblance: float | None = None,
    containment: float | None = None,
    tokens: int | None = None,
    shingles: int | None = None,
    time: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One line's object: the contract's keys in order, then the extras."""
    entry: dict[str, Any] = {
        "time": _time.time() if time is None else time,
        "url": url,
        "decision": decision,
        "reason": reason,
        "doc_id": doc_id,
        "cluster_id": cluster_id,
        "duplicate_of": duplicate_of,
        "resemblance": resemblance,
        "containment": containment,
        "tokens": tokens,
        "shingles": shingles,
    }
    if extra:
        if "run" in extra:
            raise ValueError("log field 'run' is reserved: read_log adds the run id")
        entry.update(extra)
    return entry


def _dumps(entry: Mapping[str, Any]) -> str:
    return _ENCODER.encode(entry)


def list_runs(directory: str | os.PathLike[str]) -> list[str]:
    """The run ids with a log in ``directory``, oldest first (run ids sort by start time)."""
    path = Path(directory)
    if not path.is_dir():
        return []
    return sorted(p.stem for p in path.glob("*.jsonl"))


def read_log(
    directory: str | os.PathLike[str], runs: Iterable[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Every logged decision of ``runs`` (default: all runs, oldest first), in written order.

    Each object gets a ``run`` key. A last line without its newline (cut by a crash) is
    skipped; any other line that is not a JSON object is a ``ValueError`` naming file and line.
    """
    for _run, _line, entry in read_log_lines(directory, runs):
        yield entry


def read_log_lines(
    directory: str | os.PathLike[str], runs: Iterable[str] | None = None
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """As :func:`read_log`, with each line as written (no newline) beside its object, for
    readers that pass lines through unchanged (``neardup log --json``)."""
    for run in list_runs(directory) if runs is None else runs:
        path = Path(directory) / f"{run}.jsonl"
        with open(path, encoding="utf-8", newline="\n") as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.endswith("\n"):
                    break  # the run was killed while writing this line
                line = raw[:-1]
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    entry = None
                if not isinstance(entry, dict):
                    raise ValueError(f"{path}:{number}: not a JSON object")
                entry["run"] = run
                yield run, line, entry


def _plain(value: Any) -> Any:
    """numpy scalars (and anything else with ``.item()``) as plain JSON numbers."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise TypeError(f"cannot write a {type(value).__name__} to the dedup log")
