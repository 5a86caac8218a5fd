"""A writer that never stops, for the crash test: the test SIGKILLs it at random moments.

Each start continues from the store's state. It prints one JSON line when the store is open
(with what opening repaired) and one after every commit (the next document id, so everything
below it is committed). Half of its batches fsync their pages and then sleep before the commit,
so that some kills land between the WARC write and the LMDB commit.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(path: str, seed: int) -> None:
    sys.path.insert(0, str(ROOT))
    from storage.records import DocumentRecord
    from storage.store import Store
    from tests.storage.helpers import add_kept

    rng = random.Random(seed)
    with Store.open(path, map_size=128 * 1024, warc_max_bytes=16 * 1024) as store:
        print(json.dumps({"repairs": store.repairs}), flush=True)
        while True:
            with store.batch():
                for _ in range(rng.randint(1, 6)):
                    doc_id = store.next_doc_id()
                    # every fourth page repeats an earlier one: an exact duplicate, no page
                    key = doc_id % 12 if doc_id % 4 == 0 else 1000 + doc_id
                    found = store.index.find_exact(key)
                    if found is None:
                        add_kept(store, doc_id, key=key)
                    else:
                        store.index.add_member(found[1], doc_id, identical=True)
                        url = f"http://site.test/{doc_id}"
                        record = DocumentRecord(url, "exact_duplicate", time.time(), found[1], key)
                        store.put_document(doc_id, record)
                if rng.random() < 0.5:
                    store.pages.flush()  # the pages are durable, the index not yet
                    time.sleep(0.02)
            print(json.dumps({"committed": doc_id + 1}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
