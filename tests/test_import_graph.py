"""The four packages import each other without a cycle (issue 17).

Every import counts: top-level, under ``TYPE_CHECKING`` and inside functions. A cycle is how
a stage ends up calling back into its entry class, so the graph is checked as a whole rather
than trusting each module's author to remember. ``from pkg import name`` counts as an import
of ``pkg.name`` when that is a module, and of ``pkg`` (its ``__init__``) otherwise.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("amem", "lcm", "tools", "scheduler")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports, wherever the import statement stands."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                targets.add(sub if sub in modules else module)
    return {t for t in targets if t in modules and t != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of nodes); components of 2+."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "amem.store" in graph and "lcm.store" in graph and "tools.mcp_server" in graph
    assert any(target.startswith("amem.") for target in graph["tools.mcp_server"])


def test_no_import_cycle_among_our_packages() -> None:
    cycles = strongly_connected(import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_lcm_uses_only_the_shared_kernel_of_amem() -> None:
    graph = import_graph()
    reached = {
        (module, target)
        for module, targets in graph.items() if module.split(".")[0] == "lcm"
        for target in targets
        if target.split(".")[0] == "amem" and not target.startswith("amem.kernel")
    }
    assert reached == set()


def test_the_config_file_is_parsed_in_one_place() -> None:
    # The composition root reads the TOML once and hands each table to its owner; a second
    # parser somewhere is how a section ends up reading the file on its own again.
    graph = import_graph()
    parsers = sorted(
        name for name, path in _modules().items()
        if any(isinstance(node, (ast.Import, ast.ImportFrom)) and "tomllib" in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    )
    assert parsers == ["amem.kernel.settings"] and "amem.kernel.settings" in graph


def test_the_scheduler_does_not_reach_into_tools() -> None:
    # tools.settings reads the scheduler's config, so a scheduler module importing tools (its
    # command once did, for the runtime) closes a package cycle the module graph cannot see.
    graph = import_graph()
    reached = sorted((module, target) for module, targets in graph.items()
                     if module.split(".")[0] == "scheduler"
                     for target in targets if target.split(".")[0] == "tools")
    assert reached == []
