"""Which value to repartition by, so that each bucket of the candidate search reaches the Spark
partition it is meant for.

``DataFrame.repartition(n, "bucket")`` sends a row to partition ``pmod(hash(bucket), n)``,
Spark's Murmur3 hash of the value. Over a few dozen small ints that hash is uneven: of the
buckets 0 to 31, 12 land in one of two partitions and 20 in the other; of 0 to 95, 8 to 28 in
each of six. The partition holding the most buckets then sets the time of every step of the
search (on 20,000 pages in ``local[2]``, one task of each step took twice as long as the
other). So each bucket travels under a *route*: an int that Spark's hash sends to partition
``bucket % n``, every partition getting the same number of buckets.

:func:`spark_partition` computes Spark's partition of a value as its ``HashPartitioning``
does (``Murmur3Hash`` with seed 42, then ``pmod``); a test checks it against Spark's own.
"""

from __future__ import annotations

import numpy as np

from crawler.recluster.spark.tasks import RECORD_BITS

__all__ = ["routes", "spark_partition", "task_range_route"]

_SEED = 42  # HashPartitioning's Murmur3Hash seed


def spark_partition(values: np.ndarray, partitions: int) -> np.ndarray:
    """The partition ``repartition(partitions, column)`` sends each int32 ``values`` to."""
    k = values.astype(np.int64).astype(np.uint32) * np.uint32(0xCC9E2D51)
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    k *= np.uint32(0x1B873593)
    h = np.uint32(_SEED) ^ k
    h = (h << np.uint32(13)) | (h >> np.uint32(19))
    h = h * np.uint32(5) + np.uint32(0xE6546B64)
    h ^= np.uint32(4)  # the length of an int, in bytes
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h.view(np.int32).astype(np.int64) % partitions  # Java's pmod: never negative


def routes(buckets: int, partitions: int) -> np.ndarray:
    """For each bucket ``b`` (0 to ``buckets`` - 1), the smallest unused non-negative int that
    Spark's hash partitioning sends to partition ``b % partitions``.

    >>> r = routes(32, 2)
    >>> bool((spark_partition(r, 2) == np.arange(32) % 2).all()), len(set(r.tolist()))
    (True, 32)
    """
    wanted = -(-buckets // partitions)  # routes per partition
    size = 4 * buckets + 64
    while True:
        values = np.arange(size, dtype=np.int64)
        lands = spark_partition(values, partitions)
        per = [values[lands == p][:wanted] for p in range(partitions)]
        if min(p.size for p in per) == wanted:
            break
        size *= 2
    return np.array([per[b % partitions][b // partitions] for b in range(buckets)], dtype=np.int32)


def task_range_route(key: str, tasks: int, partitions: int) -> str:
    """SQL for the route that sends a row to the partition holding the task of its key column
    ``key`` (a key's high bits are its task), partition ``p`` holding the tasks
    ``tasks·p/partitions`` to the next one's: whole tasks, in task order.

    >>> task_range_route("key", 10, 2)
    'element_at(array(2, 0), CAST(floor(shiftright(key, 32) * 2 / 10) AS INT) + 1)'
    """
    route = ", ".join(str(int(r)) for r in routes(partitions, partitions))
    part = f"CAST(floor(shiftright({key}, {RECORD_BITS}) * {partitions} / {tasks}) AS INT)"
    return f"element_at(array({route}), {part} + 1)"
