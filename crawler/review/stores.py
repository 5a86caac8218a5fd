"""The stores a review command reads: one, or the stores of one distributed crawl's nodes.

Each node of a distributed crawl keeps its own store; ``neardup log``, ``explain`` and
``report`` take them all (``--store`` repeated) and read them as one crawl. The stores must
have been made with the same parameters (sketches of different kinds do not compare), which
:func:`open_stores` checks once, from the manifest each store's open reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from storage.errors import StoreMismatchError
from storage.nodes import check_one_crawl
from storage.store import Store

__all__ = ["distinct", "open_stores"]


def distinct(names: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The store directories, in the order given; one given twice (under any name) is a
    ``ValueError`` naming both."""
    paths: list[Path] = []
    seen: dict[Path, str] = {}
    for name in names:
        path = Path(name)
        real = path.resolve()
        if real in seen:
            raise ValueError(f"--store {os.fspath(name)} is given twice (as {seen[real]})")
        seen[real] = os.fspath(name)
        paths.append(path)
    return paths


@contextmanager
def open_stores(paths: Sequence[str | os.PathLike[str]]) -> Iterator[list[Store]]:
    """The stores at ``paths``, open read-only, closed on exit.

    Raises :class:`~storage.errors.StoreMismatchError` naming the first parameter where a store
    differs from the first one, or a store that is not a node of the same crawl as the others
    (:func:`storage.nodes.check_one_crawl`, as ``recluster`` checks them), and whatever
    :meth:`Store.open` raises for a path that is not a store.
    """
    with ExitStack() as stack:
        stores = [stack.enter_context(Store.open(path, readonly=True)) for path in paths]
        _check_alike(stores)
        check_one_crawl(stores)
        yield stores


def _check_alike(stores: Sequence[Store]) -> None:
    if len(stores) < 2:
        return
    first = stores[0]
    wanted = first.manifest.compared()
    for other in stores[1:]:
        for key, have in other.manifest.compared().items():
            if wanted.get(key) != have:
                raise StoreMismatchError(
                    f"stores {first.path} and {other.path} were made with different parameters "
                    f"({key}={wanted.get(key)} and {have}): they are not the nodes of one crawl"
                )
