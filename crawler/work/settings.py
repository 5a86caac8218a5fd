"""The ``NEARDUP_*`` settings of the crawl's dedup work, read once and checked.

Both stages share one :class:`SessionSettings` (:mod:`crawler.pipelines.session`), and the worker process
gets it over its pipe (:mod:`crawler.work.process`). Unpickling it there imports this module, so this
module imports neither Scrapy nor :mod:`crawler.settings` (which loads Scrapy and reads
``config.yaml``) until a session reads the crawl's settings: the worker needs only the values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dedup.params import DedupParams, SketchParams

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["WORKERS", "SessionSettings"]

#: where the work can run (NEARDUP_WORKER)
WORKERS = ("process", "inline")


@dataclass(frozen=True)
class SessionSettings:
    """The ``NEARDUP_*`` settings the stages need, read once with typed getters and checked."""

    store: str
    sketch: SketchParams
    dedup: DedupParams
    batch_size: int
    batch_seconds: float
    run_id: str | None
    #: where the work runs: "process" (a worker process, while an asyncio loop runs) or "inline"
    worker: str = field(default_factory=lambda: _default("NEARDUP_WORKER"))
    #: keep the canonical text of dropped pages in the store (review.keep_text)
    keep_text: bool = field(default_factory=lambda: _default("NEARDUP_KEEP_TEXT"))
    #: a longer text is cut to this many UTF-8 bytes (review.max_text_bytes)
    max_text_bytes: int = field(default_factory=lambda: _default("NEARDUP_MAX_TEXT_BYTES"))

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SessionSettings:
        """Read and validate; a bad value is a ``ValueError`` naming the setting."""
        from scrapy.utils.project import data_path

        from crawler import settings as defaults

        sketch = {**defaults.NEARDUP_SKETCH, **settings.getdict("NEARDUP_SKETCH")}
        containment = settings.get("NEARDUP_CONTAINMENT", defaults.NEARDUP_CONTAINMENT)
        try:
            sketch_params = SketchParams.from_dict(sketch)
            dedup = DedupParams(
                threshold=settings.getfloat("NEARDUP_THRESHOLD", defaults.NEARDUP_THRESHOLD),
                containment=None if containment in (None, "") else float(containment),
                representative=settings.get(
                    "NEARDUP_REPRESENTATIVE", defaults.NEARDUP_REPRESENTATIVE
                ),
                canonicaliser=settings.get("NEARDUP_CANONICALISER", defaults.NEARDUP_CANONICALISER),
                cap=settings.getint("NEARDUP_CAP", defaults.NEARDUP_CAP),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"NEARDUP settings: {exc}") from None
        batch_size = settings.getint("NEARDUP_BATCH_SIZE", defaults.NEARDUP_BATCH_SIZE)
        batch_seconds = settings.getfloat("NEARDUP_BATCH_SECONDS", defaults.NEARDUP_BATCH_SECONDS)
        if batch_size < 1:
            raise ValueError(f"NEARDUP_BATCH_SIZE must be at least 1; got {batch_size}")
        if batch_seconds < 0:
            raise ValueError(f"NEARDUP_BATCH_SECONDS must be >= 0; got {batch_seconds}")
        max_text_bytes = settings.getint("NEARDUP_MAX_TEXT_BYTES", defaults.NEARDUP_MAX_TEXT_BYTES)
        if max_text_bytes < 0:
            raise ValueError(f"NEARDUP_MAX_TEXT_BYTES must be >= 0; got {max_text_bytes}")
        worker = settings.get("NEARDUP_WORKER", defaults.NEARDUP_WORKER)
        if worker not in WORKERS:
            raise ValueError(f"NEARDUP_WORKER must be one of {', '.join(WORKERS)}; got {worker!r}")
        store = settings.get("NEARDUP_STORE", defaults.NEARDUP_STORE)
        if not store:
            raise ValueError("NEARDUP_STORE must name a directory")
        return cls(
            store=data_path(store),
            sketch=sketch_params,
            dedup=dedup,
            batch_size=batch_size,
            batch_seconds=batch_seconds,
            run_id=settings.get("NEARDUP_RUN_ID") or None,
            worker=worker,
            keep_text=settings.getbool("NEARDUP_KEEP_TEXT", defaults.NEARDUP_KEEP_TEXT),
            max_text_bytes=max_text_bytes,
        )


def _default(name: str) -> Any:
    """The default of a setting (:mod:`crawler.settings`), looked up only when one is needed."""
    from crawler import settings as defaults

    return getattr(defaults, name)
