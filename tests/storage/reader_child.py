"""A reader in its own process, for the map-growth test (LMDB allows one environment per process).

Opens the store read-only with a small map, prints its counts, then prints them again for every
line read from stdin. Between the two the writer grows the map, so the second read must adopt it.
"""

from __future__ import annotations

import json
import sys


def counts(store) -> str:
    with store._txns.read() as txn:
        documents = txn.stat(store._txns.dbs["docs"])["entries"]
    return json.dumps(
        {
            "documents": documents,
            "clusters": len(store.index),
            "resizes_adopted": store._txns.resizes_adopted,
        }
    )


def main(path: str) -> None:
    from storage.store import Store

    with Store.open(path, readonly=True, map_size=64 * 1024) as store:
        print(counts(store), flush=True)
        for _ in sys.stdin:
            print(counts(store), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
