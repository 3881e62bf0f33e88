"""Episodes/s of a reference controller through each path the runner can take, side by side.

The goal: 4M episodes of a reference controller through `diagym run` at >= 100x the
episodes/s of a plain-Python simulation of the same rules. Contenders, interleaved over
repeats (the machine is shared, so medians are quoted), all on StatefulWorkflow-v0:
- `rollout batched`: diagym.controllers.rollout.rollout on gym.make's env, which picks the batched
  numba runner for a ReferencePolicy (cache-2 and exact);
- `rollout batched + log`: the same with a RunLog (one JSON line per episode);
- `rollout per-step`: rollout(..., fast=False), the Gymnasium env stepped from Python with
  the per-step adapter (fewer episodes; a rate, so comparable);
- `plain Python`: tests/independent/plain_workflow.py, the independent list-and-int model of
  the rules and controllers, one episode after another.
Then `diagym run --policy cache-2 --episodes 4000000 --json` once, end to end in a
subprocess (interpreter start, imports, kernels loaded from cache, summary, JSON), with the
child's peak resident memory.

    python benchmarks/run_paths.py [--repeats 5] [--episodes 1000000] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure  # noqa: E402
from _output import emit  # noqa: E402

import diagym  # noqa: E402,F401  (registers StatefulWorkflow-v0)
from diagym.controllers.rollout import batched_spec, rollout  # noqa: E402
from diagym.controllers.workflow.adapter import ReferencePolicy  # noqa: E402
from tests.independent.plain_workflow import PlainController, PlainWorkflowEnv, Spec  # noqa: E402

ENV_ID = "StatefulWorkflow-v0"
SEED = 0


def rollout_rate(name: str, episodes: int, fast: bool, log: bool = False
                 ) -> Callable[[], float]:
    env = gym.make(ENV_ID)
    policy = ReferencePolicy.for_env(name, env)
    if fast:
        assert batched_spec(env, policy) is not None, "gym.make's env must take the fast path"

    def run() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.jsonl" if log else None
            start = time.perf_counter()
            played = rollout(env, policy, episodes, seed=SEED, log=path, fast=fast)
            elapsed = time.perf_counter() - start
        assert len(played) == episodes
        return episodes / elapsed

    return run


def plain_rate(name: str, episodes: int) -> Callable[[], float]:
    spec = Spec(**gym.make(ENV_ID).unwrapped.params.as_dict())

    def run() -> float:
        env = PlainWorkflowEnv(spec)
        start = time.perf_counter()
        for seed in range(SEED, SEED + episodes):
            observation, info = env.reset(seed)
            controller = PlainController(name, spec)
            controller.begin(observation, info["task_seed"])
            terminated = False
            while not terminated:
                observation, _, terminated, _, info = env.step(controller.act(observation))
            controller.counters()
        return episodes / (time.perf_counter() - start)

    return run


def end_to_end(episodes: int) -> dict[str, float]:
    """Wall time and peak child RSS of one `diagym run ... --json` in a fresh process."""
    command = [str(ROOT / ".venv" / "bin" / "diagym"), "run", "--env", ENV_ID, "--policy",
               "cache-2", "--episodes", str(episodes), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    summary = json.loads(done.stdout)
    return {"episodes": episodes, "seconds": elapsed, "episodes_per_s": episodes / elapsed,
            "peak_rss_mb": max(peak, before) / 1024, "success": summary.get("success")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=1_000_000,
                        help="episodes per batched repeat")
    parser.add_argument("--log-episodes", type=int, default=50_000)
    parser.add_argument("--step-episodes", type=int, default=5_000)
    parser.add_argument("--plain-episodes", type=int, default=2_000)
    parser.add_argument("--end-to-end", type=int, default=4_000_000,
                        help="episodes of the one `diagym run` (0: skip)")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)

    contenders: dict[str, Callable[[], float]] = {}
    for name in ("cache-2", "exact"):
        contenders[f"rollout batched {name}"] = rollout_rate(name, args.episodes, fast=True)
        contenders[f"rollout per-step {name}"] = rollout_rate(name, args.step_episodes, False)
        contenders[f"plain Python {name}"] = plain_rate(name, args.plain_episodes)
    contenders["rollout batched + log cache-2"] = rollout_rate("cache-2", args.log_episodes,
                                                               fast=True, log=True)
    rates = measure(contenders, args.repeats)
    whole = end_to_end(args.end_to_end) if args.end_to_end else None

    print(f"{ENV_ID}, median of {args.repeats} interleaved repeats")
    print(f"{'contender':<32} {'episodes/s':>14} {'x plain':>9} {'x per-step':>11}")
    ratios: dict[str, dict[str, float]] = {}
    rows = list(rates.items())
    if whole is not None:
        rows.append(("diagym run cache-2 (end to end)", whole["episodes_per_s"]))
    for label, rate in rows:
        name = "exact" if label.endswith("exact") else "cache-2"
        plain = rates[f"plain Python {name}"]
        step = rates[f"rollout per-step {name}"]
        ratios[label] = {"vs_plain": rate / plain, "vs_per_step": rate / step}
        print(f"{label:<32} {rate:>14,.0f} {rate / plain:>9.1f} {rate / step:>11.1f}")
    if whole is not None:
        print(f"diagym run --episodes {whole['episodes']:,}: {whole['seconds']:.2f} s wall, "
              f"peak RSS {whole['peak_rss_mb']:.0f} MB")
    emit({
        "env": ENV_ID,
        "repeats": args.repeats,
        "episodes": {"batched": args.episodes, "batched_log": args.log_episodes,
                     "per_step": args.step_episodes, "plain": args.plain_episodes},
        "episodes_per_s": rates,
        "end_to_end": whole,
        "ratios": ratios,
    }, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
