"""The chat client against a hostile loopback server (tests/fault_server.py).

Why these tests: a provider, or anything between us and it, can send a decompression bomb, a
body that never ends, JSON nested past the parser's recursion limit, bytes that are not
text, or the API key itself inside an answer. Each call must end in bounded time and memory
with a categorised error (a `provider_error` episode upstream), and the key must reach no
result, log line or file, in any encoding we can recognise.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import re
import resource
import time
import tracemalloc
from pathlib import Path
from typing import Any
from urllib.parse import quote

import gymnasium as gym
import httpx
import pytest

from diagym import envs  # noqa: F401
from diagym.controllers.rollout import rollout
from diagym.llm_policies.client.secrets import REDACTED, redact_url, scrub, secret_forms
from diagym.llm_policies.client.transport import (
    ERROR_KINDS,
    AsyncChatClient,
    ChatClient,
    ChatResult,
)
from diagym.llm_policies.policy import LLMPolicy
from diagym.llm_policies.prompts.workflow import ACTION_SCHEMA
from diagym.llm_policies.text_actions import TEXT_FAILURES, TextActionWrapper, parse_json_action
from tests.fault_server import (
    BOMB_DECODED_BYTES,
    LONG_ANSWER_CHARS,
    FaultServer,
    bomb,
    key_forms,
)
from tests.llm_fake_server import FakeServer, Reply, scripted

MESSAGES = [{"role": "user", "content": "pick an action"}]
# Quote, backslash, plus, slash and equals: every encoding below differs from the raw key.
KEY = 'sk-fault"KEY\\+/=0123456789abcdef'
LIMIT = 2_000_000
RETRIES = 2


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def client_for(server: FaultServer, **kwargs: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "base_url": server.base_url, "model": "m", "api_key": KEY, "timeout": 1.0,
        "deadline": 2.5, "max_retries": RETRIES, "backoff": 0.0, "sleep": lambda _s: None,
        "max_response_bytes": LIMIT, **kwargs,
    }
    return ChatClient(**settings)


def leaks(text: str) -> list[str]:
    """The names of the key's encodings found in `text`."""
    return [name for name, form in key_forms(KEY).items() if form in text]


# mode -> (status, error_kind, requests the server answered, http_status)
EXPECTED: dict[str, tuple[str, str | None, int, int | None]] = {
    "ok": ("ok", None, 1, 200),
    "bomb": ("error", "too_large", 1, 200),
    "oversized": ("error", "too_large", 1, 200),
    "oversized_unannounced": ("error", "too_large", 1, 200),
    "oversized_error": ("error", "http", 1, 400),
    "long_answer": ("ok", None, 1, 200),
    "drip": ("error", "deadline", RETRIES + 1, None),
    "drip_headers": ("error", "deadline", RETRIES + 1, None),
    "deep_200": ("error", "too_deep", 1, 200),
    "deep_500": ("error", "http", RETRIES + 1, 500),
    "deep_answer": ("ok", None, 1, 200),
    "bad_utf8": ("error", "bad_encoding", 1, 200),
    "bad_charset": ("error", "bad_encoding", 1, 200),
    "undefined_charset": ("error", "bad_encoding", 1, 200),
    "punycode_charset": ("error", "bad_encoding", 1, 200),
    "corrupt_gzip": ("error", "bad_encoding", 1, 200),
    "lone_surrogate": ("ok", None, 1, 200),
    "echo_key": ("ok", None, 1, 200),
    "echo_key_401": ("error", "http", 1, 401),
    "status_401": ("error", "http", 1, 401),
    "status_403": ("error", "http", 1, 403),
    "status_404": ("error", "http", 1, 404),
    "reset": ("error", "connection", RETRIES + 1, None),
    "empty_choices": ("error", "malformed", RETRIES + 1, 200),
    "null_content": ("error", "malformed", RETRIES + 1, 200),
}


@pytest.fixture(scope="module", autouse=True)
def _bomb_ready() -> None:
    bomb()  # built once, outside every measurement


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_every_fault_ends_bounded_and_categorised(mode: str) -> None:
    status, kind, requests, http_status = EXPECTED[mode]
    with FaultServer(mode, key=KEY) as server, client_for(server) as client:
        tracemalloc.start()
        started = time.perf_counter()
        try:
            result = client.complete(MESSAGES)
        finally:
            elapsed = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        answered = server.requests
    assert isinstance(result, ChatResult)
    assert (result.status, result.error_kind, answered) == (status, kind, requests)
    assert result.http_status == http_status
    assert elapsed < client.deadline + 2.0
    assert peak < 4 * LIMIT + 4_000_000  # a few copies of the limit at most, never the body
    if status == "error":
        assert result.error_kind in ERROR_KINDS and result.text == ""
        assert result.error and result.error.startswith(
            ("HTTP", "response too large", "deadline", "too deeply nested", "bad encoding",
             "connection error", "malformed response"))
        assert len(result.error) < 400
    assert leaks(json.dumps(dataclasses.asdict(result))) == []


