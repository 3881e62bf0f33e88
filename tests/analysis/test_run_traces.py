"""`diagym run --log` traces a user's policy by default, so `report` shows its decisions and
`diagnose --log` can read it (on its battery's configurations); the page never claims
decisions it does not hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis.cli import main

SPEC = "tests.user_policy:Greedy"


def _run(tmp_path: Path, *extra: str) -> Path:
    log = tmp_path / "run.jsonl"
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", SPEC, "--episodes", "3",
                 "--log", str(log), *extra]) == 0
    return log


def _decided(log: Path, tmp_path: Path) -> int:
    out = tmp_path / "page.html"
    assert main(["report", str(log), "--out", str(out)]) == 0
    found = re.search(r"([\d,]+) with their decisions", out.read_text())
    assert found is not None
    return int(found.group(1).replace(",", ""))


def test_a_users_policy_is_traced_by_default(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = _run(tmp_path)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    traces = {x["episode_key"]: x["actions"] for x in lines if x["type"] == "trace"}
    episodes = {x["episode_key"]: x["record"] for x in lines if x["type"] == "episode"}
    assert set(traces) == set(episodes) and len(traces) == 3
    for key, record in episodes.items():  # one action per call the env executed
        assert len(traces[key]) == record["calls"]
        assert all(len(action) == 2 for action in traces[key])
    assert _decided(log, tmp_path) == 3


def test_no_trace_leaves_them_out_and_the_page_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _run(tmp_path, "--no-trace")
    assert not any(json.loads(line)["type"] == "trace" for line in log.read_text().splitlines())
    assert _decided(log, tmp_path) == 0
