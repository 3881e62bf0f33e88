"""The contract every agent meets, whatever it is: a reference controller, an LLM policy
(llm_policies/) or a trained SB3 model implements `reset(*, seed=None)` and
`act(observation, info) -> action`, and every episode it plays becomes one EpisodeRecord, so
one runner, one log and one set of tables serve all of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Policy(Protocol):
    """What the runner needs from an agent."""

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(self, observation: Any, info: dict[str, Any]) -> Any: ...


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
