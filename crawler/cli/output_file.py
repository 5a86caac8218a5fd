"""Where a command writes its result file: a run that fails or is interrupted leaves what the
file held before, and a run never writes over one of its own inputs.

A regular file is written beside its place (a hidden ``.NAME.*.part`` in the same directory)
and renamed onto it once the run has finished, which also makes the new file appear whole to
whoever reads it; anything else that can be opened for writing (``/dev/null``, a pipe) is
written as it is. A write that fails (a full disk) is one line naming the file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from crawler.cli.common import RunFailed, UserError

__all__ = ["check_not_an_input", "check_parquet_directory", "replaced_file"]


class _Checked:
    """A text file whose failed writes are one line naming it (:class:`RunFailed`)."""

    def __init__(self, handle: IO[str], name: str) -> None:
        self._handle = handle
        self._name = name

    def write(self, text: str) -> int:
        try:
            return self._handle.write(text)
        except OSError as exc:
            raise RunFailed(_cannot_write(self._name, exc)) from None


@contextlib.contextmanager
def replaced_file(name: str) -> Iterator[_Checked]:
    """The file ``name`` to write, in place only once the block ends without an error."""
    target = Path(name)
    if target.is_dir():
        raise UserError(f"cannot write {name}: it is a directory")
    if target.exists() and not target.is_file():  # a device or a pipe: nothing to keep
        try:
            handle = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UserError(_cannot_write(name, exc)) from None
        with _closed(handle, name):
            yield _Checked(handle, name)
        return
    target = target.resolve()  # a symlink's file is replaced, not the link
    try:
        fd, part = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise UserError(_cannot_write(name, exc)) from None
    try:
        os.chmod(part, target.stat().st_mode & 0o7777 if target.exists() else _default_mode())
        with _closed(open(fd, "w", encoding="utf-8"), name) as handle:
            yield _Checked(handle, name)
        os.replace(part, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise


def check_not_an_input(name: str, inputs: Iterable[str]) -> None:
    """A UserError when the file ``name`` is one of ``inputs`` (the run would replace it)."""
    if name == "-" or not os.path.exists(name):
        return
    for given in inputs:
        with contextlib.suppress(OSError):
            if os.path.isfile(given) and os.path.samefile(name, given):
                raise UserError(f"-o {name} is one of the inputs ({given}): give another file")


#: what Spark writes into a Parquet dataset's directory (its parts, checksums and markers)
_SPARK_OUTPUT = ("part-", ".part-", "_SUCCESS", "._SUCCESS", "_committed", "_started", "_temporary")


def check_parquet_directory(name: str) -> None:
    """A UserError unless the local directory ``name`` is new, empty or a Parquet dataset
    (Spark's overwrite deletes whatever it holds); a URL (``hdfs://``, ``s3a://``) is the
    cluster's to check."""
    if "://" in name:
        return
    path = Path(name)
    if path.exists() and not path.is_dir():
        raise UserError(f"-o {name} is a file: --output-format parquet writes a directory")
    if path.is_dir():
        others = sorted(p.name for p in path.iterdir() if not p.name.startswith(_SPARK_OUTPUT))
        if others:
            raise UserError(
                f"-o {name} holds files of no Parquet dataset ({', '.join(others[:3])}"
                f"{', ...' if len(others) > 3 else ''}), which Spark would delete: give a new "
                "or empty directory"
            )


@contextlib.contextmanager
def _closed(handle: IO[str], name: str) -> Iterator[IO[str]]:
    """``handle``, closed at the end: a failure to write what was buffered is one line (the
    block's own errors pass through as they are)."""
    try:
        yield handle
    except BaseException:
        with contextlib.suppress(OSError):
            handle.close()
        raise
    try:
        handle.close()
    except OSError as exc:
        raise RunFailed(_cannot_write(name, exc)) from None


def _cannot_write(name: str, exc: OSError) -> str:
    return f"cannot write {name}: {exc.strerror or exc}"


def _default_mode() -> int:
    """What ``open(name, "w")`` would give a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
