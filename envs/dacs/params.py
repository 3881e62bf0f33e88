"""The parameters of a DACSSteering scenario family, validated once, in one place.

Every knob of seed 002's steering studies is a field here, with its docs line and its check,
so the env, the registered presets and a command line's --env-kwargs mean the same thing by
the same name, and a bad value fails at construction with a ValueError naming the parameter.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from envs._core.checks import check_bool, check_choice, check_int, check_known, check_nonnegative
from envs.dacs.scenario import FAMILIES, MAX_AGENTS, MAX_DECISIONS, MIN_AGENTS, MIN_DECISIONS

CONTEXT_MODES = ("dacs", "flat", "registry")
ORDERS = ("requester_first", "requester_last")
MIN_BUDGET, MAX_BUDGET = 128, 1_000_000


@dataclass(frozen=True)
class DacsParams:
    """One level of every factor of the DACS steering family (seed 002; docs/DACS.md).

    n_agents: N, the agents steered by the orchestrator, 3..10.
    family: who holds what: "homogeneous" | "diverse" (disjoint keys, the control) |
        "crossfire" | "cascade" (decisions that must match an earlier one) | "dense".
    decisions: D, requests per agent, 1..15 (an episode answers N x D of them).
    context_mode: what the window holds: "dacs" (the requester's full context plus registry
        entries) | "flat" (every full context, cut by the budget) | "registry" (entries only).
    window: W, the window budget in cl100k_base tokens, 128..1_000_000.
    order: where the requester's block sits: "requester_first" | "requester_last".
    agent_chosen_focus: the policy chooses which agent's full context to load (focus actions
        4 + j); context_mode is then ignored.
    focus_cost: the reward paid per focus action, a finite number >= 0.
    """

    n_agents: int = 5
    family: str = "homogeneous"
    decisions: int = 3
    context_mode: str = "dacs"
    window: int = 4096
    order: str = "requester_last"
    agent_chosen_focus: bool = False
    focus_cost: float = 0.0

    def __post_init__(self) -> None:
        # Normalised in place (numpy integers to int, ints to float), as a frozen dataclass
        # allows only through object.__setattr__, so equal settings compare equal.
        normal = {
            "n_agents": check_int("n_agents", self.n_agents, MIN_AGENTS, MAX_AGENTS),
            "family": check_choice("family", self.family, FAMILIES),
            "decisions": check_int("decisions", self.decisions, MIN_DECISIONS, MAX_DECISIONS),
            "context_mode": check_choice("context_mode", self.context_mode, CONTEXT_MODES),
            "window": check_int("window", self.window, MIN_BUDGET, MAX_BUDGET),
            "order": check_choice("order", self.order, ORDERS),
            "agent_chosen_focus": check_bool("agent_chosen_focus", self.agent_chosen_focus),
            "focus_cost": check_nonnegative("focus_cost", self.focus_cost),
        }
        for name, value in normal.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> DacsParams:
        """Build from keyword arguments, rejecting unknown names with the list of known ones."""
        check_known("DACSSteering", kwargs, (f.name for f in dataclasses.fields(cls)))
        return cls(**kwargs)

    def replace(self, **changes: Any) -> DacsParams:
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
