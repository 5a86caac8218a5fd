"""The ``neardup`` command line: one sub-command per module of this package.

Each command module has ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args)``;
:data:`COMMANDS` lists them in the order ``neardup --help`` shows them.

A user mistake (bad file, bad key, bad value) ends with one line on stderr and exit status 2,
never a traceback; an interrupted command exits 130; output that finds no room (``neardup log
--json > file`` on a full disk) ends with one line and exit status 1.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from crawler.cli import compare, crawl, curve, demo, explain, log, recluster, report, verify
from crawler.cli.common import RunFailed, UserError
from crawler.config import ConfigError

COMMANDS: dict[str, ModuleType] = {
    "crawl": crawl,
    "demo": demo,
    "recluster": recluster,
    "verify": verify,
    "compare": compare,
    "curve": curve,
    "log": log,
    "explain": explain,
    "report": report,
}

DESCRIPTION = """\
Find near-duplicate documents the way Broder's "On the resemblance and containment of documents"
does: canonical tokens -> w-shingles -> Rabin fingerprints -> a small sketch per document ->
estimated resemblance and containment.
"""

EPILOG = """\
examples:
  neardup compare page1.html page2.html      how alike are two documents?
  neardup compare a.txt b.txt --json          the same, for machines
  neardup curve --sketch-size 100 --matches 90 --plot curve.png
                                              chance that a pair is called a duplicate

Defaults come from ./config.yaml when present, else the built-in ones (equal to the
repository's config.yaml). Every command has --help.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neardup",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=module.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(cmd)
        cmd.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.run(args) or 0)
        sys.stdout.flush()  # output with no room fails here, not as the interpreter exits
        return status
    except (UserError, ConfigError) as exc:
        print(f"neardup {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:
        print(f"neardup {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"neardup {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if exc.errno not in _NO_ROOM:
            raise
        where = exc.filename or "the output"
        print(f"neardup {args.command}: error: cannot write {where}: {exc.strerror}",
              file=sys.stderr)  # fmt: skip
        _discard_stdout()
        return 1


#: a write that failed for want of room: a full disk, a quota, a file-size limit
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _discard_stdout() -> None:
    """Point standard output at the null device: what it still buffers, which the interpreter
    would try to write once more as it exits (and report that failure too), goes nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing to flush
        pass

