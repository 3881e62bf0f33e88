"""Imports point down only: envs <- controllers <- llm_policies <- analysis, with no cycle;
inside analysis/ the same holds between its rooms (ANALYSIS_TIERS), no study imports another
study, and no study lives in the model layer (llm_policies/). Every module imports the library
by its one name, diagym.<layer>: from the repository's root the folders are importable as
top-level envs, analysis, ... too, and such an import would load a second copy of the code
beside the installed one.

Every import statement of every module is read (ast), at any depth: an import inside a
function hides a cycle from Python's import machinery, not from the design. A violation names
the file, the line and the import, so the fix starts where the test points.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from diagym.envs._core.packages import LAYERS, PACKAGE

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    """The installed name of a library file: envs/workflow/env.py is diagym.envs.workflow.env
    (setup.py maps the four folders under diagym/)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] != PACKAGE:
        parts.insert(0, PACKAGE)
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer a library module belongs to; the diagym package itself sits above them all."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else LAYERS[-1]


MODULES = {module_name(p): p for layer in (*LAYERS, PACKAGE)
           for p in sorted((ROOT / layer).rglob("*.py"))}


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
    assert "diagym.envs.workflow.env" in MODULES and "diagym.analysis.cli.main" in MODULES
    assert all(imports_of(m) is not None for m in MODULES)


def test_imports_point_down_only() -> None:
    upward = []
    for module in MODULES:
        rank = LAYERS.index(layer_of(module))
        for line, text, target in imports_of(module):
            if target != PACKAGE and LAYERS.index(layer_of(target)) > rank:
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
    ("diagym.analysis.diagnose",),
    ("diagym.analysis.studies",),  # every study: dacs_live, dacs_study, llm_study, rcwt, ...
    ("diagym.analysis.report", "diagym.analysis.export", "diagym.analysis.integrations"),
    ("diagym.analysis.cli",),
    ("diagym.analysis.demo",),
)
STUDIES = "diagym.analysis.studies"


def _is_package(module: str) -> bool:
    return (ROOT / module.removeprefix(PACKAGE + ".").replace(".", "/")).is_dir()


def analysis_tier(module: str) -> int | None:
    """The tier of an analysis module (ANALYSIS_TIERS), or None for an unplaced subpackage."""
    for tier, rooms in enumerate(ANALYSIS_TIERS):
        if any(module == room or module.startswith(room + ".") for room in rooms):
            return tier
    parts = module.split(".")
    if module == "diagym.analysis" or (len(parts) == 3 and not _is_package(module)):
        return 0
    return None


def study_of(module: str) -> str | None:
    """The study package a module belongs to (diagym.analysis.studies.<name>), or None outside every
    study (the modules directly in analysis/studies/, shared by the studies, included)."""
    package = ".".join(module.split(".")[:4])
    if module.startswith(STUDIES + ".") and _is_package(package):
        return package
    return None


def points_up_inside_analysis(module: str, target: str) -> bool:
    """An import of `target` by `module` that goes to a higher tier of analysis/ (or from or
    to an unplaced room)."""
    if not (module.startswith("diagym.analysis") and target.startswith("diagym.analysis")):
        return False
    rank, target_rank = analysis_tier(module), analysis_tier(target)
    return rank is None or target_rank is None or target_rank > rank


def crosses_studies(module: str, target: str) -> bool:
    """An import by a module under analysis/studies/ of another study's module (a shared
    module there imports no study at all)."""
    theirs = study_of(target)
    return module.startswith(STUDIES) and theirs is not None and theirs != study_of(module)


@pytest.mark.parametrize("module, target, up, across", [
    ("diagym.analysis.cli.rcwt", "diagym.analysis.studies.rcwt.report", False, False),
    ("diagym.analysis.stats", "diagym.analysis.studies.reproduce.design", True, False),
    ("diagym.analysis.diagnose.run", "diagym.analysis.report.logs", True, False),
    ("diagym.analysis.studies.rl_study.design", "diagym.analysis.studies.reproduce.design",
     False, True),
    ("diagym.analysis.studies.seeds", "diagym.analysis.studies.reproduce.design", False, True),
    ("diagym.analysis.studies.rl_study.design", "diagym.analysis.studies.seeds", False, False),
    ("diagym.analysis.studies.rcwt.report", "diagym.analysis.studies.rcwt.fits", False, False),
    ("diagym.analysis.newroom.thing", "diagym.analysis.stats", True, False),
])
def test_the_room_rules_judge_known_imports(module: str, target: str, up: bool,
                                            across: bool) -> None:
    assert points_up_inside_analysis(module, target) is up
    assert crosses_studies(module, target) is across


