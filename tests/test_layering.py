"""Imports point down only: envs <- controllers <- llm_policies <- analysis, with no cycle.

Every import statement of every module is read (ast), at any depth: an import inside a
function hides a cycle from Python's import machinery, not from the design. A violation names
the file, the line and the import, so the fix starts where the test points.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("envs", "controllers", "llm_policies", "analysis")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The first-party module an import of `name` loads last (a submodule, else its package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list[tuple[int, str, str]]:
    """(line, text of the import, imported first-party module) for every import in `module`."""
    path = MODULES[module]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            resolved = resolve(target)
            if resolved is not None and resolved != module:
                found.append((node.lineno, ast.unparse(node), resolved))
    return found


def test_every_library_module_is_read() -> None:
    assert "envs.workflow.env" in MODULES and "analysis.cli.main" in MODULES
    assert all(imports_of(m) is not None for m in MODULES)


def test_imports_point_down_only() -> None:
    upward = []
    for module in MODULES:
        rank = LAYERS.index(module.split(".")[0])
        for line, text, target in imports_of(module):
            if LAYERS.index(target.split(".")[0]) > rank:
                upward.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {text}")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as a module path, or None (iterative DFS)."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_no_import_cycle() -> None:
    graph = {m: {target for _, _, target in imports_of(m)} for m in MODULES}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, None),
])
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]],
                                       expected: list[str] | None) -> None:
    assert find_cycle(graph) == expected
