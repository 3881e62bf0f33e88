"""A chat model as a Policy: the same runner, records and tables as the reference controllers.

Each decision renders the public rules, task, observation and history (render_workflow),
asks an OpenAI-compatible server for one JSON action (client), and hands the raw answer to the
env's TextActionWrapper, which parses it with the same `parse_action` this policy uses to count
schema-valid answers. Every call is written to the run log as it happens, so a killed sweep
keeps what it paid for; a provider that keeps failing ends the episode as `provider_error`
instead of losing it.
"""

from __future__ import annotations

from typing import Any

from controllers.policy import EpisodeAborted, RunLog
from envs import tokens
from envs.workflow_spec import WorkflowSpec
from llm_policies.client import ChatClient
from llm_policies.render_workflow import render
from llm_policies.text_actions import parse_action

PROVIDER_ERROR = "provider_error"
COUNTER_KEYS = (
    "decisions", "schema_valid", "provider_prompt_tokens", "provider_completion_tokens",
    "cl100k_prompt_tokens", "cl100k_completion_tokens", "latency_s", "retries",
)


class LLMPolicy:
    """Plays StatefulWorkflow (wrapped in TextActionWrapper) through a chat model.

    budget / q / coordination / order: optional RCWT fixed-budget assembly of each prompt
    (llm_policies.budget); system_role=False puts the rules in the user turn, for chat formats
    that drop system messages (llama.cpp's gemma format).
    """

    def __init__(self, client: ChatClient, spec: WorkflowSpec, *, budget: int | None = None,
                 q: float = 0.0, coordination: str = "", order: str = "reason_first",
                 system_role: bool = True) -> None:
        self.client = client
        self.spec = spec
        self.budget = budget
        self.q = q
        self.coordination = coordination
        self.order = order
        self.system_role = system_role
        self._log: RunLog | None = None
        self.reset()

    @classmethod
    def for_env(cls, client: ChatClient, env: Any, **kwargs: Any) -> LLMPolicy:
        spec = getattr(env.unwrapped, "spec_params", None)
        if not isinstance(spec, WorkflowSpec):
            raise ValueError(f"LLMPolicy plays StatefulWorkflow envs; got {env.unwrapped!r}")
        return cls(client, spec, **kwargs)

    def describe(self) -> dict[str, Any]:
        """What identifies this policy in a run log (never the API key)."""
        return {
            "llm": self.client.model, "base_url": self.client.base_url,
            "temperature": self.client.temperature, "max_tokens": self.client.max_tokens,
            "seed": self.client.seed, "budget": self.budget, "q": self.q, "order": self.order,
            "system_role": self.system_role,
        }

    def attach_log(self, log: RunLog | None) -> None:
        self._log = log

    def reset(self, *, seed: int | None = None) -> None:
        self._seed = seed
        self._history: list[dict[str, Any]] = []
        self._pending: tuple[int, int] | None = None
        self._counters: dict[str, float] = dict.fromkeys(COUNTER_KEYS, 0)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        if self._pending is not None:  # the outcome of the previous answer
            failure = info.get("failure")
            update = None if failure else [int(x) for x in observation["last_update"]]
            self._history.append({"operation": self._pending[0], "candidate": self._pending[1],
                                  "outcome": failure or "ok", "update": update})
        rendered = render(self.spec, observation, self._history, budget=self.budget, q=self.q,
                          coordination=self.coordination, order=self.order,
                          system_role=self.system_role)
        result = self.client.complete(rendered.messages)
        status, parsed = parse_action(result.text, self.spec.n_ops, self.spec.candidates)
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
                "action_status": status if result.status == "ok" else None,
                "provider_prompt_tokens": result.prompt_tokens,
                "provider_completion_tokens": result.completion_tokens,
                "cl100k_prompt_tokens": rendered.text_tokens,
                "cl100k_completion_tokens": response_tokens,
                "latency_s": result.latency_s,
                "retries": result.retries,
                "response_format": result.response_format,
            })
        if result.status != "ok":
            raise EpisodeAborted(PROVIDER_ERROR, result.error or "")
        self._pending = parsed
        return result.text

    def episode_counters(self) -> dict[str, float]:
        return dict(self._counters)
