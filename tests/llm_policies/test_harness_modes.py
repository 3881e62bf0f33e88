"""The three harnesses (json, chat, tools) on one policy, one runner and one log.

Scripted chat models in this process stand in for a server: each reply is chosen by the test
(a right answer read from the env, or a malformed one), and every request is kept, so the
tests check what was sent (the json harness's prompts against prompts.workflow.render, the
conversations' growth and window) and what each reply became (its failure category, its
re-ask, its call line).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diagym  # noqa: F401  (registers the ids)
from diagym.controllers.rollout import rollout
from diagym.envs._core import tokens
from diagym.llm_policies.client.transport import ChatResult, ToolCall
from diagym.llm_policies.harness import HARNESSES
from diagym.llm_policies.harness.conversation import Conversation, message_tokens
from diagym.llm_policies.policy import COUNTER_KEYS, LLMPolicy
from diagym.llm_policies.prompts.workflow import history_entry, render
from diagym.llm_policies.text_actions import TOOL_FAILURES, TextActionWrapper

Messages = list[dict[str, Any]]
# The call line of a json run as it was before harnesses had names.
JSON_CALL_KEYS = [
    "type", "episode_key", "decision", "prompt", "response", "status", "error", "http_status",
    "action_status", "provider_prompt_tokens", "provider_completion_tokens",
    "cl100k_prompt_tokens", "cl100k_completion_tokens", "latency_s", "retries",
    "response_format", "decoding",
]
NEW_CALL_KEYS = [
    "harness", "tool_calls", "served_model", "cached_prompt_tokens", "provider_cost_usd",
    "cost_usd", "cache", "finish_reason", "reasoning", "dropped_exchanges", "invalid_retry",
    "cl100k_reasoning_tokens", "cl100k_answer_tokens", "provider_reasoning_tokens",
    "reasoning_budget",
]


def reply(text: str = "", calls: tuple[tuple[str, str], ...] = (), **extra: Any) -> ChatResult:
    return ChatResult(text=text, status="ok", error=None, http_status=None, prompt_tokens=None,
                      completion_tokens=None, latency_s=0.0, retries=0, response_format="none",
                      tool_calls=tuple(ToolCall(f"call_{i}", name, arguments)
                                       for i, (name, arguments) in enumerate(calls)), **extra)


class Scripted:
    """A chat model whose reply is `answer(messages, tools)`; it keeps every request."""

    model = "scripted"
    base_url = "in-process"
    temperature = 0.0
    max_tokens = None
    seed = None
    response_format = "none"

    def __init__(self, answer: Callable[[Messages, Any], ChatResult]) -> None:
        self.answer = answer
        self.requests: list[tuple[Messages, Any]] = []

    def complete(self, messages: Messages, tools: Any = None) -> ChatResult:
        self.requests.append((copy.deepcopy(messages), copy.deepcopy(tools)))
        return self.answer(messages, tools)


class TextOnly:
    """A client written before tools existed: complete(messages) and nothing more."""

    model, base_url, temperature, max_tokens, seed = "old", "in-process", 0.0, None, None

    def __init__(self, answer: Callable[[], str]) -> None:
        self.answer = answer

    def complete(self, messages: Messages) -> ChatResult:
        return reply(self.answer())


class Peek(gym.Wrapper):
    """Keeps the core env's last info, so a scripted model can answer right."""

    def reset(self, **kwargs: Any) -> Any:
        observation, self.info = self.env.reset(**kwargs)
        return observation, self.info

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self.info = out[4]
        return out


def workflow_env(env_id: str = "StatefulWorkflowHistory-v0", **kwargs: Any) -> TextActionWrapper:
    return TextActionWrapper(Peek(gym.make(env_id, **kwargs)))


def right(env: TextActionWrapper) -> tuple[int, int]:
    """The smallest ready operation and its correct slot, read from the simulator."""
    core = env.unwrapped
    op = int(np.flatnonzero(env.env.info["action_mask"][: core.params.n_ops])[0])
    return op, core.correct_slot(op)


def right_text(env: TextActionWrapper) -> Callable[[Messages, Any], ChatResult]:
    def answer(messages: Messages, tools: Any) -> ChatResult:
        op, slot = right(env)
        return reply(json.dumps({"operation": op, "candidate": slot}))
    return answer


