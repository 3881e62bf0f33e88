"""docs/ARCHITECTURE.md's "Where to add" table is true: on a copy of the tree, an env knob and a
reference controller added by editing exactly the files the table names work end to end (the
command line plays them, results.csv has the knob's column, reproduce predicts and tabulates
the controller, the independent plain model plays it like the env), with no other file
edited. The harness row is tested with the harnesses (tests/llm_policies).

The copy (the tracked files, as a clone has them) is imported as `diagym` the way an editable
install maps it: diagym/ in the copy gets a link to each layer's folder (setup.py's
package_dir), and the copy is first on PYTHONPATH, ahead of the installed checkout. Its
kernels compile into a cache of its own.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from diagym.envs._core.packages import LAYERS
from tests.conftest import scaled
from tests.tracked_copy import copy_tracked

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "ARCHITECTURE.md"

pytestmark = pytest.mark.timeout(scaled(1800))


def table_row(what: str) -> str:
    """The "edit" cell of the table's row `what`."""
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] == what:
            return cells[1]
    raise AssertionError(f"docs/ARCHITECTURE.md has no 'Where to add' row {what!r}")


# What the test edits for each row: (file, text after which a line goes, the line). Each file
# must be one the row names; test_the_edits_are_the_rows_files checks that against the table.
KNOB = "tag"
CONTROLLER = "scan-3"
EDITS = {
    "a knob of an env": [
        ("envs/workflow/params.py",
         '    labels: operation identifiers, "random" or "reversed" (i -> N-1-i).\n',
         '    tag: a label kept with the configuration, "none" or "marked" (read by no kernel).\n'),
        ("envs/workflow/params.py", '    labels: str = "random"\n', '    tag: str = "none"\n'),
        ("envs/workflow/params.py",
         '            "labels": check_choice("labels", self.labels, LABELS),\n',
         '            "tag": check_choice("tag", self.tag, ("none", "marked")),\n'),
    ],
    "a reference controller": [
        ("controllers/workflow/parameters.py",
         '    "scan-2": (RETAIN_ALL, 8, 2, SELECT_SERIAL, 0, 0, 0),\n',
         '    "scan-3": (RETAIN_ALL, 8, 3, SELECT_SERIAL, 0, 0, 0),\n'),
        ("docs/CONTROLLERS.md", "| scan-1, scan-2, scan-4 |", None),
        ("tests/independent/plain_workflow.py",
         '    "scan-2": Traits("all", "scan", scan=2),\n',
         '    "scan-3": Traits("all", "scan", scan=3),\n'),
    ],
}


def test_the_edits_are_the_rows_files() -> None:
    """Each file the test edits is named in its row of the table."""
    for row, edits in EDITS.items():
        cell = table_row(row)
        for path, _after, _line in edits:
            assert f"`{path}`" in cell or f"`{Path(path).name}`" in cell, (row, path, cell)


def apply(tree: Path, row: str) -> set[str]:
    """The row's edits on the copy; the files edited."""
    edited = set()
    for path, after, line in EDITS[row]:
        file = tree / path
        text = file.read_text()
        assert text.count(after) == 1, f"{path}: the anchor {after!r} is not there once"
        if line is None:  # a table row that lists the family: the new member joins it
            text = text.replace(after, after.replace("scan-2, ", f"scan-2, {CONTROLLER}, "))
        else:
            text = text.replace(after, after + line)
        file.write_text(text)
        edited.add(path)
    return edited


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("where_to_add")
    copy = base / "tree"
    copy_tracked(copy)
    for layer in LAYERS:  # what the editable install's package_dir does
        (copy / "diagym" / layer).symlink_to(copy / layer, target_is_directory=True)
    edited = apply(copy, "a knob of an env") | apply(copy, "a reference controller")
    assert edited == {"envs/workflow/params.py", "controllers/workflow/parameters.py",
                      "docs/CONTROLLERS.md", "tests/independent/plain_workflow.py"}
    return copy


def run(tree: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree),
           "XDG_CACHE_HOME": str(tree.parent / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)
    return subprocess.run([sys.executable, *argv], cwd=cwd or tree.parent, env=env,
                          capture_output=True, text=True, timeout=scaled(1200))


def test_the_copy_is_what_imports(tree: Path) -> None:
    done = run(tree, "-c", "import diagym.envs.workflow.params as p; print(p.__file__)")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == (tree / "envs/workflow/params.py").resolve()


def test_the_command_line_plays_the_new_controller_on_the_new_knob(tree: Path) -> None:
    done = run(tree, "-m", "diagym.analysis.cli", "run", "--env", "StatefulWorkflow-v0",
               "--env-kwargs", json.dumps({KNOB: "marked", "candidates": 8}),
               "--policy", CONTROLLER, "--episodes", "8", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["episodes"] == 8
    refused = run(tree, "-m", "diagym.analysis.cli", "run", "--env", "StatefulWorkflow-v0",
                  "--env-kwargs", json.dumps({KNOB: "loud"}), "--policy", CONTROLLER,
                  "--episodes", "1")
    assert refused.returncode == 2
    assert re.search(r"tag must be one of .*none.*marked.*'loud'", refused.stderr), \
        refused.stderr


REPRODUCE = """
import sys
import numpy as np
from diagym.analysis.stats import bootstrap_weights
from diagym.analysis.studies.reproduce.design import GridConfiguration
from diagym.analysis.studies.reproduce.predictions import predict
from diagym.analysis.studies.reproduce.report import summary_rows, write_results_csv
from diagym.analysis.studies.reproduce.run import play_shard
from diagym.envs.workflow.params import WorkflowParams

spec = WorkflowParams(candidates=8, tag="marked")
configs = [GridConfiguration("added", "b=8", spec, name)
           for name in ("scan-2", "scan-3", "scan-4")]
seeds = np.arange(64)
episodes = play_shard((tuple((c.spec, c.controller) for c in configs), seeds))
rows = summary_rows(configs, episodes, predict(configs, seeds),
                    bootstrap_weights(len(seeds), resamples=200))
write_results_csv(rows, sys.argv[1])
"""


def test_reproduce_predicts_and_tabulates_them(tree: Path) -> None:
    out = tree.parent / "results.csv"
    done = run(tree, "-c", REPRODUCE, str(out))
    assert done.returncode == 0, done.stderr
    rows = {row["controller"]: row for row in csv.DictReader(out.open())}
    assert {row[KNOB] for row in rows.values()} == {"marked"}
    predicted = [float(rows[name]["predicted"]) for name in ("scan-2", "scan-3", "scan-4")]
    # a longer scan never does worse on the same tasks, and scan-3 is derived, not skipped
    assert predicted[0] < predicted[1] < predicted[2]
    assert float(rows[CONTROLLER]["success_low"]) <= predicted[1] <= float(
        rows[CONTROLLER]["success_high"]) or abs(
        float(rows[CONTROLLER]["success"]) - predicted[1]) < 0.15


def test_the_independent_model_plays_the_new_controller_like_the_env(tree: Path) -> None:
    done = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "tests/independent/test_plain_workflow.py", "-k",
               f"names_match or traces_match_the_model and {CONTROLLER}", cwd=tree)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b2 passed\b", done.stdout), done.stdout[-2000:]
