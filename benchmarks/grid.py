"""Seed 003's whole study: wall time, and the batched runner against the Gymnasium loop.

Two measurements in one run (the machine is shared: medians of repeats are quoted):
- the whole study (`reproduce --grid all`: 689,152 episodes, predictions, statistics,
  tables, plots) with a warm compile cache, per stage;
- episodes/s of the batched runner (controllers/workflow/batched.py) against the same controllers
  played step by step through `gym.make` and the Policy adapter (controllers/policy.py), on
  the same episodes: a subset of the primary grid (every controller, both families, b=4,
  w=4, both observation conditions, depth 4) on the first --adapter-seeds seeds. The two paths
  play identical trajectories (tests/test_controllers.py), so the ratio is pure overhead.

    python benchmarks/grid.py [--repeats 5] [--adapter-seeds 32] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from diagym import envs  # noqa: E402,F401
from diagym.analysis.studies.reproduce.design import PRIMARY_CONTROLLERS  # noqa: E402
from diagym.analysis.studies.reproduce.run import reproduce  # noqa: E402
from diagym.controllers.rollout import rollout
from diagym.controllers.workflow.adapter import ReferencePolicy  # noqa: E402
from diagym.controllers.workflow.batched import run_controller  # noqa: E402
from diagym.envs.workflow.params import WorkflowParams  # noqa: E402


def subset() -> list[tuple[WorkflowParams, str]]:
    return [
        (WorkflowParams(family=family, depth=4, candidates=4, width=4, snapshot_period=period),
         controller)
        for family in ("chains", "barriers") for period in (1, 0)
        for controller in PRIMARY_CONTROLLERS
    ]


def batched_rate(pairs: list[tuple[WorkflowParams, str]], seeds: np.ndarray) -> float:
    start = time.perf_counter()
    for spec, controller in pairs:
        run_controller(spec, controller, seeds)
    return len(pairs) * len(seeds) / (time.perf_counter() - start)


def adapter_rate(pairs: list[tuple[WorkflowParams, str]], seeds: np.ndarray) -> float:
    envs_and_policies = []
    for spec, controller in pairs:
        env = gym.make("StatefulWorkflow-v0", **spec.as_dict())
        envs_and_policies.append((env, ReferencePolicy.for_env(controller, env)))
    start = time.perf_counter()
    for env, policy in envs_and_policies:
        rollout(env, policy, len(seeds), seed=int(seeds[0]), fast=False)  # the per-step path
    return len(pairs) * len(seeds) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--adapter-seeds", type=int, default=32)
    parser.add_argument("--batched-seeds", type=int, default=4096)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)

    pairs = subset()
    adapter_seeds = np.arange(args.adapter_seeds)
    batched_seeds = np.arange(args.batched_seeds)
    with tempfile.TemporaryDirectory() as out:
        reproduce("all", Path(out))  # warm-up: compile cache, imports, font cache
        batched_rate(pairs, adapter_seeds)
        adapter_rate(pairs, adapter_seeds[:2])
        walls: list[float] = []
        stages: dict[str, list[float]] = {}
        batched: list[float] = []
        adapter: list[float] = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = reproduce("all", Path(out))
            walls.append(time.perf_counter() - start)
            for name, value in result.seconds.items():
                stages.setdefault(name, []).append(value)
            batched.append(batched_rate(pairs, batched_seeds))
            adapter.append(adapter_rate(pairs, adapter_seeds))

    wall = statistics.median(walls)
    rate_batched = statistics.median(batched)
    rate_adapter = statistics.median(adapter)
    print(f"median of {args.repeats} repeats")
    print(f"whole study (689,152 episodes, warm cache): {wall:.2f} s "
          f"(range {min(walls):.2f}-{max(walls):.2f})")
    for name, values in stages.items():
        print(f"  {name:<24} {statistics.median(values):.2f} s")
    print(f"{'runner':<36} {'episodes/s':>12}")
    print(f"{'batched (numba, in-kernel)':<36} {rate_batched:>12,.0f}")
    print(f"{'Policy adapter through gym.make':<36} {rate_adapter:>12,.0f}")
    print(f"ratio: {rate_batched / rate_adapter:.0f}x")
    result = {
        "repeats": args.repeats,
        "whole_study_seconds": wall,
        "whole_study_seconds_range": [min(walls), max(walls)],
        "stage_seconds": {k: statistics.median(v) for k, v in stages.items()},
        "batched_episodes_per_s": rate_batched,
        "adapter_episodes_per_s": rate_adapter,
        "batched_over_adapter": rate_batched / rate_adapter,
        "subset": f"{len(pairs)} configurations; adapter on {args.adapter_seeds} seeds, "
                  f"batched on {args.batched_seeds} seeds",
    }
    emit(result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
