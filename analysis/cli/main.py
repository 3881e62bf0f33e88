"""The `diagym` command line: one entry point for the paper's analyses.

Each command is one module of this package exposing `add_parser(subparsers)`, which declares
its flags and sets its handler; the handler parses nothing more and calls library code.
Adding a command means adding one module and one entry in COMMANDS. A handler that finds a
user error raises it (analysis/cli/errors.py); `main` is the one place it becomes a line.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn

from diagym.analysis.cli import (
    audit,
    dacs_live,
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
from diagym.analysis.cli.errors import (
    COST_LIMIT_STATUS,
    USAGE_STATUS,
    is_cost_limit,
    known_errors,
)
from diagym.analysis.interrupts import exit_status, interruptible
from diagym.analysis.terminal import shown

COMMANDS: tuple[ModuleType, ...] = (
    audit, run, reproduce, llm_study, dacs_study, dacs_live, train, rl_study, serve_local, rcwt,
    diagnose, report, summarize, export,
)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line: `diagym <command>: error: <message>`, the same
    shape as a command's own errors (`reported`), so a script or a person reads every CLI
    error the same way (the usage is one `--help` away instead of printed before the
    message).

    A flag is taken only as spelled (no abbreviations: `--epi` would silently mean
    `--episodes` until another flag starts the same way), and a flag the parser does not
    know is the error reported, with the closest one it knows, rather than whatever the
    misspelling left missing (`--epsiodes 5` is not "required: --episodes")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {self._explained(message)} (see {self.prog} --help)\n")

    def _unknown_flags(self) -> list[str]:
        """The flags given to this parser that it does not know (its own, not a command's
        below it: a parser with commands looks only before the command's name)."""
        commands = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        unknown = []
        for token in self._given:
            if token == "--":
                break
            if not token.startswith("-") or self._negative_number_matcher.match(token):
                if commands:
                    break
                continue
            flag = token.split("=", 1)[0]
            if flag not in self._option_string_actions:
                unknown.append(flag)
        return unknown

    def _explained(self, message: str) -> str:
        """The message with the closest known name for a misspelled flag or choice."""
        unknown = self._unknown_flags()
        if unknown:
            flags = [f for f in self._option_string_actions if f.startswith("--")]
            hints = []
            for flag in unknown:
                longer = [f for f in flags if f.startswith(flag)]  # a cut-short flag
                close = longer[:1] if len(longer) == 1 else [  # the names, not the "--"
                    f"--{name}" for name in difflib.get_close_matches(
                        flag.lstrip("-"), [f[2:] for f in flags], n=1)]
                if close:
                    hints.append(close[0] if len(unknown) == 1 else f"{close[0]} for {flag}")
            hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
            if message.startswith("unrecognized arguments:"):
                return message + hint
            return f"unrecognized arguments: {' '.join(unknown)}{hint}"
        choice = re.match(r"argument (.+?): invalid choice: '(.*)' \(choose from (.*)\)$",
                          message)
        if choice:
            allowed = [c.strip().strip("'") for c in choice.group(3).split(",")]
            close = difflib.get_close_matches(choice.group(2), allowed, n=1)
            if close:
                return f"{message}; did you mean {close[0]}?"
        return message

    def _extras(self, args: Any, namespace: Any) -> list[str]:
        """What argparse leaves over, found with no value converted or checked: a flag's
        type may import a library (the policy names), and a misspelt flag is the error to
        report whatever the other values hold."""
        actions = [a for a in self._actions if not isinstance(a, argparse._SubParsersAction)]
        kept = [(action.type, action.choices) for action in actions]
        for action in actions:
            action.type, action.choices = None, None
        try:
            extras = super().parse_known_args(args, namespace)[1]
        finally:
            for action, (kind, choices) in zip(actions, kept, strict=True):
                action.type, action.choices = kind, choices
        return extras or self._unknown_flags()

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """A command's parser refuses what it does not know itself, so the error names the
        command (`diagym rcwt sweep: error: unrecognized arguments: --budget 5`) rather
        than `diagym`. Only the top parser ("diagym", no space) leaves extras to its caller."""
        self._given = [str(a) for a in (sys.argv[1:] if args is None else args)]
        unknown = self._unknown_flags() if " " in self.prog else []
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(self._extras(args, namespace))}")
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and " " in self.prog:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _Listed(Exception):
    """Raised by `_Commands.add_parser` while listing: the command's name and help are known,
    and the rest of its parser is built only if it is chosen."""


