"""benchmarks/local_ladder.py's answers table: what a log's decisions named, replayed on the env.

Positive control: the text oracle names the ready operation and its right slot at every
decision, in the json and the tools harness, so the replay must count every decision as ready,
in range and right. A constant agent's replies are all one reply. A log whose recorded first
failure disagrees with the replay is refused, naming the episode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from diagym.analysis.llm_runs import make_text_env
from diagym.controllers.rollout import rollout
from diagym.envs._core import tokens
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from diagym.llm_policies.policy import LLMPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import local_ladder  # noqa: E402

EASIEST = {"depth": 8, "width": 4, "candidates": 3, "snapshot_period": 1, "error_allowance": 2}


def _log(tmp_path: Path, answer, harness: str, episodes: int = 2) -> Path:
    env = make_text_env("StatefulWorkflow-v0", **EASIEST)
    policy = LLMPolicy.for_env(InProcessChat(answer), env, harness=harness)
    log = tmp_path / f"{harness}.jsonl"
    rollout(env, policy, episodes, seed=3, log=log)
    return log


@pytest.mark.parametrize("harness", ["json", "tools"])
def test_the_oracle_names_the_ready_operation_and_its_slot_every_time(
        tmp_path: Path, harness: str) -> None:
    seen = local_ladder.answers(_log(tmp_path, WorkflowOracle(), harness))
    assert seen["decisions"] == 16  # two won episodes of 8 operations
    assert seen["ready"] == seen["in_range"] == seen["right_slot"] == 16
    assert 0 < seen["ready_by_chance"] <= 1


def test_a_constant_reply_is_the_most_common_one(tmp_path: Path) -> None:
    seen = local_ladder.answers(_log(tmp_path, lambda _: '{"operation": 0, "candidate": 1}',
                                     "json"))
    assert seen["most_common_reply"] == [0, 1]
    assert seen["most_common_count"] == seen["decisions"] == seen["parsed"] > 0


def test_a_log_the_replay_contradicts_is_refused(tmp_path: Path) -> None:
    log = _log(tmp_path, WorkflowOracle(), "json", episodes=1)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for line in lines:
        if line["type"] == "episode":
            line["record"]["first_failure"] = "candidate"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(RuntimeError, match=r"the replay's first failure is None, the log's "
                                           r"candidate"):
        local_ladder.answers(log)


def test_a_tries_row_names_what_its_run_changed_from_the_ladder(tmp_path: Path) -> None:
    env = make_text_env("StatefulWorkflow-v0", **{**EASIEST, "candidates": 2})
    policy = LLMPolicy.for_env(InProcessChat(WorkflowOracle()), env, harness="tools",
                               bounded_fields=True)
    log = tmp_path / "tries.jsonl"
    rollout(env, policy, 2, seed=3, log=log)
    (row,) = local_ladder.tries_table([log])
    assert row["settings"] == "bounded fields, candidates 2"
    assert (row["successes"], row["ready"], row["decisions"]) == (2, 16, 16)
    assert len(row["first_replies"]) == 2
    # the in-process oracle answers text unconstrained, where the ladder's cells were constrained
    assert local_ladder.tries_table([_log(tmp_path, WorkflowOracle(), "json")])[0][
        "settings"] == "unconstrained"


def test_a_think_then_act_cell_counts_its_reasoning_tokens(tmp_path: Path) -> None:
    """The oracle thinking aloud before each answer: the ladder reads the action out of the
    call line as before, and counts the paragraph as the reasoning of every decision."""
    thought = "The ready operation is the one whose prerequisites are done."
    oracle = WorkflowOracle()
    env = make_text_env("StatefulWorkflow-v0", **EASIEST)
    policy = LLMPolicy.for_env(InProcessChat(lambda seen: f"{thought}\n{oracle(seen)}"), env,
                               reasoning_tokens=64)
    log = tmp_path / "reasoning.jsonl"
    rollout(env, policy, 2, seed=3, log=log)
    figures = local_ladder.cell(log)
    assert figures["settings"] == "unconstrained, reasoning 64"
    assert figures["reasoning_tokens_per_decision"] == tokens.count(thought)
    assert figures["reasoning_by_decision"] == [tokens.count(thought)] * 4
    assert figures["output_tokens_per_decision"] > tokens.count(thought)
    seen = local_ladder.answers(log)
    assert seen["ready"] == seen["right_slot"] == seen["decisions"] == 16
