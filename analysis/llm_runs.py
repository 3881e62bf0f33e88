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