class _Commands(argparse._SubParsersAction):
    """The commands, each parser built when its command is chosen: `diagym --help` and an
    error in one command need not import what every other command's flags are made of (the
    policy names, the study designs), so they answer in a fraction of a second."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, ModuleType] = {}
        self._listing = False

    def add_command(self, module: ModuleType) -> None:
        """Name the command of `module` (its add_parser runs up to its add_parser call)."""
        self._listing = True
        try:
            module.add_parser(self)
        except _Listed as listed:
            self._pending[str(listed)] = module
        finally:
            self._listing = False

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self._listing:
            super().add_parser(name, **kwargs)
            raise _Listed(name)
        if name in self._pending:
            return self._name_parser_map[name]  # made when listed, with the same kwargs
        return super().add_parser(name, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        module = self._pending.get(values[0])
        if module is not None:
            module.add_parser(self)
            del self._pending[values[0]]
        super().__call__(parser, namespace, values, option_string)


def _version() -> str:
    import importlib.metadata

    try:
        return f"diagym {importlib.metadata.version('diagym')}"
    except importlib.metadata.PackageNotFoundError:
        return "diagym (not installed: no version recorded)"


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The top-level parser with every command attached (subparsers inherit its class);
    lazy: each command's parser is completed only when that command is parsed (`main`)."""
    parser = OneLineParser(
        prog="diagym",
        description=("diagym: Gymnasium environments, policies and analyses for diagnosing "
                     "agents that act through tools and text (StatefulWorkflow, seed 003; "
                     "DACSSteering, seed 002; RCWT budgets, seed 000)."),
    )
    parser.add_argument("--version", action="version", version=_version(),
                        help="print diagym's version and exit (default: off)")
    if lazy:
        parser.register("action", "parsers", _Commands)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        if lazy:
            subparsers.add_command(command)
        else:
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
    return f"interrupted; continue with: {without_credentials(shlex.join(['diagym', *again]))}"


def without_credentials(command: str) -> str:
    """`command` with the user names and passwords of the URLs in it redacted (a --base-url
    http://user:pass@host/v1): a command line shown or written is scrubbed as every other
    output is, even where the user must then type the password again."""
    from urllib.parse import urlsplit

    from diagym.llm_policies.client.secrets import REDACTED, scrub, url_secrets

    urls = [part for word in shlex.split(command) for part in word.split("=", 1) if "://" in part]
    for url in urls:
        try:
            userinfo = urlsplit(url).netloc.rpartition("@")[0]
        except ValueError:  # not a URL urllib can read: none of it is shown
            command, userinfo = command.replace(url, REDACTED), ""
        if userinfo:
            command = command.replace(f"//{userinfo}@", f"//{REDACTED}@")
    return scrub(command, [secret for url in urls for secret in url_secrets(url)])


def command_name(args: argparse.Namespace) -> str:
    """The command as typed, with its own sub-command where it has them (`rcwt sweep`)."""
    sub = getattr(args, f"{args.command}_command", None)
    return args.command if sub is None else f"{args.command} {sub}"


def reported(command: str, error: Exception) -> int | None:
    """Print the one line of a known error of `diagym <command>` and return its status (a
    cost limit reached: COST_LIMIT_STATUS, what was spent and how to continue; a user error:
    USAGE_STATUS, its message made safe for a terminal); None for an error that is a bug."""
    if is_cost_limit(error):
        print(f"diagym {command}: {shown(str(error))}", file=sys.stderr)
        return COST_LIMIT_STATUS
    if isinstance(error, known_errors()):
        print(f"diagym {command}: error: {shown(str(error))}", file=sys.stderr)
        return USAGE_STATUS
    return None


def interrupted(argv: list[str], args: argparse.Namespace, error: KeyboardInterrupt) -> int:
    """The one line of an interrupted command (how to continue it) and the signal's status."""
    print(f"diagym {args.command}: {resume_hint(argv, args)}", file=sys.stderr, flush=True)
    return exit_status(error)


def main(argv: list[str] | None = None) -> int:
    """Parse argv (default sys.argv[1:]), run the chosen command, return its exit status.

    The command raises what goes wrong; a known error is printed here as one line with
    status 2 (`reported`), never a traceback. Ctrl-C and SIGTERM unwind the command (its
    `finally` blocks stop the local server and close the log), then print one line with the
    command that continues the run, and give the shell's status for the signal (130, 143)
    instead of a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(lazy=True).parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    stopping = None if getattr(args, "signal_ends_it", False) else (
        f"diagym {args.command}: stopping")
    try:
        # The resume line is printed inside the block: a second Ctrl-C then is ignored as it
        # is during the unwinding, where after the block it ended the process by the signal.
        with interruptible(stopping=stopping):
            try:
                return func(args)
            except KeyboardInterrupt as error:
                return interrupted(argv, args, error)
    except KeyboardInterrupt as error:  # one arriving as the block restored the handlers
        return interrupted(argv, args, error)
    except Exception as error:
        status = reported(command_name(args), error)
        if status is None:
            raise
        return status
