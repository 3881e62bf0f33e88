"""The argparse types and flags several commands share: bounded numbers, JSON objects, input
files, --env-kwargs and the run-log flags (--log, --resume, --run-name, --retry-failed).

A bad value is refused by its type, so argparse exits with status 2 and one line naming the
flag and what is allowed before anything is built.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The most episodes or training steps one command takes: a day's play at the batched runner's
# speed is ~10**11, and every count stays far from the int64 seeds and step counters.
MAX_COUNT = 10**12


class HelpValue:
    """A value of a flag's help made only when a help page is formatted: set as an attribute
    of the flag's action and written `%(name)s` in its help. Why: a default that lives in a
    library module (the policy names, a battery's size) would otherwise import that library,
    numba and all, to build a parser that only reports an argument error."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make

    def __str__(self) -> str:
        return str(self._make())


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type for integers in low..high (high None: no upper bound)."""
    allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {value}")
        return value

    return parse


def finite_number(relation: str, holds: Callable[[float], bool]) -> Callable[[str], float]:
    """An argparse type for a finite number for which `holds` is true, refused as "must be a
    finite number <relation>" (nan and inf are never a setting)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not holds(value):
            raise argparse.ArgumentTypeError(f"must be a finite number {relation}; got {text!r}")
        return value

    return parse


positive_float = finite_number("> 0", lambda value: value > 0)  # --timeout: 0 cannot answer
non_negative_float = finite_number(">= 0", lambda value: value >= 0)  # --temperature, USD


MAX_WINDOW_TOKENS = 10_000_000  # a token budget beyond any model's context: a typo
MAX_EPISODES = 10**9  # episodes one command plays: beyond it, counts overflow int64 sums
MAX_PRICES_BYTES = 1 << 20  # a price table is a few kB
MAX_CSV_BYTES = 256 << 20  # a sweep's CSV: far more rows than any sweep writes
MAX_JSON_FLAG_DEPTH = 32  # kwargs are flat; deeper input is a typo or an attack on the parser


def _json_depth(text: str) -> int:
    """The deepest bracket nesting outside strings, without parsing (json.loads recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def json_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs and --hyperparameters: a JSON object."""
    if _json_depth(text) > MAX_JSON_FLAG_DEPTH:
        raise argparse.ArgumentTypeError(
            f"must be a JSON object nested at most {MAX_JSON_FLAG_DEPTH} levels deep; got "
            f"{_json_depth(text)} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r} ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r}")
    return value


def env_kwargs_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs: a JSON object whose render_mode, when given, is a
    name or null (gym.make calls string methods on it before the env can refuse it)."""
    value = json_object(text)
    mode = value.get("render_mode")
    if mode is not None and not isinstance(mode, str):
        raise argparse.ArgumentTypeError(
            f"render_mode must be a name (\"ansi\", \"rgb_array\") or null; got {json.dumps(mode)}")
    return value


def input_file(max_bytes: int) -> Callable[[str], Path]:
    """An argparse type for a file to read whole: a regular file (a device such as /dev/zero
    or a pipe never ends) of at most `max_bytes`."""
    def parse(text: str) -> Path:
        path = Path(text)
        if not path.exists():
            raise argparse.ArgumentTypeError(f"no such file: {text}")
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"must be a regular file; {text} is not one")
        size = path.stat().st_size
        if size > max_bytes:
            raise argparse.ArgumentTypeError(
                f"must be at most {max_bytes:,} bytes; {text} has {size:,}")
        return path

    return parse


def add_env_kwargs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-kwargs", type=env_kwargs_object, default={}, metavar="JSON",
                        help="keyword arguments for gym.make, as a JSON object (default: "
                             "%(default)s, the registered configuration)")


class _RetryFailed(argparse.Action):
    """--retry-failed continues the log, so it sets --resume too."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        namespace.retry_failed = True
        namespace.resume = True


def run_name(text: str) -> str:
    """argparse type for --run-name: a name with something in it."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a non-empty name; got {text!r}")
    return text


def add_log_flags(parser: argparse.ArgumentParser, what: str, run_flags: bool = False) -> None:
    """--log FILE.jsonl and --resume (the RunLog of diagym.controllers.runlog); with run_flags, also
    --run-name and --retry-failed (for commands that pass them to the runner)."""
    parser.add_argument("--log", type=Path, metavar="FILE.jsonl",
                        help=f"append-only run log ({what}; default: none, nothing is logged)")
    parser.add_argument("--resume", action="store_true",
                        help="continue --log: skip finished episodes, rerun unfinished ones; "
                             "refused when the log recorded other settings for the run "
                             "(default: off)")
    if not run_flags:
        return
    parser.add_argument("--run-name", type=run_name, metavar="NAME",
                        help="name the run in --log yourself (default: the run is named by "
                             "what it measures: env, kwargs, policy, model and harness "
                             "settings, never the base URL, port or concurrency); a new name "
                             "starts another run in the same log")
    parser.add_argument("--retry-failed", action=_RetryFailed, nargs=0, default=False,
                        help="continue --log (implies --resume) and play again the episodes "
                             "whose first failure is provider_error; the others stay "
                             "(default: off)")
