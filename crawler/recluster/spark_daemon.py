"""The Python worker daemon of a local session that ``--engine spark`` starts: PySpark's own
daemon, with PySpark imported as the driver imports it.

Spark puts its zip of PySpark (``python/lib/pyspark.zip`` under its home) first on the path of
its Python workers. Python caches no bytecode for what it imports from a zip, so the daemon
compiles PySpark from source each time a session starts it (0.39 s here, against 0.07 s from
the installed PySpark, whose bytecode is cached), each worker compiles the modules the daemon
did not import, and each worker's first task reads the zip's index again. When the zip lies
inside the installed PySpark package (pip's PySpark ships it there: the same release), the
daemon takes it off the path before it imports PySpark; any other layout is left as Spark made
it. Then PySpark's daemon runs unchanged.

Run as ``python -m crawler.recluster.spark_daemon pyspark.worker`` (Spark's
``spark.python.daemon.module``). It lives outside :mod:`crawler.recluster.spark`, whose package
imports the engine (numpy among it, which starts threads): nothing of the engine may be loaded
before the daemon forks its workers.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

__all__ = ["redundant_zips"]


def redundant_zips(path: list[str]) -> list[str]:
    """The entries of ``path`` that are zips of PySpark inside the PySpark package that
    ``path`` would otherwise import (so that package holds the same modules)."""
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    if not zips:
        return []
    spec = PathFinder.find_spec("pyspark", [p for p in path if p not in zips])
    if spec is None or not spec.submodule_search_locations:
        return []
    package = os.path.realpath(spec.submodule_search_locations[0])
    return [p for p in zips if os.path.realpath(p).startswith(package + os.sep)]


def main() -> None:
    drop = redundant_zips(sys.path)
    sys.path[:] = [p for p in sys.path if p not in drop]
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
