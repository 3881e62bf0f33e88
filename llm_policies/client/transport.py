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
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import email.utils
import json
import math
import numbers
import os
import random
import re
import threading
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import httpcore
import httpx

from llm_policies.client.secrets import REDACTED, redact_url, scrub, url_secrets

MODES = ("json_schema", "json_object", "none")
RESPONSE_FORMATS = ("auto", *MODES)
NEGOTIATION_STATUSES = frozenset({400, 422, 500})
NEGOTIATION_WORDS = ("response_format", "response format", "schema", "json_object", "grammar")
RETRYABLE_STATUSES = frozenset({408, 429})
ERROR_KINDS = (
    "timeout", "deadline", "connection", "http", "too_large", "too_deep", "bad_encoding",
    "malformed", "request",
)
MAX_ERROR_CHARS = 200
MAX_ERROR_BODY_BYTES = 65_536
MAX_JSON_DEPTH = 64
DEFAULT_MAX_RESPONSE_BYTES = 2_000_000
DEFAULT_MAX_ANSWER_CHARS = 16_000
MAX_TOOL_CALLS = 16
MAX_FIELD_CHARS = 200
TOOLS_MODE = "tools"  # the response_format a call with tools records
TOOL_CHOICES = ("auto", "required", "none")
ACCEPT_ENCODING = "gzip, deflate"
__all__ = [
    "ERROR_KINDS", "MAX_JSON_DEPTH", "MAX_TOOL_CALLS", "REDACTED", "TOOLS_MODE",
    "AsyncChatClient", "ChatClient", "ChatResult", "Limiter", "ToolCall", "split_base_url",
]

