"""Training throughput: SB3 on the numba VecEnv against DummyVecEnv, and per architecture.

The environment should be a small share of an RL baseline's training time (goal <= 10%), so
the same MaskablePPO run (StatefulWorkflow-v0, 8 envs, one-hot observations, joint actions,
one torch thread) is timed with both VecEnvs; beside it each network of `diagym train
--arch` (controllers/sb3/entity.py) with its algorithm on the numba VecEnv, so the price of
attention and of memory is a measured ratio to the MLP. Every contender runs side by side,
interleaved over repeats (medians; the machine is shared), with the hyperparameters `diagym
train` gives it. A timing wrapper charges to the env everything SB3 asks of it: step_wait,
reset and the action masks.

    python benchmarks/train.py [--steps 16384] [--repeats 3] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from diagym import envs  # noqa: E402,F401
from diagym.analysis.training import default_hyperparameters  # noqa: E402
from diagym.controllers.sb3.entity import policy_for  # noqa: E402
from diagym.controllers.sb3.policy import algo_class, make_vec_env  # noqa: E402

ENV_ID = "StatefulWorkflow-v0"


def timed(vec: Any) -> Any:
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class Timed(VecEnvWrapper):
        def __init__(self, venv: Any) -> None:
            super().__init__(venv)
            self.seconds = 0.0

        def reset(self) -> Any:
            start = time.perf_counter()
            out = self.venv.reset()
            self.seconds += time.perf_counter() - start
            return out

        def step_wait(self) -> Any:
            start = time.perf_counter()
            out = self.venv.step_wait()
            self.seconds += time.perf_counter() - start
            return out

        def step_async(self, actions: np.ndarray) -> None:
            start = time.perf_counter()
            self.venv.step_async(actions)
            self.seconds += time.perf_counter() - start

        def env_method(self, name: str, *args: Any, indices: Any = None, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = self.venv.env_method(name, *args, indices=indices, **kwargs)
            self.seconds += time.perf_counter() - start
            return out

    return Timed(vec)


# name -> (algo, arch, numba VecEnv?)
CONTENDERS: dict[str, tuple[str, str, bool]] = {
    "numba WorkflowVecEnv": ("maskable-ppo", "mlp", True),
    "DummyVecEnv over gym.make": ("maskable-ppo", "mlp", False),
    "entity (MaskablePPO)": ("maskable-ppo", "entity", True),
    "mlp-lstm (RecurrentPPO)": ("recurrent-ppo", "mlp", True),
    "entity-lstm (RecurrentPPO)": ("recurrent-ppo", "entity-lstm", True),
}


def run(algo: str, arch: str, fast: bool, steps: int) -> tuple[float, float]:
    """(training steps/s, env share of wall time) for one training run."""
    import torch

    torch.set_num_threads(1)
    vec = timed(make_vec_env(ENV_ID, {}, 8, joint_actions=True, seed=0, fast=fast))
    model = algo_class(algo)(policy_for(arch, algo), vec, seed=0, device="cpu", verbose=0,
                             **default_hyperparameters(algo, arch))
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - start
    return model.num_timesteps / wall, vec.seconds / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=16_384)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    run("maskable-ppo", "mlp", False, 2048)  # warm-up: compile cache, torch
    rates: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    shares: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for _ in range(args.repeats):
        for name, contender in CONTENDERS.items():
            rate, share = run(*contender, args.steps)
            rates[name].append(rate)
            shares[name].append(share)
    rate = {k: statistics.median(v) for k, v in rates.items()}
    result = {
        "repeats": args.repeats, "steps": args.steps, "algo": "maskable-ppo", "env": ENV_ID,
        "n_envs": 8,
        "contenders": {k: {"algo": a, "arch": r, "numba": f}
                       for k, (a, r, f) in CONTENDERS.items()},
        "training_steps_per_s": rate,
        "env_share_of_wall_time": {k: statistics.median(v) for k, v in shares.items()},
        "ratio_to_mlp": {k: v / rate["numba WorkflowVecEnv"] for k, v in rate.items()},
    }
    print(f"{ENV_ID}, 8 envs, {args.steps} steps; median of {args.repeats}")
    print(f"{'contender':<30} {'steps/s':>10} {'env share':>10} {'x mlp':>7}")
    for name in CONTENDERS:
        print(f"{name:<30} {rate[name]:>10,.0f} "
              f"{100 * result['env_share_of_wall_time'][name]:>9.1f}% "
              f"{result['ratio_to_mlp'][name]:>7.2f}")
    emit(result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
