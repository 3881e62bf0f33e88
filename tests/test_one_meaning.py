"""A name the issue found with two meanings has one: each is defined (a top-level function,
class or assignment) in at most one library module, and the library does not spell one
thing both summarize and summarise."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from diagym.envs._core.packages import LAYERS

ROOT = Path(__file__).resolve().parents[1]
ONE_MEANING = ("read_log", "spent_in_log", "run_study", "CONTROLLERS", "summarize", "check_seed",
               "summarise", "HARNESSES", "PROVIDER_ERROR", "N_OPTIONS")


def definitions() -> dict[str, list[str]]:
    """Top-level name -> the library files that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names = [node.target.id]
                else:
                    continue
                for name in names:
                    found[name].append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("name", ONE_MEANING)
def test_the_name_is_defined_once_at_most(name: str) -> None:
    where = definitions().get(name, [])
    assert len(where) <= 1, f"{name} is defined in {', '.join(where)}"


def test_summarize_is_not_beside_summarise() -> None:
    found = definitions()
    assert not (found.get("summarize") and found.get("summarise")), (
        found.get("summarize"), found.get("summarise"))
