"""Chat-model runs from settings: the text env and the LLM policy every LLM command plays.

Why here: `diagym run --policy llm`, `llm-study`, `dacs-study --policy llm` and `rcwt sweep`
all turn the same chat-model settings into clients, and each worker of a parallel run needs
its own env, client and policy, so the construction is one factory rather than one per
command. The settings are plain data (never the API key itself, only the variable naming it),
so a run log can describe them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from llm_policies.client.transport import ChatClient
from llm_policies.families import text_family
from llm_policies.oracle import InProcessChat
from llm_policies.policy import LLMPolicy, renderer_for
from llm_policies.text_actions import TextActionWrapper


@dataclass(frozen=True)
class ChatSettings:
    """Where the model is and how it is sampled and decoded; `budget` (RCWT: every prompt
    exactly W cl100k_base tokens) and `system_role` shape the prompts, the rest the client.
    response_format is the decoding: json_schema / json_object constrained, none
    unconstrained, auto negotiated (llm_policies.policy.decoding)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    temperature: float = 0.0
    max_tokens: int = 64
    seed: int | None = None
    response_format: str = "auto"
    system_role: bool = True
    budget: int | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """ChatClient keyword arguments (without the JSON schema, which the prompt sets)."""
        prompt_only = ("system_role", "budget")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in prompt_only}


def make_text_env(env_id: str, **kwargs: Any) -> TextActionWrapper:
    """A registered env behind the text-action wrapper (a model answers in JSON text)."""
    return TextActionWrapper(gym.make(env_id, **kwargs))


def llm_policy_factory(settings: ChatSettings) -> Callable[[Any], LLMPolicy]:
    """make_policy(env) for the runner: a new client and policy for each env it is given."""

    def make_policy(env: Any) -> LLMPolicy:
        renderer = renderer_for(env, budget=settings.budget, system_role=settings.system_role)
        kwargs = settings.client_kwargs()
        if renderer.schema is None:  # a free-text reply cannot be held to a JSON schema
            kwargs["response_format"] = "none"
        client = ChatClient(**kwargs, json_schema=renderer.schema)
        return LLMPolicy(client, renderer, response_format=kwargs["response_format"])

    return make_policy


def oracle_policy_factory(*, budget: int | None = None,
                          system_role: bool = True) -> Callable[[Any], LLMPolicy]:
    """make_policy(env) for the text oracle: an LLMPolicy whose chat model is the env family's
    oracle (llm_policies/oracle.py) in this process, so the run exercises the prompts, the
    parser and the text wrapper as a model's run does, with no server."""

    def make_policy(env: Any) -> LLMPolicy:
        renderer = renderer_for(env, budget=budget, system_role=system_role)
        return LLMPolicy(InProcessChat(text_family(env).oracle()), renderer)

    return make_policy


PREFLIGHT_TIMEOUT_S = 10.0  # at most this long per pre-flight request (less with --timeout)
MAX_MODELS_BYTES = 1_000_000  # a models list larger than this is not read
PROBE = [{"role": "user", "content": "Answer OK."}]


class PreflightError(RuntimeError):
    """The server cannot serve the run: unreachable, the key refused, or no such endpoint or
    model. Raised before any episode, so a run never records failures that only say so."""


def preflight(settings: ChatSettings) -> None:
    """Check the endpoint before a run: GET {base_url}/models, and one tiny completion
    (max_tokens 1, no retries) only when that leaves a doubt (404, or a list without
    `settings.model`). Raises PreflightError for an unreachable server or HTTP 401/403/404,
    ValueError for settings the client refuses (a malformed base URL, say). A server that
    answers the list with anything else (no /models route: 405, 501) is let through, as are
    transient errors, which the run's own calls retry and categorise."""
    import os

    from llm_policies.client.secrets import scrub, url_secrets

    kwargs = {**settings.client_kwargs(), "response_format": "none", "max_tokens": 1,
              "timeout": min(settings.timeout, PREFLIGHT_TIMEOUT_S)}
    with ChatClient(**kwargs, max_retries=0) as client:  # validates every setting first
        key = (os.environ.get(settings.api_key_env) or "").strip()
        secrets = (key, *url_secrets(settings.base_url))

        def stop(why: str) -> PreflightError:
            return PreflightError(scrub(f"the server at {client.base_url} {why}", secrets))

        def refused(status: int) -> PreflightError:
            hint = f"check ${settings.api_key_env}" if key else (
                f"no key was sent: set ${settings.api_key_env}, or --api-key-env NAME")
            return stop(f"refused the key (HTTP {status}); {hint}")

        status, models = _models(settings, key, kwargs["timeout"], stop)
        if status in (401, 403):
            raise refused(status)
        doubt = status == 404 or (models is not None and settings.model not in models)
        if not doubt:
            return
        result = client.complete(PROBE)
        if result.error_kind == "connection":
            raise stop(f"cannot be reached: {result.error}; check --base-url")
        if result.error_kind == "http" and result.http_status in (401, 403):
            raise refused(result.http_status)
        if result.error_kind == "http" and result.http_status == 404:
            raise stop(f"has no chat completions for model {settings.model!r} (HTTP 404: "
                       f"{result.error}); check that --base-url ends in /v1 and --model "
                       "names a model it serves")


def _models(settings: ChatSettings, key: str, timeout: float,
            stop: Callable[[str], PreflightError]) -> tuple[int | None, set[str] | None]:
    """(HTTP status, the listed model ids or None) of GET {base_url}/models; raises through
    `stop` when nothing answers at all."""
    import json
    import time

    import httpx

    url = settings.base_url.strip().rstrip("/") + "/models"
    headers = {"Accept-Encoding": "identity"}  # raw bytes, so the size bound is the real one
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout)) as http, \
                http.stream("GET", url, headers=headers) as response:
            if response.status_code != 200:
                return response.status_code, None
            body, end = b"", time.monotonic() + timeout  # a dripping body is cut at `timeout`
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > MAX_MODELS_BYTES or time.monotonic() > end:
                    return 200, None
    except (httpx.ConnectError, httpx.ConnectTimeout) as error:
        raise stop(f"cannot be reached ({type(error).__name__}: {error}); check --base-url "
                   "and that the server is running") from None
    except httpx.HTTPError:
        return None, None  # it answered something; the run's own calls will say what
    try:
        data = json.loads(body) if body.count(b"[") + body.count(b"{") < 10_000 else None
    except (ValueError, RecursionError):
        return 200, None
    listed = data.get("data") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return 200, None
    return 200, {str(m.get("id")) for m in listed if isinstance(m, dict)}
