"""The `diagym` command line: one entry point for the paper's analyses.

Each command is one module of this package exposing `add_parser(subparsers)`, which declares
its flags and sets its handler; the handler parses nothing more and calls library code.
Adding a command means adding one module and one entry in COMMANDS.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import ModuleType

from analysis.cli import (
    audit,
    dacs_study,
    llm_study,
    rcwt,
    reproduce,
    rl_study,
    run,
    serve_local,
    train,
)

COMMANDS: tuple[ModuleType, ...] = (
    audit, run, reproduce, llm_study, dacs_study, train, rl_study, serve_local, rcwt,
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every command attached."""
    parser = argparse.ArgumentParser(
        prog="diagym",
        description=("diagym: Gymnasium environments, policies and analyses for diagnosing "
                     "agents that act through tools and text (StatefulWorkflow, seed 003; "
                     "DACSSteering, seed 002; RCWT budgets, seed 000)."),
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse argv (default sys.argv[1:]), run the chosen command, return its exit status."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)
