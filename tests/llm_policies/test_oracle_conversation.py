"""The text oracle under conversations: the chat and tools harnesses send the rules once, an
opening and one result per call, and the oracle must read there exactly what it reads in the
json harness's one prompt per decision.

The conversations here are built from real episodes (a seed 003 reference controller playing
through gym), so the two paths see the same evidence; the oracle's choice on each must agree at
every decision. A window that dropped middle exchanges must make it guess, not crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diagym  # noqa: F401  (registers the ids)
from diagym.controllers.dacs.readers import dacs_controller, parse_window
from diagym.controllers.rollout import rollout
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs.workflow.params import WorkflowParams
from diagym.llm_policies.client.transport import ToolCall
from diagym.llm_policies.families import text_family
from diagym.llm_policies.harness import CONVERSATION_HARNESSES
from diagym.llm_policies.harness.tools import tool_dict
from diagym.llm_policies.oracle import DacsOracle, InProcessChat, WorkflowOracle, latest_window
from diagym.llm_policies.policy import LLMPolicy
from diagym.llm_policies.prompts import dacs, workflow
from diagym.llm_policies.text_actions import TextActionWrapper

Messages = list[dict[str, Any]]


def _tools(env_id: str, **kwargs: Any) -> list[dict[str, Any]]:
    """The OpenAI tool dicts the tools harness sends for an env."""
    env = gym.make(env_id, **kwargs)
    return [tool_dict(spec) for spec in text_family(env).tools(env.unwrapped)]


# -- InProcessChat with tools ----------------------------------------------------------------
def test_with_tools_the_answer_becomes_a_call_of_the_tool_that_takes_it() -> None:
    answers = iter(['{"answer": 2}', '{"agent": 1}', '{"answer": 0}'])
    chat = InProcessChat(lambda messages: next(answers))
    tools = _tools("DACSSteering-v0", agent_chosen_focus=True)
    assert [t["function"]["name"] for t in tools] == ["answer", "focus"]
    first = chat.complete([{"role": "user", "content": "q"}], tools=tools)
    assert first.text == "" and first.status == "ok"
    assert first.tool_calls == (ToolCall(id="call_1", name="answer", arguments='{"option": 2}'),)
    second = chat.complete([{"role": "user", "content": "q"}], tools=tools[::-1])
    assert second.tool_calls == (ToolCall(id="call_2", name="focus", arguments='{"agent": 1}'),)
    plain = chat.complete([{"role": "user", "content": "q"}])
    assert plain.text == '{"answer": 0}' and plain.tool_calls == ()
    # The numbering is per client; an answer whose keys are a tool's parameters is sent as
    # it is.
    other = InProcessChat(lambda messages: '{"operation": 1, "candidate": 3}')
    call = other.complete([], tools=_tools("StatefulWorkflow-v0")).tool_calls
    assert call == (ToolCall("call_1", "execute", '{"operation": 1, "candidate": 3}'),)
    exact = {"type": "function", "function": {"name": "pick", "description": "",
                                              "parameters": dacs.ANSWER_SCHEMA}}
    call = InProcessChat(lambda messages: '{"answer": 3}').complete([], tools=[exact])
    assert call.tool_calls == (ToolCall("call_1", "pick", '{"answer": 3}'),)


@pytest.mark.parametrize("answer", ['{"operation": 1}', "not json", "[1, 2]", '{"answer": 1}',
                                    '{"execute": 1}', '{"operation": 1, "candidate": 2, "x": 0}'])
def test_an_answer_no_tool_takes_stays_text(answer: str) -> None:
    chat = InProcessChat(lambda messages: answer)
    result = chat.complete([], tools=_tools("StatefulWorkflow-v0"))
    assert result.text == answer and result.tool_calls == ()
    assert chat.tool_calls == 0


# -- StatefulWorkflow: conversations built from real episodes ---------------------------------
@dataclass
class Episode:
    """Per decision, the json harness's messages and the conversation so far in both forms
    (chat: the reply as assistant text; tools: as a tool call answered by a tool message)."""

    prompts: list[Messages]
    chat: list[Messages]
    tools: list[Messages]
    actions: list[tuple[int, int]]


def _observation_block(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[lines.index("Observation:"):lines.index("History:")]


def _contract_opening(spec: WorkflowParams, observation: Any) -> str:
    """The contract's opening, from the json prompt's own lines: the task header and lines,
    the initial registers, then the observation block."""
    lines = workflow.decision_prompt(spec, observation, []).split("\n")
    block = _observation_block("\n".join(lines))
    head = lines[:lines.index("Observation:")]
    return "\n".join([*head, workflow.INITIAL_HEADER, block[1], *block])


def _contract_result(spec: WorkflowParams, history: list[dict[str, Any]], observation: Any,
                     initial: list[int]) -> str:
    """The contract's result of the last call: the json prompt's history line of that call,
    then its observation block."""
    text = workflow.decision_prompt(spec, observation, history, initial)
    lines = text.split("\n")
    history_lines = lines[lines.index("History:") + 1:-1]
    return "\n".join([history_lines[-1], *_observation_block(text)])


def _play(kwargs: dict[str, Any], seed: int, controller: str = "exact") -> Episode:
    """One episode of `controller`, with each decision's json prompt (WorkflowRenderer.render)
    and conversation (WorkflowRenderer.rules, opening, result); the conversation texts are
    checked against the contract's construction from the json prompt on the way."""
    env = gym.make("StatefulWorkflow-v0", **kwargs)
    spec = env.unwrapped.params
    policy = ReferencePolicy.for_env(controller, env)
    renderer, speaker = workflow.WorkflowRenderer(spec), workflow.WorkflowRenderer(spec)
    observation, info = env.reset(seed=seed)
    policy.reset(seed=seed)
    initial = [int(v) for v in observation["registers"]]
    rules = {"role": "system", "content": speaker.rules("Answer with execute(v, a).")}
    opening = {"role": "user", "content": speaker.opening(observation)}
    assert opening["content"] == _contract_opening(spec, observation)
    chat: Messages = [rules, opening]
    tools: Messages = [rules, opening]
    episode = Episode([], [], [], [])
    done = False
    while not done:
        episode.prompts.append(renderer.render(observation).messages)
        episode.chat.append(list(chat))
        episode.tools.append(list(tools))
        action = policy.act(observation, info)
        observation, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        renderer.record(action, observation, info)
        result = speaker.result(action, observation, info)
        assert result == _contract_result(spec, renderer.history, observation, initial)
        k = len(renderer.history)
        reply = json.dumps({"operation": int(action[0]), "candidate": int(action[1])})
        episode.actions.append((int(action[0]), int(action[1])))
        chat += [{"role": "assistant", "content": reply}, {"role": "user", "content": result}]
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "execute", "arguments": reply}}
        tools += [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"call_{k}", "content": result}]
    return episode


