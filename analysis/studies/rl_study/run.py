"""`diagym rl-study`: train every (architecture, algo, feedback, width, candidates, seed) of
the grid, then evaluate it and the reference controllers with the shared runner on the same
held-out seeds; optionally diagnose every trained agent on the battery of its shape.

Several training seeds give an agent one row per seed and one "all seeds" row: its success
pooled over them, with a 95% band from resampling the training seeds (the seed-to-seed
spread of RL is the larger part of its uncertainty, which a Wilson interval over episodes of
one agent does not show).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from diagym.analysis.studies.rl_study.design import (
    ARCH_ALGOS,
    DIAGNOSIS_SEED,
    ENV_ID,
    EVAL_SEEDS,
    FEEDBACK,
    FULL_CANDIDATES,
    FULL_PRESET,
    FULL_WIDTHS,
    PRESET,
    REFERENCES,
    WIDTHS,
    agent_name,
)
from diagym.analysis.summary import summarise
from diagym.analysis.training import TrainConfig, train
from diagym.controllers.executors import Executor
from diagym.controllers.rollout import rollout
from diagym.controllers.sb3.policy import SB3Policy
from diagym.controllers.workflow.adapter import ReferencePolicy

BOOTSTRAP = 2000


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
    arch: str = ""  # "" for a reference controller
    candidates: int = 0
    seed: int | None = None  # training seed; None for a reference or the all-seeds row
    diagnosis: str = ""  # the battery's verdicts in words ("" when not diagnosed)


def _row(agent: str, feedback: str, width: int, records: Any, steps: int,
         **extra: Any) -> StudyRow:
    s = summarise(records)
    low, high = s.success_ci
    return StudyRow(agent, feedback, width, s.episodes, s.success, low, high, s.mean_completed,
                    steps, **extra)


def seed_band(rows: Sequence[StudyRow], seed: int = 0) -> StudyRow:
    """The all-seeds row of one agent's per-seed rows: pooled success and mean completed,
    and the 2.5..97.5% range of the pooled success over training seeds resampled with
    replacement."""
    success = np.array([r.success for r in rows])
    episodes = np.array([r.episodes for r in rows], dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(rows), (BOOTSTRAP, len(rows)))
    pooled = (success[draws] * episodes[draws]).sum(1) / episodes[draws].sum(1)
    total = episodes.sum()
    return replace(rows[0], episodes=int(total), seed=None, diagnosis="",
                   success=float((success * episodes).sum() / total),
                   low=float(np.quantile(pooled, 0.025)), high=float(np.quantile(pooled, 0.975)),
                   mean_completed=float(sum(r.mean_completed * r.episodes for r in rows) / total))


def diagnose_agent(model: Path, n_ops: int, candidates: int) -> str:
    """The verdicts of the battery for an agent of this shape (diagym.analysis.diagnose.battery's
    `battery_for`: every configuration an agent of fixed observation and action spaces can
    be played on), in words, one component after another."""
    from diagym.analysis.diagnose.battery import DEFAULT_BUDGET, allocate, battery_for
    from diagym.analysis.diagnose.run import diagnose_policy

    design = battery_for(n_ops, candidates, 0)
    diagnosis = diagnose_policy(lambda env: SB3Policy.load(model), battery=design.battery,
                                allocation=allocate(design.shares, DEFAULT_BUDGET, minimum=1),
                                seed=DIAGNOSIS_SEED)
    best = diagnosis.ranked[0].mechanism.name
    return f"best fit {best}; " + "; ".join(diagnosis.verdicts.values())


def run_dir(out: Path, algo: str, arch: str, feedback: str, width: int, candidates: int | None,
            seed: int, base_seed: int) -> Path:
    """DIR/<algo>_<feedback>_w<width>, with _<arch>, _b<b> and _s<seed> where they differ from
    the default grid's (so a default study's runs keep their names)."""
    name = f"{algo}_{feedback}_w{width}"
    if arch != "mlp":
        name += f"_{arch}"
    if candidates is not None:
        name += f"_b{candidates}"
    if seed != base_seed:
        name += f"_s{seed}"
    return out / name


@dataclass(frozen=True)
class TrainTask:
    """One arm's training run: its config and run directory (a unit of an executor)."""

    config: TrainConfig
    directory: Path


