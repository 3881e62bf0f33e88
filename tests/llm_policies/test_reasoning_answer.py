"""The think-then-act answer (--reasoning-tokens, docs/REASONING.md) on every path, driven
through the command line against a loopback server that reasons: free text then the action,
a reply cut mid-thought, reasoning in a reasoning_content field, a server with OpenAI's
native budget control and one without.

The server's model is the workflow text oracle with a paragraph of thinking written before
its JSON answer, so the positive control is exact: in think-then-act mode every episode
succeeds and each call line holds the oracle's JSON as the response and the paragraph as the
reasoning; the same replies in seed 003's direct mode are invalid_json.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagym.analysis.cli import main
from diagym.envs._core import tokens
from diagym.llm_policies.client.prices import (
    CostedChat,
    CostLimitReached,
    CostMeter,
    Price,
    PriceTable,
)
from diagym.llm_policies.client.results import ChatResult
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from diagym.llm_policies.text_actions import split_reasoned_reply
from tests.llm_fake_server import FakeServer, Reply, tool_call, tool_server

ENV = "StatefulWorkflowHistory-v0"
THOUGHT = ("Let me work out which operation is ready: its prerequisites are done, and the "
           "register values follow from the initial values and the updates.")
FIELDS = (("operation", 4), ("candidate", 2))
ANSWER_TOKENS, REASONING_TOKENS = 40, 200


def _is_probe(request: dict[str, Any]) -> bool:
    text = "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
    return "Task (" not in text


def reasoning_server(answer: Callable[[dict[str, Any], Reply], Reply] | None = None,
                     native: bool = False) -> Callable[[dict[str, Any]], Reply]:
    """The oracle, thinking aloud before its JSON (or through `answer`, given the request
    and that reply); `native`: a server whose model reasons natively when asked for
    reasoning_effort (the probe sees reasoning_content), else one that ignores the field."""
    probe_answers = tool_server()

    def respond(request: dict[str, Any]) -> Reply:
        if _is_probe(request):
            reply = probe_answers(request)
            if native and "reasoning_effort" in request:
                reply = dataclasses.replace(reply, reasoning="thinking")
            return reply
        result = InProcessChat(WorkflowOracle()).complete(request["messages"],
                                                          tools=request.get("tools"))
        if result.tool_calls:
            reply = Reply(content=THOUGHT, tool_calls=[
                tool_call(c.name, c.arguments, c.id) for c in result.tool_calls])
        else:
            reply = Reply(content=f"{THOUGHT}\n{result.text}")
        return answer(request, reply) if answer is not None else reply

    return respond


def _run(server: FakeServer, log: Path, *more: str, episodes: int = 2) -> list[str]:
    return ["run", "--env", ENV, "--policy", "llm", "--base-url", server.base_url,
            "--model", "fake", "--episodes", str(episodes), "--json", "--log", str(log),
            "--max-tokens", str(ANSWER_TOKENS), *more]


def _play(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _calls(log: Path) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, log.read_text().splitlines())
            if line["type"] == "call"]


def _episodes(log: Path) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, log.read_text().splitlines())
            if line["type"] == "episode"]


@pytest.mark.parametrize("harness", ["json", "chat"])
def test_reasoning_then_the_action_plays_as_the_oracle(
        harness: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(), models=["fake"]) as server:
        summary = _play(_run(server, log, "--harness", harness, "--reasoning-tokens",
                             str(REASONING_TOKENS)), capsys)
        played = [r for r in server.requests if not _is_probe(r)]
    assert summary["success"] == 1.0 and summary["model_calls"]["schema_valid_rate"] == 1.0
    calls = _calls(log)
    assert len(calls) == len(played) > 2
    for call in calls:
        assert call["reasoning"] == THOUGHT
        assert split_reasoned_reply(call["response"], FIELDS)[0] == ""  # the action alone
        assert call["cl100k_reasoning_tokens"] == tokens.count(THOUGHT)
        assert (call["cl100k_answer_tokens"] + call["cl100k_reasoning_tokens"]
                == call["cl100k_completion_tokens"])
    # the budget on top of the answer's reserve, as max_tokens (the server has no native one)
    assert {r["max_tokens"] for r in played} == {ANSWER_TOKENS + REASONING_TOKENS}
    assert not any("reasoning_effort" in r for r in played)
    # only the answer instruction changed: it asks for reasoning first
    first = "\n".join(m["content"] for m in played[0]["messages"])
    assert f"at most about {REASONING_TOKENS} tokens" in first
    assert "and nothing else" not in first
    if harness == "chat":  # the conversation keeps each reply's answer, not its thinking
        later = played[-1]["messages"]
        replies = [m["content"] for m in later if m["role"] == "assistant"]
        assert replies and all(THOUGHT not in text for text in replies)
        assert all(text.startswith("{") for text in replies)


@pytest.mark.parametrize("harness", ["json", "chat", "tools"])
def test_the_text_oracle_checks_the_think_then_act_prompt(
        harness: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The harness's self-check reads the think-then-act prompt and answers at once: every
    episode won, nothing counted as reasoning."""
    log = tmp_path / "run.jsonl"
    summary = _play(["run", "--env", ENV, "--policy", "text-oracle", "--episodes", "2",
                     "--harness", harness, "--reasoning-tokens", "64", "--json", "--log",
                     str(log)], capsys)
    assert summary["success"] == 1.0
    calls = _calls(log)
    assert calls and all(c["reasoning_budget"] == 64 and c["cl100k_reasoning_tokens"] == 0
                         for c in calls)
    assert "in two parts" in json.dumps(calls[0]["prompt"])


