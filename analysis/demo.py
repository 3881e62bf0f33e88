"""`make demo`: seed 003's whole study from a fresh checkout, in seconds.

It shows one episode as an agent sees it (the env's own text rendering, played by the `exact`
reference controller), then runs `diagym reproduce --grid all`: 689,152 episodes of the
reference controllers over the primary factorial and the seven follow-on grids, with
predictions, paired-bootstrap intervals, tables and plots, and points at what it wrote.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import gymnasium as gym

from diagym.analysis.cli import main as diagym
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs._core.failures import failure_name

OUT = Path("results")


def show_episode(env_id: str, seed: int) -> None:
    env = gym.make(env_id, render_mode="ansi")
    player = ReferencePolicy.for_env("exact", env)
    player.reset(seed=seed)
    observation, info = env.reset(seed=seed)
    print(env.render())
    terminated = False
    while not terminated:
        action = player.act(observation, info)
        observation, _, terminated, _, info = env.step(action)
        failure = failure_name(info["failure"])
        outcome = "ok" if failure is None else f"FAILED ({failure})"
        shown = "shown" if info["registers_visible"] else "hidden"
        print(f"  execute({action[0]}, {action[1]}) -> {outcome}; completed "
              f"{info['completed_ops']}/{len(observation['completed'])}; registers {shown}")
    print(f"success: {info['success']} in {info['calls']} calls")


def warm_vector_env(env_id: str) -> None:
    """Compile (or load) the batched env's kernels now, so a user's first `gym.make_vec`
    starts at once instead of compiling for half a minute or more; the env says so itself."""
    vec = gym.make_vec(env_id, num_envs=2)
    vec.reset(seed=0)
    vec.step(vec.action_space.sample())
    vec.close()


def main() -> int:
    print("== One StatefulWorkflowHistory-v0 episode, played by the `exact` controller ==")
    show_episode("StatefulWorkflowHistory-v0", seed=0)
    print("\n== diagym reproduce --grid all ==")
    status = diagym(["reproduce", "--grid", "all", "--out", str(OUT)])
    if status:
        return status
    tables = (OUT / "tables.md").read_text()
    table3 = re.search(r"### Table 3\..*?(?=\n### )", tables, flags=re.S)
    if table3:
        print("\n" + table3.group(0).strip())
    print(f"\nEvery table (1, 3-6, C.1-C.7): {OUT / 'tables.md'}")
    print(f"One row per configuration:     {OUT / 'results.csv'}")
    print(f"Structural profiles (PNG):     {OUT}/profile_*.png")
    print("\n== gym.make_vec's kernels, compiled once for your own vector runs ==")
    warm_vector_env("StatefulWorkflow-v0")
    print("Your own policy: `diagym run --env StatefulWorkflow-v0 --policy cache-2 "
          "--episodes 100`, or diagym.controllers.rollout.rollout(env, policy, episodes).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
