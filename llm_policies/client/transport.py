"""One OpenAI-compatible chat client for every LLM policy, local server or hosted API.

Why this exists: an evaluation run sends thousands of decisions to llama.cpp's server, vLLM,
Ollama or OpenAI, and each of those differs in small ways (which `response_format` it accepts,
how it signals overload). A policy must not lose an episode to a provider hiccup, so
`complete()` never raises for provider problems: it returns a `ChatResult` with
`status="error"` and a short description, and the caller decides what a failed decision means.
Everything a run needs to report (usage, latency, retries, the structured-output mode that
was actually used) is in the result.

Endpoint: `base_url` is everything before "/chat/completions", i.e. it normally ends in "/v1"
("http://127.0.0.1:8080/v1", "https://api.openai.com/v1"). A trailing "/" is ignored; nothing
is appended or guessed.

Structured output (`response_format`):
  * "json_schema": OpenAI style, `{"type": "json_schema", "json_schema": {"name": "action",
    "schema": ..., "strict": true}}` (OpenAI, vLLM, recent llama.cpp server).
  * "json_object": llama.cpp style, `{"type": "json_object", "schema": ...}` (llama-cpp-python's
    server accepts this and enforces the schema with a grammar; it answers HTTP 500 to the
    OpenAI "json_schema" type).
  * "none": no response_format at all.
  * "auto" (the default; means "none" when `json_schema` is None): negotiate, starting at
    "json_schema". A reply of HTTP 400, 422 or 500 downgrades to the next mode
    (json_schema -> json_object -> none) immediately, without counting a retry and without
    sleeping, when EITHER the error body mentions "response_format", "response format",
    "schema", "json_object" or "grammar", OR the current mode has not yet produced a single
    successful reply on this client (a server that rejects a format usually does so on the
    very first call). The mode that worked is remembered for later calls; downgrades only
    ever move forward. A 500 on a mode that has already worked, without those keywords, is an
    ordinary retryable server error. Cost of the heuristic: a genuinely transient 500 on the
    very first call downgrades one step too far; the result's `response_format` field makes
    that visible.

Native tool calls (`complete(messages, tools=[...])`, OpenAI tool dicts): the payload carries
"tools" and "tool_choice" (the client's `tool_choice`, "auto" by default; the probe forces
one function) and no response_format, and the call takes no part in the negotiation above
(its result's `response_format` is "tools"; the client's mode stays as it was). The reply's
`message.tool_calls` become `ChatResult.tool_calls`: at most `MAX_TOOL_CALLS` (16; more
keep the first 16 and set `truncated`), entries that are not objects skipped, `arguments`
kept as the text the server sent (any other JSON value, an object say, is json.dumps'ed;
missing is ""), a call without a string name keeps name "" (the harness judges calls, the
client only carries them). A reply whose content is null is an answer (text "") when it has
at least one tool call, and malformed otherwise, with or without tools.

What else a 2xx reply says is carried when it is well formed: `served_model` (the body's
"model"), `finish_reason`, `reasoning` (message.reasoning_content or message.reasoning),
`cached_prompt_tokens` (usage.prompt_tokens_details.cached_tokens, or Anthropic-style
usage.cache_read_input_tokens) and `provider_cost_usd` (usage.cost, a finite number >= 0, as
OpenRouter reports it). Anything of the wrong type is None, never an error.

Retries (at most `max_retries` after the first attempt, each with a fresh per-attempt timeout):
  * retryable: HTTP 408, 429 and 5xx (except the negotiation case above), httpx transport
    errors (timeouts, refused or dropped connections, protocol errors) and malformed 2xx
    bodies (not JSON, no choices, no message, null or non-string content). Malformed bodies
    are retried because in practice they come from truncated transfers and overloaded
    proxies, not from deterministic bugs.
  * not retryable: any other status (400, 401, 403, 404, 422, ...), and bodies that would be
    the same again: too large, nested too deeply, or in an encoding that cannot be read.
  * delay before retry k (0-based): min(max_backoff, backoff * 2**k * (1 + 0.1 * u)), with u
    drawn from a `random.Random(jitter_seed)` so that tests see reproducible delays. When the
    response carries `Retry-After` (seconds or an HTTP date) that value is used instead, with
    no jitter, capped at `max_retry_after` (60 s by default; it is deliberately separate from
    max_backoff because a provider's explicit rate-limit window should be respected).

Bounds (every call ends in bounded time and memory, whatever the server sends):
  * `timeout`: wall-clock seconds for one attempt: connecting, sending and every read
    together, not per read, so a server that drips bytes is cut when it runs out.
  * `deadline`: wall-clock seconds for the whole call: every attempt, negotiation step and
    backoff sleep. By default `timeout * (max_retries + 1) + max_backoff * max_retries`. A
    retry that cannot start in time (a long Retry-After, say) is not made; the call returns
    the last error. The sync client enforces both at every socket operation (its own httpcore
    network backend clamps each connect, read and write to the time left); with a `transport`
    of your own or an environment proxy, they are checked between reads. The async client
    cancels the attempt at its end (`asyncio.timeout`). For `AsyncChatClient` the deadline
    starts when the call first gets a connection slot: waiting behind other calls is not
    the provider's time. Name resolution is not bounded by either (use an IP or localhost).
  * `max_response_bytes` (2,000,000 by default): both the bytes received and the bytes they
    decode to (gzip or deflate, decoded here in bounded steps, so a small bomb never expands
    past the limit). A declared Content-Length over the limit is refused before reading.
    Error bodies (non-2xx) are read up to 64 KiB and the rest ignored.
  * JSON nesting deeper than `MAX_JSON_DEPTH` (64) is refused before parsing.
  * `max_answer_chars` (16,000 by default): the answer text is cut to this many characters
    (after scrubbing) and the result says `truncated=True`, so that counting tokens and
    logging stay cheap whatever the server sends. Each tool call's arguments are cut the
    same way (and flag `truncated`), and so is the reasoning text (which does not flag it:
    `truncated` is about the answer). Names, ids, the served model and the finish reason are
    cut to `MAX_FIELD_CHARS` (200).

Failures: every error result carries `error_kind`, one of `ERROR_KINDS`: "timeout" (an
attempt ran out of time), "deadline" (the call did), "connection", "http" (a non-2xx
status, see `http_status`), "too_large", "too_deep", "bad_encoding" (a charset,
Content-Encoding or byte sequence that cannot be read), "malformed" (readable, but not a
chat completion) and "request" (httpx refused to send). Nothing from the server, however
malformed, makes `complete()` raise.

Secrets: the API key is read from `api_key` or the environment variable `api_key_env` (absent
is fine for local servers: then no Authorization header is sent). Credentials in `base_url`
("http://user:pass@host/v1") are sent as HTTP Basic auth when there is no key, and dropped
from `base_url` itself, so `repr()`, `describe()`-style records and httpx's own log lines
never show them. The key and URL credentials are scrubbed (`secrets.scrub`: raw,
percent-encoded, JSON-escaped, base64) from every text the client returns: the answer itself
(a server may echo the key inside a normal answer), tool-call names, ids and arguments, the
reasoning text, the served model, error strings and `repr()`. Other layers
can scrub their own text with `client.scrub(text)`.

Concurrency: `ChatClient` is for one thread. Threaded runs (one client per worker thread)
share a `limiter` between their clients: an object with `acquire()` (blocks) and
`release(throttled)`, held around each HTTP attempt, never during backoff sleeps, and told
`throttled=True` when the attempt got HTTP 429 (`limits.AdaptiveLimit` narrows and widens
the window from that). As for the async client, the deadline starts when the call first gets
through the limiter. `AsyncChatClient` is safe for many concurrent `await complete(...)`
calls within one event loop; `concurrency` bounds the HTTP requests in flight (its semaphore
is held per attempt, not during backoff sleeps); it takes no limiter, since its callers
share one event loop and its semaphore already.

Where each part lives: every knob and its default in client/config.py (`ClientConfig`; a
client takes a config, or its fields as keywords), the result types in client/results.py,
bounded body reading in client/body.py, the clamped network backend in client/deadlines.py,
what a response means in client/replies.py, and the settings, secrets, payload and the one
retry loop both clients drive in client/core.py. This module is the two thin clients: how an
attempt is made and how a backoff sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from diagym.llm_policies.client.body import MAX_JSON_DEPTH, Outcome, Stop
from diagym.llm_policies.client.config import (
    MODES,
    RESPONSE_FORMATS,
    ClientConfig,
    integer_at_least,
    split_base_url,
)
from diagym.llm_policies.client.core import Attempt, ChatCore, Slot, checked_tools
from diagym.llm_policies.client.deadlines import (
    ClampedTransport,
    Clock,
    atimed,
    one_chunk,
    raw_chunks,
    timed,
)
from diagym.llm_policies.client.replies import MAX_TOOL_CALLS
from diagym.llm_policies.client.results import (
    ERROR_KINDS,
    TOOLS_MODE,
    ChatResult,
    Limiter,
    ToolCall,
)
from diagym.llm_policies.client.secrets import REDACTED

DEFAULT_CONCURRENCY = 8  # AsyncChatClient's requests in flight
__all__ = [
    "ERROR_KINDS", "MAX_JSON_DEPTH", "MAX_TOOL_CALLS", "MODES", "REDACTED", "RESPONSE_FORMATS",
    "TOOLS_MODE", "AsyncChatClient", "ChatClient", "ChatResult", "ClientConfig", "Limiter",
    "ToolCall", "split_base_url",
]


class ChatClient(ChatCore):
    """Synchronous client; one instance per thread. See the module docstring for the rules.

    Its settings are a `ClientConfig` (`config`, with any of its fields given as keywords
    replacing the config's); `api_key`, `transport`, `sleep` and `limiter` are what it needs
    at run time besides."""

    def __init__(self, config: ClientConfig | None = None, *, api_key: str | None = None,
                 transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] | None = None,
                 limiter: Limiter | None = None, **settings: Any) -> None:
        super().__init__(ClientConfig.of(config, settings), api_key)
        if limiter is not None and not (callable(getattr(limiter, "acquire", None))
                                        and callable(getattr(limiter, "release", None))):
            raise ValueError(f"limiter must have acquire() and release(throttled) methods, like "
                             f"limits.AdaptiveLimit (got {limiter!r:.100})")
        self.limiter = limiter
        self._sleep = sleep if sleep is not None else time.sleep
        self._clock = Clock()
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._http = httpx.Client(
            timeout=httpx.Timeout(self.timeout),
            transport=transport if transport is not None else ClampedTransport(self._clock,
                                                                               limits),
            headers=self._headers(),
            auth=self._auth,
        )

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> ChatResult:
        """POST one chat completion; never raises for provider or network problems (only
        ValueError for `tools` that are not OpenAI tool dicts)."""
        tools = checked_tools(tools)
        loop = self.calls(tools)
        step = next(loop)
        while True:
            try:
                if isinstance(step, Attempt):
                    with Slot(self.limiter) as slot:
                        outcome = self._attempt(messages, step.mode, tools, step.call.start())
                        slot.throttled = outcome.http_status == 429
                    step = loop.send(outcome)
                else:
                    self._sleep(step)
                    step = loop.send(None)
            except StopIteration as done:
                return done.value

    def _attempt(self, messages: list[dict[str, Any]], mode: str,
                 tools: list[dict[str, Any]] | None, call_end: float) -> Outcome:
        attempt_end = min(time.monotonic() + self.timeout, call_end)
        self._clock.end = attempt_end
        try:
            request = self._http.build_request("POST", self._url,
                                               json=self._payload(messages, mode, tools))
            response = self._http.send(request, stream=True)
            try:
                reader = self._reader(response)
                for chunk in timed(raw_chunks(response), attempt_end):
                    reader.feed(chunk)
                    if reader.full:
                        break
                return self._classify(response, reader.finish(), mode)
            except Stop as stop:
                return dataclasses.replace(stop.outcome, http_status=response.status_code)
            finally:
                response.close()
        except (httpx.HTTPError, httpx.StreamError, TimeoutError) as exc:
            return self._transport_error(exc, attempt_end, call_end)
        finally:
            self._clock.end = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncChatClient(ChatCore):
    """Asyncio client: many concurrent `await complete(...)` calls in one event loop, at most
    `concurrency` HTTP requests in flight; the same config, core and retry loop as
    `ChatClient`. See the module docstring for the rules."""

    def __init__(self, config: ClientConfig | None = None, *, api_key: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None,
                 concurrency: int = DEFAULT_CONCURRENCY, **settings: Any) -> None:
        super().__init__(ClientConfig.of(config, settings), api_key)
        self.concurrency = integer_at_least("concurrency", concurrency, low=1)
        self._sleep = sleep if sleep is not None else asyncio.sleep
        self._semaphore = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout),
            transport=transport,
            headers=self._headers(),
            auth=self._auth,
            limits=limits,
        )

    async def complete(self, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]] | None = None) -> ChatResult:
        """POST one chat completion; never raises for provider or network problems (only
        ValueError for `tools` that are not OpenAI tool dicts)."""
        tools = checked_tools(tools)
        loop = self.calls(tools)
        step = next(loop)
        while True:
            try:
                if isinstance(step, Attempt):
                    async with self._semaphore:
                        outcome = await self._attempt(messages, step.mode, tools,
                                                      step.call.start())
                    step = loop.send(outcome)
                else:
                    await self._sleep(step)
                    step = loop.send(None)
            except StopIteration as done:
                return done.value

    async def _attempt(self, messages: list[dict[str, Any]], mode: str,
                       tools: list[dict[str, Any]] | None, call_end: float) -> Outcome:
        attempt_end = min(time.monotonic() + self.timeout, call_end)
        try:
            async with asyncio.timeout(max(attempt_end - time.monotonic(), 0.0)):
                request = self._http.build_request("POST", self._url,
                                                   json=self._payload(messages, mode, tools))
                response = await self._http.send(request, stream=True)
                try:
                    reader = self._reader(response)
                    chunks = (one_chunk(response.content) if response.is_stream_consumed
                              else response.aiter_raw())
                    async for chunk in atimed(chunks, attempt_end):
                        reader.feed(chunk)
                        if reader.full:
                            break
                    return self._classify(response, reader.finish(), mode)
                except Stop as stop:
                    return dataclasses.replace(stop.outcome, http_status=response.status_code)
                finally:
                    await response.aclose()
        except (httpx.HTTPError, httpx.StreamError, TimeoutError) as exc:
            return self._transport_error(exc, attempt_end, call_end)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncChatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