def _choices(conversations: list[Messages]) -> tuple[list[tuple[int, int]], int]:
    oracle = WorkflowOracle()
    return [oracle.choose(m) for m in conversations], oracle.guesses


def test_the_conversation_texts_have_the_contract_layout() -> None:
    """The opening has no history, a result starts with its call line and holds one
    observation block (and `_play` checks each text against the json prompt's lines)."""
    episode = _play({"snapshot_period": 0}, seed=5)
    opening = episode.chat[0][1]["content"]
    assert "History:" not in opening and opening.count("Observation:") == 1
    assert f"{workflow.INITIAL_HEADER}\nregisters: x[0]=" in opening
    last = episode.chat[-1]
    assert [m["role"] for m in last[:4]] == ["system", "user", "assistant", "user"]
    assert last[3]["content"].startswith("1. execute(")
    assert last[3]["content"].split("\n")[1] == "Observation:"
    assert "registers: hidden" in last[3]["content"]


@settings(max_examples=150, deadline=None)
@given(
    shape=st.sampled_from([(1, 1), (2, 2), (4, 2), (4, 4), (8, 4), (8, 2), (12, 3), (16, 4)]),
    candidates=st.integers(2, 8),
    width=st.integers(1, 8),
    family=st.sampled_from(["chains", "barriers"]),
    snapshot_period=st.sampled_from([0, 1, 2, 3]),
    hidden_resampling=st.booleans(),
    error_allowance=st.sampled_from([0, 1, 8]),
    controller=st.sampled_from(["exact", "uniform-candidate", "eliminate"]),
    seed=st.integers(0, 2**20),
)
def test_the_oracle_decides_on_a_conversation_as_on_the_json_prompt(
        shape: tuple[int, int], candidates: int, width: int, family: str,
        snapshot_period: int, hidden_resampling: bool, error_allowance: int, controller: str,
        seed: int) -> None:
    n_ops, depth = shape
    kwargs = {"n_ops": n_ops, "depth": depth, "candidates": candidates, "width": width,
              "family": family, "snapshot_period": snapshot_period,
              "hidden_resampling": hidden_resampling, "error_allowance": error_allowance}
    episode = _play(kwargs, seed, controller)
    json_choices, json_guesses = _choices(episode.prompts)
    assert _choices(episode.chat) == (json_choices, json_guesses)
    assert _choices(episode.tools) == (json_choices, json_guesses)
    if not hidden_resampling:
        # Positive control: every register is known at every decision, so the oracle is
        # the exact controller wherever the exact controller played.
        assert json_guesses == 0
        if controller == "exact":
            assert json_choices == episode.actions


