"""The prompt-sufficiency control: `text-oracle` reads only the chat messages and must score
what an exact controller scores, through the whole LLM harness.

A StatefulWorkflow prompt that carries the initial registers and every applied update lets it
reach 100% under snapshot, history and retry feedback; hidden resampling caps it at the
missing-information ceiling, computed here from the rules, not from the oracle. Dropping a
field the decision needs from the prompt must make it lose, which is what makes the 100% a
statement about the prompt. On DACSSteering it must answer as `dacs-reader`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.cli import main
from diagym.analysis.llm_runs import make_text_env, oracle_policy_factory
from diagym.controllers.dacs.readers import dacs_controller
from diagym.controllers.rollout import rollout
from diagym.llm_policies.oracle import DacsOracle, InProcessChat, WorkflowOracle
from diagym.llm_policies.policy import LLMPolicy
from diagym.llm_policies.prompts import workflow

EPISODES = 200


def _oracle_run(env_id: str, episodes: int, seed: int = 0, **kwargs: Any) -> tuple[Any, ...]:
    env = make_text_env(env_id, **kwargs)
    policy = oracle_policy_factory()(env)
    records = rollout(env, policy, episodes, seed=seed)
    return env, policy, records


@pytest.mark.parametrize("env_id", ["StatefulWorkflow-v0", "StatefulWorkflowHistory-v0",
                                    "StatefulWorkflowRetry-v0"])
def test_the_oracle_completes_every_episode_when_the_prompt_keeps_the_information(
        env_id: str) -> None:
    _, policy, records = _oracle_run(env_id, EPISODES)
    assert all(r.success for r in records), [r.first_failure for r in records if not r.success]
    assert all(r.calls == r.completed == 8 for r in records)
    assert policy.client.answer.guesses == 0
    assert all(r.counters["schema_valid"] == r.counters["decisions"] == 8 for r in records)


@pytest.mark.parametrize("kwargs", [
    {"snapshot_period": 2, "family": "barriers", "depth": 2},
    {"snapshot_period": 3, "width": 8, "candidates": 8, "n_ops": 16},
    {"snapshot_period": 0, "width": 1, "candidates": 2, "updates": "static"},
])
def test_the_oracle_reconstructs_the_registers_at_any_snapshot_period(
        kwargs: dict[str, Any]) -> None:
    _, _, records = _oracle_run("StatefulWorkflow-v0", 100, **kwargs)
    assert all(r.success and r.errors == 0 for r in records)


def _visible_decisions(n: int, period: int) -> int:
    """Seed 003 appendix B.3: v = ceil(N / h) for a period h > 0, else 1 (the initial one)."""
    return math.ceil(n / period) if period else 1


def _hidden_hit(b: int) -> float:
    """The best guess's chance for a fresh uniform value in 0..7: the most likely residue
    mod b, whose preimages number ceil(8 / b)."""
    return math.ceil(8 / b) / 8


@pytest.mark.parametrize(("kwargs", "episodes"), [
    ({"n_ops": 4, "depth": 2, "candidates": 2}, 400),
    ({"n_ops": 4, "depth": 2, "candidates": 2, "snapshot_period": 2}, 400),
    ({"n_ops": 4, "depth": 4, "candidates": 3}, 400),
    ({}, EPISODES),
])
def test_hidden_resampling_reaches_the_missing_information_ceiling(
        kwargs: dict[str, Any], episodes: int) -> None:
    env, policy, records = _oracle_run("StatefulWorkflowHidden-v0", episodes, **kwargs)
    spec = env.unwrapped.params
    n, b, h = spec.n_ops, spec.candidates, spec.snapshot_period
    hit = _hidden_hit(b)
    v = _visible_decisions(n, h)
    ceiling = hit ** (n - v)
    if 8 % b == 0:
        assert ceiling == pytest.approx(float(b) ** -(n - v))
    wins = sum(r.success for r in records)
    spread = math.sqrt(episodes * ceiling * (1 - ceiling))
    assert abs(wins - episodes * ceiling) <= 4 * spread + 1, (wins, episodes * ceiling)
    # Decision k (1-based) is visible iff k == 1 or a snapshot followed success k - 1; the
    # oracle answers visible decisions right and guesses the rest, so the expected number of
    # completed operations is a sum of products of per-decision chances.
    chance = [1.0 if k == 0 or (h and k % h == 0) else hit for k in range(n)]
    expected_completed = sum(np.prod(chance[:k + 1]) for k in range(n))
    completed = np.array([r.completed for r in records], dtype=float)
    assert abs(completed.mean() - expected_completed) <= 4 * completed.std() / math.sqrt(
        episodes) + 1e-9
    guesses = sum(1 for r in records for k in range(r.calls) if chance[k] < 1)
    assert policy.client.answer.guesses == guesses


# -- a prompt without a needed field loses -------------------------------------------------
def _drop_initial(text: str) -> str:
    return re.sub(re.escape(workflow.INITIAL_HEADER) + r"\nregisters: [^\n]*\n", "", text)


def _drop_updates(text: str) -> str:
    return re.sub(r"(-> ok); x\[\d+\] \+= \d+", r"\1", text)


def _drop_codes(text: str) -> str:
    return re.sub(r"codes \[[\d ]*\]", "codes []", text)


@pytest.mark.parametrize("drop", [_drop_initial, _drop_updates, _drop_codes])
def test_dropping_a_needed_field_makes_the_oracle_fail_under_history(
        drop: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    original = workflow.decision_prompt
    changed: list[bool] = []

    def dropped(*args: Any, **kwargs: Any) -> str:
        text = original(*args, **kwargs)
        changed.append(drop(text) != text)
        return drop(text)

    monkeypatch.setattr(workflow, "decision_prompt", dropped)
    _, _, records = _oracle_run("StatefulWorkflowHistory-v0", 100)
    assert any(changed)
    assert sum(r.success for r in records) <= 30
    if drop is not _drop_codes:
        # The snapshot condition refreshes what was dropped: the same loss costs nothing there.
        _, _, records = _oracle_run("StatefulWorkflow-v0", 100)
        assert all(r.success for r in records)


def test_the_initial_values_and_updates_are_in_every_later_prompt() -> None:
    env = make_text_env("StatefulWorkflowHistory-v0")
    policy = oracle_policy_factory()(env)
    prompts: list[str] = []
    answer = policy.client.answer

    def spy(messages: Any) -> str:
        prompts.append(messages[-1]["content"])
        return answer(messages)

    policy.client.answer = spy
    rollout(env, policy, 1, seed=3)
    initial = env.unwrapped.task.initial_registers
    line = "registers: " + " ".join(f"x[{r}]={int(v)}" for r, v in enumerate(initial))
    assert workflow.INITIAL_HEADER not in prompts[0] and line in prompts[0]
    for k, text in enumerate(prompts[1:], 1):
        assert f"{workflow.INITIAL_HEADER}\n{line}" in text and "registers: hidden" in text
        assert len(re.findall(r"^\d+\. execute\(\d+, \d+\) -> ok; x\[\d+\] \+= \d+$", text,
                              re.M)) == k


def test_the_oracle_sees_only_the_messages(tmp_path: Path) -> None:
    """Replaying the logged prompts into a fresh oracle gives the logged answers."""
    log = tmp_path / "oracle.jsonl"
    env = make_text_env("StatefulWorkflowRetry-v0")
    rollout(env, oracle_policy_factory(system_role=False)(env), 5, seed=11, log=log)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    calls = [x for x in lines if x["type"] == "call"]
    assert len(calls) == 40
    fresh = WorkflowOracle()
    for call in calls:
        assert call["prompt"][0]["role"] == "user" and len(call["prompt"]) == 1
        assert fresh(call["prompt"]) == call["response"]
        assert call["response_format"] == "none" and call["action_status"] == "ok"
    assert lines[0]["run"]["policy"]["llm"] == "text-oracle"


def test_diagym_run_text_oracle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", "StatefulWorkflowHistory-v0", "--policy", "text-oracle",
            "--episodes", "20", "--log", str(log), "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["success"] == 1.0
    assert sum('"type": "call"' in x for x in log.read_text().splitlines()) == 160
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "text-oracle",
                 "--episodes", "1", "--local"]) == 2
    assert "takes no --local" in capsys.readouterr().err


# -- DACSSteering: the same decisions as dacs-reader ---------------------------------------
class _Recorder:
    """Wraps a policy to keep each decision's action and whether it was a guess."""

    def __init__(self, policy: Any, guesses: Any) -> None:
        self.policy, self.guesses = policy, guesses
        self.decisions: list[tuple[int, bool]] = []

    def reset(self, *, seed: int | None = None) -> None:
        self.policy.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        before = self.guesses()
        action = self.policy.act(observation, info)
        value = json.loads(action)["answer"] if isinstance(action, str) else int(action)
        self.decisions.append((value, self.guesses() > before))
        return action

    def episode_counters(self) -> dict[str, Any]:
        return self.policy.episode_counters()


