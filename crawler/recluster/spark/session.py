"""The Spark session the engine runs in: the caller's (``spark-submit``, a notebook), else one
started here on ``--master``; anything that stops Spark from starting is one line. A local
session's JVM maps its classes from an archive, or writes it once (:mod:`.archive`)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawler.recluster.spark.archive import ClassArchive

__all__ = [
    "LOG_CONFIG", "SparkUnavailable", "local_java_options", "page_size", "spark_session",
    "stop_session", "writes_archive",
]

#: the class archive this process's JVM writes as it exits, if it does (:func:`stop_session`)
_writing: ClassArchive | None = None

#: what a --master may look like (Spark's own parser gives a Java stack trace instead)
_MASTER = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+)$"
)


#: the log configuration of a local session's JVM: errors only, one line each. Without one,
#: Spark prints four lines about its default configuration and Hadoop's native library
#: before the first task (Spark's own ``setLogLevel`` comes too late for them)
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
#: the Python worker daemon of a local session (:mod:`crawler.recluster.spark_daemon`)
DAEMON = "crawler.recluster.spark_daemon"

#: a JVM option that picks a garbage collector: the JVM refuses to start with two
_COLLECTOR = re.compile(r"-XX:\+Use\w*GC\b")


def local_java_options(environ: dict[str, str] | None = None) -> str:
    """The driver JVM's options for a session started here (a user's own
    ``spark.driver.extraJavaOptions`` come later on its command line and win, but for the
    collector: the JVM refuses two).

    * ``-XX:TieredStopAtLevel=1``: a run lasts minutes and its heavy work is numpy's; the JVM's
      optimising compiler cost more CPU than it saved (a third of all on 20,000 pages).
    * ``-XX:InitialRAMPercentage=100``: the heap starts at its maximum (the JVM caps the
      initial size at ``-Xmx``, which ``spark.driver.memory`` sets), so the first minute is not
      spent in collections that grow it.
    * ``-XX:+UseParallelGC``: the throughput collector, as the JVM itself picks on one CPU. On
      two or more it picks G1, whose concurrent marking threads take CPU from the Python
      workers. Left out when the environment (``JAVA_TOOL_OPTIONS``, ``JDK_JAVA_OPTIONS``,
      ``PYSPARK_SUBMIT_ARGS``) already picks a collector, which would stop the JVM.

    On 20,000 pages in ``local[2]``, the last two took a first run from 645 to 716 documents/s
    (medians of 7) and a warm one from about 940 to 1,000.

    >>> local_java_options({})
    '-XX:TieredStopAtLevel=1 -XX:InitialRAMPercentage=100 -XX:+UseParallelGC'
    >>> local_java_options({"JAVA_TOOL_OPTIONS": "-XX:+UseG1GC"})
    '-XX:TieredStopAtLevel=1 -XX:InitialRAMPercentage=100'
    """
    environ = os.environ if environ is None else environ
    options = ["-XX:TieredStopAtLevel=1", "-XX:InitialRAMPercentage=100"]
    named = " ".join(environ.get(k, "") for k in
                     ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "PYSPARK_SUBMIT_ARGS"))
    if not _COLLECTOR.search(named):
        options.append("-XX:+UseParallelGC")
    return " ".join(options)


#: ``spark.driver.memory`` as PySpark's launcher is given it, and the units Spark reads in it
_DRIVER_MEMORY = re.compile(r"--driver-memory[ =](\S+)")
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: the pages one task may hold at once (the size of Spark's ``TaskMemoryManager`` page table)
_PAGES_PER_TASK = 8192


def page_size(
    settings: dict[str, str] | None = None, environ: dict[str, str] | None = None
) -> str:
    """``spark.buffer.pageSize`` for a local session: 1 MB, or more when the JVM's heap is so
    large that 8,192 pages of 1 MB (the most one task may hold) would not cover it.

    Spark sizes a task's memory pages from the heap and the cores: 16 MB for a 1 GB driver on
    two cores. A task's sort or aggregation takes a page as its first row comes, and the
    clustering stages' tasks sort and group a few packed arrays each: most of every page was
    space allocated and zeroed for nothing, and the heap filled with it (full collections of
    the old generation, 0.1 s each, every run or two). With 1 MB pages the collector's pauses
    in a warm run of the clustering stages on 10,000 synthetic documents fell from about 160
    to 35 ms and the run from 1.50 and 1.43 to 1.33 and 1.24 s; on 100,000, 7.0 to 6.7 s
    (``benchmarks/spark.md``, stop 36). The heap is ``spark.driver.memory`` from
    ``settings``, else ``--driver-memory`` in ``PYSPARK_SUBMIT_ARGS``, else Spark's default,
    1 GB.

    >>> page_size({}, {}), page_size({"spark.driver.memory": "8g"}, {})
    ('1m', '1m')
    >>> page_size({"spark.driver.memory": "32g"}, {})
    '4m'
    >>> page_size({}, {"PYSPARK_SUBMIT_ARGS": "--driver-memory 100g pyspark-shell"})
    '16m'
    """
    environ = os.environ if environ is None else environ
    given = (settings or {}).get("spark.driver.memory")
    if given is None:
        named = _DRIVER_MEMORY.search(environ.get("PYSPARK_SUBMIT_ARGS", ""))
        given = named.group(1) if named else "1g"
    text = given.strip().lower().removesuffix("b")
    unit = _UNITS.get(text[-1:], 0)
    try:  # a number alone is MiB, as Spark reads it
        heap = int(text[:-1]) * unit if unit else int(text) << 20
    except ValueError:  # Spark itself will refuse it, in its own words
        heap = 1 << 30
    megabytes = 1
    while megabytes << 20 < heap / _PAGES_PER_TASK and megabytes < 64:
        megabytes *= 2
    return f"{megabytes}m"


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no pyspark, no Java, a bad master URL); one line for the user."""


