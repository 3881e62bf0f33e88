"""Every knob of the chat client and its default, once: `ClientConfig`.

Why one object: the sync and async clients (client/transport.py), the chat settings of a run
(analysis/llm_runs.py `ChatSettings`), the CLI flags and the probe all need the same knobs;
each takes its defaults from here (`client_default`) instead of restating them. The config is
plain data, never the API key (only the variable naming it), so it can be compared and
described; what a client needs at run time besides (the key itself, an httpx transport, a
sleep function, a limiter) are the client's own arguments.

Building a config checks every value, so a setting that cannot work is refused before any
request with one SettingError (a ValueError) that carries the parameter's name, so the CLI
reports it by its flag.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diagym.llm_policies.client.secrets import redact_url

MODES = ("json_schema", "json_object", "none")
RESPONSE_FORMATS = ("auto", *MODES)
TOOL_CHOICES = ("auto", "required", "none")
# How a reasoning budget reaches the server (docs/REASONING.md): "max_tokens", the reply's cap
# raised by the budget (every server: the budget is enforced by cutting the reply); or
# "reasoning_effort", OpenAI's native control (max_completion_tokens as the cap, which counts
# the hidden reasoning, and a reasoning_effort level), where the probe found it honoured.
REASONING_CONTROLS = ("max_tokens", "reasoning_effort")
# The reasoning_effort level of a budget: the smallest level whose bound holds it.
EFFORT_LEVELS = ((1024, "low"), (4096, "medium"))


class SettingError(ValueError):
    """A setting that cannot work: `setting` names the ClientConfig field, `detail` says what
    is wrong with it; the message is both, "max_tokens must be ..."."""

    def __init__(self, setting: str, detail: str) -> None:
        super().__init__(f"{setting} {detail}")
        self.setting = setting
        self.detail = detail


def finite_number(name: str, value: Any, *, low: float, strict: bool,
                  finite: bool = True) -> float:
    """One ValueError format for numeric settings that cannot work, naming the parameter."""
    bound = f"> {low:g}" if strict else f">= {low:g}"
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = not math.isnan(value) and (not finite or math.isfinite(value))
        ok = ok and (value > low if strict else value >= low)
    if not ok:
        raise SettingError(name, f"must be a finite number {bound} (got {value!r})")
    return value


def integer_at_least(name: str, value: Any, *, low: int) -> int:
    """`value` as an int, or a ValueError naming the parameter when it is not one >= low."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise SettingError(name, f"must be an integer >= {low} (got {value!r})")
    return int(value)


def split_base_url(base_url: Any) -> tuple[str, tuple[str, str] | None]:
    """The URL to show and request (no userinfo, no trailing "/") and its credentials."""
    import httpx  # here, so the CLI reads the defaults above without loading httpx

    example = "like http://127.0.0.1:8080/v1"
    if not isinstance(base_url, str):
        raise SettingError("base_url", f"must be a string, {example}")
    shown = redact_url(base_url.strip())
    try:
        url = httpx.URL(base_url.strip())
    except (httpx.InvalidURL, ValueError, TypeError):
        raise SettingError("base_url", f"is not a valid URL ({shown!r}), {example}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise SettingError("base_url", f"needs an http:// or https:// scheme and a host, "
                                       f"{example} (got {shown!r})")
    if url.query or url.fragment:
        raise SettingError("base_url", f"must not have a query or fragment (got {shown!r})")
    auth = (url.username, url.password) if url.userinfo else None
    return shown.rstrip("/"), auth


def checked_tool_choice(value: Any) -> str | dict[str, Any]:
    """OpenAI's tool_choice: a word, or one function forced by name."""
    if value in TOOL_CHOICES:
        return str(value)
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return {"type": "function", "function": {"name": function["name"]}}
    raise SettingError("tool_choice", f"must be one of {TOOL_CHOICES} or "
                       f'{{"type": "function", "function": {{"name": NAME}}}} (got {value!r})')


