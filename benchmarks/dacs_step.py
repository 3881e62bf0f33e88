"""DACSSteering-v0 step cost by context mode and N, beside a from-scratch count of its window.

Every DACS step assembles the next request's window under the budget W and counts it exactly,
so its cost grows with the window. For each (N, context mode) this times, side by side in one
run, medians of interleaved repeats (the machine is shared):
- `step`: `env.step(correct answer)` through `gym.make` (wrappers included), episodes of the
  cascade family with D = 15 decisions per agent, resetting when one ends;
- `count`: one `tokens.count` of the whole window of that cell from scratch: what a step
  would cost that recounted its window (the env encodes each block once and sums its lines'
  counts, envs/dacs/window.py, so step / count falls as windows grow).

    python benchmarks/dacs_step.py [--steps 200] [--repeats 5] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure  # noqa: E402
from _output import emit  # noqa: E402

import diagym  # noqa: E402,F401  (registers DACSSteering-v0)
from diagym.envs._core import tokens  # noqa: E402
from diagym.envs.dacs.window import CONTEXT_MODES  # noqa: E402

AGENTS = (3, 5, 10)


def step_loop(env: gym.Env, steps: int) -> Callable[[], float]:
    """Seconds per step of `steps` correct answers (resets excluded from the clock)."""
    core = env.unwrapped

    def run() -> float:
        env.reset(seed=0)
        elapsed = 0.0
        for _ in range(steps):
            action = core.pending.correct
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            elapsed += time.perf_counter() - start
            if terminated or truncated:
                env.reset()
        return elapsed / steps

    return run


def count_loop(text: str, calls: int) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            tokens.count(text)
        return (time.perf_counter() - start) / calls

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)

    contenders: dict[str, Callable[[], float]] = {}
    window_tokens: dict[str, int] = {}
    for n in AGENTS:
        for mode in CONTEXT_MODES:
            env = gym.make("DACSSteering-v0", n_agents=n, family="cascade", decisions=15,
                           context_mode=mode, window=args.window)
            _, info = env.reset(seed=0)
            name = f"N={n} {mode}"
            window_tokens[name] = int(info["window_tokens"])
            contenders[f"{name} step"] = step_loop(env, args.steps)
            contenders[f"{name} count"] = count_loop(env.unwrapped.current_window.text, 50)
    median = measure(contenders, args.repeats)

    print(f"DACSSteering-v0, cascade, D = 15, W = {args.window}; medians of {args.repeats}")
    print(f"{'cell':<16} {'window tokens':>13} {'step (ms)':>10} {'count (ms)':>11} "
          f"{'step / count':>13}")
    rows = {}
    for name in window_tokens:
        step, count = median[f"{name} step"], median[f"{name} count"]
        rows[name] = {"window_tokens": window_tokens[name], "step_ms": 1e3 * step,
                      "count_ms": 1e3 * count, "step_over_count": step / count}
        print(f"{name:<16} {window_tokens[name]:>13,} {1e3 * step:>10.3f} {1e3 * count:>11.3f} "
              f"{step / count:>13.2f}")
    emit({"repeats": args.repeats, "steps": args.steps, "window": args.window, "cells": rows},
         args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