def right_call(env: TextActionWrapper) -> Callable[[Messages, Any], ChatResult]:
    def answer(messages: Messages, tools: Any) -> ChatResult:
        op, slot = right(env)
        return reply(calls=(("execute", json.dumps({"operation": op, "candidate": slot})),))
    return answer


def call_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines() if '"type": "call"' in x]


def play(env: TextActionWrapper, policy: LLMPolicy, seed: int) -> tuple[list[Any], dict]:
    """One episode step by step; the (observation, info) before each decision, and the
    last info."""
    observation, info = env.reset(seed=seed)
    policy.reset(seed=seed)
    seen = []
    while True:
        seen.append((observation, info))
        observation, _, terminated, truncated, info = env.step(policy.act(observation, info))
        if terminated or truncated:
            return seen, info


# -- json: today's prompts and call lines ------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {}, {"system_role": False},
    {"budget": 1500, "q": 0.25, "coordination": "Check the registers twice."}])
def test_the_json_harness_sends_what_render_renders(kwargs: dict[str, Any]) -> None:
    env = workflow_env("StatefulWorkflow-v0")
    client = Scripted(right_text(env))
    policy = LLMPolicy.for_env(client, env, **kwargs)
    spec = env.unwrapped.params
    observation, info = env.reset(seed=3)
    policy.reset(seed=3)
    history: list[dict[str, Any]] = []
    initial = [int(v) for v in observation["registers"]]
    expected = []
    while True:
        expected.append(render(spec, observation, history, initial=initial, **kwargs).messages)
        action = policy.act(observation, info)
        answer = json.loads(action)
        observation, _, terminated, _, info = env.step(action)
        history.append(history_entry((answer["operation"], answer["candidate"]), info,
                                     observation))
        if terminated:
            break
    assert info["success"] and len(expected) == 8
    assert [messages for messages, _ in client.requests] == expected
    assert all(tools is None for _, tools in client.requests)


def test_json_call_lines_keep_their_fields_and_add_the_new_ones(tmp_path: Path) -> None:
    env = workflow_env("StatefulWorkflow-v0")
    policy = LLMPolicy.for_env(Scripted(right_text(env)), env)
    assert list(policy.describe()) == ["llm", "temperature", "max_tokens", "seed", "renderer",
                                       "budget", "q", "order", "system_role"]
    records = rollout(env, policy, episodes=2, seed=0, log=tmp_path / "json.jsonl")
    assert all(r.success for r in records)
    assert set(records[0].counters) == set(COUNTER_KEYS)
    lines = call_lines(tmp_path / "json.jsonl")
    assert len(lines) == 16
    for line in lines:
        assert set(line) == {*JSON_CALL_KEYS, *NEW_CALL_KEYS}
        assert (line["harness"], line["tool_calls"], line["dropped_exchanges"],
                line["invalid_retry"]) == ("json", [], 0, 0)
        assert line["cl100k_prompt_tokens"] == sum(tokens.count(m["content"])
                                                   for m in line["prompt"])


# -- chat: one conversation per episode -------------------------------------------------------
ANSWER_LINE = ('Answer each turn with exactly one JSON object {"operation": <int>, "candidate": '
               '<int>} and nothing else.')


@pytest.mark.parametrize("system_role", [True, False])
def test_the_chat_conversation_grows_by_one_exchange_per_decision(system_role: bool) -> None:
    env = workflow_env()
    client = Scripted(right_text(env))
    policy = LLMPolicy.for_env(client, env, harness="chat", system_role=system_role)
    _, last = play(env, policy, seed=1)
    assert last["success"]
    sent = [messages for messages, _ in client.requests]
    assert len(sent) == 8
    head = sent[0]
    assert len(head) == (2 if system_role else 1)
    rules = head[0]["content"]
    assert ANSWER_LINE in rules and "History:" not in head[-1]["content"]
    assert "Initial observation (before any call):" in head[-1]["content"]
    for k in range(1, 8):
        assert sent[k][:-2] == sent[k - 1]
        reply_message, result = sent[k][-2:]
        previous = json.loads(reply_message["content"])
        assert reply_message == {"role": "assistant", "content": reply_message["content"]}
        assert result["role"] == "user"
        assert result["content"].startswith(
            f"{k}. execute({previous['operation']}, {previous['candidate']}) -> ok")
        assert "\nObservation:\n" in result["content"]
    roles = [m["role"] for m in sent[-1][len(head) - 1:]]
    assert roles == ["user", "assistant"] * 7 + ["user"]