@pytest.mark.parametrize("kwargs", [{"snapshot_period": 0}, {"snapshot_period": 0,
                                                             "error_allowance": 8}])
def test_the_exact_oracle_plays_a_whole_conversation(kwargs: dict[str, Any]) -> None:
    """Its own answers as the actions: the conversation alone carries it to success."""
    for seed in range(8):
        env = gym.make("StatefulWorkflow-v0", **kwargs)
        spec = env.unwrapped.params
        oracle, speaker = WorkflowOracle(), workflow.WorkflowRenderer(spec)
        observation, info = env.reset(seed=seed)
        messages: Messages = [{"role": "user", "content": speaker.rules("Answer.") + "\n\n"
                               + speaker.opening(observation)}]
        done = False
        while not done:
            reply = oracle(messages)
            answer = json.loads(reply)
            action = np.array([answer["operation"], answer["candidate"]], dtype=np.int64)
            observation, _, done, _, info = env.step(action)
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": speaker.result(action, observation, info)}]
        history = speaker.history
        assert info["success"] and oracle.guesses == 0 and len(history) == spec.n_ops


def _cut(conversation: Messages, keep: int) -> Messages:
    """The head (rules, opening) and the last `keep` exchanges: a window that dropped the
    oldest ones."""
    return conversation[:2] + conversation[2:][len(conversation[2:]) - 2 * keep:]


def test_a_window_cut_conversation_makes_the_oracle_guess() -> None:
    cut_guesses = 0
    for seed in range(20):
        episode = _play({"snapshot_period": 0}, seed)
        assert _choices(episode.chat)[1] == 0
        oracle = WorkflowOracle()
        for k, conversation in enumerate(episode.chat):
            if k >= 3:
                before = oracle.guesses
                op, slot = oracle.choose(_cut(conversation, 1))
                assert (op, slot) == episode.actions[k] or oracle.guesses == before + 1
                assert 0 <= slot < 4
        cut_guesses += oracle.guesses
    assert cut_guesses == 20 * 5  # decisions 4..8 of every episode: each lost calls


def test_tool_messages_without_content_read_as_empty() -> None:
    episode = _play({"snapshot_period": 0}, seed=1)
    conversation = episode.tools[-1]
    assert any(m["content"] is None for m in conversation)
    oracle = WorkflowOracle()
    assert oracle.choose(conversation) == episode.actions[-1] and oracle.guesses == 0


# -- DACSSteering ------------------------------------------------------------------------------
def _dacs_conversations(kwargs: dict[str, Any], seed: int) -> tuple[list[Messages],
                                                                    list[Messages]]:
    """Per decision, the json prompt and the chat conversation so far (dacs-reader's
    evidence rule plays, through the oracle on the json prompt)."""
    env = gym.make("DACSSteering-v0", **kwargs)
    renderer = dacs.DacsRenderer()
    observation, _ = env.reset(seed=seed)
    conversation: Messages = [
        {"role": "system", "content": renderer.rules(dacs.INSTRUCTIONS[
            dacs.INSTRUCTIONS.index(dacs.REPLY_FORMAT):])},
        {"role": "user", "content": renderer.opening(observation)}]
    prompts, conversations = [], []
    oracle = DacsOracle()
    done = False
    while not done:
        prompt = dacs.DacsRenderer().render(observation).messages
        prompts.append(prompt)
        conversations.append(list(conversation))
        reply = oracle(prompt)
        action = json.loads(reply)[dacs.ANSWER_KEY]
        observation, _, done, _, info = env.step(action)
        conversation += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": renderer.result((action,), observation,
                                                                     info)}]
    return prompts, conversations