def test_a_decompression_bomb_never_expands_past_the_limit() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with FaultServer("bomb") as server, client_for(server, max_retries=4) as client:
        tracemalloc.start()
        try:
            result = client.complete(MESSAGES)
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert server.requests == 1  # a bomb is not asked for again
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert result.error_kind == "too_large" and result.retries == 0
    assert "decodes to more than 2000000 bytes" in (result.error or "")
    assert len(bomb()) < 1_100_000 and BOMB_DECODED_BYTES == 1 << 30
    assert peak < 3 * LIMIT + 2_000_000
    assert growth < BOMB_DECODED_BYTES // 8


def test_an_oversized_error_body_is_read_only_in_part() -> None:
    with FaultServer("oversized_error") as server, client_for(server) as client:
        tracemalloc.start()
        try:
            result = client.complete(MESSAGES)
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert result.error_kind == "http" and result.http_status == 400
    assert result.error is not None and len(result.error) <= 220
    assert peak < 1_000_000


def test_a_long_answer_is_cut_and_flagged() -> None:
    with FaultServer("long_answer") as server, client_for(server, max_answer_chars=500) as c:
        result = c.complete(MESSAGES)
    assert result.status == "ok" and result.truncated
    assert result.text == "b" * 500 and LONG_ANSWER_CHARS > 500
    with FaultServer("ok") as server, client_for(server) as client:
        assert client.complete(MESSAGES).truncated is False


def test_a_dripping_server_is_cut_at_the_deadline_not_per_read() -> None:
    for mode in ("drip", "drip_headers"):
        with FaultServer(mode) as server:
            with client_for(server, timeout=30.0, deadline=1.0, max_retries=0) as client:
                started = time.perf_counter()
                result = client.complete(MESSAGES)
                elapsed = time.perf_counter() - started
        assert result.error_kind == "deadline", mode
        assert 0.9 <= elapsed < 1.0 + 2.0, mode


def test_the_per_attempt_timeout_is_wall_clock_and_retried() -> None:
    with FaultServer("drip") as server:
        with client_for(server, timeout=0.4, deadline=30.0, max_retries=2) as client:
            started = time.perf_counter()
            result = client.complete(MESSAGES)
            elapsed = time.perf_counter() - started
        assert server.requests == 3
    assert result.error_kind == "timeout" and result.retries == 2
    assert result.error == "timeout: no complete answer within 0.4 s"
    assert elapsed < 3 * 0.4 + 2.0


def test_a_retry_that_cannot_start_in_time_is_not_made() -> None:
    limited = Reply(status=429, headers={"Retry-After": "30"})
    slept: list[float] = []
    with FakeServer(scripted([], then=limited)) as server:
        client = ChatClient(base_url=server.base_url, model="m", deadline=5.0,
                            sleep=slept.append)
        with client:
            result = client.complete(MESSAGES)
        assert len(server.requests) == 1
    assert slept == [] and result.error_kind == "http" and result.http_status == 429
    assert "no time left to retry" in (result.error or "")


def test_the_async_client_is_bounded_the_same_way() -> None:
    async def run(mode: str, **kwargs: Any) -> tuple[ChatResult, float]:
        async def no_sleep(_s: float) -> None:
            return None

        settings: dict[str, Any] = {"model": "m", "api_key": KEY, "timeout": 1.0,
                                    "deadline": 1.5, "max_retries": 1, "backoff": 0.0,
                                    "sleep": no_sleep,
                                    "max_response_bytes": LIMIT, **kwargs}
        with FaultServer(mode, key=KEY) as server:
            async with AsyncChatClient(base_url=server.base_url, **settings) as client:
                started = time.perf_counter()
                result = await client.complete(MESSAGES)
                return result, time.perf_counter() - started

    for mode, kind in [("drip", "deadline"), ("drip_headers", "deadline"),
                       ("bomb", "too_large"), ("deep_200", "too_deep"),
                       ("bad_utf8", "bad_encoding"), ("null_content", "malformed")]:
        result, elapsed = asyncio.run(run(mode))
        assert result.error_kind == kind, mode
        assert elapsed < 1.5 + 2.0, mode
    result, _ = asyncio.run(run("echo_key"))
    assert result.status == "ok" and REDACTED in result.text
    assert leaks(json.dumps(dataclasses.asdict(result))) == []


