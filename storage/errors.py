"""What can go wrong when opening or writing a store, as exceptions whose message is one line for
the user."""

from __future__ import annotations

import errno
import os
import resource


class StoreError(Exception):
    """A store that cannot be used as asked; the message names the store and what to do."""


class StoreMismatchError(StoreError, ValueError):
    """The store was made with other parameters than this run asks for.

    Sketches made with different parameters cannot be compared, so mixing them would silently
    corrupt every later decision; the store refuses instead.
    """


class StoreBusyError(StoreError):
    """Another writer holds the store (one writer at a time, as in LMDB itself)."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """There is no store at the path (read-only opens never create one)."""


class PageReadError(StoreError):
    """A page location that does not lead to a readable WARC response record."""


class StoreWriteError(StoreError):
    """The store could not be written: a full disk, a read-only file system, a file that cannot
    grow, a directory without write permission. ``cause`` is what the system said ("no space
    left on device"), ``path`` where; the message is both, in one line."""

    def __init__(self, cause: str, path: str | os.PathLike[str]) -> None:
        self.cause = cause
        self.path = os.fspath(path)
        super().__init__(f"{cause}: {self.path}")

    @classmethod
    def of(cls, exc: BaseException, path: str | os.PathLike[str]) -> StoreWriteError:
        """What ``exc``, raised while writing at ``path``, says, as one of these.

        An ``OSError`` names its cause by its errno and, when it has one, its own file name.
        py-lmdb's errors carry LMDB's message only, and LMDB reports a write the disk cut
        short as "Input/output error" whatever cut it; so for them the file system at
        ``path`` is asked: read-only, (nearly) full, or a file at the process's size limit.

        >>> str(StoreWriteError.of(OSError(28, "No space left on device"), "/s/pages"))
        'no space left on device: /s/pages'
        """
        if isinstance(exc, StoreWriteError):
            return exc
        if isinstance(exc, OSError):
            text = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
            return cls(_lower_first(text), exc.filename or path)
        return cls(_lmdb_cause(exc, os.fspath(path)), path)


#: free bytes below which a write the disk cut short is taken for a full disk
_NEARLY_FULL = 1 << 20


def _lmdb_cause(exc: BaseException, path: str) -> str:
    said = _lower_first(str(exc).rsplit(": ", 1)[-1].strip() or type(exc).__name__)
    try:
        fs = os.statvfs(path)
    except OSError:
        return said
    if fs.f_flag & os.ST_RDONLY:
        return _lower_first(os.strerror(errno.EROFS))
    if fs.f_bavail * fs.f_frsize < _NEARLY_FULL:
        return _lower_first(os.strerror(errno.ENOSPC))
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY:
        sizes = [entry.stat().st_size for entry in os.scandir(path) if entry.is_file()]
        if sizes and max(sizes) + _NEARLY_FULL > limit:
            return _lower_first(os.strerror(errno.EFBIG))
    return said


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
