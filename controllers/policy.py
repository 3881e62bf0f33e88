"""The contract every agent meets, whatever it is: a reference controller, an LLM policy
(llm_policies/) or a trained SB3 model implements `reset(*, seed=None)` and
`act(observation, info) -> action`, and every episode it plays becomes one EpisodeRecord, so
one runner, one log and one set of tables serve all of them.

The runner is given a PolicyFactory, not a policy: each env (each worker's) gets its own
policy, and what the workers share (a chat model's cost meter and rate limit) is the
factory's to hand to an executor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Policy(Protocol):
    """What the runner needs from an agent."""

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(self, observation: Any, info: dict[str, Any]) -> Any: ...


MakePolicy = Callable[[Any], Policy]  # make_policy(env): what the runner calls per env


@runtime_checkable
class PolicyFactory(Protocol):
    """make_policy(env) with what a command needs to know before it plays: every form of
    --policy (a programmed controller, a chat model, the text oracle, a trained model, a
    user's import spec) is one of these."""

    text_actions: bool  # the policy answers in text: its env is behind the text-action wrapper

    def __call__(self, env: Any) -> Policy: ...

    def for_executor(self, executor: Any) -> PolicyFactory:
        """This factory for `executor`'s workers (diagym.controllers.executors): what they share
        (one cost meter, one rate limit) held by the executor; itself when nothing is
        shared."""
        ...

    def for_harness(self, harness: str) -> PolicyFactory:
        """This factory playing through `harness` (diagym.llm_policies.harness), for a study that
        compares harnesses; itself for a policy that acts without one."""
        ...


@dataclasses.dataclass(frozen=True)
class FunctionFactory:
    """A PolicyFactory of a plain make(env) that shares nothing and plays no harness: a
    programmed controller, a trained model, a factory wrapped to trace its episodes."""

    make: MakePolicy
    text_actions: bool = False

    def __call__(self, env: Any) -> Policy:
        return self.make(env)

    def for_executor(self, executor: Any) -> FunctionFactory:
        return self

    def for_harness(self, harness: str) -> FunctionFactory:
        return self


class EpisodeAborted(Exception):
    """Raised by a policy to end the episode without acting, with a failure category (an LLM
    policy whose provider kept failing raises it with "provider_error"); the runner records
    the episode instead of losing it."""

    def __init__(self, category: str, detail: str = "") -> None:
        super().__init__(f"{category}: {detail}" if detail else category)
        self.category = category


@dataclasses.dataclass(frozen=True)
class EpisodeRecord:
    """One episode, whatever the agent: outcome, work, first failure, the agent's own
    counters (resources of a controller; tokens and latency of an LLM policy) and the env's
    own per-episode metrics (DACSSteering: accuracy, contamination, window tokens)."""

    episode: int
    task_seed: int | None
    success: bool
    completed: int
    calls: int
    errors: int
    first_failure: str | None
    episode_return: float
    counters: dict[str, Any]
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)  # env's episode_metrics
