"""The chat client's core, shared by the sync and async clients so their paths cannot drift
apart: the checked settings (a `ClientConfig`), the key and its scrubbing, request building,
the structured-output negotiation state, and the one retry loop.

The retry loop (`ChatCore.calls`) is a generator: it yields the next step, an `Attempt` to
make or seconds to sleep, and is sent each attempt's `Outcome`; it returns the `ChatResult`.
A client is then only how it makes an attempt and how it sleeps (client/transport.py): the
sync one under a limiter slot, the async one under its semaphore.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from diagym.llm_policies.client.body import Outcome
from diagym.llm_policies.client.config import MODES, ClientConfig, split_base_url
from diagym.llm_policies.client.replies import ReplyRules
from diagym.llm_policies.client.results import TOOLS_MODE, ChatResult, Limiter
from diagym.llm_policies.client.secrets import scrub, url_secrets

ACCEPT_ENCODING = "gzip, deflate"


class CallDeadline:
    """The end of one call (time.monotonic): it starts when the call's first attempt gets its
    slot (the limiter's or the semaphore's), since waiting behind other calls is not the
    provider's time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end: float | None = None

    def start(self) -> float:
        if self.end is None:
            self.end = time.monotonic() + self.seconds
        return self.end


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt the retry loop asks for: in `mode`, by the end of `call`."""

    mode: str
    call: CallDeadline


class Slot:
    """One HTTP attempt's hold on the limiter (nothing without one), released with whether
    the attempt was throttled, whatever happens inside."""

    def __init__(self, limiter: Limiter | None) -> None:
        self.limiter = limiter
        self.throttled = False

    def __enter__(self) -> Slot:
        if self.limiter is not None:
            self.limiter.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.limiter is not None:
            self.limiter.release(self.throttled)


class _Setting:
    """A config field read as the client's own attribute (`client.max_tokens`), read-only."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        return self if client is None else getattr(client.config, self.name)


def checked_tools(tools: Any) -> list[dict[str, Any]] | None:
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



def sent_tool_choice(tool_choice: Any, tools: list[dict[str, Any]]) -> Any:
    """The tool_choice a request carries: as set, except "required" with one tool, which is
    sent as that tool forced by name. Under OpenAI's rules the two ask for the same call;
    the named form is the one every OpenAI-compatible server takes (llama-cpp-python's
    chatml-function-calling asserts on "required" and answers HTTP 500)."""
    if tool_choice == "required" and len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    return tool_choice


class ChatCore(ReplyRules):
    """Settings, secrets, request building, negotiation state and the retry loop of a client.

    `base_url` is the URL shown and requested (credentials dropped), `deadline` the call's
    deadline in seconds (`ClientConfig.call_deadline`); the other settings are the config's,
    read as attributes of the client."""

    model = _Setting()
    timeout = _Setting()
    max_retries = _Setting()
    temperature = _Setting()
    max_tokens = _Setting()
    seed = _Setting()
    json_schema = _Setting()
    tool_choice = _Setting()
    reasoning_tokens = _Setting()
    reasoning_control = _Setting()

    def __init__(self, config: ClientConfig, api_key: str | None) -> None:
        self.config = config
        self.base_url, userinfo = split_base_url(config.base_url)
        self.deadline = config.call_deadline
        self._auto = config.response_format == "auto" and config.json_schema is not None
        if self._auto:
            self._mode = "json_schema"
        elif config.response_format == "auto":
            self._mode = "none"
        else:
            self._mode = config.response_format
        self._confirmed = False  # has the current mode produced a successful reply yet?
        self._url = f"{self.base_url}/chat/completions"
        api_key_env = config.api_key_env
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        key = key.strip() if isinstance(key, str) else key  # a key read from a file ends in "\n"
        key = key or None
        if key is not None and (not key.isascii() or not key.isprintable() or " " in key):
            raise ValueError(f"the API key (api_key or ${api_key_env}) must be printable ASCII "
                             "without spaces")
        self.__key = key  # private: never in repr(), results or error strings
        self._auth = httpx.BasicAuth(*userinfo) if userinfo and key is None else None
        self.__secrets = (key, *url_secrets(config.base_url))
        self._rng = random.Random(config.jitter_seed)

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
            **self.config.reasoning_fields(),
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        if tools:
            payload["tools"] = tools
            payload["tool_choice"] = sent_tool_choice(self.tool_choice, tools)
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

    def _delay(self, retry_index: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        raw = self.config.backoff * (2.0**retry_index) * (1.0 + 0.1 * self._rng.random())
        return min(self.config.max_backoff, raw)

    def calls(self, tools: list[dict[str, Any]] | None
              ) -> Generator[Attempt | float, Outcome | None, ChatResult]:
        """The one retry loop of a call: yields an `Attempt` (send back its Outcome) or the
        seconds to sleep before the next one (send back None), and returns the result.
        Negotiation steps come at once; retries after their backoff, while the deadline
        leaves time to start them."""
        started = time.perf_counter()
        call = CallDeadline(self.deadline)
        retries = 0
        mode: str | None = None
        while True:
            mode = TOOLS_MODE if tools else self._start_mode(mode)
            outcome = yield Attempt(mode, call)
            assert outcome is not None and call.end is not None
            if outcome.action == "downgrade":
                mode = self._downgrade(mode)
                late = self._out_of_time(outcome, call.end, 0.0)
                if late is None:
                    continue
                outcome = late
            if outcome.action == "ok":
                self._confirm(mode)
            elif outcome.action == "retry" and retries < self.config.max_retries:
                delay = self._delay(retries, outcome.retry_after)
                late = self._out_of_time(outcome, call.end, delay)
                if late is None:
                    yield delay
                    retries += 1
                    continue
                outcome = late
            return self._result(outcome, started, retries, mode)

    def _transport_error(self, exc: Exception, attempt_end: float, call_end: float) -> Outcome:
        now = time.monotonic()
        timed_out = isinstance(exc, httpx.TimeoutException | TimeoutError)
        if timed_out and now >= call_end - 1e-3:
            return Outcome("fail", kind="deadline",
                            error=f"deadline: no complete answer within the call's "
                                  f"{self.deadline:g} s deadline")
        if timed_out and now >= attempt_end - 1e-3:
            return Outcome("retry", kind="timeout",
                            error=f"timeout: no complete answer within {self.timeout:g} s")
        detail = self._short(f"{type(exc).__name__}: {exc}")
        if timed_out:
            return Outcome("retry", kind="timeout", error=f"timeout: {detail}")
        if isinstance(exc, httpx.TransportError):
            return Outcome("retry", kind="connection", error=f"connection error: {detail}")
        return Outcome("fail", kind="request", error=f"request error: {detail}")

    def _out_of_time(self, outcome: Outcome, call_end: float, delay: float) -> Outcome | None:
        """The outcome to return when a retry after `delay` could not start before the call's
        deadline, else None."""
        if time.monotonic() + delay < call_end:
            return None
        note = f" (no time left to retry within the {self.deadline:g} s deadline)"
        return Outcome("fail", error=(outcome.error or "") + note, kind=outcome.kind,
                        http_status=outcome.http_status)

    def _result(self, outcome: Outcome, started: float, retries: int, mode: str) -> ChatResult:
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
            **(dict(outcome.answer) if ok else {}),
        )

