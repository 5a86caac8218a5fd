"""Which value to repartition by, so that each bucket of the candidate search reaches the Spark
partition it is meant for.

``DataFrame.repartition(n, "bucket")`` sends a row to partition ``pmod(hash(bucket), n)``,
Spark's Murmur3 hash of the value. Over a few dozen small ints that hash is uneven: of the
buckets 0 to 31, 12 land in one of two partitions and 20 in the other. The partition holding
the most buckets would then set the time of every step of the search. So each bucket travels
under a *route*: an int that Spark's hash sends to partition ``bucket % n``, every partition
getting the same number of buckets. The routes are read from Spark's own hash, once per
process and partition count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crawler.recluster.spark.tasks import RECORD_BITS

__all__ = ["routes", "task_range_route"]

#: the ints Spark's hash sends to each partition, by partition count (Spark's hash is fixed)
_LANDS: dict[int, list[list[int]]] = {}


def routes(session: Any, buckets: int, partitions: int) -> np.ndarray:
    """For each bucket ``b`` (0 to ``buckets`` - 1), an int that Spark's hash partitioning
    sends to partition ``b % partitions``, each a different one."""
    wanted = -(-buckets // partitions)  # routes per partition
    lands = _LANDS.get(partitions, [])
    size = 4 * buckets + 64
    while not lands or min(map(len, lands)) < wanted:
        # a query of literals: the driver's optimiser computes it, no job runs
        (row,) = session.sql(f"SELECT transform(sequence(0, {size - 1}), "
                             f"v -> pmod(hash(v), {partitions})) AS p FROM VALUES (0)").collect()
        lands = [[] for _ in range(partitions)]
        for v, p in enumerate(row.p):
            lands[p].append(v)
        _LANDS[partitions] = lands
        size *= 2
    return np.array([lands[b % partitions][b // partitions] for b in range(buckets)],
                    dtype=np.int32)


def task_range_route(session: Any, key: str, tasks: int, partitions: int) -> str:
    """SQL for the route that sends a row to the partition holding the task of its key column
    ``key`` (a key's high bits are its task), partition ``p`` holding the tasks
    ``tasks·p/partitions`` to the next one's: whole tasks, in task order."""
    route = ", ".join(str(int(r)) for r in routes(session, partitions, partitions))
    part = f"CAST(floor(shiftright({key}, {RECORD_BITS}) * {partitions} / {tasks}) AS INT)"
    return f"element_at(array({route}), {part} + 1)"
