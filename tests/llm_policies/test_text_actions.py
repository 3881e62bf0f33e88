"""The text-action wrapper bounds answers by what a text policy may say, per env family, in
JSON text or as a native tool call."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from diagym import envs  # noqa: F401
from diagym.envs.dacs.scenario import N_OPTIONS
from diagym.llm_policies.text_actions import (
    INVALID_ACTION,
    TOOL_FAILURES,
    InvalidReply,
    TextActionWrapper,
    ToolCallAction,
    judge_tool_call,
    text_action_fields,
)


@pytest.mark.parametrize("agent_chosen_focus", [False, True])
def test_dacs_answer_beyond_the_options_is_invalid_never_a_focus(agent_chosen_focus: bool) -> None:
    env = gym.make("DACSSteering-v0", n_agents=4, agent_chosen_focus=agent_chosen_focus,
                   focus_cost=0.5)
    wrapped = TextActionWrapper(env)
    assert text_action_fields(env) == (("answer", N_OPTIONS),)
    wrapped.reset(seed=3)
    core = env.unwrapped
    window_before = core.current_window.text
    pending_before = core.pending
    # With focus on, 4 + j is a legal env action (focus on agent j); as text it is not.
    if agent_chosen_focus:
        assert core.action_space.contains(N_OPTIONS + 1)
    observation, reward, terminated, truncated, info = wrapped.step(
        json.dumps({"answer": N_OPTIONS + 1}))
    assert info["action_status"] == INVALID_ACTION
    assert info["failure"] == INVALID_ACTION
    assert terminated and not truncated
    assert reward == 0.0  # a focus would have cost -focus_cost
    assert "focus" not in info
    assert core.pending == pending_before  # nothing was answered or focused
    assert core.current_window.text == window_before
    assert core._focus_count == 0


def test_dacs_answer_inside_the_options_is_played() -> None:
    env = gym.make("DACSSteering-v0", agent_chosen_focus=True)
    wrapped = TextActionWrapper(env)
    wrapped.reset(seed=1)
    correct = env.unwrapped.pending.correct
    _, reward, _, _, info = wrapped.step(json.dumps({"answer": correct}))
    assert info["action_status"] == "ok" and info["correct"] and reward == 1.0
    assert "focus" not in info


def test_workflow_answer_outside_the_action_space_is_invalid() -> None:
    env = gym.make("StatefulWorkflow-v0", n_ops=4, depth=2, candidates=3)
    wrapped = TextActionWrapper(env)
    assert text_action_fields(env) == (("operation", 4), ("candidate", 3))
    _, info = wrapped.reset(seed=0)
    ready = int(np.flatnonzero(info["action_mask"][:4])[0])
    _, _, terminated, _, info = wrapped.step(json.dumps({"operation": ready, "candidate": 3}))
    assert terminated and info["action_status"] == INVALID_ACTION
    assert env.unwrapped._state[2] == 0  # no execute call reached the env (CALLS)


def test_env_of_no_family_is_refused() -> None:
    with pytest.raises(ValueError, match="^text policies play StatefulWorkflow and DACSSteering"):
        TextActionWrapper(gym.make("CartPole-v1"))


def _free_text_reply(pick: str):
    """A chat model that reads the window with the reference reader's rule and replies in
    plain text with the right value (pick="right") or with another option's value."""
    from diagym.controllers.dacs.readers import parse_window
    from diagym.llm_policies.oracle import DacsOracle

    oracle = DacsOracle()

    def answer(messages: list[dict[str, object]]) -> str:
        options = parse_window("\n".join(str(m["content"]) for m in messages)).options
        right = oracle.choose(messages)
        index = right if pick == "right" else (right + 1) % len(options)
        return f"Use {options[index]} for this."

    return answer


