"""ChatClient / AsyncChatClient against a real loopback server with scripted faults.

Why these tests: an evaluation run must survive every provider hiccup without losing an
episode, must negotiate the structured-output dialect of whichever server it meets, and must
never leak the API key. Backoff sleeps are injected and recorded, so only the timeout tests
spend real time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import threading
import time
from typing import Any

import pytest

from diagym.llm_policies.client.limits import AdaptiveLimit
from diagym.llm_policies.client.transport import (
    MAX_TOOL_CALLS,
    REDACTED,
    AsyncChatClient,
    ChatClient,
    ChatResult,
    ToolCall,
)
from tests.llm_fake_server import FakeServer, Reply, scripted, tool_call, tool_server

MESSAGES = [{"role": "user", "content": "pick an action"}]
SCHEMA = {
    "type": "object",
    "properties": {"operation": {"type": "integer"}, "candidate": {"type": "integer"}},
    "required": ["operation", "candidate"],
}
SECRET = "sk-test-SECRET-0123456789abcdef"
OK = Reply(content='{"operation": 1, "candidate": 2}')


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def client_for(server: FakeServer, delays: list[float], **kwargs: Any) -> ChatClient:
    return ChatClient(base_url=server.base_url, model="test-model", sleep=delays.append, **kwargs)


def rf_type(request: dict[str, Any]) -> str | None:
    rf = request.get("response_format")
    return rf.get("type") if isinstance(rf, dict) else None


def test_normal_call_returns_text_usage_latency() -> None:
    delays: list[float] = []
    with FakeServer(scripted([], then=OK)) as server, client_for(server, delays) as client:
        result = client.complete(MESSAGES)
    assert isinstance(result, ChatResult)
    assert result.status == "ok" and result.error is None
    assert result.text == '{"operation": 1, "candidate": 2}'
    assert result.http_status == 200
    assert result.prompt_tokens == len("pick an action") // 4
    assert result.completion_tokens == len(result.text) // 4
    assert result.latency_s > 0
    assert result.retries == 0 and delays == []
    assert result.response_format == "none"  # auto without a schema means none
    assert "response_format" not in server.requests[0]


def test_request_carries_model_sampling_and_seed() -> None:
    with FakeServer(scripted([], then=OK)) as server:
        with client_for(server, [], seed=7, temperature=0.3) as client:
            assert client.complete(MESSAGES).status == "ok"
        with client_for(server, []) as client:
            assert client.complete(MESSAGES).status == "ok"
    seeded, unseeded = server.requests
    assert seeded["model"] == "test-model" and seeded["messages"] == MESSAGES
    assert seeded["temperature"] == 0.3 and seeded["max_tokens"] == 64 and seeded["seed"] == 7
    assert unseeded["temperature"] == 0.0 and unseeded["max_tokens"] == 64
    assert "seed" not in unseeded


def test_500_then_200_is_ok_after_one_retry() -> None:
    delays: list[float] = []
    with FakeServer(scripted([Reply(status=500)], then=OK)) as server:
        with client_for(server, delays, backoff=0.5) as client:
            result = client.complete(MESSAGES)
    assert result.status == "ok" and result.retries == 1
    assert len(server.requests) == 2
    assert len(delays) == 1 and 0.5 <= delays[0] <= 0.55


def test_backoff_is_exponential_capped_and_reproducible() -> None:
    runs = []
    for _ in range(2):
        delays: list[float] = []
        replies = [Reply(status=503)] * 4
        with FakeServer(scripted(replies, then=OK)) as server:
            with client_for(server, delays, backoff=0.5, max_backoff=1.5, jitter_seed=3) as c:
                result = c.complete(MESSAGES)
        assert result.status == "ok" and result.retries == 4
        runs.append(delays)
    delays = runs[0]
    assert runs[0] == runs[1]
    assert 0.5 <= delays[0] <= 0.55 and 1.0 <= delays[1] <= 1.1
    assert delays[2] == delays[3] == 1.5


def test_429_honours_retry_after() -> None:
    delays: list[float] = []
    limited = Reply(status=429, headers={"Retry-After": "2"})
    with FakeServer(scripted([limited], then=OK)) as server, client_for(server, delays) as c:
        result = c.complete(MESSAGES)
    assert result.status == "ok" and result.retries == 1
    assert delays == [2.0]


def test_retry_after_is_capped() -> None:
    delays: list[float] = []
    limited = Reply(status=429, headers={"Retry-After": "3600"})
    with FakeServer(scripted([limited], then=OK)) as server:
        with client_for(server, delays, max_retry_after=30.0) as client:
            assert client.complete(MESSAGES).status == "ok"
    assert delays == [30.0]


def test_timeout_is_retried_then_an_error_result() -> None:
    delays: list[float] = []
    with FakeServer(scripted([], then=Reply(delay=1.0, content="late"))) as server:
        with client_for(server, delays, timeout=0.2, max_retries=2) as client:
            started = time.perf_counter()
            result = client.complete(MESSAGES)
            elapsed = time.perf_counter() - started
        assert len(server.requests) == 3
    assert result.status == "error" and result.text == ""
    assert result.error is not None and result.error.startswith("timeout")
    assert result.retries == 2 and len(delays) == 2 and result.http_status is None
    assert elapsed < 2.0


def test_connection_refused_is_an_error_result() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    delays: list[float] = []
    client = ChatClient(
        base_url=f"http://127.0.0.1:{port}/v1/", model="m", max_retries=1, sleep=delays.append
    )
    with client:
        result = client.complete(MESSAGES)
    assert result.status == "error" and result.error is not None
    assert result.error.startswith("connection error") and result.retries == 1


@pytest.mark.parametrize("body", ['{"choices": [{"message": {"content": "tr', '{"id": "x"}', "[]"])
def test_malformed_body_is_retried_then_reported(body: str) -> None:
    delays: list[float] = []
    with FakeServer(scripted([], then=Reply(body=body))) as server:
        with client_for(server, delays, max_retries=2) as client:
            result = client.complete(MESSAGES)
        assert len(server.requests) == 3
    assert result.status == "error" and result.retries == 2
    assert result.error is not None and result.error.startswith("malformed response")


def test_404_is_not_retried() -> None:
    delays: list[float] = []
    with FakeServer(scripted([], then=Reply(status=404))) as server:
        with client_for(server, delays, json_schema=SCHEMA, response_format="json_schema") as c:
            result = c.complete(MESSAGES)
        assert len(server.requests) == 1
    assert result.status == "error" and result.http_status == 404 and result.retries == 0
    assert result.error is not None and result.error.startswith("HTTP 404")
    assert delays == []


def test_auto_negotiates_down_to_json_object_and_remembers() -> None:
    def llama_cpp_python(request: dict[str, Any]) -> Reply:
        if rf_type(request) == "json_schema":
            return Reply(status=500, content="Internal Server Error")
        return OK

    delays: list[float] = []
    with FakeServer(llama_cpp_python) as server:
        with client_for(server, delays, json_schema=SCHEMA) as client:
            first = client.complete(MESSAGES)
            second = client.complete(MESSAGES)
    assert first.status == second.status == "ok"
    assert first.response_format == second.response_format == "json_object"
    assert first.retries == second.retries == 0 and delays == []
    types = [rf_type(r) for r in server.requests]
    assert types == ["json_schema", "json_object", "json_object"]
    assert server.requests[1]["response_format"]["schema"] == SCHEMA


def test_auto_falls_through_to_none_on_format_errors() -> None:
    def plain(request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return Reply(status=400, content="unsupported response_format")
        return OK

    with FakeServer(plain) as server, client_for(server, [], json_schema=SCHEMA) as client:
        result = client.complete(MESSAGES)
    assert result.status == "ok" and result.response_format == "none" and result.retries == 0
    assert [rf_type(r) for r in server.requests] == ["json_schema", "json_object", None]


def test_auto_keeps_a_working_mode_on_a_plain_500() -> None:
    delays: list[float] = []
    replies = [OK, Reply(status=500, content="CUDA out of memory")]
    with FakeServer(scripted(replies, then=OK)) as server:
        with client_for(server, delays, json_schema=SCHEMA) as client:
            client.complete(MESSAGES)
            result = client.complete(MESSAGES)
    assert result.status == "ok" and result.retries == 1 and len(delays) == 1
    assert result.response_format == "json_schema"
    assert [rf_type(r) for r in server.requests] == ["json_schema"] * 3


def test_explicit_json_schema_payload_is_openai_style() -> None:
    with FakeServer(scripted([], then=OK)) as server:
        with client_for(server, [], json_schema=SCHEMA, response_format="json_schema") as c:
            assert c.complete(MESSAGES).response_format == "json_schema"
    assert server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "action", "schema": SCHEMA, "strict": True},
    }


def test_api_key_is_sent_but_never_leaks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    echo = Reply(status=401, content="bad key", echo_headers=True)
    echo_500 = Reply(status=500, echo_headers=True)
    with FakeServer(scripted([echo], then=echo_500)) as server:
        with client_for(server, [], max_retries=1) as client:
            rejected = client.complete(MESSAGES)
            failing = client.complete(MESSAGES)
            text = repr(client)
        assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
        assert server.headers[0].get("Authorization") == f"Bearer {SECRET}"
    assert "test-model" in text and server.base_url in text and SECRET not in text
    for result in (rejected, failing):
        assert result.status == "error" and result.error is not None
        assert "received headers" in result.error  # the echo did reach the client...
        assert SECRET not in str(dataclasses.asdict(result))  # ...but was scrubbed
    assert rejected.retries == 0 and failing.retries == 1


def test_no_authorization_header_without_a_key() -> None:
    with FakeServer(scripted([], then=OK)) as server, client_for(server, []) as client:
        client.complete(MESSAGES)
        assert "authorization" not in server.headers[0]


def test_async_client_bounds_concurrency_and_keeps_call_order() -> None:
    lock = threading.Lock()
    in_flight, peak = [0], [0]

    def slow_echo(request: dict[str, Any]) -> Reply:
        index = int(request["messages"][0]["content"])
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.02 * (6 - index))  # later calls finish sooner
        with lock:
            in_flight[0] -= 1
        return Reply(content=f"answer {index}")

    async def run(base_url: str) -> list[ChatResult]:
        async with AsyncChatClient(base_url=base_url, model="m", concurrency=2) as client:
            calls = [client.complete([{"role": "user", "content": str(i)}]) for i in range(6)]
            return await asyncio.gather(*calls)

    with FakeServer(slow_echo) as server:
        results = asyncio.run(run(server.base_url))
        assert len(server.requests) == 6
    assert [r.text for r in results] == [f"answer {i}" for i in range(6)]
    assert all(r.status == "ok" for r in results)
    assert peak[0] == 2


def test_async_client_retries_with_injected_sleep_and_negotiates() -> None:
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    def responder(request: dict[str, Any]) -> Reply:
        if rf_type(request) == "json_schema":
            return Reply(status=422, content="schema not supported")
        return OK

    flaky = scripted([Reply(status=502)], then=OK)

    async def run(base_url: str) -> list[ChatResult]:
        async with AsyncChatClient(
            base_url=base_url, model="m", json_schema=SCHEMA, sleep=record, concurrency=1
        ) as client:
            return [await client.complete(MESSAGES) for _ in range(2)]

    with FakeServer(lambda r: responder(r) if rf_type(r) == "json_schema" else flaky(r)) as srv:
        first, second = asyncio.run(run(srv.base_url))
    assert first.status == "ok" and first.response_format == "json_object"
    assert first.retries == 1 and len(delays) == 1
    assert second.retries == 0 and second.response_format == "json_object"
    assert [rf_type(r) for r in srv.requests] == [
        "json_schema",
        "json_object",
        "json_object",
        "json_object",
    ]


def test_fake_server_survives_a_client_hanging_up_mid_delay() -> None:
    before = set(threading.enumerate())
    with FakeServer(scripted([], then=Reply(delay=0.5, content="late"))) as server:
        with client_for(server, [], timeout=0.1, max_retries=0) as client:
            assert client.complete(MESSAGES).status == "error"
        started = time.perf_counter()
    assert time.perf_counter() - started < 1.0  # closing did not wait for the delay
    assert server.errors == []
    assert set(threading.enumerate()) <= before  # no handler or serve thread left behind


def test_a_transport_that_answers_in_memory_is_read_like_a_server() -> None:
    """httpx reads a response built from bytes at once (MockTransport): the client must take
    its content as the body rather than fail on a consumed stream."""
    import httpx

    body = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "hello"}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
    transport = httpx.MockTransport(
        lambda _request: httpx.Response(200, content=body,
                                        headers={"Content-Type": "application/json"}))
    client = ChatClient(base_url="http://mock/v1", model="m", transport=transport,
                        response_format="none")
    result = client.complete([{"role": "user", "content": "hi"}])
    assert (result.status, result.text, result.completion_tokens) == ("ok", "hello", 1)


PING = {"type": "function", "function": {"name": "ping", "description": "echo",
                                         "parameters": {"type": "object",
                                                        "properties": {"x": {"type": "integer"}},
                                                        "required": ["x"]}}}


def test_a_call_with_tools_sends_them_and_no_response_format() -> None:
    calls = [tool_call("ping", '{"x": 3}')]
    with FakeServer(scripted([], then=Reply(tool_calls=calls))) as server:
        with client_for(server, [], json_schema=SCHEMA) as client:
            result = client.complete(MESSAGES, tools=[PING])
            assert client.mode == "json_schema"  # the client's own negotiation is untouched
    sent = server.requests[0]
    assert sent["tools"] == [PING] and sent["tool_choice"] == "auto"
    assert "response_format" not in sent and sent["messages"] == MESSAGES
    assert result.status == "ok" and result.text == "" and result.response_format == "tools"
    assert result.tool_calls == (ToolCall(id="call_0", name="ping", arguments='{"x": 3}'),)
    assert result.finish_reason == "tool_calls" and result.truncated is False


def test_a_forced_tool_choice_is_sent_as_given() -> None:
    forced = {"type": "function", "function": {"name": "ping"}}
    with FakeServer(tool_server()) as server:
        with client_for(server, [], tool_choice=forced) as client:
            result = client.complete(MESSAGES, tools=[PING])
    assert server.requests[0]["tool_choice"] == forced
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [("ping", {"x": 1})]


def test_required_names_a_lone_tool_and_stays_required_among_several() -> None:
    pong = {"type": "function", "function": {**PING["function"], "name": "pong"}}
    with FakeServer(tool_server()) as server:
        with client_for(server, [], tool_choice="required") as client:
            client.complete(MESSAGES, tools=[PING])
            client.complete(MESSAGES, tools=[PING, pong])
    assert [r["tool_choice"] for r in server.requests] == [
        {"type": "function", "function": {"name": "ping"}}, "required"]


def test_a_500_on_a_tools_call_is_retried_not_negotiated() -> None:
    delays: list[float] = []
    calls = [tool_call("ping", "{}")]
    with FakeServer(scripted([Reply(status=500, content="schema")],
                             then=Reply(tool_calls=calls))) as server:
        with client_for(server, delays, json_schema=SCHEMA) as client:
            result = client.complete(MESSAGES, tools=[PING])
            assert client.mode == "json_schema"
    assert result.status == "ok" and result.retries == 1 and len(delays) == 1
    assert all("response_format" not in r and r["tools"] == [PING] for r in server.requests)


def test_tool_call_arguments_as_text_or_object_and_odd_entries() -> None:
    calls: list[Any] = [
        tool_call("ping", '{"x": 1}', "a"),
        tool_call("ping", {"x": 2, "y": [1]}, "b"),  # an object: encoded back to JSON text
        {"id": "c", "type": "function", "function": {"arguments": "{}"}},  # no name
        {"id": 4, "type": "function", "function": {"name": 5, "arguments": None}},
        "not a call",  # skipped
        {"id": "e"},  # no function at all
    ]
    with FakeServer(scripted([], then=Reply(tool_calls=calls, content="thinking aloud"))) as srv:
        with client_for(srv, []) as client:
            result = client.complete(MESSAGES, tools=[PING])
    assert result.text == "thinking aloud"
    assert result.tool_calls == (
        ToolCall("a", "ping", '{"x": 1}'),
        ToolCall("b", "ping", json.dumps({"x": 2, "y": [1]})),
        ToolCall("c", "", "{}"),
        ToolCall("", "", ""),
        ToolCall("e", "", ""),
    )


def test_more_than_sixteen_tool_calls_keep_the_first_sixteen() -> None:
    calls = [tool_call("ping", json.dumps({"x": i}), f"c{i}") for i in range(MAX_TOOL_CALLS + 3)]
    with FakeServer(scripted([], then=Reply(tool_calls=calls))) as server:
        with client_for(server, []) as client:
            result = client.complete(MESSAGES, tools=[PING])
    assert MAX_TOOL_CALLS == 16 and result.truncated
    assert [c.id for c in result.tool_calls] == [f"c{i}" for i in range(16)]
    with FakeServer(scripted([], then=Reply(tool_calls=calls[:16]))) as server:  # control
        with client_for(server, []) as client:
            exact = client.complete(MESSAGES, tools=[PING])
    assert len(exact.tool_calls) == 16 and not exact.truncated


def test_tool_call_arguments_are_bounded_like_the_answer() -> None:
    calls = [tool_call("ping", '{"x": "' + "9" * 500 + '"}')]
    with FakeServer(scripted([], then=Reply(tool_calls=calls))) as server:
        with client_for(server, [], max_answer_chars=100) as client:
            result = client.complete(MESSAGES, tools=[PING])
    assert result.truncated and result.tool_calls[0].arguments == calls[0]["function"][
        "arguments"][:100]


def test_null_content_is_an_answer_only_with_tool_calls() -> None:
    with FakeServer(scripted([], then=Reply(tool_calls=[]))) as server:
        with client_for(server, [], max_retries=0) as client:
            body = json.dumps({"choices": [{"message": {"content": None, "tool_calls": []}}]})
            server.responder = scripted([], then=Reply(body=body))
            empty = client.complete(MESSAGES, tools=[PING])
            server.responder = scripted([], then=Reply(tool_calls=[tool_call("ping", "{}")]))
            called = client.complete(MESSAGES)  # without tools too: the call is carried
    assert empty.status == "error" and empty.error_kind == "malformed"
    assert empty.error == "malformed response: null content"
    assert called.status == "ok" and called.text == "" and called.tool_calls[0].name == "ping"


def test_usage_details_model_reasoning_and_finish_reason_are_read() -> None:
    openai = Reply(content="ok", model="gpt-served-2025", reasoning="I think",
                   usage={"prompt_tokens_details": {"cached_tokens": 12}, "cost": 0.0025},
                   finish_reason="length")
    anthropic = Reply(content="ok", usage={"cache_read_input_tokens": 7, "cost": 0})
    odd = Reply(content="ok", usage={"prompt_tokens_details": {"cached_tokens": "12"},
                                     "cost": -1.0})
    nan = Reply(body='{"model": 5, "choices": [{"message": {"content": "ok", "reasoning": "r",'
                     ' "reasoning_content": 3}, "finish_reason": null}], "usage": '
                     '{"cost": NaN, "cache_read_input_tokens": true}}')
    with FakeServer(scripted([openai, anthropic, odd, nan], then=OK)) as server:
        with client_for(server, []) as client:
            first, second, third, fourth = (client.complete(MESSAGES) for _ in range(4))
    assert (first.served_model, first.reasoning, first.finish_reason) == (
        "gpt-served-2025", "I think", "length")
    assert (first.cached_prompt_tokens, first.provider_cost_usd) == (12, 0.0025)
    assert (second.cached_prompt_tokens, second.provider_cost_usd) == (7, 0.0)
    assert second.served_model == "test-model" and second.reasoning is None
    assert (third.cached_prompt_tokens, third.provider_cost_usd) == (None, None)
    assert fourth.status == "ok" and fourth.served_model is None and fourth.reasoning == "r"
    assert (fourth.cached_prompt_tokens, fourth.provider_cost_usd) == (None, None)
    assert fourth.finish_reason is None
    assert first.cache is None and first.cost_usd is None  # the wrappers' fields, not ours


def test_an_error_result_carries_no_reply_fields() -> None:
    with FakeServer(scripted([], then=Reply(status=400, model="x"))) as server:
        with client_for(server, []) as client:
            result = client.complete(MESSAGES, tools=[PING])
    assert result.status == "error" and result.response_format == "tools"
    assert (result.tool_calls, result.served_model, result.finish_reason) == ((), None, None)


def test_secrets_are_scrubbed_from_tool_calls_reasoning_and_model() -> None:
    calls = [tool_call(f"ping{SECRET}", json.dumps({"x": SECRET}), f"id-{SECRET}"),
             tool_call("ping", {"key": SECRET})]
    leaky = Reply(tool_calls=calls, reasoning=f"the key is {SECRET}", model=f"m-{SECRET}")
    with FakeServer(scripted([], then=leaky)) as server:
        with client_for(server, [], api_key=SECRET) as client:
            result = client.complete(MESSAGES, tools=[PING])
    assert SECRET not in json.dumps(dataclasses.asdict(result))
    assert result.tool_calls[0].arguments == json.dumps({"x": REDACTED})
    assert result.tool_calls[0].name == f"ping{REDACTED}"
    assert result.tool_calls[1].arguments == json.dumps({"key": REDACTED})
    assert result.reasoning == f"the key is {REDACTED}" and result.served_model == f"m-{REDACTED}"


class RecordingLimiter:
    def __init__(self, events: list[Any]) -> None:
        self.events = events

    def acquire(self) -> None:
        self.events.append("acquire")

    def release(self, throttled: bool) -> None:
        self.events.append(("release", throttled))


def test_the_limiter_is_held_around_each_attempt_and_sees_429_as_throttled() -> None:
    events: list[Any] = []
    replies = [Reply(status=429, headers={"Retry-After": "1"}), Reply(status=503)]
    with FakeServer(scripted(replies, then=OK)) as server:
        client = ChatClient(base_url=server.base_url, model="m", sleep=events.append,
                            limiter=RecordingLimiter(events))
        with client:
            result = client.complete(MESSAGES)
    assert result.status == "ok" and result.retries == 2
    assert events[:4] == ["acquire", ("release", True), 1.0, "acquire"]
    assert events[4] == ("release", False) and isinstance(events[5], float)
    assert events[6:] == ["acquire", ("release", False)]


def test_an_adaptive_limit_shared_by_clients_narrows_on_429() -> None:
    limit = AdaptiveLimit(4)
    with FakeServer(scripted([Reply(status=429)], then=OK)) as server:
        with client_for(server, [], limiter=limit) as one, client_for(server, [],
                                                                       limiter=limit) as two:
            assert one.complete(MESSAGES).status == "ok"  # 429 then ok: 4 -> 2, 1 success
            assert limit.limit == 2
            assert two.complete(MESSAGES).status == "ok"  # second success: 2 -> 3
    assert limit.snapshot() == {"limit": 3, "max_concurrency": 4, "in_flight": 0,
                                "throttled": 1, "ok": 2}


def test_async_client_speaks_tools_too() -> None:
    async def run(base_url: str) -> ChatResult:
        async with AsyncChatClient(base_url=base_url, model="m", json_schema=SCHEMA) as client:
            return await client.complete(MESSAGES, tools=[PING])

    with FakeServer(tool_server()) as server:
        result = asyncio.run(run(server.base_url))
    assert "response_format" not in server.requests[0] and server.requests[0]["tools"] == [PING]
    assert result.response_format == "tools"
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("ping", '{"x": 1}')]


@pytest.mark.parametrize("tools", [[{"type": "function"}], [{"name": "ping"}], "ping", [3]])
def test_tools_that_are_not_tool_dicts_are_refused(tools: Any) -> None:
    client = ChatClient(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ValueError, match=r'^tools must be a list of OpenAI tool dicts like '
                                         r'\{"type": "function", "function": \{"name": \.\.\., '
                                         r'"parameters": \.\.\.\}\} \(got '):
        client.complete(MESSAGES, tools=tools)


def test_bad_tool_choice_and_limiter_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ValueError) as info:
        ChatClient(base_url="http://127.0.0.1:9/v1", model="m", tool_choice="always")
    assert str(info.value) == ("tool_choice must be one of ('auto', 'required', 'none') or "
                               '{"type": "function", "function": {"name": NAME}} '
                               "(got 'always')")
    with pytest.raises(ValueError, match=r"^limiter must have acquire\(\) and "
                                         r"release\(throttled\) methods"):
        ChatClient(base_url="http://127.0.0.1:9/v1", model="m", limiter=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [10**400, -5, 10**10])
def test_an_impossible_reported_token_count_is_unknown_not_a_crash(count: int) -> None:
    reply = Reply(content='{"operation": 1, "candidate": 2}',
                  usage={"prompt_tokens": count, "completion_tokens": count})
    with FakeServer(scripted([], then=reply)) as server, client_for(server, []) as client:
        result = client.complete(MESSAGES)
    assert result.status == "ok"
    assert result.prompt_tokens is None and result.completion_tokens is None
