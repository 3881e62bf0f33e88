"""The parameters of a DACSSteering scenario family, validated once, in one place.

Every knob of seed 002's steering studies is a field here, with its docs line and its check,
so the env, the registered presets and a command line's --env-kwargs mean the same thing by
the same name, and a bad value fails at construction with a ValueError naming the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from diagym.envs._core.checks import check_bool, check_choice, check_int, check_nonnegative
from diagym.envs._core.params import EnvParams
from diagym.envs.dacs.scenario import (
    MAX_AGENTS,
    MAX_DECISIONS,
    MIN_AGENTS,
    MIN_DECISIONS,
    SCENARIOS,
)

CONTEXT_MODES = ("dacs", "flat", "registry")
ORDERS = ("natural", "requester_first", "requester_last")
SCORINGS = ("choice", "keywords")
OBSERVATION_MODES = ("text", "numeric")
MIN_BUDGET, MAX_BUDGET = 128, 1_000_000


@dataclass(frozen=True)
class DacsParams(EnvParams):
    """One level of every factor of the DACS steering family (seed 002; docs/DACS.md).

    n_agents: N, the agents steered by the orchestrator, 3..10.
    family: seed 002's scenario designs: "heterogeneous" (phase 1: a domain per agent) |
        "homogeneous" (s4: one domain, the same keys) | "crossfire" (s5: a domain per agent,
        no other agent's value offered) | "cascade" (s6: answers that must match a decision
        given earlier to another agent) | "dense" (s7/s8: a domain per agent, D large);
        and "conflict" (diagym's trap: paired agents with conflicting values for shared keys).
    decisions: D, requests per agent, 1..15 (an episode answers N x D of them).
    context_mode: what the window holds: "dacs" (the requester's full context, never cut,
        plus registry entries compressed or dropped to fit) | "flat" (every full context, cut
        by the budget) | "registry" (entries only).
    window: W, the window budget in cl100k_base tokens, 128..1_000_000, or None: no budget
        (nothing is cut, as in seed 002's runs).
    order: block order: "natural" (agent index; a focused block first) | "requester_first" |
        "requester_last" (position controls: the requester's block moved first or last).
    agent_chosen_focus: the policy chooses which agent's full context to load (focus actions
        4 + j); context_mode is then ignored.
    focus_cost: the reward paid per focus action, a finite number >= 0.
    scoring: how an answer is scored: "choice" (an option index, Discrete actions: RL and
        controllers) | "keywords" (seed 002's free-text scoring: the action is the reply text,
        correct if it names the right value, contaminated if it names another agent's value;
        no focus actions).
    observation_mode: "text" (the window's text beside its numeric fields) | "numeric" (no
        text: the numeric fields plus which agent's full context is loaded and the window's
        share of the budget, the form SB3's policies and check_env accept).
    """

    TITLE: ClassVar[str] = "DACSSteering"

    n_agents: int = 5
    family: str = "homogeneous"
    decisions: int = 3
    context_mode: str = "dacs"
    window: int | None = 4096
    order: str = "natural"
    agent_chosen_focus: bool = False
    focus_cost: float = 0.0
    scoring: str = "choice"
    observation_mode: str = "text"

    def __post_init__(self) -> None:
        # Normalised in place (numpy integers to int, ints to float), as a frozen dataclass
        # allows only through object.__setattr__, so equal settings compare equal.
        normal = {
            "n_agents": check_int("n_agents", self.n_agents, MIN_AGENTS, MAX_AGENTS),
            "family": check_choice("family", self.family, SCENARIOS),
            "decisions": check_int("decisions", self.decisions, MIN_DECISIONS, MAX_DECISIONS),
            "context_mode": check_choice("context_mode", self.context_mode, CONTEXT_MODES),
            "window": None if self.window is None
            else check_int("window", self.window, MIN_BUDGET, MAX_BUDGET,
                           f"an integer in {MIN_BUDGET}..{MAX_BUDGET} or None"),
            "order": check_choice("order", self.order, ORDERS),
            "agent_chosen_focus": check_bool("agent_chosen_focus", self.agent_chosen_focus),
            "focus_cost": check_nonnegative("focus_cost", self.focus_cost),
            "scoring": check_choice("scoring", self.scoring, SCORINGS),
            "observation_mode": check_choice("observation_mode", self.observation_mode,
                                             OBSERVATION_MODES),
        }
        if normal["scoring"] == "keywords" and normal["agent_chosen_focus"]:
            raise ValueError("scoring must be 'choice' with agent_chosen_focus=True (a "
                             "free-text reply has no focus actions); got 'keywords'")
        self._store(normal)

    def episode_decisions(self) -> tuple[int, int]:
        """(steps of an episode without a focus action, most steps an episode can take): it
        ends after the N x D-th answer, and with agent_chosen_focus each request may take up
        to N focus actions before its answer (the env's cap)."""
        answers = self.n_agents * self.decisions
        return answers, answers * (1 + self.n_agents) if self.agent_chosen_focus else answers

