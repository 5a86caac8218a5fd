"""``neardup recluster --store DIR --diff --engine spark``: the local ``--diff``, re-clustered
on Spark. Executors read chunks of the store's document ids as the local engine reads the
store (:func:`crawler.recluster.diff.diff_documents`); the driver compares the clusters with
the crawl's records (:func:`crawler.recluster.diff.compare`): the same report.
"""

from __future__ import annotations

import io
from typing import Any

from crawler.recluster.diff import DiffResult, check_store, compare
from crawler.recluster.inputs import StorePaths
from crawler.recluster.spark.run import recluster_spark
from crawler.recluster.spark.tasks import diff_tasks
from dedup.params import ContentArea, DedupParams, SketchParams

__all__ = ["diff_store_spark"]


def diff_store_spark(
    session: Any,
    path: StorePaths,
    params: SketchParams,
    dedup: DedupParams,
    *,
    partitions: int | None = None,
    area: ContentArea | None = None,
    exact_cap: bool | None = None,
) -> DiffResult:
    """:func:`crawler.recluster.diff.diff_store` on the Spark ``session``."""
    check_store(path)
    out = io.StringIO()
    work = diff_tasks(path, params.unit)
    result = recluster_spark(session, work, params, dedup, out=out, partitions=partitions,
                             area=area, exact_cap=exact_cap)  # fmt: skip
    return compare(path, params, dedup, out.getvalue().splitlines(), result)
