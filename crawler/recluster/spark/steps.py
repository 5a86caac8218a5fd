"""How every Python step of the engine runs in Spark, and the one declaration of each schema.

A step is ``mapInArrow``: Arrow batches in, Arrow batches out. Its output schema is declared
once, as Spark's DDL (``"key long, cluster long"``); the step builds its batches from the same
string (:func:`arrow_schema`, :func:`record_batch`), so the JVM's side and the Python side
cannot drift apart.

PySpark's worker daemon runs a full garbage collection after every task, which walks every
object the worker tracks (tens of thousands with pyarrow, numpy and the engine loaded). So a
step, as it starts, moves what its worker holds into the collector's permanent generation
(:func:`gc.freeze`), which collections skip. Objects alive as a step began that end up in a
cycle afterwards are reclaimed only when the worker ends; a step leaves little behind.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any

__all__ = ["arrow_schema", "column_names", "python_step", "record_batch"]

#: the Arrow type of each Spark SQL type the schemas use
_ARROW_TYPES = {"long": "int64", "int": "int32", "byte": "int8", "string": "string",
                "binary": "binary", "boolean": "bool_", "double": "float64"}


def python_step(frame: Any, step: Callable[[Iterable[Any]], Iterator[Any]], schema: str) -> Any:
    """``frame.mapInArrow(step, schema)``, ``step`` run with its worker's objects frozen."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        gc.freeze()
        yield from step(batches)

    return frame.mapInArrow(run, schema)


def column_names(schema: str) -> tuple[str, ...]:
    """The column names of a DDL ``schema``.

    >>> column_names("key long, kind byte")
    ('key', 'kind')
    """
    return tuple(column.split()[0] for column in schema.split(","))


@cache
def arrow_schema(schema: str) -> Any:
    """The Arrow schema of a DDL ``schema`` of plain columns.

    >>> arrow_schema("key long, kind byte, ok boolean").names
    ['key', 'kind', 'ok']
    """
    import pyarrow as pa

    fields = [column.split() for column in schema.split(",")]
    return pa.schema([(name, getattr(pa, _ARROW_TYPES[kind])()) for name, kind in fields])


def record_batch(schema: str, columns: Iterable[Any]) -> Any:
    """An Arrow batch of the DDL ``schema`` from its ``columns`` (lists, numpy or Arrow arrays),
    in order."""
    import pyarrow as pa

    arrow = arrow_schema(schema)
    arrays = [column if isinstance(column, pa.Array) else pa.array(column, field.type)
              for column, field in zip(columns, arrow)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow)
