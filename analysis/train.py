"""`diagym train`: one command from an env id to a trained SB3 agent and its learning curve.

The curve is measured the way every other policy is: the model is wrapped as an SB3Policy and
played by the shared runner on held-out evaluation seeds (never training seeds), so its
success rate at each checkpoint is comparable with the controllers' and LLMs'. Everything a
rerun needs goes to DIR: model.zip, config.json (the exact settings and versions),
curve.csv (steps, success, return, wall seconds; appended as training goes) and curve.png.
"""

from __future__ import annotations

import csv
import json
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controllers.policy import rollout
from controllers.sb3_agents import (
    CONFIG_NAME,
    MODEL_NAME,
    SB3Policy,
    algo_class,
    is_workflow,
    make_vec_env,
)

EVAL_SEED = 1_000_000_000  # held-out: training seeds are seed .. seed + n_envs - 1 and chains


@dataclass
class TrainConfig:
    algo: str
    env: str
    env_kwargs: dict[str, Any]
    steps: int
    n_envs: int = 8
    seed: int = 0
    joint_actions: bool = True
    one_hot: bool = True
    eval_episodes: int = 64
    eval_every: int = 0  # 0: about 20 checkpoints
    torch_threads: int = 1
    hyperparameters: dict[str, Any] = field(default_factory=dict)


def default_hyperparameters(algo: str) -> dict[str, Any]:
    """Short rollouts and small batches: workflow episodes last at most N (+ R) steps."""
    params: dict[str, Any] = {"n_steps": 128, "batch_size": 256, "learning_rate": 3e-4,
                              "gamma": 0.99, "ent_coef": 0.01, "n_epochs": 10}
    if algo == "recurrent-ppo":
        params.update(n_steps=128, batch_size=128)
    return params


def evaluate(policy: SB3Policy, config: TrainConfig) -> tuple[float, float]:
    """(success rate, mean return) over the held-out evaluation seeds, through `rollout`."""
    import gymnasium as gym

    env = gym.make(config.env, **config.env_kwargs)
    records = rollout(env, policy, config.eval_episodes, seed=EVAL_SEED)
    success = float(np.mean([r.success for r in records]))
    if records and records[0].metrics.get("accuracy") is not None:
        success = float(np.mean([r.metrics["accuracy"] for r in records]))
    return success, float(np.mean([r.episode_return for r in records]))


def train(config: TrainConfig, out: Path, progress: bool = False) -> Path:
    """Train, checkpointing the learning curve; returns the model path."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(config.torch_threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    hyper = {**default_hyperparameters(config.algo), **config.hyperparameters}
    config.hyperparameters = hyper
    import sb3_contrib
    import stable_baselines3

    (out / CONFIG_NAME).write_text(json.dumps({
        **asdict(config), "python": platform.python_version(),
        "stable_baselines3": stable_baselines3.__version__,
        "sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__,
    }, indent=2))
    vec = make_vec_env(config.env, config.env_kwargs, config.n_envs, config.joint_actions,
                       config.seed, one_hot=config.one_hot)
    raw_space = None
    if config.one_hot and is_workflow(config.env):
        import gymnasium as gym

        raw_space = gym.make(config.env, **config.env_kwargs).observation_space
    policy_name = "MultiInputLstmPolicy" if config.algo == "recurrent-ppo" \
        else "MultiInputPolicy"
    model = algo_class(config.algo)(policy_name, vec, seed=config.seed, device="cpu",
                                    verbose=0, **hyper)
    every = config.eval_every or max(config.steps // 20, config.n_envs * hyper["n_steps"])
    curve_path = out / "curve.csv"
    with curve_path.open("w", newline="") as handle:
        csv.writer(handle).writerow(["steps", "success", "return", "wall_s"])
    start = time.perf_counter()

    def checkpoint(steps: int) -> None:
        success, ret = evaluate(SB3Policy(model, config.algo, config.env,
                                          config.joint_actions, raw_space=raw_space), config)
        with curve_path.open("a", newline="") as handle:
            csv.writer(handle).writerow([steps, f"{success:.4f}", f"{ret:.4f}",
                                         f"{time.perf_counter() - start:.2f}"])

    class Checkpoints(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = every
            self.bar: Any = None

        def _on_training_start(self) -> None:
            if progress:
                from tqdm import tqdm

                self.bar = tqdm(total=config.steps, unit="step", desc=f"{config.algo}",
                                disable=None)

        def _on_step(self) -> bool:
            if self.bar is not None:
                self.bar.update(self.training_env.num_envs)
            if self.num_timesteps >= self.next:
                checkpoint(self.num_timesteps)
                self.next += every
            return True

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    checkpoint(0)
    model.learn(total_timesteps=config.steps, callback=Checkpoints())
    checkpoint(int(model.num_timesteps))
    model.save(out / MODEL_NAME)
    plot_curve(curve_path, out / "curve.png", f"{config.algo} on {config.env}")
    return out / MODEL_NAME


def read_curve(path: Path) -> list[dict[str, float]]:
    with Path(path).open() as handle:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def plot_curve(curve_csv: Path, out_png: Path, title: str) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = read_curve(curve_csv)
    figure = Figure(figsize=(6, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axis = figure.add_subplot(1, 1, 1)
    axis.plot([r["steps"] for r in rows], [100 * r["success"] for r in rows], marker="o")
    axis.set_xlabel("training steps")
    axis.set_ylabel("held-out success (%)")
    axis.set_ylim(-2, 102)
    axis.set_title(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(out_png)
    return Path(out_png)
