"""docs/ARCHITECTURE.md's "where to add" row for a harness is true: on a copy of the tree, a
harness added in exactly the files that row names is accepted by the command line and by the
probe, and plays end to end, with no other file edited.

The copy is imported as `diagym` the way setup.py maps the folders (a directory of links:
diagym/__init__.py and one link per layer), ahead of the editable install on the path, so
the commands run the copy's code; each run checks that it did. The harness added is seed
003's json harness under another name, so its play has a known answer: against a server
whose model is the text oracle every episode succeeds (the positive control). A second added
harness that needs native tool calls is refused by the probe of a server without them, which
shows the probe reads what a harness needs from its entry.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagym.envs._core.packages import LAYERS
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from tests.conftest import scaled
from tests.llm_fake_server import FakeServer, Reply, no_tool_server, tool_server

ROOT = Path(__file__).resolve().parents[1]
ENV = "StatefulWorkflowHistory-v0"
MODULE = "llm_policies/harness/terse.py"
MODULE_TEXT = '''"""Seed 003's json harness under another name (test_where_to_add_harness)."""

from diagym.llm_policies.harness.json_action import JsonHarness


class TerseHarness(JsonHarness):
    name = "terse"
'''
ENTRIES = ('    "terse": HarnessKind("terse:TerseHarness"),\n'
           '    "needy": HarnessKind("terse:TerseHarness", needs=("tools",)),\n')
TABLE_OPENS = "HARNESSES: dict[str, HarnessKind] = {\n"


def _harness_row() -> str:
    rows = [line for line in (ROOT / "docs" / "ARCHITECTURE.md").read_text().splitlines()
            if line.startswith("| a harness |")]
    assert len(rows) == 1, "docs/ARCHITECTURE.md's where-to-add table has one harness row"
    return rows[0]


def _named_places(row: str) -> set[str]:
    """The repository paths (files, or folders ending in /) the row's edit column names."""
    return {name for name in re.findall(r"`([\w/.]+)`", row.split("|")[2])
            if "/" in name}


def _covered(path: str, places: set[str]) -> bool:
    return any(path == place or (place.endswith("/") and path.startswith(place)
                                 and "/" not in path[len(place):]) for place in places)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the copy, its import root) with the harnesses added as the row says."""
    base = tmp_path_factory.mktemp("where_to_add_harness")
    copy = base / "tree"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("diagym", *LAYERS):
        shutil.copytree(ROOT / folder, copy / folder, ignore=skip)
    (copy / MODULE).write_text(MODULE_TEXT)
    init = copy / "llm_policies" / "harness" / "__init__.py"
    text = init.read_text()
    assert text.count(TABLE_OPENS) == 1, "the harness table opens as the test expects"
    init.write_text(text.replace(TABLE_OPENS, TABLE_OPENS + ENTRIES))
    site = base / "site"
    (site / "diagym").mkdir(parents=True)
    (site / "diagym" / "__init__.py").symlink_to(copy / "diagym" / "__init__.py")
    for layer in LAYERS:
        (site / "diagym" / layer).symlink_to(copy / layer, target_is_directory=True)
    yield copy, site


def test_only_the_files_the_row_names_were_edited(tree: tuple[Path, Path]) -> None:
    copy, _ = tree
    places = _named_places(_harness_row())
    changed = []
    for folder in LAYERS:
        for path in sorted((copy / folder).rglob("*.py")):
            relative = path.relative_to(copy).as_posix()
            original = ROOT / relative
            if not original.exists() or not filecmp.cmp(path, original, shallow=False):
                changed.append(relative)
    assert sorted(changed) == ["llm_policies/harness/__init__.py", MODULE]
    assert all(_covered(path, places) for path in changed), (changed, places)


def _oracle_server() -> Any:
    """A server whose model is the workflow text oracle; the probe's requests get the
    tool-speaking responder's answers."""
    probe_answers = tool_server()

    def respond(request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "Task (" not in text or request.get("tools"):
            return probe_answers(request)
        return Reply(content=InProcessChat(WorkflowOracle()).complete(messages).text)

    return respond


def _diagym(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`diagym ARGV` run on the copy; it fails unless the copy's code was the one imported."""
    check = ("import sys, diagym.llm_policies.harness as h\n"
             f"assert h.__file__.startswith({str(site)!r}), h.__file__\n"
             "from diagym.analysis.cli.main import main\n"
             "sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-c", check, *argv], cwd=site, env=env,
                          capture_output=True, text=True, timeout=scaled(600))


def test_the_added_harness_plays_through_the_cli_and_the_probe(
        tree: tuple[Path, Path]) -> None:
    copy, site = tree
    log = copy / "run.jsonl"
    with FakeServer(_oracle_server(), models=["fake"]) as server:
        done = _diagym(site, "run", "--env", ENV, "--policy", "llm", "--harness", "terse",
                       "--base-url", server.base_url, "--model", "fake", "--episodes", "2",
                       "--log", str(log), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["run"]["harness"] == "terse"
    assert summary["episodes"] == 2 and summary["success"] == 1.0
    calls = [line for line in map(json.loads, log.read_text().splitlines())
             if line["type"] == "call"]
    assert calls and {call["harness"] for call in calls} == {"terse"}


def test_the_probe_refuses_an_added_harness_by_its_needs(tree: tuple[Path, Path]) -> None:
    _, site = tree
    with FakeServer(no_tool_server(), models=["fake"]) as server:
        done = _diagym(site, "run", "--env", ENV, "--policy", "llm", "--harness", "needy",
                       "--base-url", server.base_url, "--model", "fake", "--episodes", "1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("diagym run: error: --harness needy needs native tool calls;")