def expected_window(full: Messages, head: int, budget: int) -> Messages:
    """The window rule, written out on a whole conversation: the head, then the newest
    (assistant, answer) pairs while the contents stay within budget, the newest always."""
    pairs = [full[i:i + 2] for i in range(head, len(full), 2)]
    total = sum(message_tokens(m) for m in full[:head])
    kept: list[Messages] = []
    for pair in reversed(pairs):
        size = sum(message_tokens(m) for m in pair)
        if kept and total + size > budget:
            break
        total += size
        kept.insert(0, pair)
    return full[:head] + [m for pair in kept for m in pair]


@pytest.mark.parametrize("extra", [0, 120, 400, 100_000])
@pytest.mark.parametrize("harness", ["chat", "tools"])
def test_a_budget_keeps_the_head_and_the_newest_exchanges_within_the_window(
        tmp_path: Path, harness: str, extra: int) -> None:
    env = workflow_env()
    answer = right_text(env) if harness == "chat" else right_call(env)
    unbounded = Scripted(answer)
    play(env, LLMPolicy.for_env(unbounded, env, harness=harness), seed=2)
    full = unbounded.requests[-1][0]
    head = 2
    budget = sum(message_tokens(m) for m in full[:head]) + extra
    bounded = Scripted(answer)
    policy = LLMPolicy.for_env(bounded, env, harness=harness, budget=budget)
    assert policy.describe()["window"] == budget == policy.describe()["budget"]
    rollout(env, policy, episodes=1, seed=2, log=tmp_path / "w.jsonl")
    lines = call_lines(tmp_path / "w.jsonl")
    assert len(lines) == 8
    for k, line in enumerate(lines):
        whole = full[:head + 2 * k]
        assert line["prompt"] == expected_window(whole, head, budget)
        assert line["dropped_exchanges"] == k - (len(line["prompt"]) - head) // 2
        assert line["cl100k_prompt_tokens"] == sum(message_tokens(m) for m in line["prompt"])
        newest = sum(message_tokens(m) for m in whole[-2:]) if k else 0
        if budget >= sum(message_tokens(m) for m in whole[:head]) + newest:
            assert line["cl100k_prompt_tokens"] <= budget
    dropped = [line["dropped_exchanges"] for line in lines]
    assert (max(dropped) > 0) == (extra < 100_000)  # the budgets do bind, except the largest


# -- the window rule as such ------------------------------------------------------------------
words = st.text(alphabet="abc xyz\n{}", max_size=60)


@st.composite
def conversations(draw: Any) -> tuple[Conversation, list[Messages]]:
    head = [{"role": "system", "content": draw(words)}, {"role": "user", "content": draw(words)}]
    conversation = Conversation(head)
    exchanges = []
    for i in range(draw(st.integers(0, 8))):
        calls = draw(st.integers(0, 3))
        if calls:
            ids = [f"c{i}_{j}" for j in range(calls)]
            assistant = {"role": "assistant", "content": draw(st.none() | words),
                         "tool_calls": [{"id": x, "type": "function",
                                         "function": {"name": "f", "arguments": draw(words)}}
                                        for x in ids]}
            answers = [{"role": "tool", "tool_call_id": x, "content": draw(words)} for x in ids]
        else:
            assistant = {"role": "assistant", "content": draw(words)}
            answers = [{"role": "user", "content": draw(words)}]
        conversation.add(assistant, *answers)
        exchanges.append([assistant, *answers])
    return conversation, exchanges