def test_the_direct_answer_reads_the_same_replies_as_invalid_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(), models=["fake"]) as server:
        summary = _play(_run(server, log, "--response-format", "none"), capsys)
    assert summary["success"] == 0.0
    assert summary["failures"] == {"invalid_json": 2}


def _cut(request: dict[str, Any], reply: Reply) -> Reply:
    return Reply(content="Let me think. Operation 2 needs operation", finish_reason="length")


def _cut_in_reasoning_content(request: dict[str, Any], reply: Reply) -> Reply:
    return Reply(content=None, reasoning="Operation 2 needs operation 0, which",
                 finish_reason="length")


@pytest.mark.parametrize("cut", [_cut, _cut_in_reasoning_content],
                         ids=["in the text", "in reasoning_content"])
def test_a_reply_cut_mid_thought_is_cut_reasoning(
        cut: Callable[..., Reply], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(cut), models=["fake"]) as server:
        summary = _play(_run(server, log, "--reasoning-tokens", "64"), capsys)
    assert summary["failures"] == {"cut_reasoning": 2}
    calls = _calls(log)
    assert [c["action_status"] for c in calls] == ["cut_reasoning"] * 2
    assert all(c["response"] == "" and c["reasoning"] and c["cl100k_reasoning_tokens"] > 0
               for c in calls)


def test_a_cut_reply_is_retried_with_its_category(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = {"cut": True}

    def once(request: dict[str, Any], reply: Reply) -> Reply:
        if first.pop("cut", False):
            return _cut(request, reply)
        return reply

    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(once), models=["fake"]) as server:
        summary = _play(_run(server, log, "--reasoning-tokens", "64", "--invalid-retries", "1",
                             episodes=1), capsys)
        reask = [r for r in server.requests if not _is_probe(r)][1]["messages"]
    assert summary["success"] == 1.0
    assert reask[-1]["content"].startswith("That reply was cut_reasoning: cut at the token "
                                           "limit before its action. Answer again: first your "
                                           "reasoning")


def test_reasoning_content_beside_the_answer_is_logged_as_reasoning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def hidden(request: dict[str, Any], reply: Reply) -> Reply:
        return Reply(content=reply.content.split("\n", 1)[1], reasoning=THOUGHT)

    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(hidden), models=["fake"]) as server:
        summary = _play(_run(server, log, "--reasoning-tokens", "64"), capsys)
    assert summary["success"] == 1.0
    assert all(c["reasoning"] == THOUGHT and c["cl100k_reasoning_tokens"] == tokens.count(THOUGHT)
               for c in _calls(log))


def test_the_tools_harness_keeps_text_before_its_call_as_reasoning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(), models=["fake"]) as server:
        summary = _play(_run(server, log, "--harness", "tools", "--reasoning-tokens", "64"),
                        capsys)
        later = [r for r in server.requests if not _is_probe(r)][-1]["messages"]
    assert summary["success"] == 1.0
    assert all(c["reasoning"] == THOUGHT and c["response"] == "" for c in _calls(log))
    assert all(m["content"] == "" for m in later if m["role"] == "assistant")


