"""`diagym rl-study`: SB3 agents beside reference controllers, as a structural profile."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from analysis.cli.common import bounded_int, fail, writable_dir


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rl-study",
        help="MaskablePPO and RecurrentPPO on snapshot/history x width 1/8, profiled",
        description=(
            "Train MaskablePPO (memoryless) and RecurrentPPO (LSTM) on a small StatefulWorkflow "
            "preset under snapshot and history feedback at widths 1 and 8, evaluate them and "
            "reference controllers on held-out seeds, and write a table and a profile plot."
        ),
    )
    parser.add_argument("--steps", type=bounded_int(1), default=100_000, metavar="N",
                        help="training steps per agent (default: %(default)s)")
    parser.add_argument("--episodes", type=bounded_int(1), default=256, metavar="E",
                        help="held-out evaluation episodes per policy (default: %(default)s)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="training seed (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("results/rl"), metavar="DIR",
                        help="where the models, the table and the plot go (default: "
                             "%(default)s)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON rows instead of the table (default: off)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import envs  # noqa: F401  (registers the ids)
    from analysis.studies.rl_study.report import format_rows, write_report
    from analysis.studies.rl_study.run import run_study

    try:
        writable_dir("--out", args.out)
    except ValueError as error:
        return fail("rl-study", error)
    rows = run_study(args.out, steps=args.steps, episodes=args.episodes, seed=args.seed,
                     progress=True)
    table, plot = write_report(rows, args.out)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    else:
        print(format_rows(rows))
        print(f"table: {table}\nplot: {plot}")
    return 0
