"""`diagym rl-study`: RL baselines get a structural profile, not one score.

MaskablePPO (memoryless: it sees only the current observation) and RecurrentPPO (an LSTM
memory) are trained on a small StatefulWorkflow preset under snapshot and history feedback at
widths 1 and 8, then evaluated with the shared runner on the follow-on seed block, beside
reference controllers on the same tasks. Seed 003's question for any agent applies: does it
fail on width, on feedback, or not at all? History feedback at width 8 needs memory of
registers shown only initially; a memoryless agent cannot have it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from analysis.stats import wilson_interval
from analysis.studies.reproduce.design import FOLLOW_ON_SEEDS
from analysis.training import TrainConfig, train
from controllers.rollout import rollout
from controllers.sb3.policy import SB3Policy
from controllers.workflow.adapter import ReferencePolicy

PRESET = {"n_ops": 4, "depth": 2, "candidates": 2}
ALGOS = ("maskable-ppo", "recurrent-ppo")
FEEDBACK = {"snapshot": 1, "history": 0}
WIDTHS = (1, 8)
REFERENCES = ("exact", "cache-2", "uniform-candidate")


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


def _row(agent: str, feedback: str, width: int, records: list[Any], steps: int) -> StudyRow:
    wins = sum(r.success for r in records)
    low, high = wilson_interval(wins, len(records))
    return StudyRow(agent, feedback, width, len(records), wins / len(records), float(low),
                    float(high), float(np.mean([r.completed for r in records])), steps)


def run_study(out: Path, steps: int = 100_000, episodes: int = 256, seed: int = 0,
              progress: bool = False) -> list[StudyRow]:
    """Train every (algo, feedback, width), evaluate it and the references; DIR/<run>/..."""
    rows = []
    seeds_from = int(FOLLOW_ON_SEEDS[0])
    for (feedback, period), width in itertools.product(FEEDBACK.items(), WIDTHS):
        kwargs = {**PRESET, "width": width, "snapshot_period": period}
        env = gym.make("StatefulWorkflow-v0", **kwargs)
        for algo in ALGOS:
            run_dir = out / f"{algo}_{feedback}_w{width}"
            config = TrainConfig(algo=algo, env="StatefulWorkflow-v0", env_kwargs=kwargs,
                                 steps=steps, seed=seed)
            model = train(config, run_dir, progress=progress, resume=True)
            records = rollout(env, SB3Policy.load(model), episodes, seed=seeds_from)
            rows.append(_row(algo, feedback, width, records, steps))
        for name in REFERENCES:
            records = rollout(env, ReferencePolicy.for_env(name, env), episodes,
                              seed=seeds_from)
            rows.append(_row(name, feedback, width, records, 0))
    return rows


def format_rows(rows: list[StudyRow]) -> str:
    lines = [
        f"StatefulWorkflow-v0 with {PRESET} (N=4, depth 2, b=2): held-out success on seeds "
        f"{int(FOLLOW_ON_SEEDS[0])}..{int(FOLLOW_ON_SEEDS[-1])} (Wilson 95%).",
        "",
        "| Agent | Feedback | Width | Train steps | Success (%) | 95% interval | "
        "Mean completed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r.agent} | {r.feedback} | {r.width} | {r.train_steps:,} | "
                     f"{100 * r.success:.1f} | [{100 * r.low:.1f}, {100 * r.high:.1f}] | "
                     f"{r.mean_completed:.2f} |")
    return "\n".join(lines)


def plot_rows(rows: list[StudyRow], out_png: Path) -> Path:
    """Success against width, one line per agent, one panel per feedback condition."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    for k, feedback in enumerate(FEEDBACK):
        axis = figure.add_subplot(1, 2, k + 1)
        for agent in dict.fromkeys(r.agent for r in rows):
            points = [r for r in rows if r.agent == agent and r.feedback == feedback]
            axis.plot([r.width for r in points], [100 * r.success for r in points],
                      marker="o", label=agent)
        axis.set_title(f"{feedback} feedback")
        axis.set_xlabel("width")
        axis.set_ylabel("success (%)")
        axis.set_ylim(-2, 102)
    figure.axes[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out_png)
    return out_png