@given(pair=conversations(), budget=st.integers(1, 200) | st.none())
@settings(max_examples=300, deadline=None)
def test_the_window_rule(pair: tuple[Conversation, list[Messages]], budget: int | None) -> None:
    conversation, exchanges = pair
    window = conversation.window(budget)
    messages = window.messages
    head_tokens = sum(message_tokens(m) for m in conversation.head)
    sizes = [sum(message_tokens(m) for m in x) for x in exchanges]
    assert messages[:2] == conversation.head
    assert window.text_tokens == sum(message_tokens(m) for m in messages)
    kept = len(exchanges) - window.dropped
    assert messages[2:] == [m for x in exchanges[len(exchanges) - kept:] for m in x]
    if exchanges:
        assert kept >= 1 and messages[-1] == exchanges[-1][-1]  # the newest turn is sent
        if budget is not None and head_tokens + sizes[-1] <= budget:
            assert window.text_tokens <= budget
        if window.dropped:  # nothing older would have fitted
            assert budget is not None and window.text_tokens + sizes[-kept - 1] > budget
    else:
        assert messages == conversation.head and window.dropped == 0
    if budget is None:
        assert window.dropped == 0
    for i, message in enumerate(messages):  # never an orphan tool message
        if message["role"] == "tool":
            j = i
            while messages[j]["role"] == "tool":
                j -= 1
            ids = [c["id"] for c in messages[j].get("tool_calls", [])]
            assert messages[j]["role"] == "assistant" and message["tool_call_id"] in ids


def test_a_window_budget_must_be_a_positive_integer() -> None:
    conversation = Conversation([{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError, match=r"^budget must be an integer >= 1 or None; got 0$"):
        conversation.window(0)


# -- tools: native calls ----------------------------------------------------------------------
EXECUTE = {"type": "function", "function": {
    "name": "execute",
    "description": "Call operation `operation` (0..7) with candidate slot `candidate` (0..3).",
    "parameters": {"type": "object",
                   "properties": {"operation": {"type": "integer", "minimum": 0},
                                  "candidate": {"type": "integer", "minimum": 0}},
                   "required": ["operation", "candidate"], "additionalProperties": False}}}


def test_the_tools_conversation_sends_the_function_and_answers_each_call() -> None:
    env = workflow_env()
    client = Scripted(right_call(env))
    policy = LLMPolicy.for_env(client, env, harness="tools")
    assert policy.describe()["tools"] == ["execute"]
    _, last = play(env, policy, seed=4)
    assert last["success"]
    assert all(tools == [EXECUTE] for _, tools in client.requests)
    sent = [messages for messages, _ in client.requests]
    assert sent[0][0]["content"].endswith(
        "Answer each turn with exactly one function call, execute(operation, candidate), with "
        "integer arguments. A reply in any other form, or with a value out of range, cannot "
        "be executed (no_tool_call, "
        "multiple_tool_calls, unknown_tool, invalid_arguments, invalid_action) and ends the "
        "episode.")
    for k in range(1, 8):
        assert sent[k][:-2] == sent[k - 1]
        call, result = sent[k][-2:]
        arguments = call["tool_calls"][0]["function"]["arguments"]
        assert call == {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "execute", "arguments": arguments}}]}
        assert result["role"] == "tool" and result["tool_call_id"] == "call_0"
        answer = json.loads(arguments)
        assert result["content"].startswith(
            f"{k}. execute({answer['operation']}, {answer['candidate']}) -> ok")


def _call(arguments: str, name: str = "execute") -> tuple[str, str]:
    return name, arguments


MALFORMED = [
    (reply("I would call execute(0, 0)."), "no_tool_call"),
    (reply(calls=(_call('{"operation": 0, "candidate": 0}'),
                  _call('{"operation": 1, "candidate": 0}'))), "multiple_tool_calls"),
    (reply(calls=(_call('{"operation": 0, "candidate": 0}', "run"),)), "unknown_tool"),
    (reply(calls=(_call("operation=0, candidate=0"),)), "invalid_arguments"),
    (reply(calls=(_call('{"op": 0, "candidate": 0}'),)), "invalid_arguments"),
    (reply(calls=(_call('{"operation": 0, "candidate": 0, "why": "x"}'),)),
     "invalid_arguments"),
    (reply(calls=(_call('{"operation": 0.0, "candidate": 0}'),)), "invalid_arguments"),
    (reply(calls=(_call('{"operation": 99, "candidate": 0}'),)), "invalid_action"),
    (reply(calls=(_call('{"operation": 0, "candidate": 4}'),)), "invalid_action"),
]


