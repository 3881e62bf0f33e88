"""The StatefulWorkflow prompt renderer: what the model is shown, and how it is counted.

Seed 003's text-action harness shows the complete public task, the current observation and
the history at every decision, and its history condition keeps what a snapshot refreshes:
the initial registers and every applied update stay in the prompt. These tests play real envs
and check the prompt carries each of them, and that a fixed budget's accounting holds for the
messages actually sent.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.envs._core import tokens
from diagym.llm_policies.prompts.workflow import (
    ACTION_SCHEMA,
    INITIAL_HEADER,
    RESAMPLED_NOTE,
    WorkflowRenderer,
    decision_prompt,
    history_entry,
    render,
    system_prompt,
)

CASES = [
    ("diagym:StatefulWorkflow-v0", {}),
    ("diagym:StatefulWorkflowHistory-v0", {"family": "barriers", "depth": 2, "candidates": 8}),
    ("diagym:StatefulWorkflowHidden-v0", {"width": 8}),
    ("diagym:StatefulWorkflowRetry-v0", {"n_ops": 4, "depth": 4, "candidates": 2}),
]


def _play(env_id: str, kwargs: dict[str, Any], seed: int, steps: int) -> tuple[Any, ...]:
    """A few steps of a real env (a correct ready action, then a deliberate wrong slot)."""
    env = gym.make(env_id, **kwargs)
    obs, info = env.reset(seed=seed)
    env.initial = [int(v) for v in obs["registers"]]
    spec = env.unwrapped.params
    history: list[dict[str, Any]] = []
    for step in range(steps):
        ready = np.flatnonzero(info["action_mask"][: spec.n_ops])
        op = int(ready[0])
        slot = env.unwrapped.correct_slot(op)
        if step == steps - 1 and spec.error_allowance > 0:
            slot = (slot + 1) % spec.candidates
        action = (op, slot)
        obs, _, terminated, _, info = env.step(action)
        history.append(history_entry(action, info, obs))
        if terminated:
            break
    return env, spec, obs, history


@pytest.mark.parametrize(("env_id", "kwargs"), CASES)
@pytest.mark.parametrize("seed", [0, 7])
def test_prompt_shows_task_observation_and_history(
    env_id: str, kwargs: dict[str, Any], seed: int
) -> None:
    env, spec, obs, history = _play(env_id, kwargs, seed, steps=3)
    task = env.unwrapped.task
    text = decision_prompt(spec, obs, history, env.initial)
    for v in range(spec.n_ops):
        pre = [int(u) for u in np.flatnonzero(task.prereq[v])]
        codes = " ".join(str(int(c)) for c in task.codes[v])
        line = f"op {v}: after {pre if pre else 'none'}; query x[{int(task.query[v])}]; "
        line += f"update x[{int(task.update[v])}] += {int(task.delta[v])}; codes [{codes}]"
        assert line in text
    done = [int(v) for v in np.flatnonzero(obs["completed"])]
    assert f"completed: {done}" in text
    assert f"errors so far: {int(obs['errors'])}" in text
    if (obs["registers"] < 0).all():
        assert "registers: hidden" in text
    else:
        shown = " ".join(f"x[{r}]={int(v)}" for r, v in enumerate(obs["registers"]))
        assert f"registers: {shown}" in text
    positions = []
    for i, entry in enumerate(history, 1):
        line = f"{i}. execute({entry['operation']}, {entry['candidate']}) -> {entry['outcome']}"
        if entry["update"] is not None:
            line += f"; x[{entry['update'][0]}] += {entry['update'][1]}"
        if entry["update"] is not None and spec.hidden_resampling:
            line += f"; {RESAMPLED_NOTE}"
        assert line in text
        positions.append(text.index(line))
    assert positions == sorted(positions)
    initial = " ".join(f"x[{r}]={v}" for r, v in enumerate(env.initial))
    assert f"{INITIAL_HEADER}\nregisters: {initial}\nObservation:" in text


@pytest.mark.parametrize(("env_id", "kwargs"), CASES)
def test_the_renderer_keeps_the_initial_registers_from_the_second_decision_on(
        env_id: str, kwargs: dict[str, Any]) -> None:
    env = gym.make(env_id, **kwargs)
    spec = env.unwrapped.params
    renderer = WorkflowRenderer(spec)
    obs, info = env.reset(seed=9)
    initial = " ".join(f"x[{r}]={int(v)}" for r, v in enumerate(obs["registers"]))
    renderer.reset()
    first = renderer.render(obs).messages[1]["content"]
    assert INITIAL_HEADER not in first and f"registers: {initial}" in first
    for _ in range(3):
        op = int(np.flatnonzero(info["action_mask"][: spec.n_ops])[0])
        action = (op, env.unwrapped.correct_slot(op))
        obs, _, terminated, _, info = env.step(action)
        renderer.record(action, obs, info)
        text = renderer.render(obs).messages[1]["content"]
        assert f"{INITIAL_HEADER}\nregisters: {initial}\n" in text
    renderer.reset()  # a new episode forgets the old initial registers
    obs, _ = env.reset(seed=10)
    fresh = " ".join(f"x[{r}]={int(v)}" for r, v in enumerate(obs["registers"]))
    assert f"registers: {fresh}" in renderer.render(obs).messages[1]["content"]


def test_a_later_prompt_needs_the_initial_registers() -> None:
    _, spec, obs, history = _play("diagym:StatefulWorkflowHistory-v0", {}, seed=1, steps=1)
    with pytest.raises(ValueError, match="^initial: "):
        decision_prompt(spec, obs, history)


def test_hidden_registers_render_as_hidden() -> None:
    env, spec, obs, history = _play("diagym:StatefulWorkflowHistory-v0", {}, seed=1, steps=1)
    assert (obs["registers"] == -1).all()
    assert "registers: hidden" in decision_prompt(spec, obs, history, env.initial)
    partial = dict(obs, registers=np.array([3, -1, 5, -1, 0, 0, 0, 0], dtype=np.int8))
    assert "x[0]=3 x[1]=hidden x[2]=5 x[3]=hidden" in decision_prompt(
        spec, partial, history, env.initial)


def test_failed_call_and_empty_history() -> None:
    env, spec, obs, history = _play("diagym:StatefulWorkflowRetry-v0", {}, seed=2, steps=2)
    assert history[-1]["outcome"] == "candidate" and history[-1]["update"] is None
    assert "last call: candidate" in decision_prompt(spec, obs, history, env.initial)
    env = gym.make("diagym:StatefulWorkflow-v0")
    first, _ = env.reset(seed=0)
    text = decision_prompt(env.unwrapped.params, first, [])
    assert "History:\nnone yet" in text and "last call: none yet" in text
    assert INITIAL_HEADER not in text


@pytest.mark.parametrize(("env_id", "kwargs"), CASES)
def test_system_prompt_states_the_rules(env_id: str, kwargs: dict[str, Any]) -> None:
    spec = gym.make(env_id, **kwargs).unwrapped.params
    text = system_prompt(spec)
    assert system_prompt(spec) is text  # cached per spec
    n, b = spec.n_ops, spec.candidates
    assert f"0..{n - 1}" in text and f"0..{b - 1}" in text
    assert f"codes[v][a] == x[query[v]] mod {b}" in text and "before v's own update" in text
    for name in ("dependency", "candidate", "completed", "invalid_json", "invalid_schema",
                 "invalid_action"):
        assert name in text
    if spec.error_allowance:
        assert f"more than {spec.error_allowance} calls have failed" in text
    else:
        assert "The first failed call ends the episode." in text
    if spec.snapshot_period == 0:
        assert "only in the initial observation" in text
    assert ("redrawn" in text) == spec.hidden_resampling
    assert (RESAMPLED_NOTE in text) == spec.hidden_resampling
    assert "repeats the initial observation" in text
    assert text.endswith('{"operation": <int>, "candidate": <int>} and nothing else.')


def _valid(value: Any, schema: dict[str, Any]) -> bool:
    """The subset of JSON Schema ACTION_SCHEMA uses (jsonschema is not a dependency)."""
    if schema.get("type") == "object":
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        if any(key not in value for key in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and set(value) - set(props):
            return False
        return all(_valid(value[key], props[key]) for key in value if key in props)
    if schema.get("type") == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        return value >= schema.get("minimum", value)
    raise AssertionError(f"unsupported schema {schema}")


def test_action_schema() -> None:
    assert set(ACTION_SCHEMA) == {"type", "properties", "required", "additionalProperties"}
    assert _valid(json.loads('{"operation": 1, "candidate": 0}'), ACTION_SCHEMA)
    for bad in (
        {"operation": 1},
        {"candidate": 0},
        {"operation": 1, "candidate": 0, "why": "x"},
        {"operation": "1", "candidate": 0},
        {"operation": 1.5, "candidate": 0},
        {"operation": True, "candidate": 0},
        {"operation": -1, "candidate": 0},
        [1, 0],
    ):
        assert not _valid(bad, ACTION_SCHEMA), bad


def _content_tokens(messages: list[dict[str, str]]) -> int:
    return sum(tokens.count(m["content"]) for m in messages)


@pytest.mark.parametrize("order", ["coord_first", "reason_first"])
@pytest.mark.parametrize("system_role", [True, False])
@pytest.mark.parametrize(("W", "q"), [(400, 0.0), (600, 0.5), (1000, 0.9), (2048, 0.25)])
def test_budget_accounting(order: str, system_role: bool, W: int, q: float) -> None:
    env, spec, obs, history = _play("diagym:StatefulWorkflowHistory-v0", {}, seed=4, steps=3)
    coordination = "Agent B (planner): I will run op 3 next; do not touch x[1].\n"
    out = render(spec, obs, history, budget=W, q=q, coordination=coordination, order=order,
                 system_role=system_role, initial=env.initial)
    a = out.assembly
    assert a is not None and a.order == order
    assert out.text_tokens == _content_tokens(out.messages) == a.tokens == W
    assert a.u + a.c + a.r == W
    if system_role:
        assert [m["role"] for m in out.messages] == ["system", "user"]
        assert out.messages[0]["content"] == a.blocks[0]
        assert tokens.count(out.messages[0]["content"]) == a.u
        assert tokens.count(out.messages[1]["content"]) == a.c + a.r
        assert out.messages[0]["content"] == system_prompt(spec) + "\n"
    else:
        assert [m["role"] for m in out.messages] == ["user"]
        assert out.messages[0]["content"] == a.text


def test_no_budget_messages() -> None:
    env, spec, obs, history = _play("diagym:StatefulWorkflow-v0", {}, seed=5, steps=2)
    plain = render(spec, obs, history, initial=env.initial)
    decision = decision_prompt(spec, obs, history, env.initial)
    assert plain.assembly is None
    assert [m["role"] for m in plain.messages] == ["system", "user"]
    assert plain.messages[0]["content"] == system_prompt(spec)
    assert plain.messages[1]["content"] == decision
    assert plain.text_tokens == _content_tokens(plain.messages)
    merged = render(spec, obs, history, system_role=False, initial=env.initial)
    assert [m["role"] for m in merged.messages] == ["user"]
    assert merged.messages[0]["content"].startswith(system_prompt(spec))
    assert decision in merged.messages[0]["content"]
    assert merged.text_tokens == _content_tokens(merged.messages)