def spark_session(
    master: str | None, settings: dict[str, str] | None = None
) -> tuple[Any, bool]:
    """The active SparkSession (under ``spark-submit``, or a caller's), else a new one on
    ``master`` (default ``local[*]``), with Spark's ``settings`` over the engine's own; and
    whether it was made here (then the caller stops it; ``settings`` apply to no other).

    The local workers run this Python (unless ``spark.pyspark.python`` or ``PYSPARK_PYTHON``
    names another): the one neardup is installed in; a cluster's, what those name, else
    PySpark's default (:func:`_workers_python`). A session made here shows no stage bars (the
    command shows its own) and, when local, logs errors only (:data:`LOG_CONFIG`).
    """
    try:
        import pyarrow  # noqa: F401 - the executors hand documents to Spark as Arrow batches
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable(
            "--engine spark needs pyspark and pyarrow: pip install 'neardup[spark]'"
        ) from None
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started a JVM for us
    if not submitted and not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise SparkUnavailable("--engine spark needs Java 17 or later: install a JDK or set JAVA_HOME")
    if master is not None and not _MASTER.match(master):
        raise SparkUnavailable(
            f"--master {master!r} is not a Spark master URL "
            "(local, local[N], local[*], local[N,RETRIES], spark://HOST:PORT, yarn, k8s://URL)"
        )
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    global _writing
    archive = None
    builder = SparkSession.builder.appName("neardup recluster")
    if not submitted:
        master = master or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):
            # one machine: Spark's ports listen on loopback only, whatever the host name says
            # (SPARK_LOCAL_IP also names the executor's own address)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1")
            options = local_java_options()
            # the JVM maps its classes from an archive, or writes one as it exits (:mod:`.archive`);
            # one per set of the JVM's options, the driver's settings given here among them
            jvm = " ".join(f"{k}={v}" for k, v in sorted((settings or {}).items())
                           if k.startswith("spark.driver."))
            archive = ClassArchive.from_environ(None, f"{options} {jvm}".strip())
            if archive is not None:
                options = f"{options} {archive.java_options()}".strip()
            # after the archive's options, which name the archive by the JVM's options
            options = f"{options} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
            builder = builder.config("spark.driver.defaultJavaOptions", options)
            # the Python workers import PySpark as installed, not from Spark's zip
            builder = builder.config("spark.python.daemon.module", DAEMON)
            builder = builder.config("spark.buffer.pageSize", page_size(settings))
        # adaptive execution re-plans after every exchange, each one a job of its own (55 jobs
        # instead of 19 on 20,000 pages); with the engine's own repartitioning by bucket into
        # even shares it has nothing to even out, and a warm local run took 6% longer
        builder = builder.config("spark.sql.adaptive.enabled", "false")
        # Spark interprets the plans instead of compiling Java for them: their operators move
        # a few packed arrays per bucket, so compiling (0.6 s of a first clustering run on
        # 10,000 documents) cost more than it saved; first runs on 20,000 pages took 10.2
        # instead of 11.2 s in local[2], and 1,000,000 documents' clustering was not slowed.
        # With both, 20,000 pages on a standalone cluster (a master and a two-core worker on
        # one machine) took 20.3 s instead of 24.4 (medians of 3 and 4 runs)
        builder = builder.config("spark.sql.codegen.wholeStage", "false").config(
            "spark.sql.codegen.factoryMode", "NO_CODEGEN")  # each expression too
        # the UI's description of each query a plain tree of its operators, not Spark's
        # "formatted" one, which details each operator again below the tree: the driver
        # writes it before each query's jobs start (105 against 4 ms for the last query of a
        # clustering run on 10,000 documents; first runs 7.92 against 8.57 s)
        builder = builder.config("spark.sql.ui.explainMode", "simple")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        # the JVM talks to its Python workers over Unix sockets: on TCP loopback each task's
        # small messages wait out delayed acknowledgements, tens of milliseconds per task
        builder = builder.config("spark.python.unix.domain.socket.enabled", "true")
        for key, value in (settings or {}).items():  # the caller's, over the engine's
            builder = builder.config(key, value)
    try:
        with _workers_python((settings or {}).get("spark.pyspark.python"),
                             local=master is not None and master.startswith("local")):
            session = builder.getOrCreate()
    except Exception as exc:  # py4j's errors carry a Java stack trace: keep its first line
        if archive is not None:
            archive.keep(None)  # gives up the lock
        raise SparkUnavailable(f"cannot start Spark on {master}: {_why(exc)}") from None
    if archive is not None and archive.writing:
        _writing = archive
    session.sparkContext.setLogLevel("ERROR")
    return session, True


