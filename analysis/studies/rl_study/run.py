"""`diagym rl-study`: train every (algo, feedback, width) of design.py, then evaluate it and
the reference controllers with the shared runner on the same held-out seeds."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from analysis.studies.rl_study.design import (
    ALGOS,
    ENV_ID,
    EVAL_SEEDS,
    FEEDBACK,
    PRESET,
    REFERENCES,
    WIDTHS,
)
from analysis.summary import summarise
from analysis.training import TrainConfig, train
from controllers.rollout import rollout
from controllers.sb3.policy import SB3Policy
from controllers.workflow.adapter import ReferencePolicy


@dataclass(frozen=True)
class StudyRow:
    agent: str
    feedback: str
    width: int
    episodes: int
    success: float
    low: float
    high: float
    mean_completed: float
    train_steps: int


def _row(agent: str, feedback: str, width: int, records: Any, steps: int) -> StudyRow:
    s = summarise(records)
    low, high = s.success_ci
    return StudyRow(agent, feedback, width, s.episodes, s.success, low, high, s.mean_completed,
                    steps)


def run_study(out: Path, steps: int = 100_000, episodes: int = 256, seed: int = 0,
              progress: bool = False) -> list[StudyRow]:
    """Train every (algo, feedback, width) into DIR/<algo>_<feedback>_w<width> (a finished
    run there is resumed, not retrained), evaluate it and the references."""
    rows = []
    seeds_from = int(EVAL_SEEDS[0])
    for (feedback, period), width in itertools.product(FEEDBACK.items(), WIDTHS):
        kwargs = {**PRESET, "width": width, "snapshot_period": period}
        env = gym.make(ENV_ID, **kwargs)
        for algo in ALGOS:
            run_dir = out / f"{algo}_{feedback}_w{width}"
            config = TrainConfig(algo=algo, env=ENV_ID, env_kwargs=kwargs, steps=steps,
                                 seed=seed)
            model = train(config, run_dir, progress=progress, resume=True)
            records = rollout(env, SB3Policy.load(model), episodes, seed=seeds_from)
            rows.append(_row(algo, feedback, width, records, steps))
        for name in REFERENCES:
            records = rollout(env, ReferencePolicy.for_env(name, env), episodes,
                              seed=seeds_from)
            rows.append(_row(name, feedback, width, records, 0))
    return rows