@pytest.mark.parametrize("kwargs", [
    {}, {"context_mode": "flat"}, {"context_mode": "registry"}, {"family": "cascade"},
    {"n_agents": 10, "window": 768},
])
def test_the_dacs_text_oracle_decides_as_dacs_reader(kwargs: dict[str, Any]) -> None:
    reader = dacs_controller("dacs-reader")
    direct = _Recorder(reader, lambda: reader.guesses)
    oracle = DacsOracle()
    env = make_text_env("DACSSteering-v0", **kwargs)
    text = _Recorder(LLMPolicy.for_env(InProcessChat(oracle), env), lambda: oracle.guesses)
    compared = 0
    for seed in range(10):
        direct.decisions, text.decisions = [], []
        a = rollout(gym.make("DACSSteering-v0", **kwargs), direct, 1, seed=seed)[0]
        b = rollout(env, text, 1, seed=seed)[0]
        for (want, guessed), (got, oracle_guessed) in zip(direct.decisions, text.decisions,
                                                          strict=False):
            assert guessed == oracle_guessed
            if guessed:
                break  # the windows may differ from here on (they carry the answers given)
            assert got == want
            compared += 1
        else:
            assert len(direct.decisions) == len(text.decisions)
            assert a.metrics["accuracy"] == b.metrics["accuracy"]
            assert a.metrics["contamination"] == b.metrics["contamination"]
    assert compared > 0 or kwargs.get("context_mode") == "registry"


def test_under_a_budget_the_oracle_scores_what_survives_the_cut() -> None:
    """An RCWT budget repeats the evidence block to fill W (harmless: the first copy is read)
    or cuts it; a cut that removes the end of the history removes what the decision needs."""
    env = make_text_env("StatefulWorkflowHistory-v0")
    roomy = rollout(env, oracle_policy_factory(budget=4096)(env), 30, seed=0)
    assert all(r.success for r in roomy)
    assert all(r.counters["cl100k_prompt_tokens"] == 4096 * 8 for r in roomy)
    tight = rollout(env, oracle_policy_factory(budget=700)(env), 30, seed=0)
    assert sum(r.success for r in tight) <= 3