def _why(exc: Exception) -> str:
    """What stopped a session from starting, in a line: the Java exception's own message (not
    py4j's "An error occurred while calling ..."), and for a context Spark stopped as it started
    (a standalone master that never answered: Spark gives up after a minute, and only its log
    says why), where to look."""
    java = getattr(exc, "java_exception", None)
    text = str(java) if java is not None else str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()),
                 type(exc).__name__)
    if "stopped SparkContext" in first:
        first += " (Spark gave up on the master: is it running, and reachable from here? " \
                 "Spark's log above says why)"
    return first


@contextmanager
def _workers_python(named: str | None, *, local: bool) -> Iterator[None]:
    """The Python the new session's workers run, as spark-submit picks it: ``named``
    (``spark.pyspark.python``), else ``PYSPARK_PYTHON``, else on one machine this Python (the
    one neardup is installed in), and on a cluster PySpark's own default, ``python3`` on the
    executors' path (this Python's path need not exist there). PySpark reads it from
    ``PYSPARK_PYTHON`` as its context starts, and only spark-submit turns the setting into
    that variable: here it is set while the session starts, then put back."""
    chosen = named or os.environ.get("PYSPARK_PYTHON") or (sys.executable if local else None)
    before = os.environ.get("PYSPARK_PYTHON")
    if chosen is not None:
        os.environ["PYSPARK_PYTHON"] = chosen
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = before


def writes_archive() -> bool:
    """Whether the JVM of the session started here writes the class archive as it exits (the
    first local session on a machine): then :func:`stop_session` waits for it."""
    return _writing is not None


def stop_session(session: Any, note: Callable[[str], None] | None = None) -> None:
    """Stop a session that :func:`spark_session` started. If its JVM writes the class archive
    (the first local session on a machine), end the JVM now and wait while it writes, telling
    ``note`` first: the archive is then whole before this process exits."""
    global _writing
    session.stop()
    archive, _writing = _writing, None
    if archive is None:
        return
    from pyspark import SparkContext

    if note is not None:
        note("saving the JVM's classes for faster starts (once, up to half a minute)")
    archive.keep(getattr(SparkContext._gateway, "proc", None))
    # that JVM is gone: a later session in this process starts one of its own
    SparkContext._gateway = None
    SparkContext._jvm = None