@pytest.mark.parametrize("pick", ["right", "other"])
def test_free_text_replies_are_scored_by_keywords_through_the_harness(pick: str) -> None:
    """Under scoring="keywords" the prompt asks for plain text, the wrapper passes the reply to
    the env, and the env scores it: naming the right value is correct, naming another option
    is not."""
    from diagym.controllers.rollout import rollout
    from diagym.llm_policies.oracle import InProcessChat
    from diagym.llm_policies.policy import LLMPolicy, renderer_for

    env = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=3, family="heterogeneous",
                                     scoring="keywords"))
    renderer = renderer_for(env)
    assert renderer.fields is None and renderer.schema is None
    policy = LLMPolicy(InProcessChat(_free_text_reply(pick)), renderer)
    records = rollout(env, policy, episodes=3, seed=0)
    accuracy = [r.metrics["accuracy"] for r in records]
    assert all(r.counters["schema_valid"] == r.counters["decisions"] > 0 for r in records)
    assert accuracy == ([1.0] * 3 if pick == "right" else [0.0] * 3)


def test_dacs_invalid_reply_ends_with_metrics_counting_it_as_a_wrong_decision() -> None:
    wrapped = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=3, decisions=3))
    wrapped.reset(seed=2)
    core = wrapped.unwrapped
    _, _, _, _, first = wrapped.step(json.dumps({"answer": core.pending.correct}))
    assert first["correct"] and "episode_metrics" not in first
    shown = core.current_window.tokens
    _, reward, terminated, _, info = wrapped.step("not json {")
    assert terminated and reward == 0.0 and info["failure"] == "invalid_json"
    assert info["correct"] is False and info["contaminated"] is False  # not the last step's
    metrics = info["episode_metrics"]
    assert metrics["accuracy"] == pytest.approx(1 / 2) and metrics["contamination"] == 0.0
    assert metrics["invalid"] == 1 and metrics["window_tokens"][-1] == shown
    assert len(metrics["window_tokens"]) == info["decisions"] == 2


def test_workflow_invalid_reply_carries_no_env_metrics() -> None:
    wrapped = TextActionWrapper(gym.make("StatefulWorkflow-v0"))
    wrapped.reset(seed=0)
    *_, info = wrapped.step("not json {")
    assert info["failure"] == "invalid_json" and "episode_metrics" not in info


# -- tool calls and replies the harness already judged ----------------------------------------
def _ready(info: dict) -> int:
    return int(np.flatnonzero(info["action_mask"][:8])[0])


@pytest.mark.parametrize(("call", "category"), [
    (ToolCallAction("run", '{"operation": 0, "candidate": 0}'), "unknown_tool"),
    (ToolCallAction("execute", "operation 0"), "invalid_arguments"),
    (ToolCallAction("execute", '{"operation": 0}'), "invalid_arguments"),
    (ToolCallAction("execute", '{"operation": 0, "slot": 0}'), "invalid_arguments"),
    (ToolCallAction("execute", '{"operation": "0", "candidate": 0}'), "invalid_arguments"),
    (ToolCallAction("execute", '[0, 0]'), "invalid_arguments"),
    (ToolCallAction("execute", '{"operation": 8, "candidate": 0}'), "invalid_action"),
    (ToolCallAction("execute", '{"operation": 0, "candidate": -1}'), "invalid_action"),
    (InvalidReply("no_tool_call"), "no_tool_call"),
    (InvalidReply("multiple_tool_calls", "2 calls"), "multiple_tool_calls"),
])
def test_a_bad_tool_call_ends_the_episode_with_its_category(call: object, category: str) -> None:
    env = gym.make("StatefulWorkflow-v0")
    wrapped = TextActionWrapper(env)
    wrapped.reset(seed=4)
    _, reward, terminated, truncated, info = wrapped.step(call)
    assert (terminated, truncated, reward) == (True, False, 0.0)
    assert info["failure"] == info["action_status"] == category
    assert info["decisions"] == 1 and not info["success"]
    assert env.unwrapped._state[2] == 0  # no execute call reached the env (CALLS)


def test_a_tool_call_is_the_same_action_as_the_json_answer() -> None:
    """Positive control: execute(v, a) plays exactly what {"operation": v, "candidate": a}
    plays, step for step."""
    by_tool, by_text = (TextActionWrapper(gym.make("StatefulWorkflow-v0")) for _ in range(2))
    _, info = by_tool.reset(seed=7)
    by_text.reset(seed=7)
    for _ in range(8):
        op = _ready(info)
        args = json.dumps({"candidate": by_tool.unwrapped.correct_slot(op), "operation": op})
        out_tool = by_tool.step(ToolCallAction("execute", args))
        out_text = by_text.step(args)
        info = out_tool[4]
        assert out_tool[1:4] == out_text[1:4]
        assert info["action_status"] == out_text[4]["action_status"] == "ok"
        if out_tool[2]:
            break
    assert info["success"] and info["completed_ops"] == 8


