"""DACS vs flat over paired trials with live agents, played into one run log.

Trial t of both conditions uses seed `seed + t` for every model, so the two conditions differ
only in the orchestrator's window. Each (condition, trial) is one executor unit
(diagym.controllers.executors: in this process, or a Ray task under `--executor ray`) that
builds its roles where it plays and returns its call lines and its trial line; the caller's
thread writes them into the study's RunLog (controllers/runlog.py: locked, one writer) when
the unit ends.

The log holds one run per scenario, named by the scenario and described by the settings a
trial's figures depend on, so a resume with other settings is refused (RunChanged) and a
resumed study plays only the units that have no trial line. A unit's lines share its
episode key: the call lines of a unit a kill cut off before its trial line are voided by a
"replay" line before it plays again, so `call_totals` (what a resumed cost limit counts)
counts them apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diagym.analysis.studies.dacs_live.design import CONDITIONS, LiveScenario
from diagym.analysis.studies.dacs_live.trial import run_trial
from diagym.controllers.runlog import RunLog

# (role, seed, scenario) -> the role's chat model ("agent", "judge") or Policy
# ("orchestrator"); roles.LiveRoles is the one that pickles for Ray.
Roles = Callable[..., Any]
STUDY = "dacs-live"
TRIAL = "trial"  # the type of a unit's result line


def unit_key(condition: str, trial: int) -> str:
    """A unit's key in its scenario's run."""
    return f"{condition}-{trial}"


@dataclass(frozen=True)
class TrialUnit:
    """One executor unit: a condition's trial, with everything it needs to play (picklable
    when `roles` is), and its episode key in the log."""

    scenario: LiveScenario
    condition: str
    trial: int
    seed: int
    roles: Any
    max_steps: int
    max_steers: int
    judge_format: str
    episode_key: str | None = None


def play_unit(unit: TrialUnit) -> list[dict[str, Any]]:
    """The unit's call lines, then its trial line (the last, a result line of its key)."""
    lines: list[dict[str, Any]] = []
    seed = unit.seed + unit.trial
    made = [unit.roles("agent", seed, unit.scenario),
            unit.roles("orchestrator", seed, unit.scenario),
            unit.roles("judge", seed, unit.scenario)]
    try:
        decisions, figures = run_trial(
            unit.scenario, unit.condition, unit.trial, agent=made[0], orchestrator=made[1],
            judge=made[2], sink=lines.append, max_steps=unit.max_steps,
            max_steers=unit.max_steers, judge_format=unit.judge_format,
            episode_key=unit.episode_key)
    finally:
        for role in made:
            close = getattr(role, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
    entry = {"type": TRIAL, "key": unit_key(unit.condition, unit.trial),
             "episode_key": unit.episode_key, "scenario": unit.scenario.scenario_id,
             "condition": unit.condition, "trial": unit.trial, "seed": seed, **figures,
             "decisions": [dataclasses.asdict(d) for d in decisions]}
    return [*lines, entry]


def play_trials(scenario: LiveScenario, trials: int, roles: Roles, log: RunLog, *,
                seed: int = 0, max_steps: int = 6, max_steers: int = 3,
                conditions: tuple[str, ...] = CONDITIONS, judge_format: str = "tags",
                executor: Any = None) -> list[dict[str, Any]]:
    """Play every (condition, trial) of `scenario` the open `log` lacks on `executor` (None:
    one at a time here); return the trial lines in order (trial-major, conditions paired)."""
    from diagym.controllers.executors import LocalExecutor

    settings = {"seed": seed, "max_steps": max_steps, "max_steers": max_steers,
                "judge_format": judge_format}
    log.open_run({"study": STUDY, "scenario": scenario.scenario_id, "settings": settings},
                 name=scenario.scenario_id)
    finished = dict(log.results)
    units = []
    for t in range(trials):
        for condition in conditions:
            key = unit_key(condition, t)
            if key not in finished:
                episode_key = f"{log.run_id}:{key}"
                log.begin_episode(episode_key)  # voids what a cut-off attempt wrote
                units.append(TrialUnit(scenario, condition, t, seed, roles, max_steps,
                                       max_steers, judge_format, episode_key))

    def append(unit: TrialUnit, lines: list[dict[str, Any]]) -> None:
        for line in lines[:-1]:
            log.write(line)
        finished[unit_key(unit.condition, unit.trial)] = log.write_result(lines[-1])

    (executor or LocalExecutor(1)).map(play_unit, units, on_result=append)
    return [finished[unit_key(c, t)] for t in range(trials) for c in conditions]
