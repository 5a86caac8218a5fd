"""What can go wrong when opening a store, as exceptions whose message is one line for the user."""

from __future__ import annotations


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
