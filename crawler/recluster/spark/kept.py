"""Results that later stages read again (the preferences, each greedy round's step, the
decisions so far), kept by the first job that reads them, with a plan cut where they were kept:
each round's plan reads the round before twice, so a plan that carried every round before it
would double with each round. On a cluster a local checkpoint lives only in the executor that
made it and cannot be made again, so one lost executor would fail the run: there the frame is
persisted instead, and Spark computes a lost partition again from its lineage (docs/spark.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["cached", "kept", "on_one_machine"]


def kept(frame: Any, held: list[Any]) -> Any:
    """``frame``, kept by the first job that reads it, with a plan that starts there: a local
    checkpoint on one machine; on a cluster, the rows of the persisted ``frame`` as a new
    frame. What to unpersist once it is no longer read is added to ``held``."""
    session = frame.sparkSession
    if on_one_machine(session.sparkContext.master):
        from pyspark import StorageLevel

        out = frame.localCheckpoint(eager=False, storageLevel=StorageLevel.DISK_ONLY)
        held.append(out)
        return out
    persisted = cached(frame)
    held.append(persisted)
    return session.createDataFrame(persisted.rdd, persisted.schema, verifySchema=False)


def cached(frame: Any) -> Any:
    """``frame`` persisted on disk (on one machine, in the OS's page cache), not in the JVM's
    heap: what the engine caches is packed arrays, each read whole a few times, and a heap full
    of them keeps its collector marking while the tasks' sorts and aggregations wait for room."""
    from pyspark import StorageLevel

    return frame.persist(StorageLevel.DISK_ONLY)


def on_one_machine(master: str) -> bool:
    """Whether a master runs its executors inside the driver's JVM (local mode, under
    spark-submit too); ``local-cluster`` starts executors of their own, as a cluster does.

    >>> [on_one_machine(m) for m in ("local", "local[2]", "local[*,3]", "local-cluster[2,1,1024]",
    ...                              "spark://head:7077", "yarn")]
    [True, True, True, False, False, False]
    """
    return master == "local" or master.startswith("local[")
