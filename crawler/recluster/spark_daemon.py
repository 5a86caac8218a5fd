"""The Python worker daemon of a local session that ``--engine spark`` starts: PySpark's own
daemon, with PySpark imported as the driver imports it.

Spark puts its zip of PySpark (``python/lib/pyspark.zip`` under its home) first on the path of
its Python workers. Python caches no bytecode for what it imports from a zip, so the daemon
compiles PySpark from source each time a session starts it (0.39 s here, against 0.07 s from
the installed PySpark, whose bytecode is cached), each worker compiles the modules the daemon
did not import, and each worker's first task reads the zip's index again. When the zip lies
inside the installed PySpark package (pip's PySpark ships it there: the same release), the
daemon takes it off the path before it imports PySpark; any other layout is left as Spark made
it. Then PySpark's daemon runs, with one change: a worker whose socket the JVM has closed (its
session stopped while the worker waited for a task) exits without a word, instead of printing
a ``BrokenPipeError`` traceback into the user's terminal after the command's last line
(:func:`quiet_on_hang_up`).

Run as ``python -m crawler.recluster.spark_daemon pyspark.worker`` (Spark's
``spark.python.daemon.module``). It lives outside :mod:`crawler.recluster.spark`, whose package
imports the engine (numpy among it, which starts threads): nothing of the engine may be loaded
before the daemon forks its workers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from typing import Any

__all__ = ["quiet_on_hang_up", "redundant_zips"]


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


def quiet_on_hang_up(worker: Callable[..., int]) -> Callable[..., int]:
    """``worker`` (PySpark's ``daemon.worker``, which runs one task on a socket), returning 1
    when writing to the JVM fails because the JVM hung up. The worker then exits, as PySpark's
    own flush failure makes it, minus the traceback: the JVM closed the socket (a session that
    stops closes its idle workers' sockets; a cancelled task's), so nobody is left waiting for
    what the worker had to say, and the user, whose command has already finished, would read
    a stack trace about nothing (in about one run in four of a small corpus on a busy
    machine)."""

    def run(*args: Any) -> int:
        try:
            return worker(*args)
        except (BrokenPipeError, ConnectionResetError):
            return 1

    return run


def main() -> None:
    drop = redundant_zips(sys.path)
    sys.path[:] = [p for p in sys.path if p not in drop]
    from pyspark import daemon

    daemon.worker = quiet_on_hang_up(daemon.worker)  # the name manager() calls
    daemon.manager()


if __name__ == "__main__":
    main()
