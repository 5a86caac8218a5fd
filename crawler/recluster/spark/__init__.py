"""``neardup recluster --engine spark``: the same re-clustering, distributed by Apache Spark.

Same tokens, same sketches, same decisions as the single-machine engine
(:func:`crawler.recluster.run.recluster`), one path for every input, and no stage that holds
more than a partition of the input in one process (docs/spark.md): the input cut into tasks
(:mod:`.tasks`), read and sketched in executors (:mod:`.sketch`), exact duplicates and the
candidate search in six shuffled steps (:mod:`.candidates`, :mod:`.search_steps`,
:mod:`.postings`), Broder's greedy clustering in rounds (:mod:`.greedy`,
:mod:`crawler.recluster.rounds`), cluster ids (:mod:`.numbering`), and the run end to end
(:mod:`.run`); ``--diff`` through the same stages (:mod:`.diff`).

The engines can differ only where the boilerplate cap cuts a fingerprint's postings;
``--exact-cap``, the default below the default cap (:func:`.sketch.exact_cap_wanted`), closes
that gap. The popular representative is refused: whether a document joins it depends on every
member before it, not on its candidates alone.
"""

from crawler.recluster.spark.run import recluster_spark
from crawler.recluster.spark.session import SparkUnavailable, spark_session
from crawler.recluster.spark.tasks import Task, tasks

__all__ = ["SparkUnavailable", "Task", "recluster_spark", "spark_session", "tasks"]
