"""The Spark session the engine runs in: the caller's (``spark-submit``, a notebook), else one
started here on ``--master``; anything that stops Spark from starting is one line.

A session started here is Spark's own but for what the command shows (docs/spark.md): a local
one listens on loopback only and logs errors only, and no stage bars; ``--spark-conf`` wins.
The settings the engine's queries need are the run's, in any session (:mod:`.run`).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["LOG_CONFIG", "SparkUnavailable", "spark_session"]

#: what a --master may look like (Spark's own parser gives a Java stack trace instead)
_MASTER = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+)$"
)
#: the log configuration of a local session's JVM: errors only, one line each. Without one,
#: Spark prints its notes on its log configuration and Hadoop's native library before the
#: first task (Spark's own ``setLogLevel`` comes too late for them)
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no pyspark, no Java, a bad master URL); one line for the user."""


def spark_session(
    master: str | None, settings: dict[str, str] | None = None
) -> tuple[Any, bool]:
    """The active SparkSession (under ``spark-submit``, or a caller's), else a new one on
    ``master`` (default ``local[*]``) with Spark's ``settings``; and whether it was made here
    (then the caller stops it; ``settings`` apply to no other).

    The local workers run this Python (unless ``spark.pyspark.python`` or ``PYSPARK_PYTHON``
    names another): the one neardup is installed in; a cluster's, what those name, else
    PySpark's default (:func:`_workers_python`).
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
        raise SparkUnavailable(
            "--engine spark needs Java 17 or later: install a JDK or set JAVA_HOME")
    if master is not None and not _MASTER.match(master):
        raise SparkUnavailable(
            f"--master {master!r} is not a Spark master URL "
            "(local, local[N], local[*], local[N,RETRIES], spark://HOST:PORT, yarn, k8s://URL)"
        )
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName("neardup recluster")
    if not submitted:
        master = master or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):
            # one machine: no other needs to reach it, so Spark's ports listen on loopback only
            # (SPARK_LOCAL_IP names the executor's own address too)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1")
            # the command prints its own progress and summary: the JVM's log, errors only
            builder = builder.config("spark.driver.defaultJavaOptions",
                                     f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}")
        # the command shows its own progress bar, which Spark's stage bars would overwrite
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        for key, value in (settings or {}).items():  # the caller's, over these
            builder = builder.config(key, value)
    try:
        with _workers_python((settings or {}).get("spark.pyspark.python"),
                             local=master is not None and master.startswith("local")):
            session = builder.getOrCreate()
    except Exception as exc:  # py4j's errors carry a Java stack trace: keep its first line
        raise SparkUnavailable(f"cannot start Spark on {master}: {_why(exc)}") from None
    session.sparkContext.setLogLevel("ERROR")
    return session, True


def _why(exc: Exception) -> str:
    """What stopped a session from starting, in a line: the Java exception's own message (not
    py4j's "An error occurred while calling ..."), and for a context Spark stopped as it started
    (a standalone master that never answered: Spark gives up after its retries, and only its
    log says why), where to look."""
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
