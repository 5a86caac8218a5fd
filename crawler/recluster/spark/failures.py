"""A Spark job that failed, told in one line.

A failed job reaches the driver as a Java exception whose text holds Spark's whole story (every
attempt, a Java stack trace, the Python worker's traceback). The user needs its last word, and
what to do when the cluster's setup is the cause (bad documents never fail a job): most often
a Python on the executors without neardup (PySpark runs ``python3`` there unless told).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["JobFailure", "explain"]

#: what to do when the executors' Python lacks the engine
_NAME_ONE = ("install neardup with its spark extra where the executors run, or name a Python "
             "that has it: --spark-conf spark.pyspark.python=PATH (under spark-submit, --conf)")
_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_NO_PROGRAM = re.compile(r'Cannot run program "([^"]+)"')
#: the line a Python traceback ends with: ``SomeError: what``
_PYTHON_ERROR = re.compile(r"^\s*([\w.]+(Error|Exception|Interrupt|Exit)\b.*)$", re.MULTILINE)
#: how much of Spark's own first line a message keeps
_LONGEST = 300


@dataclass(frozen=True)
class JobFailure:
    """One line for the user; ``setup``: the cluster's setup is the cause, not the run."""

    line: str
    setup: bool


def explain(exc: BaseException, python: str) -> JobFailure | None:
    """``exc`` told in one line, if it is a Spark job's failure (else None: not Spark's to
    tell); ``python`` is the Python the executors were told to run.

    >>> explain(ValueError("a bug of ours"), "python3") is None
    True
    """
    if not _is_spark_s(exc):
        return None
    text = str(exc)
    missing = _MISSING.search(text)
    if missing:
        return JobFailure(f"the executors' Python ({python}) cannot import "
                          f"{missing.group(1).split('.')[0]!r}: {_NAME_ONE}", setup=True)
    absent = _NO_PROGRAM.search(text)
    if absent:
        return JobFailure(f"the executors cannot start Python {absent.group(1)!r}: {_NAME_ONE}",
                          setup=True)
    return JobFailure(f"a Spark job failed: {last_word(text)} (Spark's log, above or on the "
                      "executors, has the rest)", setup=False)


def last_word(text: str) -> str:
    """What a failure's text ends with: the Python error its traceback ends with, if it holds
    one, else its first line (without Spark's preamble), cut to a readable length.

    >>> last_word("An exception was thrown from the Python worker.\\nTraceback (most recent "
    ...           "call last):\\n  File \\"x.py\\", line 1\\nMemoryError\\n")
    'MemoryError'
    >>> last_word("Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times, most "
    ...           "recent failure: java.lang.OutOfMemoryError\\n\\tat x")
    'Task 0 in stage 1.0 failed 4 times, most recent failure: java.lang.OutOfMemoryError'
    """
    errors = _PYTHON_ERROR.findall(text) if "Traceback (most recent call last)" in text else []
    line = errors[-1][0] if errors else next(
        (line for line in text.strip().splitlines() if line.strip()), "no message")
    line = line.strip().removeprefix("Job aborted due to stage failure: ")
    return line if len(line) <= _LONGEST else line[: _LONGEST - 1] + "…"


def _is_spark_s(exc: BaseException) -> bool:
    """Whether ``exc`` came from Spark's JVM: a Java exception through py4j, or one PySpark
    converted (a Python worker's among them). PySpark's own driver-side errors are not: those
    are the engine's bugs, whose traceback is worth its length."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors.exceptions.captured import CapturedException
    except ImportError:  # pragma: no cover - no Spark, no Spark job
        return False
    return isinstance(exc, (Py4JError, CapturedException))
