"""`llm-study --design reasoning`: every budget level plays seed 003's fractional cells on the
same task seeds, with retries and the harness held fixed, and is compared with the direct
answer on all (cell, seed) pairs and at matched usage.

The server's model is the text oracle, which thinks aloud (a fixed paragraph before its JSON)
only when the prompt asks for reasoning first: so every level succeeds on every task (the
positive control), the budget's only effect is the paragraph's tokens, and the usage-matched
contrast must be exactly zero with every pair matched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagym.analysis.cli import main
from diagym.analysis.studies.llm_study.design import design_cells
from diagym.analysis.studies.llm_study.reasoning import REASONING_LEVELS
from diagym.envs._core import tokens
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from tests.llm_fake_server import FakeServer, Reply, tool_server

THOUGHT = "First I check which operation has its prerequisites done."
ANSWER_TOKENS = 40


def _asks_to_think(request: dict[str, Any]) -> bool:
    return any("in two parts" in str(m.get("content")) for m in request["messages"])


def _is_probe(request: dict[str, Any]) -> bool:
    return not any("Task (" in str(m.get("content")) for m in request.get("messages", []))


def thinking_when_asked() -> Any:
    probe_answers = tool_server()

    def respond(request: dict[str, Any]) -> Reply:
        if _is_probe(request):
            return probe_answers(request)
        answer = InProcessChat(WorkflowOracle()).complete(request["messages"]).text
        return Reply(content=f"{THOUGHT}\n{answer}" if _asks_to_think(request) else answer)

    return respond


def test_every_level_plays_the_structural_cells_and_is_compared_at_matched_usage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "study.jsonl"
    with FakeServer(thinking_when_asked(), models=["fake"]) as server:
        status = main(["llm-study", "--design", "reasoning", "--seeds", "1", "--base-url",
                       server.base_url, "--model", "fake", "--max-tokens", str(ANSWER_TOKENS),
                       "--invalid-retries", "1", "--log", str(log), "--json"])
        played = [r for r in server.requests if not _is_probe(r)]
    assert status == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    cells = len(design_cells("fractional"))
    rows = {row["level"]: row for row in summary["levels"]}
    assert list(rows) == ["direct", "reason 256", "reason 1024"]
    assert all(row["episodes"] == cells and row["successes"] == cells for row in rows.values())
    assert summary["run"]["invalid_retries"] == 1 and summary["run"]["response_format"] == "none"
    # each level's calls carry its budget on top of the answer's reserve, and only its
    # answer instruction asks for reasoning
    caps = {(_asks_to_think(r), r["max_tokens"]) for r in played}
    assert caps == {(False, ANSWER_TOKENS), (True, ANSWER_TOKENS + 256),
                    (True, ANSWER_TOKENS + 1024)}
    for level in ("reason 256", "reason 1024"):
        versus = rows[level]["versus_direct"]
        assert versus["pairs"] == cells and versus["success_difference"] == 0.0
        assert versus["usage_ratio"] > 1.0
        assert versus["matched_pairs"] == cells and versus["matched_success_difference"] == 0.0
        assert rows[level]["reasoning_per_decision"] == tokens.count(THOUGHT)
    assert rows["direct"]["reasoning_per_decision"] == 0
    by_decision = summary["reasoning_by_decision"]
    assert set(by_decision["direct"][:2]) == {0.0}
    assert by_decision["reason 256"][:2] == [tokens.count(THOUGHT)] * 2
    assert len(REASONING_LEVELS) == 3


def test_the_design_refuses_what_it_cannot_vary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm-study", "--design", "reasoning", "--policy", "text-oracle"]) == 2
    assert capsys.readouterr().err == (
        "diagym llm-study: error: --design reasoning varies a chat model's reasoning budget; "
        "--policy text-oracle has none (use --policy llm)\n")
    assert main(["llm-study", "--design", "reasoning", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m", "--reasoning-tokens", "64"]) == 2
    assert capsys.readouterr().err == (
        "diagym llm-study: error: --reasoning-tokens: --design reasoning sets the budgets "
        "itself (the direct answer, 256, 1024 tokens)\n")
