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

Retries (at most `max_retries` after the first attempt, each with a fresh per-attempt timeout):
  * retryable: HTTP 408, 429 and 5xx (except the negotiation case above), httpx transport
    errors (timeouts, refused or dropped connections, protocol errors) and malformed 2xx
    bodies (not JSON, no choices/message). Malformed bodies are retried because in practice
    they come from truncated transfers and overloaded proxies, not from deterministic bugs.
  * not retryable: any other status (400, 401, 403, 404, 422, ...).
  * delay before retry k (0-based): min(max_backoff, backoff * 2**k * (1 + 0.1 * u)), with u
    drawn from a `random.Random(jitter_seed)` so that tests see reproducible delays. When the
    response carries `Retry-After` (seconds or an HTTP date) that value is used instead, with
    no jitter, capped at `max_retry_after` (60 s by default; it is deliberately separate from
    max_backoff because a provider's explicit rate-limit window should be respected).

Secrets: the API key is read from `api_key` or the environment variable `api_key_env` (absent
is fine for local servers: then no Authorization header is sent). It is never part of a
result, an error string (error bodies are scrubbed, since proxies sometimes echo headers),
`repr()` or a log message.

Concurrency: `ChatClient` is for one thread. `AsyncChatClient` is safe for many concurrent
`await complete(...)` calls within one event loop; `concurrency` bounds the HTTP requests in
flight (the semaphore is held per attempt, not during backoff sleeps).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

MODES = ("json_schema", "json_object", "none")
RESPONSE_FORMATS = ("auto", *MODES)
NEGOTIATION_STATUSES = frozenset({400, 422, 500})
NEGOTIATION_WORDS = ("response_format", "response format", "schema", "json_object", "grammar")
RETRYABLE_STATUSES = frozenset({408, 429})
MAX_ERROR_CHARS = 200
REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one `complete()` call; `text` is "" whenever `status` is "error"."""

    text: str
    status: Literal["ok", "error"]
    error: str | None
    http_status: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    retries: int
    response_format: str


@dataclass(frozen=True)
class _Outcome:
    """How one HTTP attempt ended, before the retry loop decides what to do with it."""

    action: Literal["ok", "retry", "fail", "downgrade"]
    text: str = ""
    error: str | None = None
    http_status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retry_after: float | None = None


class _ChatCore:
    """Request building, response classification and negotiation state, shared by both
    clients so that the sync and async paths cannot drift apart."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        api_key_env: str,
        timeout: float,
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
    ) -> None:
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {RESPONSE_FORMATS}")
        if response_format == "json_schema" and json_schema is None:
            raise ValueError('response_format="json_schema" needs a json_schema')
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_retry_after = float(max_retry_after)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.seed = seed
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
        self.__key = key or None  # private: never in repr(), results or error strings
        self._rng = random.Random(jitter_seed)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def mode(self) -> str:
        """The structured-output mode the next call will start with."""
        return self._mode

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        return headers

    def _scrub(self, text: str) -> str:
        """Remove the API key from any text that may leave the client."""
        if self.__key:
            text = text.replace(self.__key, REDACTED)
        return text

    def _short(self, text: str) -> str:
        text = self._scrub(" ".join(text.split()))
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

    def _payload(self, messages: list[dict[str, Any]], mode: str) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        if mode == "json_schema":
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
        value = value.strip()
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
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
        try:
            data = json.loads(body)
        except ValueError:
            return body
        if isinstance(data, dict):
            err = data.get("error", data.get("detail", data.get("message")))
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return err["message"]
            if isinstance(err, str):
                return err
        return body

    def _classify(self, response: httpx.Response, mode: str) -> _Outcome:
        status = response.status_code
        body = response.text
        if 200 <= status < 300:
            return self._parse_ok(body, status)
        message = f"HTTP {status}: {self._short(self._error_text(body)) or response.reason_phrase}"
        if self._auto and mode != MODES[-1] and status in NEGOTIATION_STATUSES:
            lowered = body.lower()
            if not self._confirmed or any(word in lowered for word in NEGOTIATION_WORDS):
                return _Outcome("downgrade", error=message, http_status=status)
        if status in RETRYABLE_STATUSES or status >= 500:
            return _Outcome(
                "retry",
                error=message,
                http_status=status,
                retry_after=self._retry_after(response.headers),
            )
        return _Outcome("fail", error=message, http_status=status)

    def _parse_ok(self, body: str, status: int) -> _Outcome:
        def malformed(why: str) -> _Outcome:
            return _Outcome("retry", error=f"malformed response: {why}", http_status=status)

        try:
            data = json.loads(body)
        except ValueError as exc:
            return malformed(f"not JSON ({self._short(str(exc))})")
        if not isinstance(data, dict):
            return malformed("body is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return malformed("no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return malformed("no message in choices[0]")
        content = message.get("content")
        if content is None:
            content = ""  # e.g. a reasoning model that spent max_tokens before answering
        if not isinstance(content, str):
            return malformed("message content is not a string")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return _Outcome(
            "ok",
            text=content,
            http_status=status,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
        )

    def _transport_error(self, exc: httpx.HTTPError) -> _Outcome:
        if isinstance(exc, httpx.TimeoutException):
            kind = "timeout"
        elif isinstance(exc, httpx.TransportError):
            kind = "connection error"
        else:
            kind = "request error"
        detail = self._short(f"{type(exc).__name__}: {exc}")
        action: Literal["retry", "fail"] = (
            "retry" if isinstance(exc, httpx.TransportError) else "fail"
        )
        return _Outcome(action, error=f"{kind}: {detail}")

    def _result(self, outcome: _Outcome, started: float, retries: int, mode: str) -> ChatResult:
        ok = outcome.action == "ok"
        return ChatResult(
            text=outcome.text if ok else "",
            status="ok" if ok else "error",
            error=None if ok else self._scrub(outcome.error or "unknown error"),
            http_status=outcome.http_status,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            latency_s=time.perf_counter() - started,
            retries=retries,
            response_format=mode,
        )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
    ) -> None:
        super().__init__(
            base_url=base_url,
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
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
        )
        self._sleep = sleep if sleep is not None else time.sleep
        self._http = httpx.Client(
            timeout=httpx.Timeout(self.timeout), transport=transport, headers=self._headers()
        )

    def complete(self, messages: list[dict[str, Any]]) -> ChatResult:
        """POST one chat completion; never raises for provider or network problems."""
        started = time.perf_counter()
        retries = 0
        mode: str | None = None
        while True:
            mode = self._start_mode(mode)
            try:
                response = self._http.post(self._url, json=self._payload(messages, mode))
                outcome = self._classify(response, mode)
            except httpx.HTTPError as exc:
                outcome = self._transport_error(exc)
            if outcome.action == "downgrade":
                mode = self._downgrade(mode)
                continue
            if outcome.action == "ok":
                self._confirm(mode)
            elif outcome.action == "retry" and retries < self.max_retries:
                self._sleep(self._delay(retries, outcome.retry_after))
                retries += 1
                continue
            return self._result(outcome, started, retries, mode)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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
    ) -> None:
        super().__init__(
            base_url=base_url,
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
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
        )
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = int(concurrency)
        self._sleep = sleep if sleep is not None else asyncio.sleep
        self._semaphore = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout),
            transport=transport,
            headers=self._headers(),
            limits=limits,
        )

    async def complete(self, messages: list[dict[str, Any]]) -> ChatResult:
        """POST one chat completion; never raises for provider or network problems."""
        started = time.perf_counter()
        retries = 0
        mode: str | None = None
        while True:
            mode = self._start_mode(mode)
            try:
                async with self._semaphore:
                    response = await self._http.post(self._url, json=self._payload(messages, mode))
                outcome = self._classify(response, mode)
            except httpx.HTTPError as exc:
                outcome = self._transport_error(exc)
            if outcome.action == "downgrade":
                mode = self._downgrade(mode)
                continue
            if outcome.action == "ok":
                self._confirm(mode)
            elif outcome.action == "retry" and retries < self.max_retries:
                await self._sleep(self._delay(retries, outcome.retry_after))
                retries += 1
                continue
            return self._result(outcome, started, retries, mode)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncChatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
