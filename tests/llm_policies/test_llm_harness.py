"""The LLM harness end to end against a real loopback HTTP server scripted with faults:
text actions, the LLM policy, the run log and resuming after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym import envs  # noqa: F401
from diagym.controllers.rollout import rollout, rollout_parallel
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.policy import LLMPolicy
from diagym.llm_policies.prompts.workflow import ACTION_SCHEMA
from diagym.llm_policies.text_actions import TEXT_FAILURES, TextActionWrapper, parse_action
from tests.conftest import scaled
from tests.llm_fake_server import FakeServer, Reply

ROOT = Path(__file__).resolve().parents[2]


# -- parsing ---------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children), max_leaves=8)


@given(text=st.text() | json_values.map(json.dumps)
       | st.builds(lambda o, c: json.dumps({"operation": o, "candidate": c}), json_values,
                   json_values))
@settings(max_examples=400, deadline=None)
def test_parser_never_raises_and_answers_a_category(text: str) -> None:
    status, action = parse_action(text, 8, 4)
    assert status in ("ok", *TEXT_FAILURES)
    assert (action is None) == (status != "ok")
    if action is not None:
        assert 0 <= action[0] < 8 and 0 <= action[1] < 4


@pytest.mark.parametrize(("text", "expected"), [
    ('{"operation": 3, "candidate": 1}', ("ok", (3, 1))),
    ('  ```json\n{"candidate": 0, "operation": 7}\n```  ', ("ok", (7, 0))),
    ('{"operation": 3, "candidate": 1', ("invalid_json", None)),
    ("execute(3, 1)", ("invalid_json", None)),
    ('{"operation": 3}', ("invalid_schema", None)),
    ('{"operation": 3, "candidate": 1, "why": "x"}', ("invalid_schema", None)),
    ('{"operation": "3", "candidate": 1}', ("invalid_schema", None)),
    ('{"operation": true, "candidate": 1}', ("invalid_schema", None)),
    ('[3, 1]', ("invalid_schema", None)),
    ('{"operation": 8, "candidate": 1}', ("invalid_action", None)),
    ('{"operation": 0, "candidate": -1}', ("invalid_action", None)),
])
def test_parser_categories(text: str, expected: tuple[str, Any]) -> None:
    assert parse_action(text, 8, 4) == expected


INVALID_ANSWERS = [
    ("I think operation 2", "invalid_json"),
    ('{"op": 1, "slot": 0}', "invalid_schema"),
    ('{"operation": 8, "candidate": 0}', "invalid_action"),
]


@pytest.mark.parametrize(("answer", "category"), INVALID_ANSWERS)
@pytest.mark.parametrize("successes_first", [0, 1, 3])
def test_text_wrapper_ends_the_episode_on_an_invalid_answer(
        answer: str, category: str, successes_first: int) -> None:
    """Right answers (slot read from the simulator) keep the episode going; the first
    invalid answer ends it with its category, executes nothing and counts as a decision."""
    env = TextActionWrapper(gym.make("StatefulWorkflow-v0"))
    assert isinstance(env.action_space, gym.spaces.Text)
    _, info = env.reset(seed=3)
    assert info["decisions"] == 0
    for k in range(1, successes_first + 1):
        ready = int(info["action_mask"][:8].argmax())
        right = env.unwrapped.correct_slot(ready)
        _, reward, terminated, _, info = env.step(
            json.dumps({"operation": ready, "candidate": right}))
        assert not terminated and reward == pytest.approx(1 / 8)
        assert (info["decisions"], info["calls"], info["action_status"]) == (k, k, "ok")
    _, reward, terminated, truncated, info = env.step(answer)
    assert terminated and not truncated and reward == 0.0
    assert info["failure"] == category and info["action_status"] == category
    assert info["decisions"] == successes_first + 1 and not info["success"]
    assert info["calls"] == info["completed_ops"] == successes_first  # nothing executed
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        env.step('{"operation": 0, "candidate": 0}')
    _, info = env.reset(seed=3)  # a new episode starts from zero decisions
    assert info["decisions"] == 0 and info["calls"] == 0


# -- a sweep through faults ------------------------------------------------------------------
FAULTS = [
    Reply(500), Reply(content='{"operation": 0, "candidate": 0}'),
    Reply(429, headers={"Retry-After": "0"}), Reply(content="operation 1 please"),
    Reply(content='{"op": 1, "slot": 0}'),
    Reply(content='{"operation": 42, "candidate": 0}'),
    Reply(body='{"choices": [{"message": {"content": "{\\"operation'),  # truncated body
    Reply(content='{"operation": 1, "candidate": 1}'),
    Reply(delay=0.6, content='{"operation": 2, "candidate": 0}'),  # slower than the timeout
    Reply(content='{"operation": 2, "candidate": 0}'),
    Reply(500), Reply(503), Reply(502),  # more failures than retries: provider_error
    Reply(content='{"operation": 3, "candidate": 2}'),
]


def cycling(replies: list[Reply]) -> Any:
    lock = threading.Lock()
    count = [0]

    def respond(_request: dict[str, Any]) -> Reply:
        with lock:
            reply = replies[count[0] % len(replies)]
            count[0] += 1
        return reply

    return respond


def _policy(server: FakeServer, env: gym.Env, **kwargs: Any) -> LLMPolicy:
    client = ChatClient(base_url=server.base_url, model="fake", timeout=0.3, max_retries=2,
                        backoff=0.0, json_schema=ACTION_SCHEMA, response_format="json_schema",
                        sleep=lambda _s: None)
    return LLMPolicy.for_env(client, env, **kwargs)


def test_a_sweep_through_server_faults_completes_with_every_failure_categorised(
        tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(cycling(FAULTS)) as server:
        env = TextActionWrapper(gym.make("StatefulWorkflow-v0", candidates=4))
        records = rollout(env, _policy(server, env), episodes=24, seed=0, log=log)
    assert len(records) == 24
    seen = {r.first_failure for r in records}
    assert {"invalid_json", "invalid_schema", "invalid_action", "provider_error"} <= seen
    assert seen <= {None, "dependency", "candidate", "completed", "invalid_json",
                    "invalid_schema", "invalid_action", "provider_error"}
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    episodes = [x for x in lines if x["type"] == "episode"]
    calls = [x for x in lines if x["type"] == "call"]
    assert len(episodes) == 24 and len({x["episode_key"] for x in episodes}) == 24
    decisions = sum(r.counters["decisions"] for r in records)
    provider_errors = sum(r.first_failure == "provider_error" for r in records)
    assert len(calls) == decisions + provider_errors
    assert sum(c["retries"] for c in calls) >= 3
    for call in calls:
        if call["status"] == "ok":
            assert call["provider_prompt_tokens"] > 0 and call["cl100k_prompt_tokens"] > 0
            assert call["action_status"] in ("ok", *TEXT_FAILURES)
    keys = {x["episode_key"] for x in episodes}
    assert {c["episode_key"] for c in calls} <= keys


def test_parallel_llm_episodes_share_one_log(tmp_path: Path) -> None:
    answer = Reply(content='{"operation": 0, "candidate": 0}', delay=0.02)
    with FakeServer(cycling([answer])) as server:
        def make_env() -> gym.Env:
            return TextActionWrapper(gym.make("StatefulWorkflow-v0"))

        records = rollout_parallel(make_env, lambda env: _policy(server, env), episodes=16,
                                   seed=5, workers=4, log=tmp_path / "p.jsonl")
    assert [r.episode for r in records] == list(range(16))
    assert [r.task_seed for r in records] == list(range(5, 21))
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert sum(x["type"] == "episode" for x in lines) == 16


def test_the_api_key_never_reaches_the_log(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-123")
    with FakeServer(cycling([Reply(401, content="bad key", echo_headers=True)])) as server:
        env = TextActionWrapper(gym.make("StatefulWorkflow-v0"))
        rollout(env, _policy(server, env), episodes=2, seed=0, log=tmp_path / "k.jsonl")
        assert any("SECRET" in h.get("Authorization", "") for h in server.headers)
    assert "SECRET" not in (tmp_path / "k.jsonl").read_text()


# -- kill -9 and resume ----------------------------------------------------------------------
def _run_cli(base_url: str, log: Path, resume: bool) -> subprocess.Popen:
    command = [sys.executable, "-m", "diagym.analysis.cli", "run", "--env", "StatefulWorkflow-v0",
               "--policy", "llm", "--base-url", base_url, "--model", "fake", "--episodes", "20",
               "--concurrency", "2", "--log", str(log), "--json"]
    if resume:
        command.append("--resume")
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_sigkill_then_resume_leaves_every_episode_exactly_once(tmp_path: Path) -> None:
    log = tmp_path / "killed.jsonl"
    slow = [Reply(content='{"operation": 0, "candidate": 0}', delay=0.15),
            Reply(content='{"operation": 1, "candidate": 0}', delay=0.15)]
    with FakeServer(cycling(slow)) as server:
        process = _run_cli(server.base_url, log, resume=False)
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline:
            if log.exists() and log.read_text().count('"type": "episode"') >= 4:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        before = [json.loads(x) for x in log.read_text().splitlines() if x.endswith("}")]
        finished_before = {x["episode_key"] for x in before if x["type"] == "episode"}
        assert 4 <= len(finished_before) < 20
        resumed = _run_cli(server.base_url, log, resume=True)
        out, err = resumed.communicate(timeout=scaled(120))
    assert resumed.returncode == 0, err.decode()
    assert json.loads(out)["episodes"] == 20
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    keys = [x["episode_key"] for x in lines if x["type"] == "episode"]
    assert len(keys) == 20 and len(set(keys)) == 20
    assert finished_before <= set(keys)


# -- decoding ---------------------------------------------------------------------------------
def test_the_cli_offers_the_clients_response_formats() -> None:
    from diagym.analysis.cli.flags_chat import RESPONSE_FORMATS
    from diagym.llm_policies.client import transport

    assert RESPONSE_FORMATS == transport.RESPONSE_FORMATS


@pytest.mark.parametrize(("setting", "label"), [
    ("json_schema", "constrained"), ("json_object", "constrained"), ("none", "unconstrained"),
    ("auto", "negotiated")])
def test_every_call_line_records_its_decoding(tmp_path: Path, setting: str, label: str) -> None:
    from diagym.llm_policies.policy import decoding

    assert decoding(setting) == label
    log = tmp_path / "decoding.jsonl"
    with FakeServer(cycling([Reply(content='{"operation": 0, "candidate": 0}')])) as server:
        env = TextActionWrapper(gym.make("StatefulWorkflow-v0"))
        client = ChatClient(base_url=server.base_url, model="fake", json_schema=ACTION_SCHEMA,
                            response_format=setting)
        policy = LLMPolicy.for_env(client, env)
        policy_with_setting = LLMPolicy(client, policy.renderer, response_format=setting)
        rollout(env, policy_with_setting, episodes=2, seed=0, log=log)
    assert policy_with_setting.decoding == label
    calls = [json.loads(x) for x in log.read_text().splitlines() if '"type": "call"' in x]
    assert calls
    for call in calls:
        used = call["response_format"]
        assert used in ("json_schema", "json_object", "none")
        assert call["decoding"] == decoding(used)
        if setting != "auto":
            assert used == setting
