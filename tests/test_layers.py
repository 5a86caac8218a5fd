"""The layout's promises (README, Layout), read from the source: which package may import which,
and no import cycle between our modules, counting imports made inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("crawler", "dedup", "storage")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every absolute module an import statement in ``path`` names, wherever it stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {
        _module_name(p): p for package in OURS for p in (ROOT / package).rglob("*.py")
    }

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        targets = {ours(imported) for imported in _imports(path)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


GRAPH = _graph()


def _under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_graph_sees_every_package():
    assert {"dedup.cluster", "storage.store", "crawler.work.steps", "crawler.cli"} <= set(GRAPH)
    assert "dedup.cluster" in GRAPH["storage.records"]  # so an import is seen when it is there


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("dedup", ("storage", "crawler")),  # pure computation
        ("storage", ("crawler",)),
        # the crawl's work process: no Scrapy edge, no command, no offline tool
        ("crawler.work", ("crawler.pipelines", "crawler.spiders", "crawler.extensions",
                          "crawler.cli", "crawler.review", "crawler.recluster", "crawler.demo",
                          "crawler.settings")),  # fmt: skip
        ("crawler.review", ("crawler.cli", "crawler.pipelines", "crawler.spiders")),
        ("crawler.recluster", ("crawler.cli", "crawler.pipelines", "crawler.spiders")),
    ],
)
def test_a_package_imports_only_what_is_below_it(package, forbidden):
    crossings = sorted(
        (name, target)
        for name, targets in GRAPH.items()
        if _under(name, package)
        for target in targets
        if _under(target, *forbidden)
    )
    assert crossings == []


def test_only_the_command_line_imports_the_command_line():
    users = sorted(
        name
        for name, targets in GRAPH.items()
        if not _under(name, "crawler.cli") and any(_under(t, "crawler.cli") for t in targets)
    )
    assert users == []


def test_no_import_cycle():
    # Tarjan's strongly connected components; a package importing its own submodule
    # (``from storage import lmdb_env`` in storage.store) is not a cycle of two modules
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    package_and_child = [c for c in cycles if len(c) == 2 and c[1].startswith(c[0] + ".")]
    assert [c for c in cycles if c not in package_and_child] == []
