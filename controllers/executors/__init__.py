"""Where a run's independent units play: in this process (`local`) or on a Ray cluster (`ray`).

Why an interface: every command that plays many independent units (episodes of `run`, the
cells and episodes of the studies, the configurations of `reproduce`) needs the same three
things from wherever they play: run a picklable function over units with a bounded number in
flight, hand each result back to the caller's thread as it arrives (so the caller's one run
log writes it, and nothing is lost or written twice), and stop starting units at the first
failure. `Executor.map` is that contract; `Executor.share` gives workers one copy of a
thread-safe object (a rate limit, a cost meter) instead of one each.

A unit's result must depend on the unit alone, never on which worker played it: seeds come
from the unit (a task seed), so `--executor ray` writes the same records as `--executor
local` for the same run identity. Resume is by key and stays the caller's: it drops the units
its log already holds before calling `map`.

    executor = make_executor("ray", address=None, workers=4)
    with executor:
        results = executor.map(play, units, on_result=lambda unit, result: log(result))
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from diagym.controllers.executors.local import LocalExecutor

__all__ = ["EXECUTORS", "Executor", "ExecutorUnavailable", "LocalExecutor", "make_executor",
           "worker_state"]

EXECUTORS = ("local", "ray")
RAY_INSTALL = "pip install 'diagym[ray]'"

U = TypeVar("U")
R = TypeVar("R")
T = TypeVar("T")


class ExecutorUnavailable(RuntimeError):
    """The executor asked for cannot run here (Ray not installed); one line for the user."""


class Executor(Protocol):
    """Runs independent units; see the module docstring for the contract."""

    name: str
    workers: int
    # True when units run in this process and may write to the caller's objects (a RunLog)
    # directly; False when they run elsewhere and must return what they would have written.
    in_process: bool

    def map(self, fn: Callable[[U], R], units: Iterable[U],
            on_result: Callable[[U, R], None] | None = None) -> list[R]:
        """fn(unit) for every unit, at most `workers` in flight; on_result(unit, result) is
        called in the caller's thread as each finishes (in finishing order); the results come
        back in unit order. The first failure stops new units from starting; those in flight
        finish (their results are handed to on_result) and the failure is raised."""
        ...

    def share(self, build: Callable[[], T], oneway: tuple[str, ...] = ()) -> T:
        """The thread-safe object build() makes, as every worker sees it: the object itself
        in process, a proxy with the same methods and attributes over the one copy a cluster
        hosts (built there, so it need not be picklable). `oneway`: methods whose return
        the proxy need not wait for."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


def make_executor(name: str = "local", address: str | None = None,
                  workers: int | None = None) -> Executor:
    """The executor `name` (EXECUTORS) with `workers` units in flight (None: 1 locally, one
    per CPU of the Ray cluster). `address` (ray only):
    None starts a local Ray instance for this run, "auto" or host:port joins a running
    cluster; a Ray instance this process already started is used as it is."""
    if name == "local":
        if address is not None:
            raise ValueError("address is only for the ray executor")
        return LocalExecutor(1 if workers is None else workers)
    if name == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ExecutorUnavailable(
                f"the ray executor needs Ray, which is not installed: {RAY_INSTALL}") from None
        from diagym.controllers.executors.ray_executor import RayExecutor

        return RayExecutor(address=address, workers=workers)
    raise ValueError(f"executor must be one of {' | '.join(EXECUTORS)}; got {name!r}")


# Per worker (thread and process) state built once and reused by its units: a worker's env
# and policy, say. Keyed by a token the driver gives the run, so a long-lived Ray worker
# serving many runs keeps only the last few.
_STATE_KEPT = 4
_state = threading.local()


def worker_state(token: str, build: Callable[[], T]) -> T:
    """The value this worker built for `token`, built now with build() the first time."""
    cache: OrderedDict[str, Any] | None = getattr(_state, "cache", None)
    if cache is None:
        cache = _state.cache = OrderedDict()
    if token in cache:
        cache.move_to_end(token)
        return cache[token]
    value = cache[token] = build()
    while len(cache) > _STATE_KEPT:
        cache.popitem(last=False)
    return value
