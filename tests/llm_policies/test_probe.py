"""The capability probe against loopback servers that honour, ignore or refuse each field.

Why these tests: `--harness tools` must be refused before a run on a server that does not do
native tool calls, and the run record must say what the server did. The probe must tell a
refused field from a broken server, never raise for misbehaviour, and say in one line why
it cannot reach a server or use a key.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import pytest

from diagym.llm_policies.client.probe import (
    HARNESS_NEEDS,
    MAX_MODELS_BYTES,
    PING_TOOL,
    PROBE_MAX_TOKENS,
    X_SCHEMA,
    Capabilities,
    ProbeError,
    ProbeRefused,
    check_harness,
    list_models,
    probe,
)
from tests.conftest import scaled
from tests.fault_server import FaultServer
from tests.llm_fake_server import FakeServer, Reply, no_tool_server, scripted, tool_server

KEY = "sk-probe-KEY-0123456789"


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def run_probe(server: FakeServer, model: str = "m", **kwargs: Any) -> Capabilities:
    return probe(base_url=server.base_url, model=model, timeout=5.0, **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_tools_server_honours_everything_and_the_requests_say_why() -> None:
    with FakeServer(tool_server(model="served-7b"), models=["m"]) as server:
        caps = run_probe(server)
    assert caps == Capabilities(json_schema=True, json_object_schema=True, tools=True,
                                seed=True, reasoning=False, served_model="served-7b",
                                notes={"reasoning": "no reply carried reasoning text"})
    assert server.seen[0] == ("GET", "/v1/models")
    plain, schema, obj, tools, seeded = server.requests
    assert all(r["max_tokens"] == PROBE_MAX_TOKENS and r["model"] == "m"
               for r in server.requests)
    assert "response_format" not in plain and "tools" not in plain and "seed" not in plain
    assert schema["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "action", "schema": X_SCHEMA,
                                               "strict": True}}
    assert obj["response_format"] == {"type": "json_object", "schema": X_SCHEMA}
    assert tools["tools"] == [PING_TOOL] and "response_format" not in tools
    assert tools["tool_choice"] == {"type": "function", "function": {"name": "ping"}}
    assert seeded["seed"] == 1 and "response_format" not in seeded


def test_a_server_without_tools_is_told_apart_and_refused_for_the_tools_harness() -> None:
    with FakeServer(no_tool_server(), models=["m"]) as server:
        caps = run_probe(server)
        url = server.base_url
    assert (caps.json_schema, caps.json_object_schema, caps.tools, caps.seed) == (
        False, True, False, True)
    assert caps.notes["json_schema"] == "HTTP 500: Internal Server Error"  # llama-cpp-python
    assert caps.notes["tools"] == "answered without a tool call"
    check_harness(caps, "json", url)
    check_harness(caps, "chat", url)
    with pytest.raises(ProbeRefused) as info:
        check_harness(caps, "tools", url)
    assert str(info.value) == (
        f"--harness tools needs native tool calls; the server at {url} did not honour them "
        "(answered without a tool call); use --harness json or chat")
    assert isinstance(info.value, ValueError)


def test_a_server_that_500s_on_tools_is_a_refusal_with_its_message() -> None:
    def responder(request: dict[str, Any]) -> Reply:
        if "tools" in request:
            return Reply(status=500, content="tools are not supported by this model")
        return tool_server()(request)

    with FakeServer(responder) as server:
        caps = run_probe(server)
        with pytest.raises(ProbeRefused, match=r"\(HTTP 500: tools are not supported by this "
                                               r"model\); use --harness json or chat$"):
            check_harness(caps, "tools", server.base_url)
    assert caps.tools is False and caps.json_schema is True
    assert len(server.requests) == 5  # no retries


def test_a_server_that_refuses_seed() -> None:
    def responder(request: dict[str, Any]) -> Reply:
        if "seed" in request:
            return Reply(status=400, content="Unrecognized request argument supplied: seed")
        return tool_server()(request)

    with FakeServer(responder) as server:
        caps = run_probe(server)
    assert caps.seed is False and caps.tools is True
    assert caps.notes["seed"] == "HTTP 400: Unrecognized request argument supplied: seed"


def test_a_tool_call_of_the_wrong_shape_is_not_honoured() -> None:
    def responder(request: dict[str, Any]) -> Reply:
        if "tools" in request:
            return Reply(tool_calls=[{"id": "c", "type": "function",
                                      "function": {"name": "ping", "arguments": '{"x": "7"}'}}])
        return Reply(content="OK")

    with FakeServer(responder) as server:
        caps = run_probe(server)
    assert caps.tools is False
    assert caps.notes["tools"] == ("the tool call was 'ping' with arguments '{\"x\": \"7\"}', "
                                   "not ping with an integer x")
    assert caps.json_schema is False  # "OK" is no JSON object
    assert caps.notes["json_schema"] == "the reply 'OK' is not a JSON object with an integer x"


def test_reasoning_is_seen_in_any_reply() -> None:
    def responder(request: dict[str, Any]) -> Reply:
        if "seed" in request:
            return Reply(content="OK", reasoning="Let me think.")
        return tool_server()(request)

    with FakeServer(responder) as server:
        caps = run_probe(server)
    assert caps.reasoning is True and "reasoning" not in caps.notes


def test_a_reply_cut_at_the_token_limit_tells_nothing() -> None:
    def responder(request: dict[str, Any]) -> Reply:
        if "response_format" in request or "tools" in request:
            return Reply(content="", reasoning="Hmm, the user wants", finish_reason="length")
        return Reply(content="OK")

    with FakeServer(responder) as server:
        caps = run_probe(server)
    assert (caps.json_schema, caps.json_object_schema, caps.tools) == (None, None, None)
    assert caps.notes["tools"] == (f"answered without a tool call, but the reply was cut at "
                                   f"{PROBE_MAX_TOKENS} tokens")
    assert caps.reasoning is True
    check_harness(caps, "tools", server.base_url)  # unknown is let through


def test_transient_failures_are_unknown_not_refusals() -> None:
    with FakeServer(scripted([], then=Reply(status=503, content="overloaded"))) as server:
        caps = run_probe(server)
    assert (caps.json_schema, caps.json_object_schema, caps.tools, caps.seed,
            caps.reasoning) == (None,) * 5
    assert caps.notes["tools"] == "HTTP 503: overloaded"
    assert caps.notes["reasoning"] == "no request was answered" and caps.served_model is None


def test_a_500_everywhere_is_a_broken_server_not_a_refused_field() -> None:
    with FakeServer(scripted([], then=Reply(status=500, content="boom"))) as server:
        caps = run_probe(server)
    assert caps.tools is None and caps.json_schema is None
    assert caps.notes["json_schema"] == "HTTP 500: boom (the plain request failed too)"


def test_an_unlisted_model_is_noted() -> None:
    with FakeServer(tool_server(), models=["other", "another"]) as server:
        caps = run_probe(server)
    assert caps.notes["model"] == "the server lists 2 model(s), not 'm'"


def test_an_unreachable_server_is_a_probe_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ProbeError) as info:
        probe(base_url=url, model="m", timeout=2.0)
    message = str(info.value)
    assert message.startswith(f"the server at {url} cannot be reached (ConnectError: ")
    assert message.endswith("); check --base-url and that the server is running")


def test_a_refused_key_is_a_probe_error_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeServer(tool_server(), models=["m"], api_key=KEY) as server:
        url = server.base_url
        with pytest.raises(ProbeError) as unset:
            run_probe(server)
        monkeypatch.setenv("MY_KEY", "sk-wrong-key-000000")
        with pytest.raises(ProbeError) as wrong:
            run_probe(server, api_key_env="MY_KEY")
        monkeypatch.setenv("MY_KEY", KEY)
        caps = run_probe(server, api_key_env="MY_KEY")  # positive control: the right key
        assert server.headers[-1]["authorization"] == f"Bearer {KEY}"
    assert str(unset.value) == (f"the server at {url} refused the key (HTTP 401); no key was "
                                "sent: set $OPENAI_API_KEY, or --api-key-env NAME")
    assert str(wrong.value) == f"the server at {url} refused the key (HTTP 401); check $MY_KEY"
    assert caps.tools is True


def test_a_key_refused_on_chat_without_a_models_route() -> None:
    with FakeServer(tool_server(), api_key=KEY) as server:  # GET /models: 501
        with pytest.raises(ProbeError, match=r"refused the key \(HTTP 401\); no key was sent"):
            run_probe(server)
        assert server.seen == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]


def test_list_models_reads_ids_status_and_bounds() -> None:
    with FakeServer(tool_server(), models=["a", "b"]) as listing, \
            FakeServer(tool_server()) as bare:
        assert list_models(listing.base_url, None, 5.0) == (200, {"a", "b"})
        assert list_models(listing.base_url + "/", None, 5.0) == (200, {"a", "b"})
        assert list_models(bare.base_url, None, 5.0) == (501, None)
        assert list_models(listing.base_url.replace("/v1", "/v2"), None, 5.0) == (404, None)
    huge = json.dumps({"data": [{"id": "m" * 1000}] * (MAX_MODELS_BYTES // 1000)})
    nested = json.dumps({"data": [{"id": "m"}] * 20_000})
    for body in (huge, nested, "not json", '{"data": 3}'):
        transport = httpx.MockTransport(lambda _r, body=body: httpx.Response(200, text=body))
        assert list_models("http://mock/v1", None, 5.0, transport=transport) == (200, None)
    with pytest.raises(ValueError, match=r"^base_url needs an http:// or https:// scheme"):
        list_models("ftp://host/v1", None, 5.0)


def test_check_harness_refuses_unknown_harnesses_and_lets_unknowns_through() -> None:
    caps = Capabilities(json_schema=None, json_object_schema=None, tools=None, seed=None,
                        reasoning=None)
    for harness in HARNESS_NEEDS:
        check_harness(caps, harness, "http://127.0.0.1:1/v1")
    with pytest.raises(ValueError) as info:
        check_harness(caps, "xml", "http://127.0.0.1:1/v1")
    assert str(info.value) == "harness must be one of json | tools | chat; got 'xml'"
    assert not isinstance(info.value, ProbeRefused)


def test_capabilities_as_dict_is_plain_json() -> None:
    caps = Capabilities(json_schema=True, json_object_schema=False, tools=None, seed=True,
                        reasoning=False, served_model="s", notes={"tools": "why"})
    assert json.loads(json.dumps(caps.as_dict())) == {
        "json_schema": True, "json_object_schema": False, "tools": None, "seed": True,
        "reasoning": False, "served_model": "s", "notes": {"tools": "why"},
        "reasoning_effort": None}


def test_list_models_ends_at_its_timeout_while_a_server_drips_its_headers() -> None:
    """A header drip (one byte each 0.05 s) never ends a per-read timeout; the wall clock
    does. The server would drip for 120 s."""
    with FaultServer("drip_headers", answer_get=True, lifetime=120.0,
                     max_response_s=120.0) as server:
        start = time.monotonic()
        assert list_models(server.base_url, None, 1.0) == (None, None)
        elapsed = time.monotonic() - start
    assert elapsed < scaled(10.0)
