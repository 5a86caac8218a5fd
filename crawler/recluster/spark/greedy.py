"""Broder's greedy clustering in rounds on Spark (the steps are :mod:`crawler.recluster.rounds`).

A round joins each pending document's candidates with the statuses the round before decided
(each row keeps the status it already knew), cuts the pending documents into contiguous
stretches of the input (a range partitioning by key), and decides each stretch in input order
(:func:`~crawler.recluster.rounds.decide_in_order`). What is still undecided, because a
candidate it waits on lies in an earlier stretch and was undecided when the round began, goes
to the next round. A round has as many stretches as its pending documents need
(``SparkJob.stretch`` each), at most the job's partitions. Each round's step is kept
(:mod:`.kept`), so round n neither computes nor plans rounds 1 to n-1 again. The job that
counts a round's decided and pending documents also counts the kept documents of each input
task, which the cluster ids need (:mod:`.numbering`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple

from crawler.recluster.rounds import JOINED, KEPT, decide_in_order
from crawler.recluster.spark.described import described
from crawler.recluster.spark.kept import kept
from crawler.recluster.spark.steps import python_step, record_batch
from crawler.recluster.spark.tasks import RECORD_BITS

__all__ = ["DECISIONS", "Rounds", "greedy_rounds"]

#: a leader's decision: its cluster's representative ``rep`` (None when kept) and resemblance
DECISIONS = "key long, kind string, rep long, r double"
_STEP = "decided boolean, d long, pos int, e long, kind string, r double, status int"


class Rounds(NamedTuple):
    """What :func:`greedy_rounds` hands back: every leader's decision (:data:`DECISIONS`), how
    many rounds it took, the rounds' kept steps (to unpersist once the decisions are read), and
    the kept documents of each input task that has any."""

    decisions: Any
    count: int
    steps: list[Any]
    kept_per_task: dict[int, int]


def greedy_rounds(leaders: Any, prefs: Any, partitions: int, stretch: int, most: int) -> Rounds:
    """The rounds that decide every leader (:class:`Rounds`).

    ``prefs`` are :data:`~crawler.recluster.spark.candidates.PREFERENCES`; a leader without
    any is kept at once. ``stretch``: pending documents per range of a round. ``most``: how
    many documents at most have preferences (the search's count of documents with a pair to
    estimate), which sizes the first round without a job to count them.
    """
    context = prefs.sparkSession.sparkContext
    # a document with candidates has exactly one first preference: no distinct, no shuffle
    waiting = prefs.where("pos = 0").selectExpr("d AS key")
    alone = leaders.select("key").join(waiting, "key", "left_anti")
    decided = alone.selectExpr("key", "'kept' AS kind", "CAST(NULL AS LONG) AS rep",
                               "CAST(NULL AS DOUBLE) AS r")
    # a candidate is a leader: kept at once unless it waits too. Each pending row carries its
    # candidate's status from then on; a round learns only the statuses the one before decided
    learnt = waiting.selectExpr("key AS e", "true AS waits")
    status = f"IF(waits, NULL, {KEPT})"  # no row in ``learnt``: the candidate does not wait
    pending = prefs
    rounds = 0
    steps: list[Any] = []
    left = most
    while True:  # a round even if none waits: its job counts the kept documents of each task
        # the first round's job estimates the pairs on its way (the preferences are kept); the
        # step's plan, made here, starts the jobs of the joins' broadcasts
        with described(context, f"greedy round {rounds + 1}" if rounds
                       else "estimates and greedy round 1"):
            stretches = max(1, min(partitions, -(-left // stretch)))
            ranged = (
                pending.join(learnt, "e", "left")
                .selectExpr("d", "pos", "e", "kind", "r", f"{status} AS status")
                .repartitionByRange(stretches, "d")
                .sortWithinPartitions("d", "pos")
            )
            step = kept(python_step(ranged, _decide_pass, _STEP), steps)  # by the count
            now = step.where("decided").selectExpr("d AS key", "kind", "e AS rep", "r")
            # every decision so far, kept by the count, which counts the kept documents of each
            # task too: if this round is the last, the cluster ids need nothing more
            so_far = kept(decided.unionByName(now), steps)
            # decided documents have a row each, pending ones keep their first preference's
            counts = (
                step.where("decided OR pos = 0")
                .selectExpr("true AS round", "decided", "-1L AS task")
                .unionByName(_kept_by_task(so_far))
                .groupBy("round", "decided", "task").count().collect()
            )
        progress = sum(n for in_round, is_decided, _, n in counts if in_round and is_decided)
        left = sum(n for in_round, is_decided, _, n in counts if in_round and not is_decided)
        kept_per_task = {task: n for in_round, _, task, n in counts if not in_round}
        decided = so_far
        if left and not progress:
            raise RuntimeError("greedy rounds made no progress (a bug: candidates are earlier)")
        rounds += progress > 0  # none: no pair estimated at the threshold, nothing waited
        if not left:
            break
        learnt = now.selectExpr("key AS e", f"IF(kind = 'kept', {KEPT}, {JOINED}) AS now")
        status = "coalesce(now, status)"  # what the round before decided, else what was known
        pending = step.where("NOT decided").drop("decided")
    return Rounds(decided, rounds, steps, kept_per_task)


def _kept_by_task(decisions: Any) -> Any:
    """A row per kept document of ``decisions``, with its input task (a key's high bits), in
    the columns of a round's count."""
    return decisions.where("kind = 'kept'").selectExpr(
        "false AS round", "true AS decided", f"shiftright(key, {RECORD_BITS}) AS task")


def _decide_pass(batches: Iterable[Any]) -> Iterator[Any]:
    """One round in one partition: its pending documents' preference rows, sorted by document
    and place, each with its candidate's status if known; out go the decided documents (one
    row each) and the rows of those still pending, as they came (:data:`_STEP`)."""
    rows = (row for batch in batches for row in zip(*batch.to_pydict().values()))
    held: dict[int, list[tuple]] = {}  # a document's rows, until it is decided or not

    def documents() -> Iterator[tuple[int, list, dict[int, int]]]:
        for d, group in groupby(rows, key=itemgetter(0)):  # rows: d, pos, e, kind, r, status
            held[d] = mine = list(group)
            yield (d, [(e, kind, r) for _, _, e, kind, r, _ in mine],
                   {e: status for _, _, e, _, _, status in mine if status is not None})

    out: list[tuple] = []
    for d, decision in decide_in_order(documents()):
        mine = held.pop(d)
        if decision is None:
            out += [(False, *row) for row in mine]
        else:
            kind, rep, r = decision
            out.append((True, d, None, rep, kind, r, None))
        if len(out) >= 4096:
            yield record_batch(_STEP, map(list, zip(*out)))
            out = []
    if out:
        yield record_batch(_STEP, map(list, zip(*out)))
