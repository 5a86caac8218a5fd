"""Sub-commands of ``neardup``; each module has HELP, DESCRIPTION, add_arguments and run."""

from __future__ import annotations

from types import ModuleType

from crawler.commands import compare, crawl, curve, demo, explain, log, recluster, report, verify

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
