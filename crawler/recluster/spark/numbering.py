"""Cluster ids, numbered as the local index numbers its clusters: the kept documents in input
order, 0 first.

The greedy rounds count the kept documents of each input task
(:attr:`.greedy.Rounds.kept_per_task`); the driver turns the counts into each task's first id.
Every document then travels to the partition of its representative's task (whole tasks, in
task order), sorted by representative and key. A representative comes before its members, so
one pass numbers them all: the ``i``-th representative of a partition is its first task's
first id plus ``i``, and each member takes the id of the representative before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from crawler.recluster.spark.routes import task_range_route
from crawler.recluster.spark.steps import column_names, python_step, record_batch
from crawler.recluster.spark.tasks import RECORD_BITS

__all__ = ["ROWS", "numbered"]

#: one clustered document: its cluster, whether it represents it, its estimate against the
#: representative, the decision, and whether its content is the cluster's first member's
ROWS = "key long, cluster long, representative boolean, r double, kind string, identical boolean"


def numbered(decisions: Any, copies: Any, partitions: int, kept: Mapping[int, int]) -> Any:
    """:data:`ROWS` from the leaders' decisions (:data:`~.greedy.DECISIONS`), the exact copies
    ``(key, leader, self_r)`` and ``kept``, the kept documents of each input task that has any."""
    tasks = 1 + max(kept, default=0)
    per_task = np.zeros(tasks, dtype=np.int64)
    per_task[list(kept)] = list(kept.values())
    first_ids = np.concatenate(([0], np.cumsum(per_task)[:-1]))

    # every leader, with its representative's key and what it reports
    led = decisions.selectExpr(
        "key", "coalesce(rep, key) AS rep_key", "kind = 'kept' AS representative",
        "IF(kind = 'kept', 1.0D, r) AS r", "kind", "kind = 'kept' AS identical")
    # a copy of the representative itself reports its estimate against itself (1.0 but for
    # MOD_m's empty samples); a copy of a member, what that member reported
    copied = copies.join(
        led.selectExpr("key AS leader", "rep_key", "representative AS lead", "r AS lead_r"),
        "leader",
    ).selectExpr(
        "key", "rep_key", "false AS representative", "IF(lead, self_r, lead_r) AS r",
        "'exact_duplicate' AS kind", "lead AS identical")
    route = task_range_route(decisions.sparkSession, "rep_key", tasks, partitions)
    grouped = (led.unionByName(copied).selectExpr("*", f"{route} AS _route")
               .repartition(partitions, "_route")
               .sortWithinPartitions("rep_key", "key"))
    return python_step(grouped, _ids(first_ids), ROWS)


_ROW_NAMES = column_names(ROWS)


def _ids(first_ids: np.ndarray) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The step that numbers a partition's rows, sorted by representative and key: see the
    module's docstring."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        start = None  # the partition's first id, less one
        for batch in batches:
            if batch.num_rows == 0:
                continue
            key = batch.column("key").to_numpy()
            rep_key = batch.column("rep_key").to_numpy()
            if start is None:  # the partition's first row is a representative
                start = int(first_ids[rep_key[0] >> RECORD_BITS]) - 1
            cluster = start + np.cumsum(key == rep_key)
            start = int(cluster[-1])
            yield record_batch(ROWS, [batch.column(name) if name != "cluster" else cluster
                                      for name in _ROW_NAMES])

    return step