# A string token with an optional closing quote and possessive repeats: an unterminated string
# runs to the end instead of being retried from every later quote, so the scan stays linear.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One native tool call of a reply: `arguments` is the raw JSON text the server sent (an
    object a server sent as JSON is encoded back to text), judged by the harness."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one `complete()` call; `text` is "" whenever `status` is "error".

    `truncated`: the answer was longer than `max_answer_chars` and `text` is its beginning.
    `error_kind`: one of `ERROR_KINDS` for an error, None for an answer.
    """

    text: str
    status: Literal["ok", "error"]
    error: str | None
    http_status: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    retries: int
    response_format: str
    truncated: bool = False
    error_kind: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    served_model: str | None = None
    cached_prompt_tokens: int | None = None
    provider_cost_usd: float | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    cache: str | None = None  # None: no cache in use; "hit" or "miss" (client/cache.py)
    cost_usd: float | None = None  # set by client/prices.py's CostedChat; None: unknown


class Limiter(Protocol):
    """What `ChatClient(limiter=...)` holds around each HTTP attempt (limits.AdaptiveLimit)."""

    def acquire(self) -> None: ...

    def release(self, throttled: bool) -> None: ...


@dataclass(frozen=True)
class _Answer:
    """What a well-formed 2xx reply says besides its text (the ChatResult fields it fills)."""

    tool_calls: tuple[ToolCall, ...] = ()
    served_model: str | None = None
    cached_prompt_tokens: int | None = None
    provider_cost_usd: float | None = None
    reasoning: str | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class _Outcome:
    """How one HTTP attempt ended, before the retry loop decides what to do with it."""

    action: Literal["ok", "retry", "fail", "downgrade"]
    text: str = ""
    error: str | None = None
    kind: str | None = None
    http_status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retry_after: float | None = None
    truncated: bool = False
    answer: _Answer = _Answer()


class _Stop(Exception):
    """Ends reading a response early with the outcome it deserves."""

    def __init__(self, outcome: _Outcome) -> None:
        super().__init__(outcome.error)
        self.outcome = outcome


def _number(name: str, value: Any, *, low: float, strict: bool, finite: bool = True) -> float:
    """One ValueError format for numeric settings that cannot work, naming the parameter."""
    bound = f"> {low:g}" if strict else f">= {low:g}"
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = not math.isnan(value) and (not finite or math.isfinite(value))
        ok = ok and (value > low if strict else value >= low)
    if not ok:
        raise ValueError(f"{name} must be a finite number {bound} (got {value!r})")
    return value


def _integer(name: str, value: Any, *, low: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low} (got {value!r})")
    return int(value)


def split_base_url(base_url: Any) -> tuple[str, tuple[str, str] | None]:
    """The URL to show and request (no userinfo, no trailing "/") and its credentials."""
    example = "like http://127.0.0.1:8080/v1"
    if not isinstance(base_url, str):
        raise ValueError(f"base_url must be a string, {example}")
    shown = redact_url(base_url.strip())
    try:
        url = httpx.URL(base_url.strip())
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ValueError(f"base_url is not a valid URL ({shown!r}), {example}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"base_url needs an http:// or https:// scheme and a host, {example} "
                         f"(got {shown!r})")
    if url.query or url.fragment:
        raise ValueError(f"base_url must not have a query or fragment (got {shown!r})")
    auth = (url.username, url.password) if url.userinfo else None
    return shown.rstrip("/"), auth


def _json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether arrays/objects nest deeper than `limit` (brackets inside strings ignored).
    The bracket count bounds the depth, so an ordinary reply costs two str.count calls."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group(0)
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _valid_unicode(text: str) -> str:
    """JSON can carry lone surrogates ("\\ud800") that no UTF-8 log line can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class _BodyReader:
    """Accumulates a response body under a byte limit on both what arrives and what it
    decodes to; gzip and deflate are decoded here, at most `limit + 1` bytes per step.

    `hard`: exceeding the limit is a "too_large" failure (answers); otherwise reading stops
    quietly and keeps the beginning (error bodies, where only the message matters).
    """

    def __init__(self, headers: httpx.Headers, limit: int, *, hard: bool) -> None:
        self.limit = limit
        self.hard = hard
        self.full = False
        self.received = 0
        self.size = 0
        self.parts: list[bytes] = []
        codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1:
            raise self._bad(f"stacked content-encodings {', '.join(codings)!r}")
        self.coding = codings[0] if codings else None
        self._first = True
        self._z: Any = None
        if self.coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self.coding == "deflate":
            self._z = zlib.decompressobj()
        elif self.coding is not None:
            raise self._bad(f"unsupported content-encoding {self.coding[:40]!r}")
        declared = headers.get("content-length", "").strip()
        if hard and declared.isdigit() and int(declared) > limit:
            raise self._large(f"Content-Length {declared} is over the {limit}-byte limit")

    @staticmethod
    def _bad(why: str) -> _Stop:
        return _Stop(_Outcome("fail", error=f"bad encoding: {why}", kind="bad_encoding"))

    def _large(self, why: str) -> _Stop:
        return _Stop(_Outcome("fail", error=f"response too large: {why}", kind="too_large"))

    def feed(self, chunk: bytes) -> None:
        """Raises _Stop when the limit is crossed (hard) or sets `full` (soft)."""
        self.received += len(chunk)
        if self.received > self.limit:
            if self.hard:
                raise self._large(f"more than {self.limit} bytes received")
            self.full = True
        if self._z is None:
            self._add(chunk)
            return
        data = chunk
        while data and not self.full:
            room = self.limit - self.size
            try:
                out = self._z.decompress(data, room + 1)
            except zlib.error as exc:
                if self.coding == "deflate" and self._first:  # raw deflate, without zlib header
                    self._first = False
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise self._bad(f"corrupt {self.coding} data ({exc})") from None
            self._first = False
            self._add(out)
            data = b"" if self._z.eof else self._z.unconsumed_tail

    def _add(self, data: bytes) -> None:
        if self.full:
            return
        if self.size + len(data) > self.limit:
            if self.hard:
                raise self._large(f"the body decodes to more than {self.limit} bytes")
            data = data[: self.limit - self.size]
            self.full = True
        self.size += len(data)
        self.parts.append(data)

    def finish(self) -> bytes:
        if self._z is not None and not self.full:
            self._add(self._z.flush())
        return b"".join(self.parts)