def train_task(task: TrainTask) -> Path:
    """Train (or resume, or find finished) one arm; its model's path. Module-level and a pure
    function of the task, so an executor may run it on any worker (checkpoints then need a
    file system every worker shares)."""
    return train(task.config, task.directory, progress=False, resume=True)


def train_and_evaluate(out: Path, steps: int = 100_000, episodes: int = 256, seed: int = 0,
              progress: bool = False, archs: Sequence[str] = ("mlp",), seeds: int = 1,
              full: bool = False, diagnose: bool = False,
              executor: Executor | None = None) -> list[StudyRow]:
    """Train every arm into its run_dir (a finished run there is resumed, not retrained),
    evaluate it and the references. full: the default N (FULL_PRESET) at FULL_WIDTHS x
    FULL_CANDIDATES instead of the small preset at WIDTHS. With `executor`, the training runs
    are its units (diagym.controllers.executors); evaluation and diagnosis stay here."""
    rows = []
    seeds_from = int(EVAL_SEEDS[0])
    widths = FULL_WIDTHS if full else WIDTHS
    candidate_levels: tuple[int | None, ...] = FULL_CANDIDATES if full else (None,)
    base = FULL_PRESET if full else PRESET
    cells = list(itertools.product(FEEDBACK.items(), widths, candidate_levels))
    tasks: dict[tuple[Any, ...], TrainTask] = {}
    for (feedback, period), width, b in cells:
        kwargs = {**base, "width": width, "snapshot_period": period}
        if b is not None:
            kwargs["candidates"] = b
        for arch in archs:
            for algo in ARCH_ALGOS[arch]:
                for s in range(seed, seed + seeds):
                    config = TrainConfig(algo=algo, arch=arch, env=ENV_ID, env_kwargs=kwargs,
                                         steps=steps, seed=s)
                    tasks[(feedback, width, b, arch, algo, s)] = TrainTask(
                        config, run_dir(out, algo, arch, feedback, width, b, s, seed))
    if executor is None:
        models = {key: train(task.config, task.directory, progress=progress, resume=True)
                  for key, task in tasks.items()}
    else:
        models = dict(zip(tasks, executor.map(train_task, list(tasks.values())), strict=True))
    for (feedback, period), width, b in itertools.product(FEEDBACK.items(), widths,
                                                          candidate_levels):
        kwargs = {**base, "width": width, "snapshot_period": period}
        if b is not None:
            kwargs["candidates"] = b
        env = gym.make(ENV_ID, **kwargs)
        n_ops, n_candidates = env.unwrapped.params.n_ops, env.unwrapped.params.candidates
        for arch in archs:
            for algo in ARCH_ALGOS[arch]:
                per_seed = []
                for s in range(seed, seed + seeds):
                    model = models[(feedback, width, b, arch, algo, s)]
                    records = rollout(env, SB3Policy.load(model), episodes, seed=seeds_from)
                    words = diagnose_agent(model, n_ops, n_candidates) if diagnose else ""
                    name = agent_name(algo, arch) + (f" b={n_candidates}" if full else "")
                    if seeds > 1:
                        name += f" [seed {s}]"
                    per_seed.append(_row(name, feedback, width, records,
                                         steps, arch=arch, candidates=n_candidates,
                                         seed=s if seeds > 1 else None, diagnosis=words))
                rows.extend(per_seed)
                if seeds > 1:
                    rows.append(replace(seed_band(per_seed), agent=name.rsplit(" [", 1)[0]
                                        + f" [{seeds} seeds]"))
        for name in REFERENCES:
            records = rollout(env, ReferencePolicy.for_env(name, env), episodes,
                              seed=seeds_from)
            label = f"{name} b={n_candidates}" if full else name
            rows.append(_row(label, feedback, width, records, 0, candidates=n_candidates))
    return rows
