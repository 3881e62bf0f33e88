"""Imports point down only: envs <- controllers <- llm_policies <- analysis, with no cycle;
inside analysis/ the same holds between its rooms (ANALYSIS_TIERS), and no study imports
another study.

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


# The rooms of analysis/, lowest first: a module may import its own tier or a lower one.
# Tier 0 is every module directly in analysis/ (statistics, the episode summary, plotting,
# progress, the audit, chat-model runs, training, policy labels); a new subpackage must be
# placed here.
ANALYSIS_TIERS = (
    (),  # the modules directly in analysis/
    ("analysis.diagnose",),
    ("analysis.studies",),
    ("analysis.report", "analysis.export"),
    ("analysis.cli",),
    ("analysis.demo",),
)
STUDIES = "analysis.studies"


def _is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/")).is_dir()


def analysis_tier(module: str) -> int | None:
    """The tier of an analysis module (ANALYSIS_TIERS), or None for an unplaced subpackage."""
    for tier, rooms in enumerate(ANALYSIS_TIERS):
        if any(module == room or module.startswith(room + ".") for room in rooms):
            return tier
    parts = module.split(".")
    if module == "analysis" or (len(parts) == 2 and not _is_package(module)):
        return 0
    return None


def study_of(module: str) -> str | None:
    """The study package a module belongs to (analysis.studies.<name>), or None outside every
    study (the modules directly in analysis/studies/, shared by the studies, included)."""
    package = ".".join(module.split(".")[:3])
    if module.startswith(STUDIES + ".") and _is_package(package):
        return package
    return None


def points_up_inside_analysis(module: str, target: str) -> bool:
    """An import of `target` by `module` that goes to a higher tier of analysis/ (or from or
    to an unplaced room)."""
    if not (module.startswith("analysis") and target.startswith("analysis")):
        return False
    rank, target_rank = analysis_tier(module), analysis_tier(target)
    return rank is None or target_rank is None or target_rank > rank


def crosses_studies(module: str, target: str) -> bool:
    """An import by a module under analysis/studies/ of another study's module (a shared
    module there imports no study at all)."""
    theirs = study_of(target)
    return module.startswith(STUDIES) and theirs is not None and theirs != study_of(module)


@pytest.mark.parametrize("module, target, up, across", [
    ("analysis.cli.rcwt", "analysis.studies.rcwt.report", False, False),
    ("analysis.stats", "analysis.studies.reproduce.design", True, False),
    ("analysis.diagnose.run", "analysis.report.logs", True, False),
    ("analysis.studies.rl_study.design", "analysis.studies.reproduce.design", False, True),
    ("analysis.studies.seeds", "analysis.studies.reproduce.design", False, True),
    ("analysis.studies.rl_study.design", "analysis.studies.seeds", False, False),
    ("analysis.studies.rcwt.report", "analysis.studies.rcwt.fits", False, False),
    ("analysis.newroom.thing", "analysis.stats", True, False),
])
def test_the_room_rules_judge_known_imports(module: str, target: str, up: bool,
                                            across: bool) -> None:
    assert points_up_inside_analysis(module, target) is up
    assert crosses_studies(module, target) is across


def test_every_analysis_module_has_a_tier() -> None:
    unplaced = sorted(m for m in MODULES if m.startswith("analysis")
                      and analysis_tier(m) is None)
    assert not unplaced, "place these in ANALYSIS_TIERS: " + ", ".join(unplaced)


def test_imports_inside_analysis_point_down_only() -> None:
    upward = [f"{MODULES[module].relative_to(ROOT)}:{line}: {text}"
              for module in MODULES for line, text, target in imports_of(module)
              if points_up_inside_analysis(module, target)]
    assert not upward, "upward imports inside analysis/:\n" + "\n".join(upward)


def test_no_study_imports_another_study() -> None:
    crossing = [f"{MODULES[module].relative_to(ROOT)}:{line}: {text}"
                for module in MODULES for line, text, target in imports_of(module)
                if crosses_studies(module, target)]
    assert not crossing, "cross-study imports:\n" + "\n".join(crossing)
