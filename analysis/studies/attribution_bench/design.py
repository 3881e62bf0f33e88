"""The attribution benchmark as data: which battery configurations the fault injector plays,
with which causes and how many episodes.

The configurations are DEFAULT_BATTERY's (analysis/diagnose/battery.py) on which the exact
controller never fails by itself, so every failure is the injected one: history feedback
(b = 3 and b = 8, R = 2), a snapshot after every other success (R = 0, depth 2 and 8) and
hidden resampling with a snapshot after every success (R = 2, width 8 and 4). The one
battery configuration left out is history with hidden resampling, where the registers are
unknown after the first success and the exact controller guesses. Each configuration plays
`episodes` task seeds from `seed`; the causes take turns along the seeds (faults.cause_of),
so each cause gets about episodes / 7 episodes per configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.faults import CAUSES
from diagym.envs.workflow.params import WorkflowParams

# Indices into DEFAULT_BATTERY (its docstring's table).
CONFIGURATION_INDICES = (0, 6, 2, 4, 3, 7)
EPISODES = 140
BASE = "exact"


@dataclass(frozen=True)
class BenchDesign:
    """Configurations, episodes per configuration, first task seed, base controller and
    causes."""

    configurations: tuple[WorkflowParams, ...] = tuple(DEFAULT_BATTERY[i]
                                                    for i in CONFIGURATION_INDICES)
    episodes: int = EPISODES
    seed: int = 0
    base: str = BASE
    causes: tuple[str, ...] = CAUSES
