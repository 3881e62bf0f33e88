"""Does the diagnosis recover an RL agent's memory capacity? The design, the resumable runner
and the loader of the capacity study (its analysis: capacity_report.py).

An agent's memory capacity is set by construction: RecurrentPPO's LSTM hidden width
(`lstm_hidden_size`, the whole of what `entity-lstm` and RecurrentPPO's MLP carry from one
decision to the next). Each (width, training seed) trains on one history preset, the small
preset under history feedback at width 8, where the registers are shown only at the start
and a memoryless agent plays like cache-0 (docs/rl_runs/rl_study_entity_small.md). At each
checkpoint (steps trained so far) the agent is diagnosed on the battery of its shape
(`battery_for`, as `rl-study --diagnose` does) and evaluated on the held-out seeds; the
fitted retention is the cache-k family's maximum-likelihood k with its profile interval,
the lapse the best mechanism's fitted epsilon with its interval.

## Resumable, bsuite style
DIR/runs.jsonl holds one JSON line per finished (width, seed, checkpoint): a rerun skips
those, trains the next checkpoint from the model left in DIR/<run>/ (diagym.analysis.training's
resume) and appends its line only when the diagnosis is done, so a kill loses at most the
checkpoint in progress. A checkpoint is diagnosed before training goes on, since the run
directory keeps one model; every run reaches a checkpoint before any goes on to the next.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagym.analysis.studies.rl_study.design import DIAGNOSIS_SEED, ENV_ID, EVAL_SEEDS, PRESET
from diagym.analysis.summary import summarise
from diagym.analysis.training import TrainConfig, read_curve, train

RUNS_NAME = "runs.jsonl"
# The small preset under history feedback at width 8: registers shown only initially, every
# one of the 8 active, so what the agent keeps between decisions is what it can use.
HISTORY_PRESET = {**PRESET, "width": 8, "snapshot_period": 0}
WIDTHS = (4, 16, 64)  # LSTM hidden units
SEEDS = 2
CHECKPOINTS = (5_000, 10_000, 20_000)
DIAGNOSIS_BUDGET = 256  # battery episodes per diagnosis (battery.allocate, every config >= 1)
EVAL_EPISODES = 256
MEMORY_ARCHS = {"entity-lstm": "recurrent-ppo", "mlp": "recurrent-ppo"}


@dataclass(frozen=True)
class CapacityDesign:
    """Which memory architecture, widths, seeds and checkpoints; the diagnosis budget and the
    held-out episodes per checkpoint. `hyperparameters`: algorithm keyword arguments over
    training's defaults (a shorter rollout lets a check of the pipeline train in seconds);
    the LSTM width is the design's own."""

    arch: str = "entity-lstm"
    widths: tuple[int, ...] = WIDTHS
    seeds: tuple[int, ...] = tuple(range(SEEDS))
    checkpoints: tuple[int, ...] = CHECKPOINTS
    budget: int = DIAGNOSIS_BUDGET
    episodes: int = EVAL_EPISODES
    env_kwargs: dict[str, Any] = field(default_factory=lambda: dict(HISTORY_PRESET))
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.arch not in MEMORY_ARCHS:
            raise ValueError(f"--arch: the capacity study needs one memory architecture, "
                             f"{' | '.join(MEMORY_ARCHS)}; got {self.arch!r}")
        if not self.widths or min(self.widths) < 1:
            raise ValueError(f"--capacity: LSTM widths must be integers >= 1; got "
                             f"{list(self.widths)}")
        if not self.checkpoints or list(self.checkpoints) != sorted(set(self.checkpoints)) \
                or self.checkpoints[0] < 1:
            raise ValueError(f"--checkpoints: steps must be increasing integers >= 1; got "
                             f"{list(self.checkpoints)}")

    def config(self, width: int, seed: int, steps: int) -> TrainConfig:
        """The training config of one run up to `steps` (the LSTM width in policy_kwargs)."""
        return TrainConfig(algo=MEMORY_ARCHS[self.arch], arch=self.arch, env=ENV_ID,
                           env_kwargs=dict(self.env_kwargs), steps=steps, seed=seed,
                           eval_every=self.checkpoints[0],
                           hyperparameters={**self.hyperparameters,
                                            "policy_kwargs": {"lstm_hidden_size": width}})


