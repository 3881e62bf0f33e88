"""A chat model as a Policy: the same runner, records and tables as the reference controllers.

Each decision renders what the model sees (a Renderer, chosen per env family in
llm_policies/families.py: prompts.workflow or prompts.dacs), asks a chat model for one JSON
action (a ChatModel: an OpenAI-compatible server through transport.ChatClient, or the text
oracle in this process through oracle.InProcessChat), and hands the raw answer to the env's
TextActionWrapper, which parses it with the same `parse_json_action` this policy uses to
count schema-valid answers. Every call is written to the run log as it happens, with the
decoding it used, so a killed sweep keeps what it paid for; a provider that keeps
failing ends the episode as `provider_error` instead of losing it.
"""

from __future__ import annotations

from typing import Any, Protocol

from controllers.policy import EpisodeAborted
from controllers.runlog import RunLog
from envs._core import tokens
from llm_policies.client.transport import ChatResult
from llm_policies.families import text_family
from llm_policies.text_actions import parse_json_action

PROVIDER_ERROR = "provider_error"
# Decoding: a server that holds the answer to the action schema (constrained), or free text
# that the parser alone judges (unconstrained, as in seed 003's local run); "auto" negotiates
# per client (transport.py) and each call line records the mode that was used.
CONSTRAINED_FORMATS = ("json_schema", "json_object")
DECODINGS = {"json_schema": "constrained", "json_object": "constrained",
             "none": "unconstrained", "auto": "negotiated"}


def decoding(response_format: str | None) -> str | None:
    """"constrained", "unconstrained" or "negotiated" for a response_format setting."""
    return DECODINGS.get(response_format) if response_format is not None else None

COUNTER_KEYS = (
    "decisions", "schema_valid", "provider_prompt_tokens", "provider_completion_tokens",
    "cl100k_prompt_tokens", "cl100k_completion_tokens", "latency_s", "retries",
)


class ChatModel(Protocol):
    """What LLMPolicy needs from a chat client: transport.ChatClient over HTTP, or
    oracle.InProcessChat in this process. The attributes describe the run."""

    model: str
    base_url: str
    temperature: float
    max_tokens: int | None
    seed: int | None

    def complete(self, messages: list[dict[str, Any]]) -> ChatResult: ...


class Renderer(Protocol):
    """What LLMPolicy needs from an env's prompt renderer (prompts.workflow.WorkflowRenderer,
    prompts.dacs.DacsRenderer)."""

    fields: tuple[tuple[str, int], ...] | None  # None: free text, the reply is the action
    schema: dict[str, Any] | None

    def describe(self) -> dict[str, Any]: ...

    def reset(self) -> None: ...

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> None: ...

    def render(self, observation: Any) -> Any: ...


def renderer_for(env: Any, **kwargs: Any) -> Renderer:
    """The renderer of a (possibly wrapped) env, from llm_policies.families."""
    return text_family(env).renderer(env.unwrapped, **kwargs)


class LLMPolicy:
    """Plays a text-action env (wrapped in TextActionWrapper) through a chat model.

    The renderer decides what the model sees (StatefulWorkflow: rules, task, observation,
    history, optionally under an RCWT budget; DACSSteering: the orchestrator's window).
    """

    def __init__(self, client: ChatModel, renderer: Renderer,
                 response_format: str | None = None) -> None:
        """response_format: the structured-output setting the client was built with (see
        `decoding`), for the run's record; None takes the client's own `response_format`
        attribute when it has one (oracle.InProcessChat does, transport.ChatClient not)."""
        self.client = client
        self.renderer = renderer
        self.response_format = (response_format if response_format is not None
                                else getattr(client, "response_format", None))
        self.decoding = decoding(self.response_format)
        self._log: RunLog | None = None
        self.reset()

    @classmethod
    def for_env(cls, client: ChatModel, env: Any, **kwargs: Any) -> LLMPolicy:
        """kwargs go to the renderer (budget, q, coordination, order, system_role)."""
        return cls(client, renderer_for(env, **kwargs))

    def describe(self) -> dict[str, Any]:
        """What this policy measures, for its run's identity: the model, its sampling and the
        prompt harness, never how it is reached (base URL, port, key, timeout)."""
        return {
            "llm": self.client.model, "temperature": self.client.temperature,
            "max_tokens": self.client.max_tokens, "seed": self.client.seed,
            **self.renderer.describe(),
        }

    def attach_log(self, log: RunLog | None) -> None:
        self._log = log

    def reset(self, *, seed: int | None = None) -> None:
        self._seed = seed
        self._pending: tuple[int, ...] | None = None
        self._counters: dict[str, float] = dict.fromkeys(COUNTER_KEYS, 0)
        self.renderer.reset()

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        if self._pending is not None:  # the outcome of the previous answer
            self.renderer.record(self._pending, observation, info)
        rendered = self.renderer.render(observation)
        result = self.client.complete(rendered.messages)
        if self.renderer.fields is None:  # a free-text reply: any answer is well-formed
            status, parsed = "ok", None
        else:
            status, parsed = parse_json_action(result.text, self.renderer.fields)
        answered = result.status == "ok"  # a provider failure is not a model decision
        decision = int(self._counters["decisions"])
        counters = self._counters
        counters["decisions"] += answered
        counters["schema_valid"] += answered and status not in ("invalid_json", "invalid_schema")
        counters["provider_prompt_tokens"] += result.prompt_tokens or 0
        counters["provider_completion_tokens"] += result.completion_tokens or 0
        counters["cl100k_prompt_tokens"] += rendered.text_tokens
        response_tokens = tokens.count(result.text)
        counters["cl100k_completion_tokens"] += response_tokens
        counters["latency_s"] += result.latency_s
        counters["retries"] += result.retries
        if self._log is not None:
            self._log.write({
                "type": "call",
                "episode_key": self._log.key(self._seed) if self._seed is not None else None,
                "decision": decision,
                "prompt": rendered.messages,
                "response": result.text,
                "status": result.status,
                "error": result.error,
                "http_status": result.http_status,
                "action_status": status if answered else None,
                "provider_prompt_tokens": result.prompt_tokens,
                "provider_completion_tokens": result.completion_tokens,
                "cl100k_prompt_tokens": rendered.text_tokens,
                "cl100k_completion_tokens": response_tokens,
                "latency_s": result.latency_s,
                "retries": result.retries,
                "response_format": result.response_format,
                "decoding": decoding(result.response_format),
            })
        if not answered:
            raise EpisodeAborted(PROVIDER_ERROR, result.error or "")
        self._pending = parsed
        return result.text

    def episode_counters(self) -> dict[str, float]:
        return dict(self._counters)
