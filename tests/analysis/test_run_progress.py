"""`diagym run` shows progress for every policy, with the right total, and a resumed run
says how much the log already holds and counts it as done."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.cli import main

RUN = ["run", "--env", "StatefulWorkflow-v0", "--episodes"]


@pytest.mark.parametrize("policy", ["tests.user_policy:Greedy", "cache-2"])
def test_run_shows_progress_and_counts_resumed_episodes(
        policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    assert main([*RUN, "6", "--policy", policy, "--log", str(log)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("diagym run: 0/6 episode (0%)")
    assert lines[-1].startswith("diagym run: 6/6 episode (100%)")
    assert main([*RUN, "10", "--policy", policy, "--log", str(log), "--resume"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert f"diagym run: resuming: 6 of 10 episodes are in {log} already; 4 to play" in lines
    assert lines[-1].startswith("diagym run: 10/10 episode (100%)")