def test_judge_tool_call_names_the_tool_and_its_integers() -> None:
    env = gym.make("StatefulWorkflow-v0", n_ops=4, depth=2, candidates=3)
    tools = TextActionWrapper(env).tools
    assert [t.name for t in tools] == ["execute"]
    assert tools[0].fields == text_action_fields(env)
    status, tool, parsed = judge_tool_call(tools, ToolCallAction(
        "execute", '```json\n{"candidate": 2, "operation": 3}\n```'))
    assert (status, tool, parsed) == ("ok", tools[0], (3, 2))
    assert judge_tool_call(tools, ToolCallAction("execute", '{"operation": 4, "candidate": 0}')
                           ) == ("invalid_action", tools[0], None)
    assert judge_tool_call(tools, ToolCallAction("answer", '{"option": 0}')) == (
        "unknown_tool", None, None)


def test_an_invalid_reply_category_outside_the_failures_is_refused() -> None:
    with pytest.raises(ValueError, match=(
            r"^category must be one of invalid_json \| invalid_schema \| invalid_action \| "
            r"no_tool_call \| multiple_tool_calls \| unknown_tool \| invalid_arguments \| "
            r"cut_reasoning; "
            r"got 'oops'$")):
        InvalidReply("oops")
    assert TOOL_FAILURES == ("no_tool_call", "multiple_tool_calls", "unknown_tool",
                             "invalid_arguments")


def test_dacs_focus_through_a_tool_call_is_the_focus_action() -> None:
    """focus(agent=j) steps the env with N_OPTIONS + j, exactly as the integer action does."""
    kwargs = {"n_agents": 4, "agent_chosen_focus": True, "focus_cost": 0.25}
    by_tool = TextActionWrapper(gym.make("DACSSteering-v0", **kwargs))
    direct = gym.make("DACSSteering-v0", **kwargs)
    assert [t.name for t in by_tool.tools] == ["answer", "focus"]
    by_tool.reset(seed=5)
    direct.reset(seed=5)
    observation, reward, terminated, _, info = by_tool.step(
        ToolCallAction("focus", '{"agent": 2}'))
    expected, expected_reward, *_ = direct.step(N_OPTIONS + 2)
    assert info["action_status"] == "ok" and info["focus"] == 2 and not terminated
    assert reward == expected_reward == -0.25
    assert observation["window"] == expected["window"]
    _, _, terminated, _, info = by_tool.step(ToolCallAction("focus", '{"agent": 4}'))
    assert terminated and info["failure"] == "invalid_action"  # agents are 0..3


def test_dacs_without_focus_offers_no_focus_tool() -> None:
    wrapped = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=3))
    assert [t.name for t in wrapped.tools] == ["answer"]
    wrapped.reset(seed=0)
    *_, info = wrapped.step(ToolCallAction("focus", '{"agent": 0}'))
    assert info["failure"] == "unknown_tool"
    keywords = TextActionWrapper(gym.make("DACSSteering-v0", scoring="keywords"))
    assert keywords.tools == ()


@pytest.mark.parametrize("reply", [
    InvalidReply("no_tool_call"), ToolCallAction("answer", '{"choice": 1}'),
    ToolCallAction("nope", "{}")])
def test_dacs_bad_tool_reply_ends_with_metrics_counting_it_as_wrong(reply: object) -> None:
    wrapped = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=3, decisions=3))
    wrapped.reset(seed=2)
    core = wrapped.unwrapped
    _, _, _, _, first = wrapped.step(ToolCallAction(
        "answer", json.dumps({"option": core.pending.correct})))
    assert first["correct"] and first["action_status"] == "ok"
    _, reward, terminated, _, info = wrapped.step(reply)
    assert terminated and reward == 0.0
    assert info["correct"] is False and info["contaminated"] is False
    metrics = info["episode_metrics"]
    assert metrics["accuracy"] == pytest.approx(1 / 2) and metrics["invalid"] == 1
