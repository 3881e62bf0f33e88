"""Under `make test`'s `-n auto --dist loadgroup`, each test file runs on one worker, and the
files that start a Ray instance (or a llama.cpp server) share one (tests/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import SHARED_WORKER_GROUPS, scaled, worker_group

ROOT = Path(__file__).resolve().parents[1]


def test_the_shared_files_map_to_their_group_and_others_to_their_file() -> None:
    assert worker_group("tests/analysis/test_executors.py::test_x[1]") == "ray"
    assert worker_group("tests/test_ray_executor.py::test_y") == "ray"
    assert worker_group("tests/llm_policies/test_local_harnesses.py::t") == "llama"
    assert worker_group("tests/test_layering.py::test_z") == "tests/test_layering.py"
    assert all(name.startswith("test_") for files in SHARED_WORKER_GROUPS.values()
               for name in files)


@pytest.mark.timeout(240)
def test_each_file_runs_on_one_worker_under_loadgroup() -> None:
    files = ["tests/test_time_scale.py", "tests/analysis/test_report_words.py"]  # quick ones
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-v", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(200))
    assert done.returncode == 0, done.stdout[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in re.findall(r"\[(gw\d+)\][^\n]*?PASSED (\S+)", done.stdout):
        workers[nodeid.split("::")[0]].add(worker)
    assert set(workers) == set(files), done.stdout[-2000:]
    assert all(len(found) == 1 for found in workers.values()), dict(workers)
