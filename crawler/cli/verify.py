"""``neardup verify``: is the store consistent? Repairs what an interrupted write left behind."""

from __future__ import annotations

import argparse
import json

from crawler.cli.common import UserError, add_config_arguments, resolve_config
from storage.errors import StoreError
from storage.verify import verify_store

HELP = "check a store's integrity (and repair what a crash left behind)"
DESCRIPTION = """\
Check that a store's index and page store agree: every fingerprint in the index belongs to a
cluster whose representative holds it, every cluster's members exist, every kept page's WARC
record is where its document says (same URL), and every WARC record in pages/ belongs to
exactly one document.

A crawl killed between writing pages and committing the index leaves pages past the last
commit; verify cuts them off (so does the next crawl on the store) and says so. Other damage
(a deleted WARC file, a broken index entry) is listed, one line each, and not touched.

Exit status: 0 if the store is consistent (after repairs), 1 if it is damaged, 2 if there is
no store or it cannot be opened. While a crawl is writing, verify checks the committed state
and repairs nothing.

examples:
  neardup verify                        the store named in config.yaml (neardup-store)
  neardup verify --store crawl-2025     another store
  neardup verify --json --no-repair     check only, for machines
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="DIR", help="store directory (default: 'store' in the config file)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-repair", action="store_true", help="only check; do not cut off uncommitted pages"
    )
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    store = args.store or resolve_config(args).store
    try:
        report = verify_store(store, repair=not args.no_repair)
    except StoreError as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.render())
    return 0 if report.ok else 1
