"""The executor flags (--executor local|ray, --ray-address): where a command's independent
units play (diagym.controllers.executors), checked before anything slow starts."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    """--executor local|ray and --ray-address (diagym.controllers.executors): where the command's
    independent units play. Checked by `open_executor` before anything slow starts."""
    from diagym.controllers.executors import EXECUTORS

    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="where units play: local (threads of this process) or ray (tasks "
                             "on a Ray instance: the [ray] extra; see docs/SCALING.md) "
                             "(default: %(default)s)")
    parser.add_argument("--ray-address", metavar="ADDR",
                        help="with --executor ray: auto or host:port joins a running cluster "
                             "(default: start a local Ray instance for this run)")


def check_executor_flags(args: argparse.Namespace) -> None:
    """ValueError (one line naming the flag) for --ray-address without --executor ray, and
    for --executor ray where Ray is not installed."""
    from diagym.controllers.executors import RAY_INSTALL

    executor = getattr(args, "executor", "local")
    if getattr(args, "ray_address", None) is not None and executor != "ray":
        raise ValueError("--ray-address joins a Ray cluster: it needs --executor ray")
    if executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ValueError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL}")


def executor_workers(args: argparse.Namespace, chat: bool) -> int | None:
    """Units in flight: --concurrency for a chat model (its calls in flight, one limit for
    the cluster) and for any policy locally (threads); for a programmed policy on Ray, None:
    one per CPU of the cluster."""
    return args.concurrency if chat or getattr(args, "executor", "local") == "local" else None


@contextlib.contextmanager
def open_executor(args: argparse.Namespace, workers: int | None = None) -> Iterator[Any]:
    """The executor of --executor / --ray-address with `workers` units in flight (ray, None:
    one per CPU of the cluster), closed (a local Ray instance shut down) on exit."""
    from diagym.controllers.executors import make_executor

    check_executor_flags(args)
    name = getattr(args, "executor", "local")
    if name == "local":
        workers = 1 if workers is None else workers
    with make_executor(name, getattr(args, "ray_address", None), workers) as executor:
        yield executor