@pytest.mark.parametrize("kwargs", [{}, {"context_mode": "flat"}, {"family": "cascade"},
                                    {"n_agents": 10, "window": 768}])
def test_the_dacs_oracle_reads_only_the_newest_window(kwargs: dict[str, Any]) -> None:
    for seed in range(5):
        prompts, conversations = _dacs_conversations(kwargs, seed)
        json_oracle, chat_oracle = DacsOracle(), DacsOracle()
        assert [json_oracle.choose(p) for p in prompts] == \
            [chat_oracle.choose(c) for c in conversations]
        assert json_oracle.guesses == chat_oracle.guesses
        for prompt, conversation in zip(prompts, conversations, strict=True):
            assert latest_window(conversation).endswith(prompt[1]["content"].removesuffix(
                "\nYour answer (one JSON object):") + dacs.ANSWER_END)
        # Positive control: read whole, a conversation holds every earlier request's options.
        whole = "\n".join(str(m["content"]) for m in conversations[-1])
        assert len(parse_window(whole).options) == 4 * len(conversations)


def test_dacs_rules_put_the_harness_format_after_the_task() -> None:
    renderer = dacs.DacsRenderer()
    json_format = dacs.INSTRUCTIONS[dacs.INSTRUCTIONS.index(dacs.REPLY_FORMAT):]
    assert renderer.rules(json_format) == dacs.INSTRUCTIONS
    assert renderer.rules("Call answer(option).").endswith("not another agent's. Call "
                                                           "answer(option).")
    assert dacs.DacsRenderer(free_text=True).rules("X") == renderer.rules("X")


def _first_step(kwargs: dict[str, Any], action: Any, seed: int = 0) -> tuple[Any, ...]:
    env = gym.make("DACSSteering-v0", **kwargs)
    renderer = dacs.DacsRenderer(free_text=kwargs.get("scoring") == "keywords")
    observation, _ = env.reset(seed=seed)
    opening = renderer.opening(observation)
    pending = env.unwrapped.pending
    after, _, _, _, info = env.step(action)
    return renderer, opening, pending, after, info


@pytest.mark.parametrize("action", range(4))
def test_a_dacs_result_says_what_was_given_and_never_whether_it_was_right(action: int) -> None:
    renderer, opening, pending, after, info = _first_step({}, action)
    assert opening.endswith(dacs.ANSWER_END)
    text = renderer.result((action,), after, info)
    head = text.split("\n")[0]
    assert head == (f"Given to agent-{pending.requester} for {pending.key}: "
                    f"{pending.options[action]}.")
    assert text == head + "\n" + str(after["window"]) + dacs.ANSWER_END
    # The same text whatever the info says of correctness, and for any form of the action.
    flipped = {**info, "correct": not info["correct"], "contaminated": not info["correct"],
               "failure": None if info["failure"] else "wrong"}
    other, *_ = _first_step({}, action)
    assert other.result(np.array([action]), after, flipped) == text
    assert sum(_first_step({}, a)[4]["correct"] for a in range(4)) == 1


def test_a_free_text_result_leaves_out_the_recorded_value() -> None:
    renderer, _, pending, after, info = _first_step({"scoring": "keywords"}, "no idea")
    text = renderer.result("no idea", after, info)
    assert text.split("\n")[0] == (f"Your reply to agent-{pending.requester} on "
                                   f"{pending.key} was recorded.")


def test_a_focus_result_names_the_agent_loaded() -> None:
    kwargs = {"agent_chosen_focus": True}
    renderer, _, pending, after, info = _first_step(kwargs, dacs.N_OPTIONS + 2)
    assert info["focus"] == 2
    text = renderer.result((dacs.N_OPTIONS + 2,), after, info)
    assert text == ("Loaded the full context of agent-2.\n" + str(after["window"])
                    + dacs.ANSWER_END)
    # The request stays pending: the next result names it.
    assert renderer.result((0,), *_first_step(kwargs, 0)[3:]).startswith(
        f"Given to agent-{pending.requester} for {pending.key}: {pending.options[0]}.")


# -- through the harnesses ----------------------------------------------------------------------
SEEDS = 32


