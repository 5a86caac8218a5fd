"""Settings shared by every test."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import settings

#: fixtures of a real redis-server, for the distributed crawl's tests
pytest_plugins = ("tests.redis_server",)

# Time limits belong to benchmarks, not tests: on a loaded 2-core machine a property test's
# example can take longer than Hypothesis's default 200 ms deadline without anything being wrong.
settings.register_profile("neardup", deadline=None)
settings.load_profile("neardup")

#: the test files that take longest, longest first. pyproject's addopts give each file to one
#: worker, in collection order; started first, these leave the short files to fill the
#: workers' ends, instead of one worker running a long file alone while the other is idle
LONGEST_FIRST = (
    "tests/crawler/test_spark.py",
    "tests/crawler/test_spark_cluster.py",
    "tests/dedup/test_canonical_corpus.py",
    "tests/crawler/test_recluster_nodes.py",
    "tests/crawler/test_faults.py",
    "tests/crawler/test_distributed_crawl.py",
    "tests/crawler/test_frontier.py",
    "tests/crawler/test_recrawl.py",
    "tests/crawler/test_traps.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def html_corpus_or_skip(min_pages: int, packages: Sequence[str] | None = None) -> list:
    """The real HTML corpus (``benchmarks.corpus``: its default packages, or ``packages``) of
    at least ``min_pages`` pages; without it a test is skipped, except in CI, where it fails:
    CI must test on real pages."""
    import os

    import pytest

    from benchmarks.corpus import PACKAGES, html_corpus

    try:
        wanted = PACKAGES if packages is None else packages
        return html_corpus(min_pages=min_pages, packages=wanted)
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the HTML corpus is needed in CI: {exc}")
        pytest.skip(f"no HTML corpus: {exc}")
