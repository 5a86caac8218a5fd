"""What a run's jobs are called in Spark's UI and event log: ``neardup: greedy round 1`` and
the like, instead of the line of the engine whose action started them (``collect at
.../candidates.py:199``). Spark names a job by the ``spark.job.description`` property of the
thread that starts it; a description the caller set stays in front of the engine's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["described"]

#: the thread's Spark property that names the jobs it starts
DESCRIPTION = "spark.job.description"


@contextmanager
def described(context: Any, what: str) -> Iterator[None]:
    """The jobs this thread starts inside the block are described as ``neardup: {what}``
    (after the caller's own description, if any) in the Spark ``context``."""
    theirs = context.getLocalProperty(DESCRIPTION)
    context.setLocalProperty(DESCRIPTION, f"{theirs} · neardup: {what}" if theirs
                             else f"neardup: {what}")
    try:
        yield
    finally:
        context.setLocalProperty(DESCRIPTION, theirs)