class _Clock(threading.local):
    """The end of the attempt in progress on this thread (time.monotonic), or None."""

    end: float | None = None

    def clamp(self, timeout: float | None, error: type[Exception]) -> float | None:
        if self.end is None:
            return timeout
        left = self.end - time.monotonic()
        if left <= 0:
            raise error("out of time")
        return left if timeout is None else min(timeout, left)


class _ClampedStream(httpcore.NetworkStream):
    """A socket stream whose every operation ends by the attempt's end."""

    def __init__(self, stream: httpcore.NetworkStream, clock: _Clock) -> None:
        self._stream = stream
        self._clock = clock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._clock.clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._clock.clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        limit = self._clock.clamp(timeout, httpcore.ConnectTimeout)
        return _ClampedStream(self._stream.start_tls(ssl_context, server_hostname, limit),
                              self._clock)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _ClampedBackend(httpcore.NetworkBackend):
    """httpcore's own sync backend, with each connect, read and write clamped to the time
    the attempt has left: per-read timeouts alone let a dripping server hold a call forever."""

    def __init__(self, clock: _Clock) -> None:
        self._inner = httpcore.SyncBackend()
        self._clock = clock

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        limit = self._clock.clamp(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, limit, local_address, socket_options)
        return _ClampedStream(stream, self._clock)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        limit = self._clock.clamp(timeout, httpcore.ConnectTimeout)
        return _ClampedStream(self._inner.connect_unix_socket(path, limit, socket_options),
                              self._clock)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _ClampedTransport(httpx.HTTPTransport):
    """httpx's HTTP transport over `_ClampedBackend` (httpx has no network-backend option,
    so the connection pool it builds is replaced by the same pool with the backend)."""

    def __init__(self, clock: _Clock, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_ClampedBackend(clock),
        )


