"""``neardup recluster --engine spark``: the same re-clustering, distributed by Apache Spark.

Same tokens, same sketches, same decisions as the single-machine engine
(:func:`crawler.recluster.run.recluster`), with no single-process stage that holds more than
a partition of the input, and one path for every input (docs/spark.md):

1. :mod:`~crawler.recluster.spark.tasks`: the input cut into tasks on the driver, one per WARC
   or JSON Lines file, chunks of HTML files or store pages; a document's key is its place in
   the input, never its partition, so reruns and any number of partitions give the same output.
2. :mod:`~crawler.recluster.spark.sketch`: each task read and sketched in an executor by the
   local engine's own per-document function; rows reach the JVM as Arrow batches.
3. :mod:`~crawler.recluster.spark.candidates`: exact duplicates by content hash, candidate pairs
   from the pigeonhole part of each sketch under the boilerplate cap, estimates and preference
   orders, in six shuffled steps (:mod:`~crawler.recluster.spark.search_steps`) whose work in
   the executors is numpy's (:mod:`~crawler.recluster.spark.postings`).
4. :mod:`~crawler.recluster.spark.greedy`: Broder's greedy clustering in rounds
   (:mod:`crawler.recluster.rounds`), then cluster ids (:mod:`~crawler.recluster.spark.numbering`).
5. :mod:`~crawler.recluster.spark.run`: the run end to end, the summary, and clusters.jsonl or
   Parquet.

:mod:`~crawler.recluster.spark.diff` runs ``--store DIR --diff`` through the same stages. Every
step that runs Python in the executors goes through :mod:`~crawler.recluster.spark.steps`; a job
that fails is told in one line by :mod:`~crawler.recluster.spark.failures`; each job says in
Spark's UI which step it is (:mod:`~crawler.recluster.spark.described`).

Where the two engines can differ: only through the cap. The local engine's postings hold
representatives only; here they hold every leader that might become one, so a fingerprint in
the indexed part of more than ``cap`` near-identical leaders is cut where the local index is
not (and the local engine, which picks the "rarest" part from the counts seen so far, indexes
common fingerprints early in a corpus where this engine does not). Both report how often the
cap bit (``capped``). ``--exact-cap`` closes both gaps: it ranks each part by the local
clusterer's own running count-min estimates, and searches again without the leaders that
joined a cluster. It is the default below the default cap, where the cap bites often enough
for the gaps to matter (:func:`~crawler.recluster.spark.sketch.exact_cap_wanted`).

The popular representative is refused: it changes as its cluster grows, so whether a document
joins depends on every member before it, not on its candidates alone.
"""

from crawler.recluster.spark.run import recluster_spark
from crawler.recluster.spark.session import SparkUnavailable, spark_session
from crawler.recluster.spark.tasks import Task, tasks

__all__ = ["SparkUnavailable", "Task", "recluster_spark", "spark_session", "tasks"]