def test_a_deeply_nested_answer_reaches_the_parser_as_text_and_is_invalid_json() -> None:
    with FaultServer("deep_answer") as server, client_for(server) as client:
        result = client.complete(MESSAGES)
    assert result.status == "ok" and result.text.startswith("[[[")
    fields = (("operation", 8), ("candidate", 4))
    assert parse_json_action(result.text, fields) == ("invalid_json", None)


@pytest.mark.parametrize("body", [
    '"' + '\\"' * 900_000 + "[" * 100,  # an unterminated string full of escaped quotes
    '"ab' * 600_000 + "[" * 100,  # thousands of strings that never close
    "[" * 1_900_000,
])
def test_the_depth_check_is_linear_on_hostile_bodies(body: str) -> None:
    client = ChatClient(base_url="http://127.0.0.1:9/v1", model="m")
    response = httpx.Response(200, headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    outcome = client._parse_ok(response, body.encode())
    assert time.perf_counter() - started < 2.0
    assert outcome.action in ("fail", "retry") and outcome.kind in ("too_deep", "malformed")
    client.close()


def test_lone_surrogates_become_writable_text() -> None:
    with FaultServer("lone_surrogate") as server, client_for(server) as client:
        result = client.complete(MESSAGES)
    assert result.status == "ok" and result.text.startswith("ok ")
    result.text.encode("utf-8")  # would raise UnicodeEncodeError on a lone surrogate


# -- episodes, the run log and every log line ------------------------------------------------
RUN_MODES = [m for m in EXPECTED if m not in ("ok", "long_answer", "lone_surrogate")]


@pytest.mark.parametrize("mode", RUN_MODES)
def test_a_run_through_each_fault_categorises_every_episode_and_writes_no_key(
        mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = tmp_path / "run.jsonl"
    caplog.set_level(logging.DEBUG)
    with FaultServer(mode, key=KEY, max_requests=32) as server:
        client = ChatClient(base_url=server.base_url, model="fault", api_key=KEY, timeout=0.5,
                            deadline=1.0, max_retries=1, backoff=0.0, sleep=lambda _s: None,
                            json_schema=ACTION_SCHEMA, response_format="json_schema")
        env = TextActionWrapper(gym.make("StatefulWorkflow-v0", candidates=4))
        with client:
            started = time.perf_counter()
            records = rollout(env, LLMPolicy.for_env(client, env), episodes=2, seed=0, log=log)
            elapsed = time.perf_counter() - started
    assert len(records) == 2
    provider_side = EXPECTED[mode][0] == "error"
    for record in records:
        if provider_side:
            assert record.first_failure == "provider_error"
        else:
            assert record.first_failure in TEXT_FAILURES
    assert elapsed < 2 * (1.0 + 2.0)
    lines = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
    assert sum(x["type"] == "episode" for x in lines) == 2
    assert sum(x["type"] == "call" for x in lines) >= 2
    written = log.read_text("utf-8") + caplog.text
    assert leaks(written) == []
    assert leaks(json.dumps([dataclasses.asdict(r) for r in records])) == []


def test_credentials_in_the_url_are_used_and_never_shown(
        caplog: pytest.LogCaptureFixture) -> None:
    password = "pa55-word-zyx"
    caplog.set_level(logging.DEBUG)
    with FaultServer("echo_key", key=password) as server:
        url = server.base_url.replace("http://", f"http://alice:{password}@")
        with ChatClient(base_url=url, model="m") as client:
            result = client.complete(MESSAGES)
            shown = (client.base_url, repr(client))
        sent = server.authorization[0]
    assert sent is not None and sent.startswith("Basic ")
    assert result.status == "ok" and REDACTED in result.text
    assert shown[0] == server.base_url and password not in shown[1]
    everything = caplog.text + json.dumps(dataclasses.asdict(result)) + " ".join(shown)
    assert password not in everything and sent.removeprefix("Basic ") not in everything


# -- settings that cannot work -----------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "name"), [
    ({"timeout": 0}, "timeout"),
    ({"timeout": -1.0}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
    ({"timeout": float("inf")}, "timeout"),
    ({"deadline": 0}, "deadline"),
    ({"max_response_bytes": 0}, "max_response_bytes"),
    ({"max_answer_chars": 0}, "max_answer_chars"),
    ({"max_retries": -1}, "max_retries"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"temperature": -0.5}, "temperature"),
    ({"backoff": -1}, "backoff"),
    ({"base_url": "127.0.0.1:8080/v1"}, "base_url"),
    ({"base_url": "http://"}, "base_url"),
    ({"base_url": "ftp://host/v1"}, "base_url"),
    ({"base_url": "http://host/v1?key=1"}, "base_url"),
    ({"base_url": "http://[::1/v1"}, "base_url"),
    ({"model": ""}, "model"),
    ({"api_key": "sk bad key"}, "API key"),
    ({"timeout": True}, "timeout"),
])
def test_settings_that_cannot_work_are_refused_naming_the_parameter(
        kwargs: dict[str, Any], name: str) -> None:
    settings = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError) as raised:
        ChatClient(**settings)
    message = str(raised.value)
    assert name in message and "\n" not in message
    assert "sk bad key" not in message