class _ChatCore:
    """Settings checks, request building, response classification and negotiation state,
    shared by both clients so that the sync and async paths cannot drift apart."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        api_key_env: str,
        timeout: float,
        deadline: float | None,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        max_retry_after: float,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        response_format: str,
        json_schema: Mapping[str, Any] | None,
        jitter_seed: int,
        max_response_bytes: int,
        max_answer_chars: int,
        tool_choice: str | Mapping[str, Any],
    ) -> None:
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {RESPONSE_FORMATS} "
                             f"(got {response_format!r})")
        if response_format == "json_schema" and json_schema is None:
            raise ValueError('response_format="json_schema" needs a json_schema')
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string (got {model!r})")
        self.base_url, userinfo = split_base_url(base_url)
        self.model = model
        self.timeout = _number("timeout", timeout, low=0, strict=True)
        self.max_retries = _integer("max_retries", max_retries, low=0)
        self.backoff = _number("backoff", backoff, low=0, strict=False)
        self.max_backoff = _number("max_backoff", max_backoff, low=0, strict=False)
        self.max_retry_after = _number("max_retry_after", max_retry_after, low=0, strict=False)
        if deadline is None:
            deadline = self.timeout * (self.max_retries + 1) + self.max_backoff * self.max_retries
        self.deadline = _number("deadline", deadline, low=0, strict=True)
        self.temperature = _number("temperature", temperature, low=0, strict=False)
        self.max_tokens = _integer("max_tokens", max_tokens, low=1)
        self.max_response_bytes = _integer("max_response_bytes", max_response_bytes, low=1)
        self.max_answer_chars = _integer("max_answer_chars", max_answer_chars, low=1)
        self.seed = seed
        self.tool_choice = _tool_choice(tool_choice)
        self.json_schema = dict(json_schema) if json_schema is not None else None
        self._auto = response_format == "auto" and json_schema is not None
        if self._auto:
            self._mode = "json_schema"
        elif response_format == "auto":
            self._mode = "none"
        else:
            self._mode = response_format
        self._confirmed = False  # has the current mode produced a successful reply yet?
        self._url = f"{self.base_url}/chat/completions"
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        key = key.strip() if isinstance(key, str) else key  # a key read from a file ends in "\n"
        key = key or None
        if key is not None and (not key.isascii() or not key.isprintable() or " " in key):
            raise ValueError(f"the API key (api_key or ${api_key_env}) must be printable ASCII "
                             "without spaces")
        self.__key = key  # private: never in repr(), results or error strings
        self._auth = httpx.BasicAuth(*userinfo) if userinfo and key is None else None
        self.__secrets = (key, *url_secrets(base_url))
        self._rng = random.Random(jitter_seed)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def mode(self) -> str:
        """The structured-output mode the next call will start with."""
        return self._mode

    def scrub(self, text: str) -> str:
        """`text` without the API key or URL credentials, in any encoding secrets.scrub knows."""
        return scrub(text, self.__secrets)

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        return headers

    def _short(self, text: str) -> str:
        text = self.scrub(" ".join(text[: 4 * MAX_ERROR_CHARS].split()))
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS - 3] + "..."
        return text

    def _start_mode(self, mode: str | None) -> str:
        """The later of the call's own mode and the client's (another call may have
        downgraded meanwhile)."""
        if mode is None or MODES.index(self._mode) > MODES.index(mode):
            return self._mode
        return mode

    def _downgrade(self, mode: str) -> str:
        nxt = MODES[MODES.index(mode) + 1]
        if MODES.index(nxt) > MODES.index(self._mode):
            self._mode, self._confirmed = nxt, False
        return nxt

    def _confirm(self, mode: str) -> None:
        if mode == self._mode:
            self._confirmed = True

    def _payload(self, messages: list[dict[str, Any]], mode: str,
                 tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        if tools:
            payload["tools"] = tools
            payload["tool_choice"] = self.tool_choice
        elif mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "action", "schema": self.json_schema, "strict": True},
            }
        elif mode == "json_object":
            payload["response_format"] = {"type": "json_object"}
            if self.json_schema is not None:
                payload["response_format"]["schema"] = self.json_schema
        return payload

    def _retry_after(self, headers: httpx.Headers) -> float | None:
        value = headers.get("retry-after")
        if value is None:
            return None
        value = value.strip()[:64]
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - datetime.now(UTC)).total_seconds()
        if seconds != seconds:  # NaN
            return None
        return min(max(seconds, 0.0), self.max_retry_after)

    def _delay(self, retry_index: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        raw = self.backoff * (2.0**retry_index) * (1.0 + 0.1 * self._rng.random())
        return min(self.max_backoff, raw)

    def _error_text(self, body: str) -> str:
        """The provider's error message when the body is OpenAI-shaped, else the raw body."""
        if _json_depth_exceeds(body, MAX_JSON_DEPTH):
            return body
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return body
        if isinstance(data, dict):
            err = data.get("error", data.get("detail", data.get("message")))
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return err["message"]
            if isinstance(err, str):
                return err
        return body

    def _reader(self, response: httpx.Response) -> _BodyReader:
        ok = 200 <= response.status_code < 300
        limit = self.max_response_bytes if ok else min(self.max_response_bytes,
                                                        MAX_ERROR_BODY_BYTES)
        headers = response.headers
        if response.is_stream_consumed:  # in memory already (MockTransport): decoded bytes
            headers = httpx.Headers({k: v for k, v in headers.items()
                                     if k.lower() != "content-encoding"})
        return _BodyReader(headers, limit, hard=ok)

    def _classify(self, response: httpx.Response, raw: bytes, mode: str) -> _Outcome:
        status = response.status_code
        if 200 <= status < 300:
            return self._parse_ok(response, raw)
        body = raw.decode("utf-8", "replace")
        detail = self._short(self._error_text(body)) or response.reason_phrase
        message = f"HTTP {status}: {detail}"
        if self._auto and mode in MODES[:-1] and status in NEGOTIATION_STATUSES:
            lowered = body.lower()
            if not self._confirmed or any(word in lowered for word in NEGOTIATION_WORDS):
                return _Outcome("downgrade", error=message, kind="http", http_status=status)
        if status in RETRYABLE_STATUSES or status >= 500:
            return _Outcome(
                "retry",
                error=message,
                kind="http",
                http_status=status,
                retry_after=self._retry_after(response.headers),
            )
        return _Outcome("fail", error=message, kind="http", http_status=status)

    def _parse_ok(self, response: httpx.Response, raw: bytes) -> _Outcome:
        status = response.status_code

        def malformed(why: str) -> _Outcome:
            return _Outcome("retry", error=f"malformed response: {why}", kind="malformed",
                            http_status=status)

        def refused(kind: str, why: str) -> _Outcome:
            return _Outcome("fail", error=why, kind=kind, http_status=status)

        charset = response.charset_encoding or "utf-8"
        try:
            codecs.lookup(charset)
            body = raw.decode(charset)
        except LookupError:
            return refused("bad_encoding", f"bad encoding: unknown charset {charset[:40]!r}")
        except UnicodeDecodeError as exc:
            return refused("bad_encoding", f"bad encoding: not valid {charset[:40]} "
                                           f"(byte {exc.start})")
        except (UnicodeError, ValueError):  # a codec that refuses any bytes ("undefined")
            return refused("bad_encoding", f"bad encoding: {charset[:40]!r} cannot be read")
        body = body.removeprefix("\ufeff")
        if _json_depth_exceeds(body, MAX_JSON_DEPTH):
            return refused("too_deep", f"too deeply nested: JSON deeper than {MAX_JSON_DEPTH}")
        try:
            data = json.loads(body)
        except RecursionError:
            return refused("too_deep", "too deeply nested: JSON parser recursion limit")
        except ValueError as exc:
            return malformed(f"not JSON ({self._short(str(exc))})")
        if not isinstance(data, dict):
            return malformed("body is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return malformed("no choices")
        if not isinstance(choices[0], dict):
            return malformed("choices[0] is not an object")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return malformed("no message in choices[0]")
        content = message.get("content")
        calls, calls_cut = self._tool_calls(message.get("tool_calls"))
        if content is None and not calls:
            finish = choices[0].get("finish_reason")
            reason = f" (finish_reason {self._short(finish)!r})" if isinstance(finish, str) else ""
            return malformed(f"null content{reason}")
        if content is not None and not isinstance(content, str):
            return malformed("message content is not a string")
        text = self.scrub(_valid_unicode(content or ""))
        truncated = len(text) > self.max_answer_chars or calls_cut
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        reasoning = next((r for r in (message.get("reasoning_content"), message.get("reasoning"))
                          if isinstance(r, str) and r), None)
        answer = _Answer(
            tool_calls=calls,
            served_model=self._field(data.get("model")),
            cached_prompt_tokens=_cached_tokens(usage),
            provider_cost_usd=_cost(usage.get("cost")),
            reasoning=(self.scrub(_valid_unicode(reasoning))[: self.max_answer_chars]
                       if reasoning is not None else None),
            finish_reason=self._field(choices[0].get("finish_reason")),
        )
        return _Outcome(
            "ok",
            text=text[: self.max_answer_chars],
            http_status=status,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            truncated=truncated,
            answer=answer,
        )

    def _field(self, value: Any) -> str | None:
        """A short string field of a reply (model, finish reason), scrubbed and bounded."""
        if not isinstance(value, str):
            return None
        return self.scrub(_valid_unicode(value[: 4 * MAX_FIELD_CHARS]))[:MAX_FIELD_CHARS]

    def _tool_calls(self, raw: Any) -> tuple[tuple[ToolCall, ...], bool]:
        """The reply's tool calls and whether any was cut (too many, or arguments too long)."""
        if not isinstance(raw, list):
            return (), False
        entries = [entry for entry in raw if isinstance(entry, dict)]
        cut = len(entries) > MAX_TOOL_CALLS
        calls = []
        for entry in entries[:MAX_TOOL_CALLS]:
            function = entry.get("function")
            function = function if isinstance(function, dict) else {}
            arguments = function.get("arguments")
            if arguments is None:
                arguments = ""
            elif not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            arguments = self.scrub(_valid_unicode(arguments))
            cut = cut or len(arguments) > self.max_answer_chars
            calls.append(ToolCall(id=self._field(entry.get("id")) or "",
                                  name=self._field(function.get("name")) or "",
                                  arguments=arguments[: self.max_answer_chars]))
        return tuple(calls), cut

    def _transport_error(self, exc: Exception, attempt_end: float, call_end: float) -> _Outcome:
        now = time.monotonic()
        timed_out = isinstance(exc, httpx.TimeoutException | TimeoutError)
        if timed_out and now >= call_end - 1e-3:
            return _Outcome("fail", kind="deadline",
                            error=f"deadline: no complete answer within the call's "
                                  f"{self.deadline:g} s deadline")
        if timed_out and now >= attempt_end - 1e-3:
            return _Outcome("retry", kind="timeout",
                            error=f"timeout: no complete answer within {self.timeout:g} s")
        detail = self._short(f"{type(exc).__name__}: {exc}")
        if timed_out:
            return _Outcome("retry", kind="timeout", error=f"timeout: {detail}")
        if isinstance(exc, httpx.TransportError):
            return _Outcome("retry", kind="connection", error=f"connection error: {detail}")
        return _Outcome("fail", kind="request", error=f"request error: {detail}")

    def _out_of_time(self, outcome: _Outcome, call_end: float, delay: float) -> _Outcome | None:
        """The outcome to return when a retry after `delay` could not start before the call's
        deadline, else None."""
        if time.monotonic() + delay < call_end:
            return None
        note = f" (no time left to retry within the {self.deadline:g} s deadline)"
        return _Outcome("fail", error=(outcome.error or "") + note, kind=outcome.kind,
                        http_status=outcome.http_status)

    def _result(self, outcome: _Outcome, started: float, retries: int, mode: str) -> ChatResult:
        ok = outcome.action == "ok"
        return ChatResult(
            text=outcome.text if ok else "",
            status="ok" if ok else "error",
            error=None if ok else self.scrub(outcome.error or "unknown error"),
            http_status=outcome.http_status,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            latency_s=time.perf_counter() - started,
            retries=retries,
            response_format=mode,
            truncated=outcome.truncated,
            error_kind=None if ok else (outcome.kind or "request"),
            **({f.name: getattr(outcome.answer, f.name)
                for f in dataclasses.fields(_Answer)} if ok else {}),
        )


MAX_REPORTED_TOKENS = 10**9  # no call holds more: a larger or negative count is not usage


def _count(value: Any) -> int | None:
    """A reported token count, None (unknown, never 0) when it is not one a call can have."""
    if isinstance(value, int) and not isinstance(value, bool) and (
            0 <= value <= MAX_REPORTED_TOKENS):
        return value
    return None


def _cached_tokens(usage: dict[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return cached if cached is not None else _count(usage.get("cache_read_input_tokens"))


def _cost(value: Any) -> float | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)
        return value if math.isfinite(value) and value >= 0 else None
    return None


def _tool_choice(value: Any) -> str | dict[str, Any]:
    """OpenAI's tool_choice: a word, or one function forced by name."""
    if value in TOOL_CHOICES:
        return str(value)
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return {"type": "function", "function": {"name": function["name"]}}
    raise ValueError(f"tool_choice must be one of {TOOL_CHOICES} or "
                     f'{{"type": "function", "function": {{"name": NAME}}}} (got {value!r})')


def _checked_tools(tools: Any) -> list[dict[str, Any]] | None:
    """The tools of a call (None or [] for none), refused when they are not tool dicts."""
    if tools is None:
        return None
    ok = isinstance(tools, list | tuple) and all(
        isinstance(t, Mapping) and t.get("type") == "function"
        and isinstance(t.get("function"), Mapping) and isinstance(t["function"].get("name"), str)
        for t in tools)
    if not ok:
        raise ValueError('tools must be a list of OpenAI tool dicts like {"type": "function", '
                         f'"function": {{"name": ..., "parameters": ...}}}} (got {tools!r:.200})')
    return [dict(t) for t in tools] or None


class ChatClient(_ChatCore):
    """Synchronous client; one instance per thread. See the module docstring for the rules."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        deadline: float | None = None,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int = 64,
        seed: int | None = None,
        response_format: str = "auto",
        json_schema: Mapping[str, Any] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        jitter_seed: int = 0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
        tool_choice: str | Mapping[str, Any] = "auto",
        limiter: Limiter | None = None,
    ) -> None:
        super().__init__(
            base_url=base_url,
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            max_retry_after=max_retry_after,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            response_format=response_format,
            json_schema=json_schema,
            jitter_seed=jitter_seed,
            max_response_bytes=max_response_bytes,
            max_answer_chars=max_answer_chars,
            tool_choice=tool_choice,
        )
        if limiter is not None and not (callable(getattr(limiter, "acquire", None))
                                        and callable(getattr(limiter, "release", None))):
            raise ValueError(f"limiter must have acquire() and release(throttled) methods, like "
                             f"limits.AdaptiveLimit (got {limiter!r:.100})")
        self.limiter = limiter
        self._sleep = sleep if sleep is not None else time.sleep
        self._clock = _Clock()
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._http = httpx.Client(
            timeout=httpx.Timeout(self.timeout),
            transport=transport if transport is not None else _ClampedTransport(self._clock,
                                                                                limits),
            headers=self._headers(),
            auth=self._auth,
        )

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> ChatResult:
        """POST one chat completion; never raises for provider or network problems (only
        ValueError for `tools` that are not OpenAI tool dicts)."""
        tools = _checked_tools(tools)
        started = time.perf_counter()
        call_end: float | None = None
        retries = 0
        mode: str | None = None
        while True:
            mode = TOOLS_MODE if tools else self._start_mode(mode)
            with _Slot(self.limiter) as slot:
                if call_end is None:
                    call_end = time.monotonic() + self.deadline
                outcome = self._attempt(messages, mode, tools, call_end)
                slot.throttled = outcome.http_status == 429
            if outcome.action == "downgrade":
                mode = self._downgrade(mode)
                late = self._out_of_time(outcome, call_end, 0.0)
                if late is None:
                    continue
                outcome = late
            if outcome.action == "ok":
                self._confirm(mode)
            elif outcome.action == "retry" and retries < self.max_retries:
                delay = self._delay(retries, outcome.retry_after)
                late = self._out_of_time(outcome, call_end, delay)
                if late is None:
                    self._sleep(delay)
                    retries += 1
                    continue
                outcome = late
            return self._result(outcome, started, retries, mode)

    def _attempt(self, messages: list[dict[str, Any]], mode: str,
                 tools: list[dict[str, Any]] | None, call_end: float) -> _Outcome:
        attempt_end = min(time.monotonic() + self.timeout, call_end)
        self._clock.end = attempt_end
        try:
            request = self._http.build_request("POST", self._url,
                                               json=self._payload(messages, mode, tools))
            response = self._http.send(request, stream=True)
            try:
                reader = self._reader(response)
                for chunk in _timed(_raw_chunks(response), attempt_end):
                    reader.feed(chunk)
                    if reader.full:
                        break
                return self._classify(response, reader.finish(), mode)
            except _Stop as stop:
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


class _Slot:
    """One HTTP attempt's hold on the limiter (nothing without one), released with whether
    the attempt was throttled, whatever happens inside."""

    def __init__(self, limiter: Limiter | None) -> None:
        self.limiter = limiter
        self.throttled = False

    def __enter__(self) -> _Slot:
        if self.limiter is not None:
            self.limiter.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.limiter is not None:
            self.limiter.release(self.throttled)


def _raw_chunks(response: httpx.Response) -> Iterator[bytes]:
    """The body as it came over the wire; a response a transport built in memory (httpx reads
    those at once) is its content, still bounded by the reader."""
    return iter((response.content,)) if response.is_stream_consumed else response.iter_raw()


async def _one(content: bytes) -> AsyncIterator[bytes]:
    yield content


def _timed(chunks: Iterator[bytes], end: float) -> Iterator[bytes]:
    """The chunks of a body, ending in a timeout once `end` has passed (the check between
    reads, for transports without the clamped backend)."""
    for chunk in chunks:
        if time.monotonic() > end:
            raise TimeoutError("out of time")
        yield chunk


async def _atimed(chunks: AsyncIterator[bytes], end: float) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        if time.monotonic() > end:
            raise TimeoutError("out of time")
        yield chunk


class AsyncChatClient(_ChatCore):
    """Asyncio client: many concurrent `await complete(...)` calls in one event loop, at most
    `concurrency` HTTP requests in flight. See the module docstring for the rules."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        deadline: float | None = None,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int = 64,
        seed: int | None = None,
        response_format: str = "auto",
        json_schema: Mapping[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        jitter_seed: int = 0,
        concurrency: int = 8,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
        tool_choice: str | Mapping[str, Any] = "auto",
    ) -> None:
        super().__init__(
            base_url=base_url,
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            max_retry_after=max_retry_after,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            response_format=response_format,
            json_schema=json_schema,
            jitter_seed=jitter_seed,
            max_response_bytes=max_response_bytes,
            max_answer_chars=max_answer_chars,
            tool_choice=tool_choice,
        )
        self.concurrency = _integer("concurrency", concurrency, low=1)
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
        tools = _checked_tools(tools)
        started = time.perf_counter()
        call_end: float | None = None
        retries = 0
        mode: str | None = None
        while True:
            mode = TOOLS_MODE if tools else self._start_mode(mode)
            async with self._semaphore:
                if call_end is None:
                    call_end = time.monotonic() + self.deadline
                outcome = await self._attempt(messages, mode, tools, call_end)
            if outcome.action == "downgrade":
                mode = self._downgrade(mode)
                late = self._out_of_time(outcome, call_end, 0.0)
                if late is None:
                    continue
                outcome = late
            if outcome.action == "ok":
                self._confirm(mode)
            elif outcome.action == "retry" and retries < self.max_retries:
                delay = self._delay(retries, outcome.retry_after)
                late = self._out_of_time(outcome, call_end, delay)
                if late is None:
                    await self._sleep(delay)
                    retries += 1
                    continue
                outcome = late
            return self._result(outcome, started, retries, mode)

    async def _attempt(self, messages: list[dict[str, Any]], mode: str,
                       tools: list[dict[str, Any]] | None, call_end: float) -> _Outcome:
        attempt_end = min(time.monotonic() + self.timeout, call_end)
        try:
            async with asyncio.timeout(max(attempt_end - time.monotonic(), 0.0)):
                request = self._http.build_request("POST", self._url,
                                                   json=self._payload(messages, mode, tools))
                response = await self._http.send(request, stream=True)
                try:
                    reader = self._reader(response)
                    chunks = (_one(response.content) if response.is_stream_consumed
                              else response.aiter_raw())
                    async for chunk in _atimed(chunks, attempt_end):
                        reader.feed(chunk)
                        if reader.full:
                            break
                    return self._classify(response, reader.finish(), mode)
                except _Stop as stop:
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
