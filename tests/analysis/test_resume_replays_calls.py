"""A resumed episode keeps the decisions its interrupted attempt had answered, with no
response cache: the replies are read back from the run log's call lines, so the model is
asked only the decisions that were not answered.

The interrupted log is a finished run's log cut after its K-th call line (what a kill after
K answered calls leaves: the calls, no episode line). The server is the text oracle behind
HTTP (tests/analysis/test_harness_cli.py), and it counts the decision requests it is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_harness_cli import _lines, _run, _summary, server  # noqa: F401
from tests.llm_fake_server import FakeServer

K = 3  # answered calls the interrupted attempt left in the log


def _decisions(fake: FakeServer) -> int:
    return sum("Task (" in json.dumps(r.get("messages")) and not isinstance(
        r.get("tool_choice"), dict) for r in fake.requests)


def _cut_after_call(lines: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    calls = [i for i, line in enumerate(lines) if line["type"] == "call"]
    return lines[:calls[k - 1] + 1]


@pytest.mark.parametrize("harness", ["json", "tools"])
def test_a_resume_replays_the_logged_replies_of_an_interrupted_episode(
        harness: str, server: FakeServer, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    whole = tmp_path / "whole.jsonl"
    first = _summary(_run(server, "--harness", harness, "--log", str(whole), episodes=1),
                     capsys)
    asked = _decisions(server)
    assert asked == first["model_calls"]["decisions"] > K

    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(json.dumps(line) + "\n"
                           for line in _cut_after_call(_lines(whole), K)))
    before = _decisions(server)
    resumed = _summary(_run(server, "--harness", harness, "--log", str(cut), "--resume",
                            episodes=1), capsys)
    assert _decisions(server) - before == asked - K  # the K answered ones not asked again
    for key in ("success", "mean_completed", "failures"):
        assert resumed[key] == first[key]
    assert resumed["model_calls"]["decisions"] == asked

    lines = _lines(cut)
    replay = next(i for i, line in enumerate(lines) if line["type"] == "replay")
    again = [line for line in lines[replay:] if line["type"] == "call"]
    assert [c["decision"] for c in again] == list(range(asked))
    assert [c["cache"] for c in again[:K]] == ["log"] * K
    assert all(c["cache"] != "log" and c["retries"] >= 0 for c in again[K:])
    assert all(c["cost_usd"] in (0, 0.0, None) for c in again[:K])
    whole_calls = [line for line in _lines(whole) if line["type"] == "call"]
    assert [c["response"] for c in again] == [c["response"] for c in whole_calls]
    assert [c["tool_calls"] for c in again] == [c["tool_calls"] for c in whole_calls]


def test_a_prompt_other_than_the_logged_one_is_asked_again(
        server: FakeServer, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    whole = tmp_path / "whole.jsonl"
    first = _summary(_run(server, "--log", str(whole), episodes=1), capsys)
    asked = _decisions(server)
    lines = _cut_after_call(_lines(whole), K)
    calls = [line for line in lines if line["type"] == "call"]
    calls[1]["prompt"][-1]["content"] += " (another prompt)"  # decision 1 went another way
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = _decisions(server)
    resumed = _summary(_run(server, "--log", str(cut), "--resume", episodes=1), capsys)
    assert _decisions(server) - before == asked - 1  # only decision 0 replayed
    assert resumed["success"] == first["success"]
    again = [line for line in _lines(cut) if line["type"] == "call"][K:]
    assert [c["cache"] for c in again].count("log") == 1 and again[0]["cache"] == "log"
