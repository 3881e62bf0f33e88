"""Play seed 002's phases (design.py) for any policy through the one Policy runner.

Every arm runs on the same scenario seeds, so arms are paired; each arm is its own run in one
shared RunLog, so rerunning with resume plays only the episodes that are missing (an LLM
study makes one model call per decision).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagym.analysis.studies.dacs_study.design import (
    ENV_ID,
    EPISODES,
    PHASES,
    REFERENCE_ARMS,
    env_kwargs,
)
from diagym.analysis.studies.named_runs import NamedRuns
from diagym.analysis.summary import summarise


@dataclass(frozen=True)
class ArmResult:
    phase: str
    cell: dict[str, Any]
    policy: str
    context_mode: str
    episodes: int
    accuracy: float
    contamination: float
    mean_tokens: float
    p95_tokens: float
    invalid: int = 0  # replies a text policy could not turn into an answer (wrong decisions)
    unmeasured: int = 0  # episodes with no env metrics (aborted before a step), not in the rates


def reference_env(kwargs: dict[str, Any]) -> Any:
    """The numeric env the programmed readers play."""
    import gymnasium as gym

    import diagym  # noqa: F401  (registers the ids)

    return gym.make(ENV_ID, **kwargs)


def text_env(kwargs: dict[str, Any]) -> Any:
    """The env behind the text-action wrapper, for a chat model."""
    import diagym  # noqa: F401  (registers the ids)
    from diagym.analysis.llm_runs import make_text_env

    return make_text_env(ENV_ID, **kwargs)


def play_phases(make_policy: Callable[[str, Any], Any],
              arms: tuple[tuple[str, str], ...] = REFERENCE_ARMS, episodes: int = EPISODES,
              window: int | None = None, phases: tuple[str, ...] = tuple(PHASES),
              progress: bool = False, log: Path | None = None, resume: bool = False,
              workers: int = 1,
              make_env: Callable[[dict[str, Any]], Any] = reference_env,
              run_name: str | None = None, retry_failed: bool = False,
              executor: Any = None,
              cells: tuple[str, ...] | None = None) -> list[ArmResult]:
    """Every phase x cell x arm on scenario seeds 0 .. episodes - 1.

    window None: no budget (nothing is cut). make_policy(name, env) builds the arm's policy;
    a log that already holds a run needs resume=True (diagym.controllers.runlog's one rule).
    `workers` episodes of an arm are in flight at once (for policies that wait on a server).
    Each arm of each cell is its own run (prefixed by `run_name` when given); retry_failed
    plays again the episodes whose first failure is provider_error. `executor`
    (diagym.controllers.executors) plays each arm's episodes (default: `workers` threads here).
    `cells`: only the cells of these names (s1 .. s8; None: every cell of the phases).
    The study's one log stays locked for the whole study. With `progress`, the bar counts
    every episode (arms x episodes), a resumed study's finished ones done from its start."""
    jobs = [(phase, cell, arm,
             " ".join(filter(None, (run_name, phase, arm[0], arm[1], str(cell)))))
            for phase in phases for cell in PHASES[phase] for arm in arms
            if cells is None or cell["name"] in cells]
    results = []
    runs = NamedRuns([name for *_job, name in jobs], range(episodes), log=log, resume=resume,
                     retry_failed=retry_failed, workers=workers, executor=executor,
                     progress=progress, desc="dacs-study")
    with runs:
        for phase, cell, (policy_name, mode), name in jobs:
            kwargs = {**env_kwargs(cell), "context_mode": mode, "window": window}
            records = runs.play(name, lambda kwargs=kwargs: make_env(kwargs),
                                lambda env, name=policy_name: make_policy(name, env))
            summary = summarise(records)
            steering = summary.steering
            if steering is None:
                failures = ", ".join(f"{k} {v}" for k, v in summary.failures.items()) or "none"
                raise ValueError(f"{ENV_ID} arm {policy_name} ({mode}) on {cell['name']}: no "
                                 f"episode reached a decision (first failures: {failures})")
            results.append(ArmResult(
                phase=phase, cell=dict(cell), policy=policy_name, context_mode=mode,
                episodes=len(records), accuracy=steering.accuracy,
                contamination=steering.contamination, mean_tokens=steering.mean_tokens,
                p95_tokens=steering.p95_tokens, invalid=steering.invalid,
                unmeasured=steering.unmeasured))
    return results
