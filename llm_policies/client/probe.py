"""What an OpenAI-compatible server actually honours, found out before a run relies on it.

Why probe: servers accept the same request fields with different results. llama-cpp-python
answers HTTP 500 to an OpenAI json_schema response_format, some servers take "tools" and
answer plain text, some refuse "seed". A run that finds out on its first decision has already
spent an episode on it; a probe of six small requests tells a `--harness tools` run up front
that it cannot work, and records in the run what the server did.

The requests (no retries, `timeout` seconds each, at most `PROBE_MAX_TOKENS` tokens):

  * GET {base_url}/models (`list_models`): an unreachable server or HTTP 401/403 ends the
    probe with `ProbeError`; any other answer (no such route, say) lets it go on.
  * a plain request: the baseline that tells a refused field from a broken server.
  * json_schema: OpenAI's response_format with a one-field integer schema; honoured when the
    reply parses as a JSON object with an integer "x".
  * json_object_schema: llama.cpp's {"type": "json_object", "schema": ...}; the same test.
  * tools: one function `ping(x: integer)`, forced by tool_choice; honoured when the reply
    has a call named ping whose arguments parse to an object with an integer x.
  * seed: the plain request with "seed"; honoured when it is answered.
  * reasoning: True when any reply carried reasoning text (reasoning_content / reasoning).
  * reasoning_effort, only when asked (`reasoning=True`, a run with a reasoning budget): the
    plain request with OpenAI's native budget control (reasoning_effort "low",
    max_completion_tokens in place of max_tokens); honoured when answered with reasoning
    (reasoning text, or usage's completion_tokens_details.reasoning_tokens), since a server
    that ignores the fields answers too. Not honoured: the run's budget is sent as max_tokens.

Each capability is True, False (not honoured; `notes` says why) or None (the probe could not
tell; `notes` says why). A refusal (HTTP 4xx other than 408 and 429, or 500 and 501, the way
llama-cpp-python refuses a format) counts as not honoured only when the baseline was
answered; otherwise, and for timeouts, dropped connections, other 5xx and replies cut at the
token limit, the capability is unknown. Server misbehaviour never raises: only an
unreachable server and a refused key do (`ProbeError`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from diagym.llm_policies.client.deadlines import ClampedTransport, Clock, raw_chunks, timed
from diagym.llm_policies.client.secrets import redact_url, scrub, url_secrets
from diagym.llm_policies.client.transport import ChatClient, ChatResult, split_base_url
from diagym.llm_policies.harness import HARNESSES, check_harness_name

__all__ = [
    "HARNESS_NEEDS", "MAX_MODELS_BYTES", "PROBE_MAX_TOKENS", "Capabilities", "ProbeError",
    "ProbeRefused", "check_harness", "list_models", "probe",
]

PROBE_MAX_TOKENS = 32
MAX_MODELS_BYTES = 1_000_000  # a models list larger than this is not read
MAX_MODELS_BRACKETS = 10_000  # nor one nested or listed past this many brackets
CAPABILITIES = ("json_schema", "json_object_schema", "tools", "seed", "reasoning")
# what each harness needs, from the harness table (diagym.llm_policies.harness.HARNESSES)
HARNESS_NEEDS: dict[str, tuple[str, ...]] = {name: kind.needs
                                             for name, kind in HARNESSES.items()}
NEEDS_WORDS = {"tools": "native tool calls"}  # how a refusal names each need
TRANSIENT_STATUSES = frozenset({408, 429})
REFUSAL_5XX = frozenset({500, 501})

X_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
    "additionalProperties": False,
}
PING_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "ping", "description": "Echo an integer back.", "parameters": X_SCHEMA},
}
ASK_PLAIN = [{"role": "user", "content": "Answer OK."}]
ASK_JSON = [{"role": "user", "content": 'Reply with the JSON object {"x": 7} and nothing else.'}]
ASK_TOOL = [{"role": "user", "content": "Call the ping tool with x = 7."}]


class ProbeError(RuntimeError):
    """The server cannot be probed at all: unreachable, or it refused the key."""


class ProbeRefused(ValueError):
    """The server does not honour what the chosen harness needs."""


@dataclass(frozen=True)
class Capabilities:
    """What the server honoured: True, False (see `notes`) or None (unknown, see `notes`)."""

    json_schema: bool | None
    json_object_schema: bool | None
    tools: bool | None
    seed: bool | None
    reasoning: bool | None
    served_model: str | None = None
    notes: dict[str, str] = field(default_factory=dict)
    reasoning_effort: bool | None = None  # probed only for a run with a reasoning budget

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def list_models(base_url: str, key: str | None, timeout: float, *,
                transport: httpx.BaseTransport | None = None
                ) -> tuple[int | None, set[str] | None]:
    """(HTTP status, the listed model ids or None) of GET {base_url}/models, the body read
    up to MAX_MODELS_BYTES, the whole request (connect, headers, body) within `timeout`
    seconds of wall clock: per-read timeouts alone let a server dripping its headers hold
    the check for as long as it drips. (None, None) when the server answered but not with a
    whole response in time. Raises ProbeError when nothing answers at all, ValueError for a
    base_url the chat client would refuse."""
    shown, _credentials = split_base_url(base_url)
    url = base_url.strip().rstrip("/") + "/models"
    headers = {"Accept-Encoding": "identity"}  # raw bytes, so the size bound is the real one
    if key:
        headers["Authorization"] = f"Bearer {key}"
    clock = Clock()
    clock.end = end = time.monotonic() + timeout
    if transport is None:
        transport = ClampedTransport(clock, httpx.Limits(max_connections=1))
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout), transport=transport) as http, \
                http.stream("GET", url, headers=headers) as response:
            if response.status_code != 200:
                return response.status_code, None
            body = b""
            for chunk in timed(raw_chunks(response), end):
                body += chunk
                if len(body) > MAX_MODELS_BYTES:
                    return 200, None
    except (httpx.ConnectError, httpx.ConnectTimeout) as error:
        why = scrub(f"{type(error).__name__}: {error}", (key or "", *url_secrets(base_url)))
        raise ProbeError(f"the server at {shown} cannot be reached ({why}); check --base-url "
                         "and that the server is running") from None
    except (httpx.HTTPError, TimeoutError):
        return None, None
    if body.count(b"[") + body.count(b"{") >= MAX_MODELS_BRACKETS:
        return 200, None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return 200, None
    listed = data.get("data") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return 200, None
    return 200, {str(m.get("id")) for m in listed if isinstance(m, dict)}


def probe(*, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
          timeout: float = 10.0, transport: httpx.BaseTransport | None = None,
          reasoning: bool = False) -> Capabilities:
    """Probe the server (see the module docstring; `reasoning`: probe reasoning_effort too).
    Raises ProbeError for an unreachable server or a refused key, ValueError for settings
    the chat client refuses."""
    key = (os.environ.get(api_key_env) or "").strip()
    common: dict[str, Any] = {
        "base_url": base_url, "model": model, "api_key_env": api_key_env, "timeout": timeout,
        "deadline": timeout, "max_retries": 0, "max_tokens": PROBE_MAX_TOKENS,
        "transport": transport,
    }
    shown = ChatClient(**common, response_format="none").base_url  # validates every setting

    def refused(status: int) -> ProbeError:
        hint = (f"check ${api_key_env}" if key else
                f"no key was sent: set ${api_key_env}, or --api-key-env NAME")
        return ProbeError(f"the server at {shown} refused the key (HTTP {status}); {hint}")

    notes: dict[str, str] = {}
    status, models = list_models(base_url, key, timeout, transport=transport)
    if status in (401, 403):
        raise refused(status)
    if models is not None and model not in models:
        notes["model"] = f"the server lists {len(models)} model(s), not {model!r}"

    def ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
            **settings: Any) -> ChatResult:
        with ChatClient(**common, **settings) as client:
            result = client.complete(messages, tools=tools)
        if result.error_kind == "http" and result.http_status in (401, 403):
            raise refused(result.http_status)
        return result

    plain = ask(ASK_PLAIN, response_format="none")
    results = {
        "json_schema": ask(ASK_JSON, response_format="json_schema", json_schema=X_SCHEMA),
        "json_object_schema": ask(ASK_JSON, response_format="json_object",
                                  json_schema=X_SCHEMA),
        "tools": ask(ASK_TOOL, tools=[PING_TOOL], response_format="none",
                     tool_choice={"type": "function", "function": {"name": "ping"}}),
        "seed": ask(ASK_PLAIN, response_format="none", seed=1),
    }
    replies = [plain, *results.values()]
    verdicts: dict[str, bool | None] = {}
    for name, result in results.items():
        verdicts[name], why = _verdict(name, result, baseline=plain.status == "ok")
        if why:
            notes[name] = why
    answered = [r for r in replies if r.status == "ok"]
    if any(r.reasoning for r in answered):
        verdicts["reasoning"] = True
    elif answered:
        verdicts["reasoning"] = False
        notes["reasoning"] = "no reply carried reasoning text"
    else:
        verdicts["reasoning"] = None
        notes["reasoning"] = "no request was answered"
    served = next((r.served_model for r in answered if r.served_model), None)
    if reasoning:
        effort = ask(ASK_PLAIN, response_format="none", reasoning_tokens=PROBE_MAX_TOKENS,
                     reasoning_control="reasoning_effort")
        verdicts["reasoning_effort"], why = _effort_verdict(effort, plain.status == "ok")
        if why:
            notes["reasoning_effort"] = why
    return Capabilities(**verdicts, served_model=served, notes=notes)


def _effort_verdict(result: ChatResult, baseline: bool) -> tuple[bool | None, str]:
    """(honoured, why not) for the native reasoning control (module docstring)."""
    if result.status != "ok":
        return _verdict("reasoning_effort", result, baseline=baseline)
    if result.reasoning or result.provider_reasoning_tokens:
        return True, ""
    return False, ("answered without reasoning (no reasoning text, no reasoning_tokens in "
                   "usage): the fields are ignored or the model does not reason natively")


def _verdict(name: str, result: ChatResult, *, baseline: bool) -> tuple[bool | None, str]:
    """(honoured, why not) for one capability's reply."""
    if result.status != "ok":
        error = result.error or "no answer"
        status = result.http_status if result.error_kind == "http" else None
        refusal = status is not None and (
            (400 <= status < 500 and status not in TRANSIENT_STATUSES) or status in REFUSAL_5XX)
        if refusal and baseline:
            return False, error
        if refusal:
            return None, f"{error} (the plain request failed too)"
        return None, error
    if name == "seed":
        return True, ""
    if name == "tools":
        if not result.tool_calls:
            return _unless_cut(result, "answered without a tool call")
        pings = [c for c in result.tool_calls if c.name == "ping"]
        if any(_has_integer_x(c.arguments) for c in pings):
            return True, ""
        call = (pings or list(result.tool_calls))[0]
        return _unless_cut(result, f"the tool call was {call.name[:40]!r} with arguments "
                                   f"{call.arguments[:80]!r}, not ping with an integer x")
    if _has_integer_x(result.text):
        return True, ""
    return _unless_cut(result, f"the reply {result.text[:80]!r} is not a JSON object with an "
                               "integer x")