@pytest.mark.parametrize(("bad", "category"), MALFORMED)
def test_every_malformed_tool_reply_lands_in_its_category(
        tmp_path: Path, bad: ChatResult, category: str) -> None:
    env = workflow_env()
    good = right_call(env)
    client = Scripted(lambda messages, tools: good(messages, tools) if len(messages) == 2
                      else bad)
    records = rollout(env, LLMPolicy.for_env(client, env, harness="tools"), episodes=1,
                      seed=0, log=tmp_path / "bad.jsonl")
    record = records[0]
    assert record.first_failure == category and not record.success
    assert record.completed == record.calls == 1  # the malformed reply executed nothing
    counters = record.counters
    assert counters["decisions"] == 2
    assert counters["schema_valid"] == 1 + (category not in TOOL_FAILURES)
    lines = call_lines(tmp_path / "bad.jsonl")
    assert [line["action_status"] for line in lines] == ["ok", category]
    assert lines[1]["tool_calls"] == [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                      for c in bad.tool_calls]
    assert lines[1]["response"] == bad.text


# -- re-asking after an invalid reply ----------------------------------------------------------
def scripted_sequence(env: TextActionWrapper, first: list[ChatResult],
                      good: Callable[[TextActionWrapper], Any]) -> Scripted:
    """The replies `first`, in order, then right answers."""
    queue = list(first)
    right_now = good(env)
    return Scripted(lambda messages, tools: queue.pop(0) if queue
                    else right_now(messages, tools))


def test_chat_reasks_an_invalid_reply_and_logs_each_ask(tmp_path: Path) -> None:
    env = workflow_env()
    client = scripted_sequence(env, [reply("operation 2 please"), reply('{"op": 1}')],
                               right_text)
    policy = LLMPolicy.for_env(client, env, harness="chat", invalid_retries=2)
    assert (policy.describe()["harness"], policy.describe()["invalid_retries"]) == ("chat", 2)
    record = rollout(env, policy, episodes=1, seed=0, log=tmp_path / "re.jsonl")[0]
    assert record.success and record.calls == 8
    counters = record.counters
    assert (counters["decisions"], counters["schema_valid"], counters["invalid_retries"]) == (
        10, 8, 2)
    lines = call_lines(tmp_path / "re.jsonl")
    assert [x["invalid_retry"] for x in lines] == [0, 1, 2] + [0] * 7
    assert [x["action_status"] for x in lines[:3]] == ["invalid_json", "invalid_schema", "ok"]
    assert [x["decision"] for x in lines] == list(range(10))
    sent = [messages for messages, _ in client.requests]
    assert sent[0][0]["content"].endswith(
        "A reply in any other form, or with a value out of range, cannot be executed "
        "(invalid_json, invalid_schema, invalid_action): you "
        "are told its category and asked again, at most 2 times per turn, and an invalid last "
        "reply ends the episode.")
    assert sent[1] == sent[0] + [
        {"role": "assistant", "content": "operation 2 please"},
        {"role": "user", "content": "That reply was invalid_json: not one JSON object. Answer "
         'again with exactly one JSON object {"operation": <int>, "candidate": <int>} and '
         "nothing else."}]
    assert sent[2][:-2] == sent[1] and sent[2][-2]["content"] == '{"op": 1}'
    assert sent[2][-1]["content"].startswith("That reply was invalid_schema: not exactly")
    assert sent[3][:-2] == sent[2] and sent[3][-1]["content"].startswith("1. execute(")


@pytest.mark.parametrize("harness", HARNESSES)
def test_when_the_reasks_run_out_the_last_reply_ends_the_episode(
        tmp_path: Path, harness: str) -> None:
    env = workflow_env()
    text = harness != "tools"
    bad = [reply("no"),  # no JSON, and no call
           reply('{"operation": 9, "candidate": 0}') if text
           else reply(calls=(_call('{"operation": 9, "candidate": 0}'),))]
    client = scripted_sequence(env, bad, right_text if text else right_call)
    policy = LLMPolicy.for_env(client, env, harness=harness, invalid_retries=1)
    record = rollout(env, policy, episodes=1, seed=0, log=tmp_path / "out.jsonl")[0]
    assert record.first_failure == "invalid_action" and record.calls == 0
    assert (record.counters["decisions"], record.counters["invalid_retries"],
            record.counters["schema_valid"]) == (2, 1, 1)
    lines = call_lines(tmp_path / "out.jsonl")
    first = "invalid_json" if text else "no_tool_call"
    assert [(x["invalid_retry"], x["action_status"]) for x in lines] == [
        (0, first), (1, "invalid_action")]
    assert lines[1]["prompt"][:-2] == lines[0]["prompt"]
    assert lines[1]["prompt"][-1] == {"role": "user", "content": (
        f"That reply was {first}: "
        + ("not one JSON object. Answer again with exactly one JSON object "
           '{"operation": <int>, "candidate": <int>}' if text else
           "no function call. Answer again with exactly one function call, "
           "execute(operation, candidate)")
        + (" and nothing else." if harness == "chat" else "."))}


