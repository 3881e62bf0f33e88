"""The response cache: a repeated request is answered from disk, exactly, and nothing else is.

Why these tests: a cache that answers a request it has not seen (another temperature, other
tools) silently changes an experiment, one that keeps errors freezes a provider hiccup into
every later run, and one that writes a key or crashes on a torn file is worse than none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.llm_policies.client.cache import MAX_ENTRY_BYTES, CachedChat, ResponseCache
from diagym.llm_policies.client.secrets import secret_forms
from diagym.llm_policies.client.transport import ChatClient, ChatResult, ToolCall

MESSAGES = [{"role": "user", "content": "pick an action"}]
TOOLS = [{"type": "function", "function": {"name": "act", "parameters": {"type": "object"}}}]
SECRET = "sk-secret-CACHE-0123456789abcdef"
PASSWORD = "pa55word-in-the-url"


def answer(text: str = '{"operation": 1, "candidate": 2}', **fields: Any) -> ChatResult:
    values: dict[str, Any] = dict(
        text=text, status="ok", error=None, http_status=200, prompt_tokens=31,
        completion_tokens=7, latency_s=1.25, retries=2, response_format="json_schema",
        tool_calls=(ToolCall(id="call_1", name="act", arguments='{"operation": 1}'),),
        served_model="served-1", cached_prompt_tokens=8, provider_cost_usd=0.0125,
        reasoning="thought", finish_reason="stop",
    )
    values.update(fields)
    return ChatResult(**values)


ERROR = ChatResult(text="", status="error", error="HTTP 503: busy", http_status=503,
                   prompt_tokens=None, completion_tokens=None, latency_s=0.5, retries=4,
                   response_format="json_schema", error_kind="http")


class ScriptedChat:
    """A chat model that answers every call with `reply`, counting the calls; `complete`
    takes no `tools` keyword unless `takes_tools`, like models that predate tool calling."""

    def __init__(self, reply: ChatResult | None = None, *, takes_tools: bool = True,
                 **attributes: Any) -> None:
        self.reply = reply or answer()
        self.calls: list[tuple[Any, Any]] = []
        self.model = "m-1"
        self.base_url = "http://127.0.0.1:8080/v1"
        self.temperature = 0.0
        self.max_tokens = 64
        self.seed = 7
        self.json_schema: dict[str, Any] | None = {"type": "object"}
        self.mode = "json_schema"
        self.closed = False
        for name, value in attributes.items():
            setattr(self, name, value)
        if not takes_tools:
            self.complete = self._messages_only  # type: ignore[method-assign]

    def complete(self, messages: list[dict[str, Any]], tools: Any = None) -> ChatResult:
        self.calls.append((messages, tools))
        return self.reply

    def _messages_only(self, messages: list[dict[str, Any]]) -> ChatResult:
        self.calls.append((messages, None))
        return self.reply

    def close(self) -> None:
        self.closed = True


def entry_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


def test_a_repeated_request_is_answered_from_the_cache(tmp_path: Path) -> None:
    inner = ScriptedChat()
    chat = CachedChat(inner, ResponseCache(tmp_path))
    first = chat.complete(MESSAGES, tools=TOOLS)
    second = chat.complete(MESSAGES, tools=TOOLS)
    assert len(inner.calls) == 1
    assert first == dataclasses.replace(inner.reply, cache="miss")
    assert second.cache == "hit" and second.retries == 0 and second.cost_usd == 0.0
    assert second.latency_s >= 0 and second.latency_s != inner.reply.latency_s
    keep = ("latency_s", "retries", "cache", "cost_usd")
    for field in dataclasses.fields(ChatResult):
        if field.name not in keep:
            assert getattr(second, field.name) == getattr(first, field.name), field.name
    assert all(isinstance(call, ToolCall) for call in second.tool_calls)
    stored = json.loads(entry_files(tmp_path)[0].read_text())["value"]
    assert stored["original_latency_s"] == 1.25 and "latency_s" not in stored


VARIANTS = {
    "temperature": ({"temperature": 0.7}, {}),
    "seed": ({"seed": 8}, {}),
    "no seed": ({"seed": None}, {}),
    "max_tokens": ({"max_tokens": 65}, {}),
    "model": ({"model": "m-2"}, {}),
    "json_schema": ({"json_schema": {"type": "array"}}, {}),
    "response_format": ({"mode": "none"}, {}),
    "tools": ({}, {"tools": TOOLS + TOOLS}),
    "no tools": ({}, {"tools": None}),
    "tool_choice": ({"tool_choice": "required"}, {}),
    "messages": ({}, {"messages": [{"role": "user", "content": "pick an action!"}]}),
    "role": ({}, {"messages": [{"role": "system", "content": "pick an action"}]}),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_a_request_that_differs_in_what_decides_the_answer_misses(tmp_path: Path,
                                                                  name: str) -> None:
    cache = ResponseCache(tmp_path)
    base = ScriptedChat()
    CachedChat(base, cache).complete(MESSAGES, tools=TOOLS)
    attributes, call = VARIANTS[name]
    other = ScriptedChat(**attributes)
    result = CachedChat(other, cache).complete(call.get("messages", MESSAGES),
                                               tools=call.get("tools", TOOLS))
    assert result.cache == "miss" and len(other.calls) == 1
    again = ScriptedChat()  # positive control: the unchanged request is still a hit
    assert CachedChat(again, cache).complete(MESSAGES, tools=TOOLS).cache == "hit"
    assert again.calls == []


def test_how_the_model_is_reached_is_not_part_of_the_key(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    CachedChat(ScriptedChat(), cache).complete(MESSAGES)
    elsewhere = ScriptedChat(base_url="https://other.example/v1")
    assert CachedChat(elsewhere, cache).complete(MESSAGES).cache == "hit"


def test_tool_choice_matters_only_with_tools(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    CachedChat(ScriptedChat(tool_choice="auto"), cache).complete(MESSAGES)
    forced = ScriptedChat(tool_choice="required")
    assert CachedChat(forced, cache).complete(MESSAGES).cache == "hit"


def test_the_response_format_setting_is_taken_once_and_can_be_given(tmp_path: Path) -> None:
    inner = ScriptedChat()
    assert CachedChat(inner, ResponseCache(tmp_path)).response_format == "json_schema"
    assert CachedChat(inner, ResponseCache(tmp_path), response_format="auto").response_format \
        == "auto"
    inner.response_format = "json_object"
    assert CachedChat(inner, ResponseCache(tmp_path)).response_format == "json_object"
    chat = CachedChat(ScriptedChat(), ResponseCache(tmp_path), response_format="auto")
    chat.complete(MESSAGES)
    chat.inner.mode = "json_object"  # a negotiating client downgraded: same setting, a hit
    assert chat.complete(MESSAGES).cache == "hit"


def test_an_error_is_not_stored(tmp_path: Path) -> None:
    inner = ScriptedChat(ERROR)
    chat = CachedChat(inner, ResponseCache(tmp_path))
    assert chat.complete(MESSAGES).cache == "miss"
    assert chat.complete(MESSAGES) == dataclasses.replace(ERROR, cache="miss")
    assert len(inner.calls) == 2
    assert entry_files(tmp_path) == []


def test_tools_are_passed_only_when_there_are_some(tmp_path: Path) -> None:
    old = ScriptedChat(takes_tools=False)
    assert CachedChat(old, ResponseCache(tmp_path)).complete(MESSAGES).status == "ok"
    new = ScriptedChat()
    CachedChat(new, ResponseCache(tmp_path / "b")).complete(MESSAGES, tools=TOOLS)
    assert new.calls == [(MESSAGES, TOOLS)]


def test_the_wrapper_forwards_the_models_attributes(tmp_path: Path) -> None:
    inner = ScriptedChat()
    with CachedChat(inner, ResponseCache(tmp_path)) as chat:
        assert (chat.model, chat.base_url, chat.temperature, chat.max_tokens, chat.seed,
                chat.json_schema, chat.mode) == ("m-1", "http://127.0.0.1:8080/v1", 0.0, 64,
                                                 7, {"type": "object"}, "json_schema")
        with pytest.raises(AttributeError):
            _ = chat.no_such_attribute
    assert inner.closed


def torn(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbage(path: Path) -> None:
    path.write_bytes(b"\xff\xfe not json \x00")


def not_an_object(path: Path) -> None:
    path.write_text("[1, 2, 3]")


def oversized(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(MAX_ENTRY_BYTES + 1)


def another_request(path: Path) -> None:
    entry = json.loads(path.read_text())
    entry["request"]["temperature"] = 1.0
    path.write_text(json.dumps(entry))


def not_an_answer(path: Path) -> None:
    entry = json.loads(path.read_text())
    entry["value"]["tool_calls"] = [{"id": "x"}]
    path.write_text(json.dumps(entry))


def too_deep(path: Path) -> None:
    path.write_text("[" * 100_000)


@pytest.mark.parametrize("damage", [torn, garbage, not_an_object, oversized, another_request,
                                    not_an_answer, too_deep])
def test_a_damaged_entry_is_a_miss_and_is_rewritten(tmp_path: Path, damage: Any) -> None:
    inner = ScriptedChat()
    chat = CachedChat(inner, ResponseCache(tmp_path))
    chat.complete(MESSAGES)
    [path] = entry_files(tmp_path)
    assert chat.complete(MESSAGES).cache == "hit"  # positive control: undamaged, a hit
    damage(path)
    assert chat.complete(MESSAGES).cache == "miss"
    assert len(inner.calls) == 2
    assert chat.complete(MESSAGES).cache == "hit"


def test_files_are_0600_and_directories_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        root = tmp_path / "a" / "cache"
        cache = ResponseCache(root)
        CachedChat(ScriptedChat(), cache).complete(MESSAGES)
        cache.put_meta("probe", {"base_url": "x"}, {"modes": ["none"]})
    finally:
        os.umask(old)
    directories = [root, *(p for p in root.rglob("*") if p.is_dir())]
    files = entry_files(root)
    assert len(files) == 2 and len(directories) == 5  # root, 2 fan-outs, meta, meta/probe
    for path in directories:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_files_fan_out_by_the_first_two_hex_digits_of_the_key(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    request = {"b": [1, "é"], "a": None}
    canonical = '{"a":null,"b":[1,"\\u00e9"]}'
    assert cache.key(request) == hashlib.sha256(canonical.encode()).hexdigest()
    assert cache.key({"a": None, "b": [1, "é"]}) == cache.key(request)
    cache.put(request, {"v": 1})
    key = cache.key(request)
    assert entry_files(tmp_path) == [tmp_path / key[:2] / f"{key}.json"]
    assert cache.get(request) == {"v": 1} and cache.get({"a": None}) is None


def test_meta_entries_are_a_namespace_of_their_own(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    request = {"base_url": "http://127.0.0.1:8080/v1"}
    cache.put_meta("probe", request, {"mode": "json_object"})
    assert cache.get_meta("probe", request) == {"mode": "json_object"}
    assert cache.get(request) is None and cache.get_meta("other", request) is None
    cache.put(request, {"answer": 1})
    assert cache.get_meta("probe", request) == {"mode": "json_object"}
    for name in ("", "../up", "Probe", "a/b", "x" * 65):
        with pytest.raises(ValueError) as error:
            cache.get_meta(name, request)
        assert str(error.value) == ("name must be 1-64 characters of a-z, 0-9, '_' and '-', "
                                    f"starting with a letter or digit (got {name!r})")


def test_threads_sharing_one_cache_see_whole_entries(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    values = {i: {"text": "x" * (1000 * i), "i": i} for i in range(8)}
    seen: list[dict[str, Any] | None] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        i = n % 8
        cache.put({"i": i}, values[i])
        got = cache.get({"i": (i + 1) % 8})
        with lock:
            seen.append(got)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(200)))
    assert all(got is None or got == values[got["i"]] for got in seen)
    assert all(cache.get({"i": i}) == values[i] for i in range(8))
    assert not [p for p in entry_files(tmp_path) if p.name.endswith(".tmp")]  # none left


@settings(max_examples=50, deadline=None)
@given(text=st.text(), arguments=st.text(), prompt=st.none() | st.integers(0, 10**9),
       truncated=st.booleans(), reasoning=st.none() | st.text())
def test_a_hit_rebuilds_the_stored_answer_exactly(tmp_path_factory: pytest.TempPathFactory,
                                                  text: str, arguments: str,
                                                  prompt: int | None, truncated: bool,
                                                  reasoning: str | None) -> None:
    reply = answer(text, prompt_tokens=prompt, truncated=truncated, reasoning=reasoning,
                   tool_calls=(ToolCall("c", "act", arguments), ToolCall("d", "b", "")))
    chat = CachedChat(ScriptedChat(reply), ResponseCache(tmp_path_factory.mktemp("c")))
    chat.complete(MESSAGES)
    hit = chat.complete(MESSAGES)
    assert dataclasses.replace(hit, latency_s=1.25, retries=2, cache=None, cost_usd=None) \
        == reply


@pytest.fixture
def echo_transport() -> Iterator[tuple[httpx.MockTransport, list[httpx.Request]]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)  # the answer echoes the credential the client sent
        echo = request.headers["authorization"]
        body = {"choices": [{"message": {"content": f"the key is {echo}"}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
        return httpx.Response(200, json=body)

    yield httpx.MockTransport(handler), seen


def test_no_credential_reaches_a_cache_file(tmp_path: Path, echo_transport: Any) -> None:
    transport, seen = echo_transport
    for i, url in enumerate(("http://127.0.0.1:9/v1", f"http://user:{PASSWORD}@127.0.0.1:9/v1")):
        key = SECRET if i == 0 else None
        with ChatClient(base_url=url, model=f"m{i}", api_key=key, api_key_env="NO_SUCH_KEY_VAR",
                        transport=transport, max_retries=0) as client:
            chat = CachedChat(client, ResponseCache(tmp_path))
            assert chat.complete(MESSAGES).status == "ok"
            assert chat.complete(MESSAGES).cache == "hit"
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"  # the key was in use
    assert seen[1].headers["authorization"].startswith("Basic ")  # and the URL's password
    assert len(seen) == 2
    files = entry_files(tmp_path)
    assert len(files) == 2
    forms = secret_forms(SECRET) | secret_forms(PASSWORD) | secret_forms(f"user:{PASSWORD}")
    for path in files:
        data = path.read_text()
        assert "the key is" in data  # positive control: the answer is in the file
        assert not [form for form in forms if form in data], path


def test_a_cache_the_disk_refuses_warns_once_and_the_calls_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A full disk under --cache-dir stopped the run: a failed cache write now warns once
    and every call still answers, from the model."""
    import errno

    from diagym.controllers import files

    def full(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.tempfile, "mkstemp", full)
    inner = ScriptedChat()
    chat = CachedChat(inner, ResponseCache(tmp_path))
    with caplog.at_level("WARNING", logger="diagym.cache"):
        results = [chat.complete([{"role": "user", "content": f"call {i}"}]) for i in range(3)]
    assert [r.cache for r in results] == ["miss"] * 3 and len(inner.calls) == 3
    assert [r.getMessage() for r in caplog.records if r.name == "diagym.cache"] == [
        f"diagym: warning: the response cache {tmp_path} cannot be written (No space left on "
        "device); the run goes on without storing answers"]