def _unless_cut(result: ChatResult, why: str) -> tuple[bool | None, str]:
    """A reply cut at the token limit (a reasoning model still thinking) tells nothing."""
    if result.finish_reason == "length":
        return None, f"{why}, but the reply was cut at {PROBE_MAX_TOKENS} tokens"
    return False, why


def _has_integer_x(text: str) -> bool:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return (isinstance(value, dict) and isinstance(value.get("x"), int)
            and not isinstance(value.get("x"), bool))


def check_harness(capabilities: Capabilities, harness: str, base_url: str) -> None:
    """Raises ProbeRefused when the server did not honour what `harness` needs. Unknown
    capabilities (None) let the run go on: its own calls retry and categorise failures."""
    check_harness_name(harness)
    shown = redact_url(base_url.strip()).rstrip("/")
    for need in HARNESS_NEEDS[harness]:
        if getattr(capabilities, need) is False:
            others = [h for h, needs in HARNESS_NEEDS.items() if h != harness
                      and all(getattr(capabilities, n) is not False for n in needs)]
            why = capabilities.notes.get(need, "no reason recorded")
            advice = f"; use --harness {' or '.join(others)}" if others else ""
            raise ProbeRefused(f"--harness {harness} needs {NEEDS_WORDS.get(need, need)}; the "
                               f"server at {shown} did not honour them ({why}){advice}")
