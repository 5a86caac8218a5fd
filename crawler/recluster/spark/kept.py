"""Results that later stages read again, kept by the first job that reads them, in the way that
survives what the master can lose.

The preferences, each greedy round's step and the leaders' decisions are each read by several
later jobs. On one machine they are local checkpoints: their plan is cut, so a later job's plan
does not repeat the stages that made them, and nothing is lost by it, since the executor there
is the driver's own JVM. On a cluster a local checkpoint lives only in the executor that made
it, and Spark cannot make it again: one executor lost after it (a preempted node, a killed
container) failed the whole run (``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``). There they are
persisted instead, so Spark recomputes a lost partition from its lineage, as it does for every
other stage; a test kills the executors of a standalone cluster after the rounds and the run
writes the local engine's output all the same.
"""

from __future__ import annotations

from typing import Any

__all__ = ["kept", "on_one_machine"]


def kept(frame: Any, held: list[Any]) -> Any:
    """``frame``, kept by the first job that reads it, and with a plan of its own: a local
    checkpoint on one machine; on a cluster, the persisted ``frame`` read as a new frame of its
    rows, whose plan starts there but whose partitions Spark can compute again. What to
    unpersist once it is no longer read is added to ``held``."""
    session = frame.sparkSession
    if on_one_machine(session.sparkContext.master):
        out = frame.localCheckpoint(eager=False)
        held.append(out)
        return out
    from pyspark.sql import DataFrame

    persisted = frame.persist()
    held.append(persisted)
    # its rows, not its plan: later plans that held the whole plan (a persisted frame keeps
    # it) took adaptive execution 29 s instead of 17 to re-plan, stage after stage, on 3,000
    # pages on a two-core standalone cluster, and printing them for Spark's UI ran the 1 GB
    # driver out of memory (local checkpoints: 15 s, and a lost executor fails the run)
    rows = session._jsparkSession.createDataFrame(persisted._jdf.rdd(), persisted._jdf.schema())
    return DataFrame(rows, session)


def on_one_machine(master: str) -> bool:
    """Whether a master runs its executors inside the driver's JVM (local mode, under
    spark-submit too); ``local-cluster`` starts executors of their own, as a cluster does.

    >>> [on_one_machine(m) for m in ("local", "local[2]", "local[*,3]", "local-cluster[2,1,1024]",
    ...                              "spark://head:7077", "yarn")]
    [True, True, True, False, False, False]
    """
    return master == "local" or master.startswith("local[")