def test_a_malformed_url_with_credentials_is_refused_without_showing_them() -> None:
    with pytest.raises(ValueError, match="base_url") as raised:
        ChatClient(base_url="ftp://bob:hunter2-secret@host/v1", model="m")
    assert "hunter2-secret" not in str(raised.value)


def test_numpy_numbers_and_a_key_with_a_newline_are_accepted() -> None:
    import numpy as np

    client = ChatClient(base_url="http://127.0.0.1:9/v1", model="m", timeout=np.float64(2.5),
                        max_retries=np.int64(1), api_key=KEY + "\n")
    assert client.timeout == 2.5 and client.max_retries == 1
    assert client.scrub(KEY) == REDACTED
    client.close()


def test_async_client_refuses_bad_concurrency() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        AsyncChatClient(base_url="http://127.0.0.1:9/v1", model="m", concurrency=0)


# -- the scrubber --------------------------------------------------------------------------------
def test_scrub_removes_every_encoding_it_names() -> None:
    forms = key_forms(KEY)
    lower_hex = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), forms["url"])
    text = " ; ".join(forms.values()) + " ; " + lower_hex
    cleaned = scrub(text, [KEY])
    assert leaks(cleaned) == [] and lower_hex not in cleaned
    assert cleaned.count(REDACTED) == len(forms) + 1
    assert set(forms.values()) - {forms["joined_upper"]} <= secret_forms(KEY)


def test_scrub_leaves_short_secrets_and_other_text_alone() -> None:
    assert scrub('{"operation": 1}', ["1", None, ""]) == '{"operation": 1}'
    assert scrub("nothing here", [KEY]) == "nothing here"


def test_percent_encoded_url_credentials_are_scrubbed_decoded_too() -> None:
    client = ChatClient(base_url="http://bob:s%40cret-pass@127.0.0.1:9/v1", model="m")
    assert client.base_url == "http://127.0.0.1:9/v1"
    assert client.scrub("s@cret-pass s%40cret-pass") == f"{REDACTED} {REDACTED}"
    client.close()


def test_redact_url_drops_userinfo_only() -> None:
    assert redact_url("https://u:p@api.example.com:8443/v1") == "https://api.example.com:8443/v1"
    assert redact_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    assert redact_url("http://tok@[::1]/v1") == "http://[::1]/v1"


def test_a_flood_of_tool_calls_echoing_the_key_stays_bounded_and_scrubbed() -> None:
    """A server may answer with thousands of tool calls, each carrying the key in another
    encoding: the result keeps 16 calls, each argument bounded, and no form of the key."""
    forms = list(key_forms(KEY).values())
    calls = [{"id": f"c{i}-{forms[i % len(forms)]}", "type": "function",
              "function": {"name": forms[(i + 1) % len(forms)],
                           "arguments": {"k": forms[i % len(forms)], "pad": "x" * 300}}}
             for i in range(3_000)]
    body = json.dumps({"model": KEY, "choices": [{"message": {
        "content": None, "tool_calls": calls, "reasoning_content": " ".join(forms)}}]})
    assert len(body) < LIMIT
    with FakeServer(scripted([], then=Reply(body=body))) as server:
        with client_for(server, max_answer_chars=200) as client:
            result = client.complete(MESSAGES, tools=[{"type": "function",
                                                       "function": {"name": "f"}}])
    assert result.status == "ok" and result.truncated and len(result.tool_calls) == 16
    assert all(len(c.arguments) <= 200 for c in result.tool_calls)
    assert leaks(json.dumps(dataclasses.asdict(result))) == []
    assert result.served_model == REDACTED


def test_scrub_catches_the_key_in_any_letter_case_and_joined_to_words() -> None:
    key = "sk-Probe-0123456789abcdef"
    echoed = (f"ok{key.upper()}ok {key.lower()} "
              f"{base64.b64encode(key.upper().encode()).decode()} {quote(key.upper(), safe='')}")
    cleaned = scrub(echoed, [key])
    assert "PROBE" not in cleaned.upper() and "0123456789ABCDEF" not in cleaned.upper()
    assert cleaned.startswith(f"ok{REDACTED}ok {REDACTED} ")
