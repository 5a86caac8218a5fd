"""Sub-commands of ``neardup``; each module has HELP, DESCRIPTION, add_arguments and run."""

from __future__ import annotations

from types import ModuleType

from crawler.commands import compare, curve

COMMANDS: dict[str, ModuleType] = {
    "compare": compare,
    "curve": curve,
}
