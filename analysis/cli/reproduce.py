"""`diagym reproduce`: seed 003's grids, predictions, tables and plots in one run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    open_executor,
)
from diagym.analysis.cli.outputs import writable_dir


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="run seed 003's primary factorial and follow-on grids; write results and tables",
        description=(
            "Run the reference controllers over a grid (all: 689,152 episodes) and write "
            "DIR/results.csv (one row per configuration), DIR/tables.md (the shapes of the "
            "paper's Tables 1, 3-6 and C.1-C.7) and PNG profile plots."
        ),
    )
    from diagym.analysis.studies.reproduce.design import GRID_CHOICES

    parser.add_argument("--grid", choices=GRID_CHOICES, default="all",
                        help="which grid to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="output directory (default: results)")
    add_executor_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from diagym.analysis.studies.reproduce.run import reproduce

    writable_dir("--out", args.out)
    check_executor_flags(args)
    with open_executor(args) as executor:  # a --ray-address nobody answers at: one line
        result = reproduce(args.grid, args.out, progress=True, executor=executor)
    total = sum(result.seconds.values())
    stages = ", ".join(f"{name} {value:.2f} s" for name, value in result.seconds.items())
    print(f"{result.configurations:,} configurations, {result.episodes:,} episodes in "
          f"{total:.2f} s ({stages}; drawing the figures took {result.drawing_seconds:.2f} s "
          "in all)")
    print(f"results: {result.results_csv}")
    print(f"tables:  {result.tables_md}")
    print(f"plots:   {len(result.plots)} PNG files in {args.out}")
    from diagym.analysis.report import write_beside

    write_beside(args.out, command="reproduce")
    return 0
