"""Settings shared by every test."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hypothesis import settings

#: fixtures of a real redis-server, for the distributed crawl's tests
pytest_plugins = ("tests.redis_server",)

# Time limits belong to benchmarks, not tests: on a loaded 2-core machine a property test's
# example can take longer than Hypothesis's default 200 ms deadline without anything being wrong.
settings.register_profile("neardup", deadline=None)
settings.load_profile("neardup")

# Every Spark session a test starts, here or in a child process, reads its defaults from
# tests/spark_conf/spark-defaults.conf, and none from a developer's own Spark configuration.
os.environ["SPARK_CONF_DIR"] = str(Path(__file__).with_name("spark_conf"))

# The processes the tests start (crawls, commands, nodes, Spark's Python workers: hundreds in a
# run) import neardup's modules afresh. Under PYTHONDONTWRITEBYTECODE, which some images set,
# each would compile them again; instead the first writes their bytecode to __pycache__, as
# Python does by default, and the others read it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def html_corpus_or_skip(min_pages: int, packages: Sequence[str] | None = None) -> list:
    """The real HTML corpus (``benchmarks.corpus``: its default packages, or ``packages``) of
    at least ``min_pages`` pages; without it a test is skipped, except in CI, where it fails:
    CI must test on real pages."""
    import pytest

    from benchmarks.corpus import PACKAGES, html_corpus

    try:
        wanted = PACKAGES if packages is None else packages
        return html_corpus(min_pages=min_pages, packages=wanted)
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the HTML corpus is needed in CI: {exc}")
        pytest.skip(f"no HTML corpus: {exc}")
