"""Several processes deciding copies of each other at the same instant against one real
redis-server: no two pages kept that resemble each other, every page decided once, and one
global order, the one a single process replaying the pages reproduces."""

from __future__ import annotations

import itertools
import multiprocessing
import random
from dataclasses import replace

import pytest

from benchmarks.distributed import sketched
from benchmarks.edits import edit_page
from crawler.demo import SITE_DIR
from dedup.cluster import GreedyClusterer
from dedup.estimators import estimate
from dedup.memory_index import MemoryIndex
from dedup.params import DedupParams
from tests.storage.redis_decider import decide_pages

NODES = 4
THRESHOLD = 0.8


def outcome(assignment):
    """An assignment without the search's counts: each node picks the indexed part of its
    representatives with its own fingerprint counts, so a replay estimates other candidates on
    the way to the same decision (every cluster that can reach the threshold is found whatever
    part is indexed: ``dedup.cluster.indexed_count``)."""
    decision = replace(assignment.decision, candidates=0, pruned=0)
    return replace(assignment, decision=decision)


def copies_of_each_page():
    """For each demo page, NODES versions: the page, an exact copy and edited copies."""
    rng = random.Random(3)
    groups = []
    for n, path in enumerate(sorted(SITE_DIR.rglob("*.html"))):
        body = path.read_bytes()
        versions = [body, body]
        for _ in range(NODES - 2):
            versions.append(edit_page(body, rng, ["quarry", "beacon"], max_word_fraction=0.02)[0])
        groups.append([(f"{n}/{v}", html) for v, html in enumerate(versions)])
    return groups


@pytest.mark.slow
def test_nodes_deciding_copies_at_the_same_instant_agree(redis_server, redis_client):
    groups = [sketched(group) for group in copies_of_each_page()]
    groups = [g for g in groups if len(g) == NODES]  # pages with text
    # node i takes version (i + g) of group g: each node sees originals and copies alike
    work = [[group[(i + g) % NODES] for g, group in enumerate(groups)] for i in range(NODES)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(NODES)
    results = context.Queue()
    nodes = [
        context.Process(target=decide_pages,
                        args=(redis_server.url, i + 1, work[i], THRESHOLD, barrier, results))
        for i in range(NODES)
    ]  # fmt: skip
    for process in nodes:
        process.start()
    decided = [d for _ in nodes for d in results.get(timeout=300)]
    for process in nodes:
        process.join(timeout=60)
        assert process.exitcode == 0

    # every page decided exactly once, and the order numbers are one sequence without gaps
    pages = {key: (sketch, h) for group in groups for key, sketch, h in group}
    assert sorted(d.key for d in decided) == sorted(pages)
    assert sorted(d.order for d in decided) == list(range(1, len(pages) + 1))
    assert not any(d.adopted for d in decided)

    # no two kept pages resemble each other at the threshold, across all nodes
    kept = [pages[d.key][0] for d in decided if d.decision.kind == "kept"]
    for a, b in itertools.combinations(kept, 2):
        assert not estimate(a, b).resemblance >= THRESHOLD

    # one global order: one process deciding the pages in that order decides them all alike
    in_order = sorted(decided, key=lambda d: d.order)
    memory = GreedyClusterer(MemoryIndex(), DedupParams(threshold=THRESHOLD))
    replayed = [memory.assign(d.order, *pages[d.key]) for d in in_order]
    assert [outcome(a) for a in replayed] == [outcome(d.assignment) for d in in_order]

    kinds = {d.decision.kind for d in decided}
    assert {"kept", "exact_duplicate", "near_duplicate"} <= kinds
    # and the copies did meet inside each other's transactions: some decisions were retried
    assert sum(d.attempts - 1 for d in decided) > 0