@dataclass(frozen=True)
class CapacityRow:
    """One diagnosed checkpoint: the built-in capacity, the steps trained, the fitted
    retention (cache-k MLE and interval), the best mechanism and its lapse, held-out
    success."""

    arch: str
    width: int
    seed: int
    checkpoint: int  # the design's step count
    steps: int  # steps actually trained (whole rollouts: at least the checkpoint)
    retention: int  # cache-k MLE
    retention_low: int
    retention_high: int
    best: str
    epsilon: float
    epsilon_low: float
    epsilon_high: float
    success: float
    success_low: float
    success_high: float
    episodes: int  # held-out episodes
    diagnosis_episodes: int
    verdict: str  # the retention verdict in words


def run_name(arch: str, width: int, seed: int) -> str:
    return f"{arch}_h{width}_s{seed}"


def load_rows(out: Path) -> list[CapacityRow]:
    """The finished checkpoints in DIR/runs.jsonl (a torn last line, from a kill mid-write,
    is skipped)."""
    path = Path(out) / RUNS_NAME
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(CapacityRow(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue
    return rows


def _append(out: Path, row: CapacityRow) -> None:
    with (Path(out) / RUNS_NAME).open("a") as handle:
        handle.write(json.dumps(asdict(row)) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def diagnose_checkpoint(model: Path, design: CapacityDesign, width: int, seed: int,
                        checkpoint: int, steps: int) -> CapacityRow:
    """Diagnose the model on the battery of its shape and evaluate it on the held-out seeds."""
    import gymnasium as gym

    from diagym.analysis.diagnose.battery import allocate, battery_for
    from diagym.analysis.diagnose.run import diagnose_policy
    from diagym.controllers.rollout import rollout
    from diagym.controllers.sb3.policy import SB3Policy

    env = gym.make(ENV_ID, **design.env_kwargs)
    params = env.unwrapped.params
    battery = battery_for(params.n_ops, params.candidates, 0)
    allocation = allocate(battery.shares, design.budget, minimum=1)
    diagnosis = diagnose_policy(lambda _env: SB3Policy.load(model), battery=battery.battery,
                                allocation=allocation, seed=DIAGNOSIS_SEED)
    cache = diagnosis.family_fits["cache-k"]
    best = diagnosis.ranked[0]
    lapse = best.epsilon_interval or (best.epsilon, best.epsilon)
    summary = summarise(rollout(env, SB3Policy.load(model), design.episodes,
                                seed=int(EVAL_SEEDS[0])))
    env.close()
    low, high = summary.success_ci
    return CapacityRow(
        arch=design.arch, width=width, seed=seed, checkpoint=checkpoint, steps=steps,
        retention=int(cache.params["k"]), retention_low=int(cache.intervals["k"][0]),
        retention_high=int(cache.intervals["k"][1]), best=best.mechanism.name,
        epsilon=float(best.epsilon), epsilon_low=float(lapse[0]),
        epsilon_high=float(lapse[1]), success=float(summary.success),
        success_low=float(low), success_high=float(high), episodes=summary.episodes,
        diagnosis_episodes=diagnosis.episodes, verdict=diagnosis.verdicts["retention"])


def pending(design: CapacityDesign, done: Iterable[CapacityRow]) -> list[tuple[int, int]]:
    """The (width, seed) runs with a checkpoint not yet in `done`, in design order."""
    finished = {(r.width, r.seed, r.checkpoint) for r in done if r.arch == design.arch}
    return [(w, s) for w in design.widths for s in design.seeds
            if any((w, s, c) not in finished for c in design.checkpoints)]


def run_capacity(design: CapacityDesign, out: Path,
                 runs: Sequence[tuple[int, int]] | None = None,
                 on_row: Callable[[CapacityRow], None] | None = None) -> list[CapacityRow]:
    """Train and diagnose every (width, seed) of `runs` (default: all of the design) at
    every checkpoint not yet in DIR/runs.jsonl, checkpoint by checkpoint (every run reaches
    one before any trains on, so a study stopped early has whole checkpoints); every row of
    the design there afterwards. Several processes may share DIR if their `runs` are
    disjoint (one line per append)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    todo = pending(design, load_rows(out)) if runs is None else list(runs)
    for checkpoint in design.checkpoints:
        finished = {(r.width, r.seed) for r in load_rows(out)
                    if r.arch == design.arch and r.checkpoint == checkpoint}
        for width, seed in todo:
            if (width, seed) in finished:
                continue
            directory = out / run_name(design.arch, width, seed)
            model = train(design.config(width, seed, checkpoint), directory, resume=True)
            steps = int(read_curve(directory / "curve.csv")[-1]["steps"])
            row = diagnose_checkpoint(model, design, width, seed, checkpoint, steps)
            _append(out, row)
            if on_row is not None:
                on_row(row)
    return [r for r in load_rows(out) if r.arch == design.arch and r.width in design.widths
            and r.seed in design.seeds and r.checkpoint in design.checkpoints]