def test_a_reask_answers_every_call_of_a_reply_with_several() -> None:
    env = workflow_env()
    two = reply(calls=(_call('{"operation": 0, "candidate": 0}'),
                       _call('{"operation": 1, "candidate": 1}')))
    client = scripted_sequence(env, [two], right_call)
    policy = LLMPolicy.for_env(client, env, harness="tools", invalid_retries=1)
    _, last = play(env, policy, seed=0)
    assert last["success"]
    added = client.requests[1][0][len(client.requests[0][0]):]
    assert [m["role"] for m in added] == ["assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in added[1:]] == ["call_0", "call_1"]
    assert all(m["content"].startswith("That reply was multiple_tool_calls: more than one "
                                       "function call.") for m in added[1:])


# -- clients, descriptions, settings ----------------------------------------------------------
@pytest.mark.parametrize("harness", ["json", "chat"])
def test_a_client_without_tools_serves_the_text_harnesses(harness: str) -> None:
    env = workflow_env()
    policy = LLMPolicy.for_env(TextOnly(lambda: json.dumps(dict(zip(
        ("operation", "candidate"), right(env), strict=True)))), env, harness=harness)
    records = rollout(env, policy, episodes=2, seed=0)
    assert all(r.success for r in records)


def test_cost_and_cache_hits_are_counted_per_episode() -> None:
    env = workflow_env()
    good = right_text(env)
    counter = iter(range(1000))

    def answer(messages: Messages, tools: Any) -> ChatResult:
        base = good(messages, tools)
        k = next(counter)
        return reply(base.text, cost_usd=0.5 if k % 2 else None,
                     cache="hit" if k % 4 == 0 else "miss")

    record = rollout(env, LLMPolicy.for_env(Scripted(answer), env, harness="chat"),
                     episodes=1, seed=0)[0]
    assert record.counters["cost_usd"] == pytest.approx(2.0)  # calls 1, 3, 5, 7
    assert record.counters["cache_hits"] == 2  # calls 0 and 4


def test_each_harness_is_its_own_run_identity() -> None:
    env = workflow_env()
    client = Scripted(right_text(env))
    described = [LLMPolicy.for_env(client, env, harness=h).describe() for h in HARNESSES]
    assert len({json.dumps(d, sort_keys=True) for d in described}) == 3
    assert "harness" not in described[0]
    assert LLMPolicy.for_env(client, env, invalid_retries=1).describe()["harness"] == "json"


@pytest.mark.parametrize(("call", "message"), [
    (lambda c, e: LLMPolicy.for_env(c, e, harness="xml"),
     r"^harness must be one of json \| tools \| chat; got 'xml'$"),
    (lambda c, e: LLMPolicy.for_env(c, e, invalid_retries=-1),
     r"^invalid_retries must be an integer >= 0; got -1$"),
    (lambda c, e: LLMPolicy(c, LLMPolicy.for_env(c, e).renderer, harness="tools"),
     r"^tools: the tools harness needs the env's functions"),
    (lambda c, e: LLMPolicy(c, LLMPolicy.for_env(c, e).renderer, window=100),
     r"^window: only the chat and tools harnesses keep a conversation"),
    (lambda c, e: LLMPolicy.for_env(c, e, harness="chat", budget=0),
     r"^budget must be an integer >= 1 or None; got 0$"),
])
def test_bad_settings_are_named(call: Callable[[Any, Any], Any], message: str) -> None:
    env = workflow_env()
    with pytest.raises(ValueError, match=message):
        call(Scripted(right_text(env)), env)


def test_tools_need_an_env_with_functions() -> None:
    env = TextActionWrapper(gym.make("DACSSteering-v0", scoring="keywords"))
    with pytest.raises(ValueError, match=r"^harness 'tools' needs functions to offer; "):
        LLMPolicy.for_env(Scripted(lambda m, t: reply("x")), env, harness="tools")


# -- the prompt-sufficiency control in conversations -------------------------------------------
@pytest.mark.parametrize("harness", ["chat", "tools"])
def test_the_text_oracle_completes_every_history_episode_in_a_conversation(harness: str) -> None:
    """Without snapshots the current registers follow only from the opening's initial values
    and the updates in the results, so 100% says the conversation carries both."""
    from diagym.llm_policies.families import text_family
    from diagym.llm_policies.oracle import InProcessChat

    env = TextActionWrapper(gym.make("StatefulWorkflowHistory-v0"))
    oracle = text_family(env).oracle()
    policy = LLMPolicy.for_env(InProcessChat(oracle), env, harness=harness)
    records = rollout(env, policy, episodes=50, seed=0)
    assert all(r.success for r in records), [r.first_failure for r in records if not r.success]
    assert oracle.guesses == 0
    assert all(r.counters["schema_valid"] == r.counters["decisions"] == 8 for r in records)


@pytest.mark.parametrize("harness", ["chat", "tools"])
def test_the_text_oracle_loses_episodes_when_the_window_drops_the_updates(harness: str) -> None:
    """The control's negative side: a window that keeps only the head and the newest exchange
    loses the earlier updates, and the oracle has to guess."""
    from diagym.llm_policies.families import text_family
    from diagym.llm_policies.oracle import InProcessChat

    env = TextActionWrapper(gym.make("StatefulWorkflowHistory-v0"))
    oracle = text_family(env).oracle()
    policy = LLMPolicy.for_env(InProcessChat(oracle), env, harness=harness, budget=1)
    records = rollout(env, policy, episodes=50, seed=0)
    assert oracle.guesses > 0 and not all(r.success for r in records)


# -- DACSSteering in the conversation harnesses ------------------------------------------------
def test_dacs_focus_and_answer_through_the_tools_harness(tmp_path: Path) -> None:
    """A scripted model that focuses on the requester, then answers right: every focus is
    played as the env's focus action (its cost in the return) and every answer scores."""
    env = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=3, decisions=2,
                                     agent_chosen_focus=True, focus_cost=0.25))
    core = env.unwrapped

    def answer(messages: Messages, tools: Any) -> ChatResult:
        assert [t["function"]["name"] for t in tools] == ["answer", "focus"]
        if len(messages) % 4 == 2:  # the opening, or the result of an answer: focus first
            return reply(calls=(("focus", json.dumps({"agent": core.pending.requester})),))
        return reply(calls=(("answer", json.dumps({"option": core.pending.correct})),))

    client = Scripted(answer)
    policy = LLMPolicy.for_env(client, env, harness="tools")
    record = rollout(env, policy, episodes=1, seed=3, log=tmp_path / "dacs.jsonl")[0]
    assert record.metrics["accuracy"] == 1.0
    assert record.episode_return == pytest.approx(6 * 1.0 - 6 * 0.25)
    assert record.counters["decisions"] == record.counters["schema_valid"] == 12
    last = client.requests[-1][0]
    calls = [m for m in last if m.get("tool_calls")]
    tool_messages = [m for m in last if m["role"] == "tool"]
    assert len(calls) == 11 and [m["tool_call_id"] for m in tool_messages] == [
        m["tool_calls"][0]["id"] for m in calls]


def test_dacs_oracle_scores_alike_in_every_harness() -> None:
    from diagym.llm_policies.families import text_family
    from diagym.llm_policies.oracle import InProcessChat

    accuracy = {}
    for harness in HARNESSES:
        env = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=4))
        policy = LLMPolicy.for_env(InProcessChat(text_family(env).oracle()), env,
                                   harness=harness)
        accuracy[harness] = [r.metrics["accuracy"] for r in rollout(env, policy, 4, seed=0)]
    assert accuracy["chat"] == accuracy["tools"] == accuracy["json"]
    assert min(accuracy["json"]) > 0.5
