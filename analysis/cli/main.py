"""The `diagym` command line: one entry point for the paper's analyses.

Each command is one module of this package exposing `add_parser(subparsers)`, which declares
its flags and sets its handler; the handler parses nothing more and calls library code.
Adding a command means adding one module and one entry in COMMANDS.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn

from analysis.cli import (
    audit,
    dacs_study,
    diagnose,
    export,
    llm_study,
    rcwt,
    report,
    reproduce,
    rl_study,
    run,
    serve_local,
    summarize,
    train,
)
from analysis.interrupts import exit_status, interruptible

COMMANDS: tuple[ModuleType, ...] = (
    audit, run, reproduce, llm_study, dacs_study, train, rl_study, serve_local, rcwt, diagnose,
    report, summarize, export,
)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line: `diagym <command>: error: <message>`, the same
    shape as `common.fail`, so a script or a person reads every CLI error the same way (the
    usage is one `--help` away instead of printed before the message)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """A command's parser refuses what it does not know itself, so the error names the
        command (`diagym rcwt sweep: error: unrecognized arguments: --budget 5`) rather
        than `diagym`. Only the top parser ("diagym", no space) leaves extras to its caller."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and " " in self.prog:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every command attached (subparsers inherit its class)."""
    parser = OneLineParser(
        prog="diagym",
        description=("diagym: Gymnasium environments, policies and analyses for diagnosing "
                     "agents that act through tools and text (StatefulWorkflow, seed 003; "
                     "DACSSteering, seed 002; RCWT budgets, seed 000)."),
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def resume_hint(argv: list[str], args: argparse.Namespace) -> str:
    """What to type to continue an interrupted command: the same command with --resume for
    one that logs, or why it cannot be continued."""
    if not hasattr(args, "resume"):
        return "interrupted"
    if getattr(args, "log", True) is None:
        return "interrupted; nothing was logged (no --log FILE), so it cannot be resumed"
    again = list(argv) if {"--resume", "--retry-failed"} & set(argv) else [*argv, "--resume"]
    return f"interrupted; continue with: {shlex.join(['diagym', *again])}"


def main(argv: list[str] | None = None) -> int:
    """Parse argv (default sys.argv[1:]), run the chosen command, return its exit status.

    Ctrl-C and SIGTERM unwind the command (its `finally` blocks stop the local server and
    close the log), then print one line with the command that continues the run, and give
    the shell's status for the signal (130, 143) instead of a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        with interruptible():
            return func(args)
    except KeyboardInterrupt as error:
        print(f"diagym {args.command}: {resume_hint(argv, args)}", file=sys.stderr, flush=True)
        return exit_status(error)