def _harness_run(env_id: str, harness: str, episodes: int = SEEDS, budget: int | None = None,
                 system_role: bool = True, **kwargs: Any) -> tuple[list[Any], Any]:
    """The family's text oracle through LLMPolicy and TextActionWrapper, as a model plays."""
    env = TextActionWrapper(gym.make(env_id, **kwargs))
    oracle = text_family(env).oracle()
    extra = {} if budget is None else {"budget": budget}
    policy = LLMPolicy.for_env(InProcessChat(oracle), env, harness=harness,
                               system_role=system_role, **extra)
    return rollout(env, policy, episodes, seed=0), oracle


def _outcomes(records: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.success, r.calls, r.completed, r.first_failure) for r in records]


@pytest.mark.parametrize("system_role", [True, False])
@pytest.mark.parametrize("harness", CONVERSATION_HARNESSES)
def test_the_oracle_completes_every_history_episode_in_a_conversation(
        harness: str, system_role: bool) -> None:
    records, oracle = _harness_run("StatefulWorkflowHistory-v0", harness,
                                   system_role=system_role)
    assert all(r.success for r in records), [r.first_failure for r in records if not r.success]
    assert oracle.guesses == 0
    assert all(r.counters["schema_valid"] == r.counters["decisions"] == 8 for r in records)


@pytest.mark.parametrize("harness", CONVERSATION_HARNESSES)
@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("StatefulWorkflow-v0", {}),
    ("StatefulWorkflowHidden-v0", {"snapshot_period": 2, "n_ops": 4, "candidates": 2}),
    ("StatefulWorkflowRetry-v0", {"hidden_resampling": True, "snapshot_period": 3}),
])
def test_a_conversation_scores_what_the_json_harness_scores(
        harness: str, env_id: str, kwargs: dict[str, Any]) -> None:
    json_records, json_oracle = _harness_run(env_id, "json", **kwargs)
    records, oracle = _harness_run(env_id, harness, **kwargs)
    assert _outcomes(records) == _outcomes(json_records)
    assert oracle.guesses == json_oracle.guesses
    if env_id == "StatefulWorkflow-v0":
        assert all(r.success for r in records)
    else:  # positive control: these presets hide values, so some episodes are lost
        assert 0 < sum(r.success for r in records) < SEEDS


@pytest.mark.parametrize("harness", CONVERSATION_HARNESSES)
def test_a_window_that_drops_exchanges_makes_the_oracle_guess_through_the_harness(
        harness: str) -> None:
    records, oracle = _harness_run("StatefulWorkflowHistory-v0", harness, budget=1200)
    assert oracle.guesses > 0
    assert any(r.counters["decisions"] for r in records)
    assert sum(r.success for r in records) < SEEDS


@pytest.mark.parametrize("harness", CONVERSATION_HARNESSES)
@pytest.mark.parametrize("kwargs", [{}, {"family": "cascade"}, {"context_mode": "flat",
                                                                 "window": 1024}])
def test_the_dacs_oracle_scores_in_a_conversation_what_it_scores_in_json(
        harness: str, kwargs: dict[str, Any]) -> None:
    json_records, json_oracle = _harness_run("DACSSteering-v0", "json", 10, **kwargs)
    records, oracle = _harness_run("DACSSteering-v0", harness, 10, **kwargs)
    # Only the newest window is read, so dropping old exchanges, or the rules sharing the
    # first user turn, changes nothing either.
    cut, cut_oracle = _harness_run("DACSSteering-v0", harness, 10, budget=2000,
                                   system_role=False, **kwargs)
    assert sum(r.counters["cl100k_prompt_tokens"] for r in cut) < \
        sum(r.counters["cl100k_prompt_tokens"] for r in records) / 2
    for run in (records, cut):
        assert [r.metrics for r in run] == [r.metrics for r in json_records]
    assert oracle.guesses == cut_oracle.guesses == json_oracle.guesses
    if not kwargs:  # dacs-reader's own accuracy, where the window always holds the fact
        reader = dacs_controller("dacs-reader")
        direct = rollout(gym.make("DACSSteering-v0"), reader, 10, seed=0)
        assert oracle.guesses == 0
        assert [r.metrics["accuracy"] for r in records] == \
            [r.metrics["accuracy"] for r in direct]
    if "window" in kwargs:  # positive control: a cut flat window loses facts
        assert oracle.guesses > 0
