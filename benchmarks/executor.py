"""`--executor local` against `--executor ray` on this machine: what a unit costs to ship,
how a CPU-bound grid and an I/O-bound LLM study scale with workers, and what Ray's start
costs. Side by side in one run, medians of interleaved repeats (the machine is shared).

- start: `ray.init` of a local instance, and the first map (worker processes start and
  import diagym): paid once per run, not per unit.
- dispatch: no-op units through each executor: the overhead per unit, alone; for Ray both
  one unit per task (`max_batch=1`: a task's round trip) and batched as map batches them.
- grid: seed 003's primary grid (1,536 configurations x 256 seeds, the batched numba
  runner) through run_grids: the CPU-bound case whose units are milliseconds.
- steps: a reference controller played step by step through Gymnasium (rollout_parallel
  with fast=False, one episode per unit): CPU-bound units of about a millisecond of Python.
- llm: seed 003's fractional LLM design (8 cells x --seeds episodes) against the loopback
  fake server (tests/llm_fake_server.py) answering every call after --latency seconds with
  the text oracle's answer: the I/O-bound case; the ideal wall time is decisions x latency /
  workers, and what is above it is overhead.

A model of k machines from these figures is in docs/SCALING.md.

    python benchmarks/executor.py [--repeats 3] [--latency 0.02] [--seeds 8]
                                  [--workers 1,2,4,8] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gymnasium as gym  # noqa: E402
import ray  # noqa: E402
from _measure import measure  # noqa: E402
from _output import emit  # noqa: E402

from diagym import envs  # noqa: E402,F401
from diagym.analysis.llm_runs import ChatPolicyFactory, ChatSettings  # noqa: E402
from diagym.analysis.studies.llm_study.run import run_design  # noqa: E402
from diagym.analysis.studies.reproduce.run import run_grids  # noqa: E402
from diagym.controllers.executors import LocalExecutor  # noqa: E402
from diagym.controllers.executors.ray_executor import RayExecutor  # noqa: E402
from diagym.controllers.registry import make_reference_policy  # noqa: E402
from diagym.controllers.rollout import rollout_parallel  # noqa: E402
from diagym.controllers.runlog import call_totals  # noqa: E402
from diagym.llm_policies.oracle import WorkflowOracle  # noqa: E402
from tests.llm_fake_server import FakeServer, Reply  # noqa: E402

DISPATCH_UNITS = 400
STEP_EPISODES = 400


def _noop(unit: int) -> int:
    return unit


def _make_env() -> gym.Env:
    return gym.make("StatefulWorkflow-v0")


def _exact(env: gym.Env) -> Any:
    return make_reference_policy("exact", env)


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _executors(workers: list[int]) -> dict[str, Any]:
    executors: dict[str, Any] = {}
    for w in workers:
        executors[f"local/{w}"] = LocalExecutor(w)
        executors[f"ray/{w}"] = RayExecutor(workers=w)
    return executors


def dispatch(executors: dict[str, Any], repeats: int) -> dict[str, float]:
    """Microseconds per no-op unit; ray/W/task: one unit per task."""
    executors = {**executors, **{f"{name}/task": RayExecutor(workers=e.workers, max_batch=1)
                                 for name, e in executors.items() if name.startswith("ray")}}
    contenders = {name: (lambda e=e: _timed(lambda: e.map(_noop, range(DISPATCH_UNITS))))
                  for name, e in executors.items()}
    return {name: 1e6 * s / DISPATCH_UNITS for name, s in measure(contenders, repeats).items()}


def grid(executors: dict[str, Any], repeats: int) -> dict[str, float]:
    """Seconds for the primary grid's episodes."""
    contenders = {name: (lambda e=e: _timed(lambda: run_grids(("primary",), executor=e)))
                  for name, e in executors.items()}
    return measure(contenders, repeats)


def steps(executors: dict[str, Any], repeats: int) -> dict[str, float]:
    """Seconds for STEP_EPISODES per-step episodes."""
    def run(executor: Any) -> float:
        return _timed(lambda: rollout_parallel(_make_env, _exact, STEP_EPISODES, fast=False,
                                               executor=executor))

    return measure({name: functools.partial(run, e) for name, e in executors.items()},
                   repeats)


def _oracle_reply(latency: float, request: dict[str, Any]) -> Reply:
    return Reply(content=WorkflowOracle()(request["messages"]), delay=latency)


