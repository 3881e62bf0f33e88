"""Env throughput, side by side in one run: StatefulWorkflow-v0 against Gymnasium's CartPole.

Two comparisons, each interleaved over repeats (the machine is shared, so medians are quoted):
- single env: steps/s of gym.make("StatefulWorkflow-v0") vs gym.make("CartPole-v1");
- vector env: env-steps/s of the numba vector env vs CartPoleVectorEnv, both at 1024 envs.

StatefulWorkflow is timed under two workloads, because its episodes end at the first failure:
- `random`: uniform actions. Almost every call fails, so nearly every step is followed by a
  reset; this measures mostly task generation.
- `solving`: a replay of correct actions recorded beforehand on the same seeds, so every
  episode runs all N operations (what a trained agent sees).
CartPole is timed with uniform actions, its usual workload. Every loop steps with
pre-drawn actions and resets on termination (the vector envs autoreset), so the timings
hold env work and the driving loop only, not an agent.

    python benchmarks/env_step.py [--repeats 7] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure  # noqa: E402
from _output import emit  # noqa: E402

import diagym  # noqa: E402,F401  (registers StatefulWorkflow-v0)

ENV_ID = "StatefulWorkflow-v0"


def _correct_action(core: diagym.envs.workflow.env.StatefulWorkflowEnv,
                    mask: np.ndarray) -> np.ndarray:
    """The smallest ready operation and its right slot, read from the simulator state."""
    v = int(np.flatnonzero(mask[: core.params.n_ops])[0])
    return np.array([v, core.correct_slot(v)])


def single_loop(env: gym.Env, actions: np.ndarray, seed: int) -> Callable[[], float]:
    """Steps the env through `actions`, resetting (without a seed) on termination."""

    def run() -> float:
        env.reset(seed=seed)
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return len(actions) / (time.perf_counter() - start)

    return run


def record_single_solving(steps: int, seed: int) -> np.ndarray:
    env = gym.make(ENV_ID)
    _, info = env.reset(seed=seed)
    actions = []
    for _ in range(steps):
        action = _correct_action(env.unwrapped, info["action_mask"])
        actions.append(action)
        _, _, terminated, _, info = env.step(action)
        if terminated:
            _, info = env.reset()
    return np.array(actions)


def vector_loop(vec: gym.vector.VectorEnv, actions: np.ndarray, seed: int) -> Callable[[], float]:
    def run() -> float:
        vec.reset(seed=seed)
        start = time.perf_counter()
        for batch in actions:
            vec.step(batch)
        return actions.shape[0] * vec.num_envs / (time.perf_counter() - start)

    return run


def record_vector_solving(num_envs: int, steps: int, seed: int) -> np.ndarray:
    """Correct actions per env and step (any action on an autoreset step), vectorised."""
    vec = gym.make_vec(ENV_ID, num_envs=num_envs)
    core = vec.unwrapped
    _, info = vec.reset(seed=seed)
    n, b = core.params.n_ops, core.params.candidates
    regs = diagym.envs.workflow.layout.work_offsets(n)[0]
    rows = np.arange(num_envs)
    recorded = np.zeros((steps, num_envs, 2), dtype=np.int64)
    observations = None
    for t in range(steps):
        if observations is None:
            observations, info = vec.reset(seed=seed)
        mask = info["action_mask"][:, :n]
        v = np.argmax(mask, axis=1)
        x = core._work[:, regs:regs + 8]
        target = x[rows, observations["query_register"][rows, v]] % b
        codes = observations["codes"].reshape(num_envs, n, b)
        slot = np.argmax(codes[rows, v] == target[:, None], axis=1)
        recorded[t, :, 0], recorded[t, :, 1] = v, slot
        observations, _, _, _, info = vec.step(recorded[t])
    return recorded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--single-steps", type=int, default=30_000)
    parser.add_argument("--vector-steps", type=int, default=300)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    seed = 0
    draw = np.random.default_rng(seed)

    single = measure(
        {
            "CartPole-v1 random": single_loop(
                gym.make("CartPole-v1"), draw.integers(0, 2, args.single_steps), seed),
            f"{ENV_ID} random": single_loop(
                gym.make(ENV_ID), draw.integers(0, [8, 4], (args.single_steps, 2)), seed),
            f"{ENV_ID} solving": single_loop(
                gym.make(ENV_ID), record_single_solving(args.single_steps, seed), seed),
        },
        args.repeats,
    )
    e, steps = args.num_envs, args.vector_steps
    vector = measure(
        {
            "CartPoleVectorEnv random": vector_loop(
                CartPoleVectorEnv(num_envs=e), draw.integers(0, 2, (steps, e)), seed),
            f"{ENV_ID} vector random": vector_loop(
                gym.make_vec(ENV_ID, num_envs=e), draw.integers(0, [8, 4], (steps, e, 2)),
                seed),
            f"{ENV_ID} vector solving": vector_loop(
                gym.make_vec(ENV_ID, num_envs=e), record_vector_solving(e, steps, seed), seed),
        },
        args.repeats,
    )

    cart, cart_vec = single["CartPole-v1 random"], vector["CartPoleVectorEnv random"]
    rows = [(name, rate, rate / cart) for name, rate in single.items()]
    rows += [(name, rate, rate / cart_vec) for name, rate in vector.items()]
    print(f"median of {args.repeats} interleaved repeats; vector envs at {e} envs")
    print(f"{'contender':<38} {'steps/s':>14} {'x CartPole':>11}")
    for name, rate, ratio in rows:
        print(f"{name:<38} {rate:>14,.0f} {ratio:>11.2f}")
    result = {
        "repeats": args.repeats,
        "num_envs": e,
        "single_steps_per_s": single,
        "vector_env_steps_per_s": vector,
        "single_ratio_vs_cartpole": {k: v / cart for k, v in single.items()},
        "vector_ratio_vs_cartpole_vector": {k: v / cart_vec for k, v in vector.items()},
    }
    emit(result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