def test_a_tools_reply_cut_before_its_call_is_cut_reasoning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(_cut), models=["fake"]) as server:
        summary = _play(_run(server, log, "--harness", "tools", "--reasoning-tokens", "64"),
                        capsys)
    assert summary["failures"] == {"cut_reasoning": 2}


def test_a_native_budget_control_found_by_the_probe_carries_the_budget(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(reasoning_server(native=True), models=["fake"]) as server:
        summary = _play(_run(server, log, "--reasoning-tokens", "2000"), capsys)
        played = [r for r in server.requests if not _is_probe(r)]
    assert summary["success"] == 1.0
    assert summary["run"]["capabilities"]["reasoning_effort"] is True
    assert all("max_tokens" not in r for r in played)
    assert {(r["max_completion_tokens"], r["reasoning_effort"]) for r in played} == {
        (ANSWER_TOKENS + 2000, "medium")}


@pytest.mark.parametrize("decoding", ["json_object", "json_schema", "auto"])
def test_decoding_that_forces_a_bare_object_is_refused(
        decoding: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--env", ENV, "--policy", "llm", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "fake", "--episodes", "1", "--reasoning-tokens", "64",
            "--response-format", decoding]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"diagym run: error: --reasoning-tokens: a think-then-act reply writes its reasoning "
        f"before its JSON object, which --response-format {decoding} forbids (it holds the "
        "reply to a bare object); use --response-format none or leave it out\n")


def test_the_local_default_decoding_is_refused_before_a_server_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--env", ENV, "--policy", "llm", "--local", "qwen0.5b", "--episodes", "1",
            "--reasoning-tokens", "64", "--response-format", "json_object"]
    assert main(argv) == 2
    assert "which --response-format json_object forbids" in capsys.readouterr().err


@given(st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=200),
       st.integers(0, 3), st.integers(0, 1))
def test_the_last_action_object_is_the_answer(thought: str, operation: int,
                                              candidate: int) -> None:
    action = json.dumps({"operation": operation, "candidate": candidate})
    decoy = json.dumps({"operation": 3, "candidate": 0})
    reasoning, found = split_reasoned_reply(f"{thought}{decoy} then {action}\n```", FIELDS)
    assert found == action
    assert reasoning == f"{thought}{decoy} then".strip()
    assert split_reasoned_reply(thought, FIELDS) == (thought.strip(), None)


def test_a_fence_around_the_action_is_not_reasoning() -> None:
    """What the Qwen 0.5B writes when asked to reason first: the fenced object alone."""
    fenced = '```json\n{\n  "operation": 0,\n  "candidate": 2\n}\n```'
    assert split_reasoned_reply(fenced, FIELDS) == (
        "", '{\n  "operation": 0,\n  "candidate": 2\n}')
    assert split_reasoned_reply("Op 0 is ready.\n```json\n" + fenced[8:], FIELDS)[0] == (
        "Op 0 is ready.")


def test_reasoning_tokens_are_priced_as_output() -> None:
    """A reply without usage is priced by cl100k counts, its reasoning as output."""

    class Inner:
        model, max_tokens, reasoning_tokens = "m", 10, 100

        def complete(self, messages: list[dict[str, Any]]) -> ChatResult:
            return ChatResult(text='{"x": 1}', status="ok", error=None, http_status=200,
                              prompt_tokens=None, completion_tokens=None, latency_s=0.0,
                              retries=0, response_format="none", reasoning=THOUGHT)

    prices = PriceTable({"m": Price(input=1.0, cached_input=None, output=1000.0)}, "test", "0")
    ask = [{"role": "user", "content": "hi"}]
    result = CostedChat(Inner(), prices).complete(ask)
    output = tokens.count('{"x": 1}') + tokens.count(THOUGHT)
    assert result.cost_usd == pytest.approx((tokens.count("hi") * 1.0 + output * 1000.0) / 1e6)
    # the limit reserves the reasoning budget too: room for 10 output tokens is not enough
    answer_only = (tokens.count("hi") * 1.0 + 10 * 1000.0) / 1e6
    with pytest.raises(CostLimitReached):
        CostedChat(Inner(), prices, CostMeter(answer_only * 1.5)).complete(ask)