def llm(executors: dict[str, Any], repeats: int, latency: float, seeds: int,
        scratch: Path) -> tuple[dict[str, float], int]:
    """Seconds for the fractional design, and its decisions."""
    decisions: list[int] = []
    with FakeServer(functools.partial(_oracle_reply, latency)) as server:
        factories = {}
        for name, executor in executors.items():
            settings = ChatSettings(base_url=server.base_url, model="fake",
                                    response_format="none", concurrency=executor.workers,
                                    max_tokens=64)
            factories[name] = ChatPolicyFactory(settings).for_executor(executor)

        def run(name: str) -> float:
            log = scratch / f"{name.replace('/', '-')}-{time.monotonic_ns()}.jsonl"
            executor = executors[name]
            seconds = _timed(lambda: run_design(
                "fractional", 0, seeds, factories[name].for_harness, log=log,
                workers=executor.workers, executor=executor))
            decisions.append(call_totals(log).calls)
            log.unlink()
            return seconds

        result = measure({name: functools.partial(run, name) for name in executors}, repeats)
    assert len(set(decisions)) == 1, decisions  # every contender made the same calls
    return result, decisions[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    cpus = os.cpu_count() or 1

    start = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=256 * 1024 * 1024, logging_level="warning",
             log_to_driver=False)
    ray_start = time.perf_counter() - start
    try:
        executors = _executors(workers)
        first_map = _timed(lambda: executors[f"ray/{max(workers)}"].map(
            _noop, range(4 * max(workers))))
        cpu_executors = {name: e for name, e in executors.items()
                         if e.workers <= cpus or name == "local/1"}
        dispatch_us = dispatch(executors, args.repeats)
        grid_s = grid(cpu_executors, args.repeats)
        steps_s = steps(cpu_executors, args.repeats)
        with tempfile.TemporaryDirectory(prefix="diagym-bench-executor-") as scratch:
            llm_s, decisions = llm(executors, args.repeats, args.latency, args.seeds,
                                   Path(scratch))
    finally:
        ray.shutdown()

    configs, step_units = 1536, STEP_EPISODES
    print(f"machine: {cpus} CPUs (shared); ray start {ray_start:.2f} s, first map with "
          f"{max(workers)} workers (worker processes start) {first_map:.2f} s")
    print(f"\n{'executor':<10} {'us/unit':>8} {'us/task':>8} {'grid s':>8} {'grid ms/cfg':>12} "
          f"{'steps s':>8} {'steps ms/ep':>12} {'llm s':>7} {'llm ideal s':>12} "
          f"{'llm overhead ms/decision':>25}")
    rows = {}
    for name, executor in executors.items():
        ideal = decisions * args.latency / executor.workers
        row = {"workers": executor.workers, "dispatch_us_per_unit": dispatch_us[name],
               "dispatch_us_per_task": dispatch_us.get(f"{name}/task", dispatch_us[name]),
               "llm_s": llm_s[name], "llm_ideal_s": ideal,
               "llm_overhead_ms_per_decision": 1e3 * (llm_s[name] - ideal) / decisions}
        if name in grid_s:
            row.update(grid_s=grid_s[name],
                       grid_ms_per_configuration=1e3 * grid_s[name] / configs,
                       steps_s=steps_s[name],
                       steps_ms_per_episode=1e3 * steps_s[name] / step_units)
        rows[name] = row
        print(f"{name:<10} {row['dispatch_us_per_unit']:>8.0f} "
              f"{row['dispatch_us_per_task']:>8.0f} "
              + (f"{row['grid_s']:>8.2f} {row['grid_ms_per_configuration']:>12.2f} "
                 f"{row['steps_s']:>8.2f} {row['steps_ms_per_episode']:>12.2f} "
                 if "grid_s" in row else f"{'-':>8} {'-':>12} {'-':>8} {'-':>12} ")
              + f"{row['llm_s']:>7.2f} {ideal:>12.2f} "
                f"{row['llm_overhead_ms_per_decision']:>25.2f}")
    base = rows["local/1"]
    speedups = {name: {"grid": base["grid_s"] / row["grid_s"] if "grid_s" in row else None,
                       "steps": base["steps_s"] / row["steps_s"] if "steps_s" in row else None,
                       "llm": base["llm_s"] / row["llm_s"]}
                for name, row in rows.items()}
    print("\nspeed-up over local/1: " + "; ".join(
        f"{name} " + ", ".join(f"{k} {v:.2f}x" for k, v in s.items() if v is not None)
        for name, s in speedups.items()))
    emit({"benchmark": "executor", "cpus": cpus, "repeats": args.repeats,
          "ray_version": ray.__version__, "ray_start_s": ray_start,
          "first_map_s": first_map, "dispatch_units": DISPATCH_UNITS,
          "grid": {"name": "primary", "configurations": configs, "seeds": 256},
          "steps": {"episodes": step_units, "policy": "exact", "fast": False},
          "llm": {"design": "fractional", "seeds_per_cell": args.seeds,
                  "latency_s": args.latency, "decisions": decisions},
          "median_over_repeats": rows, "speedup_over_local_1": speedups,
          "stdev_note": "medians of interleaved repeats on a shared 2-core machine"
          if cpus == 2 else "medians of interleaved repeats"}, args.json_out)


if __name__ == "__main__":
    main()