def test_every_analysis_module_has_a_tier() -> None:
    unplaced = sorted(m for m in MODULES if m.startswith("diagym.analysis")
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


# What makes a module part of a study rather than of the model layer: it plays many units
# (the executors, the parallel runner) or writes a study's tables (csv), or it is one of a
# study's files. llm_policies/ holds chat models as policies; their studies are analysis's.
STUDY_IMPORTS = ("diagym.controllers.executors", "diagym.controllers.rollout", "csv")
STUDY_FILES = ("design.py", "run.py", "study.py")


def study_signs(source: str, where: str) -> list[str]:
    """Where `source` (the file `where`) does what a study does (STUDY_IMPORTS, STUDY_FILES),
    one line per sign."""
    signs = [f"{where}: a study's file name"] if Path(where).name in STUDY_FILES else []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        signs += [f"{where}:{node.lineno}: {ast.unparse(node)}" for name in names
                  if any(name == s or name.startswith(s + ".") for s in STUDY_IMPORTS)]
    return signs


def test_no_study_lives_in_the_model_layer() -> None:
    found = [sign for module, path in MODULES.items()
             if layer_of(module) == "llm_policies"
             for sign in study_signs(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, ("a study belongs in analysis/studies/<name>/, not llm_policies/:\n"
                       + "\n".join(found))


@pytest.mark.parametrize("where, source, flagged", [
    ("llm_policies/live_agents/study.py", "import json", True),
    ("llm_policies/live/trials.py",
     "def play():\n    from diagym.controllers.executors import LocalExecutor", True),
    ("llm_policies/live/tables.py", "import csv", True),
    ("llm_policies/live/x.py", "from diagym.controllers.rollout import rollout_parallel", True),
    ("llm_policies/policy.py", "from diagym.controllers.runlog import RunLog\nimport json",
     False),
])
def test_study_signs_are_recognised(where: str, source: str, flagged: bool) -> None:
    assert bool(study_signs(source, where)) is flagged


OLD_NAME = re.compile(rf"^(?:from |import |-m )?(?:{'|'.join(LAYERS)})[.:]\w")


def _first_party_files() -> list[Path]:
    """Every Python file of the repository: the library, diagym/, tests, benchmarks."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        # hidden folders (.git, .venv, .venv-verifiers: other packages' code) and build output
        subfolders[:] = [d for d in subfolders
                         if not d.startswith(".") and d not in {"build", "dist"}]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return sorted(found)


def old_name_uses(source: str, where: str) -> list[str]:
    """Imports of a layer by its folder's name (`import envs`, `from analysis.cli import`),
    and strings that name one as a module (`"-m analysis.cli"`, `"envs.workflow.env:X"`,
    code run in a subprocess): each would load a second copy of the library from the
    repository's root instead of the installed diagym."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            lines = node.value.splitlines() or [""]
            names = [line.strip() for line in lines if OLD_NAME.match(line.strip())]
            found += [f"{where}:{node.lineno}: {name!r}" for name in names]
            continue
        else:
            continue
        found += [f"{where}:{node.lineno}: {ast.unparse(node)}"
                  for name in names if name.split(".")[0] in LAYERS]
    return found


# (file, the string) that names the old layout on purpose: the start-up benchmark runs a
# checkout from before the move by its old module name, to compare the two.
KNOWN_OLD_NAMES = {("benchmarks/startup.py", "'analysis.cli'")}


def test_the_library_is_imported_by_its_one_name() -> None:
    found = [use for path in _first_party_files()
             for use in old_name_uses(path.read_text(), str(path.relative_to(ROOT)))
             if (use.split(":")[0], use.split(": ", 1)[1]) not in KNOWN_OLD_NAMES]
    assert not found, "use diagym.<layer>, not the folder's name:\n" + "\n".join(found)


# The examples spell an old name with a "@" in front (taken out before the check), so this
# file passes the check it tests.
@pytest.mark.parametrize("source, flagged", [
    ("import @envs", True),
    ("from @analysis.cli import main", True),
    ("import @controllers.rollout as runner", True),
    ("x = ['-m', '@analysis.cli']", True),
    ("x = '-m @analysis.cli'", True),
    ("x = 'from @llm_policies.client import local_server'", True),
    ("x = '@envs.workflow.env:StatefulWorkflowEnv'", True),
    ("import diagym\nfrom diagym.envs import family_of", False),
    ("x = 'the analysis. It'", False),
])
def test_old_names_are_recognised(source: str, flagged: bool) -> None:
    assert bool(old_name_uses(source.replace("@", ""), "probe.py")) is flagged
