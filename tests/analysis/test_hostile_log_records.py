"""A log line with an integer beyond 64 bits, or episodes with metrics keys diagym does not
report, is skipped or left unmeasured by resume, report and summarize, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagym.analysis.cli import main

RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--episodes"]


@pytest.fixture
def log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "run.jsonl"
    assert main([*RUN, "3", "--log", str(path)]) == 0
    lines = path.read_text().splitlines()
    huge = json.loads(lines[1])
    huge["record"]["calls"] = 10**400
    lines[1] = json.dumps(huge)
    foreign = json.loads(lines[2])
    foreign["record"]["metrics"] = {"unknown_key": 5}
    lines[2] = json.dumps(foreign)
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    return path


def test_summarize_and_report_read_past_them(log: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summarize", str(log)]) == 0
    captured = capsys.readouterr()
    assert "2 episodes from seed" in captured.out.splitlines()[0]
    assert captured.err.strip() == (
        f"diagym summarize: warning: log {log}: skipped 1 line with an integer beyond 64 "
        "bits; the run resumes from the lines that are entries")
    assert main(["report", str(log), "--out", str(tmp_path / "page.html")]) == 0


def test_resume_plays_the_skipped_episode_again(log: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "3", "--log", str(log), "--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 3