@dataclass(frozen=True)
class ClientConfig:
    """What a chat client sends and how long and how often it tries; checked when built.

    The rules these knobs drive (negotiation, retries, bounds) are client/transport.py's
    module docstring."""

    base_url: str = field(repr=False)
    """Everything before "/chat/completions", normally ending in "/v1"
    ("http://127.0.0.1:8080/v1"); a trailing "/" is ignored. Credentials in it
    ("http://user:pass@host/v1") are sent as HTTP Basic auth when there is no key, and the
    client shows the URL without them (hence no repr here)."""

    model: str
    """The model name sent with every request; non-empty."""

    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (unset: no Authorization header, as
    local servers want). The key itself is never part of the config."""

    timeout: float = 60.0
    """Wall-clock seconds for one attempt: connecting, sending and every read together."""

    deadline: float | None = None
    """Wall-clock seconds for the whole call (every attempt, negotiation step and backoff
    sleep); None: `timeout * (max_retries + 1) + max_backoff * max_retries`
    (`call_deadline`)."""

    max_retries: int = 4
    """Retries after the first attempt of a retryable failure (408, 429, 5xx, transport
    errors, malformed 2xx bodies)."""

    backoff: float = 0.5
    """Seconds before the first retry; retry k waits backoff * 2**k with up to 10% jitter."""

    max_backoff: float = 8.0
    """The most seconds a computed backoff waits."""

    max_retry_after: float = 60.0
    """The most seconds a server's Retry-After is honoured for (apart from max_backoff: a
    provider's explicit rate-limit window is respected)."""

    temperature: float = 0.0
    """Sampling temperature, >= 0 (0: greedy)."""

    max_tokens: int = 64
    """The most tokens the model may answer per call."""

    seed: int | None = None
    """Sampling seed sent to the server; None: not sent."""

    response_format: str = "auto"
    """Structured output: "json_schema", "json_object", "none", or "auto" (negotiate from
    json_schema down; "none" when json_schema is None)."""

    json_schema: Mapping[str, Any] | None = None
    """The schema the answer must follow under json_schema / json_object decoding."""

    jitter_seed: int = 0
    """Seed of the backoff jitter, so tests see reproducible delays."""

    max_response_bytes: int = 2_000_000
    """The most bytes a reply may be, received and decoded alike."""

    max_answer_chars: int = 16_000
    """The answer (and each tool call's arguments, and the reasoning) is cut to this many
    characters, and the result says truncated."""

    tool_choice: str | Mapping[str, Any] = "auto"
    """OpenAI's tool_choice for calls with tools: one of TOOL_CHOICES or one function forced
    by name."""

    reasoning_tokens: int | None = None
    """Tokens the model may reason before its answer, on top of `max_tokens` (the answer's own
    reserve); None: no reasoning budget, the reply capped at `max_tokens` alone."""

    reasoning_control: str = "max_tokens"
    """How `reasoning_tokens` is sent: one of REASONING_CONTROLS."""

    @property
    def reply_cap(self) -> int:
        """The most tokens a reply may take, reasoning included."""
        return self.max_tokens + (self.reasoning_tokens or 0)

    def reasoning_fields(self) -> dict[str, Any]:
        """The request fields that cap a reply: max_tokens, or under the native control
        max_completion_tokens and reasoning_effort (REASONING_CONTROLS)."""
        if self.reasoning_tokens is None or self.reasoning_control == "max_tokens":
            return {"max_tokens": self.reply_cap}
        effort = next((level for bound, level in EFFORT_LEVELS
                       if self.reasoning_tokens <= bound), "high")
        return {"max_completion_tokens": self.reply_cap, "reasoning_effort": effort}

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise SettingError("response_format", f"must be one of {RESPONSE_FORMATS} "
                               f"(got {self.response_format!r})")
        if self.response_format == "json_schema" and self.json_schema is None:
            raise ValueError('response_format="json_schema" needs a json_schema')
        if not isinstance(self.model, str) or not self.model:
            raise SettingError("model", f"must be a non-empty string (got {self.model!r})")
        split_base_url(self.base_url)
        checked = {
            "timeout": finite_number("timeout", self.timeout, low=0, strict=True),
            "max_retries": integer_at_least("max_retries", self.max_retries, low=0),
            "backoff": finite_number("backoff", self.backoff, low=0, strict=False),
            "max_backoff": finite_number("max_backoff", self.max_backoff, low=0, strict=False),
            "max_retry_after": finite_number("max_retry_after", self.max_retry_after, low=0,
                                             strict=False),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if self.deadline is not None:
            object.__setattr__(self, "deadline",
                               finite_number("deadline", self.deadline, low=0, strict=True))
        finite_number("deadline", self.call_deadline, low=0, strict=True)
        checked = {
            "temperature": finite_number("temperature", self.temperature, low=0, strict=False),
            "max_tokens": integer_at_least("max_tokens", self.max_tokens, low=1),
            "max_response_bytes": integer_at_least("max_response_bytes",
                                                   self.max_response_bytes, low=1),
            "max_answer_chars": integer_at_least("max_answer_chars", self.max_answer_chars,
                                                 low=1),
            "tool_choice": checked_tool_choice(self.tool_choice),
            "reasoning_tokens": (None if self.reasoning_tokens is None else integer_at_least(
                "reasoning_tokens", self.reasoning_tokens, low=1)),
            "json_schema": dict(self.json_schema) if self.json_schema is not None else None,
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if self.reasoning_control not in REASONING_CONTROLS:
            raise SettingError("reasoning_control", f"must be one of {REASONING_CONTROLS} "
                               f"(got {self.reasoning_control!r})")

    @property
    def call_deadline(self) -> float:
        """The whole call's deadline in seconds: `deadline`, or the default it stands for."""
        if self.deadline is not None:
            return self.deadline
        return self.timeout * (self.max_retries + 1) + self.max_backoff * self.max_retries

    @classmethod
    def of(cls, config: ClientConfig | None, settings: Mapping[str, Any]) -> ClientConfig:
        """`config` with `settings` (ClientConfig fields) replaced, or a config of `settings`
        alone; an unknown setting is a TypeError, as for any keyword argument."""
        if config is None:
            return cls(**settings)
        return dataclasses.replace(config, **settings) if settings else config


_FIELDS = {f.name: f for f in dataclasses.fields(ClientConfig)}


def client_default(name: str) -> Any:
    """The default of ClientConfig's field `name`: what other layers (run settings, CLI
    flags) use instead of restating it."""
    default = _FIELDS[name].default
    if default is dataclasses.MISSING:
        raise KeyError(f"ClientConfig.{name} has no default")
    return default
