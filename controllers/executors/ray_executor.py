"""The Ray executor: units as Ray tasks on a local instance or a cluster (Ray core only).

Why Ray core: it schedules picklable functions over the cores of many machines, retries a
task whose worker process died (`max_retries`), and hosts shared objects as actors; nothing
here needs Ray's libraries on top. Ray is imported only here, when `--executor ray` asks.

- Units in flight: `workers` tasks at a time (default: the cluster's CPUs), each asking for
  `cpus / workers` of a CPU when that is below one, so an I/O-bound run (a chat server) can
  keep more units in flight than there are cores. A new task starts only when one finishes:
  after the first failure nothing new starts, those in flight finish and are handed back.
- Batches: a task carries one unit at first; once units are seen to be shorter than a
  task's round trip, later tasks carry several (TARGET_TASK_SECONDS of work), each unit's
  result still handed back on its own. A failing unit ends its batch there.
- A worker killed mid-unit: Ray runs the unit again on another worker (MAX_RETRIES); the
  driver never saw a result for it, so nothing is doubled, and nothing is lost.
- Shared objects (`share`): built once inside a threaded actor; workers get a `Hosted` proxy
  that forwards method calls and attribute reads to it, so every worker of the cluster draws
  on one rate limit and one cost meter, the same classes the local run uses.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import ray
import ray.cloudpickle
from ray.exceptions import RayActorError, RayError, RayTaskError, TaskCancelledError

from diagym.controllers.executors.local import check_workers

U = TypeVar("U")
R = TypeVar("R")
T = TypeVar("T")

# Retries of a unit whose worker process died (not of a unit that raised: that is its result).
MAX_RETRIES = 3
# Units shorter than a task's round trip (about 2 ms on a busy 2-core machine,
# docs/benchmarks/executor.json) go in batches sized so that a task takes about this long:
# a unit of a second (a chat model's episode) still goes alone.
TARGET_TASK_SECONDS = 0.05
MAX_BATCH = 256
# Threads of a hosting actor: every worker blocked in a limiter's acquire holds one, and a
# release must still find one free.
HOST_THREADS = 1024
# A local instance's object store: results are records and log lines, not arrays of models.
LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class _Failure:
    """An exception raised in a worker, carried back as its class, args and attributes.

    Why not let Ray pickle it: an exception whose __init__ takes other arguments than its
    message (CostLimitReached(spent, limit, estimate)) cannot be unpickled, and the caller
    would get Ray's "failed to deserialize" instead of the run's own error line. The
    worker's traceback is not carried: the error reads as it does under the local executor."""

    kind: type[BaseException]
    args: tuple[Any, ...]
    state: dict[str, Any]

    @classmethod
    def of(cls, error: BaseException) -> _Failure:
        return cls(type(error), error.args, dict(vars(error)))

    def rebuild(self) -> BaseException:
        error = self.kind.__new__(self.kind)
        error.args = self.args
        vars(error).update(self.state)
        return error


def _call(fn: Callable[[Any], Any], units: list[Any]
          ) -> tuple[list[Any], _Failure | None, float]:
    """One task: fn over a batch of units in order, stopping at the first that raises; the
    results, that failure, and the seconds the batch took (for the next batch's size)."""
    results = []
    start = time.perf_counter()
    for unit in units:
        try:
            results.append(fn(unit))
        except Exception as error:
            return results, _Failure.of(error), time.perf_counter() - start
    return results, None, time.perf_counter() - start


_remote_call = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(_call)


def _cause(error: RayError) -> BaseException:
    """The unit's own exception (CostLimitReached, EpisodeAborted...) rather than Ray's
    wrapper, so a caller handles a failure the same way under either executor."""
    cause = getattr(error, "cause", None) if isinstance(error, RayTaskError) else None
    return cause if isinstance(cause, BaseException) else error


# How long a cluster's address may take to accept a connection: Ray itself waits minutes.
CONNECT_TIMEOUT_S = 5.0


def _check_reachable(address: str) -> None:
    """ConnectionError (one line) when nothing listens at a host:port address, before Ray's
    own connection attempt, which retries for minutes; "auto" and ray:// addresses are Ray's
    to resolve."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray-address must be auto or HOST:PORT; got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise ConnectionError(f"--ray-address {address}: no Ray cluster answers there "
                              f"({error.strerror or error}); start one with `ray start "
                              "--head`, or check the address") from None


def _send_file_modules_by_value() -> None:
    """Modules loaded from a file outside sys.path (a user's `path/to/file.py:Name` policy,
    controllers/loading.py) cannot be imported by name in a worker: pickle their classes and
    functions by value instead, so such a policy plays on Ray as it does locally."""
    global _SCANNED
    if len(sys.modules) == _SCANNED:  # nothing imported since the last look
        return
    _SCANNED = len(sys.modules)
    roots = {Path(p or ".").resolve() for p in sys.path}
    for name, module in list(sys.modules.items()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)  # not frozen
        if "." in name or not origin or name in _BY_VALUE or name == "__main__":
            continue
        path = Path(origin).resolve()
        folder = path.parent.parent if path.stem == "__init__" else path.parent
        if path.suffix == ".py" and folder not in roots and not _importable(name):
            ray.cloudpickle.register_pickle_by_value(module)
            _BY_VALUE.add(name)


def _importable(name: str) -> bool:
    """Whether an import system finder (sys.path, an editable install's) finds `name`
    afresh, as a worker's import would; a module already imported does not count."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        try:
            if callable(find_spec) and find_spec(name, None) is not None:
                return True
        except (ImportError, ValueError, TypeError):
            continue
    return False


_BY_VALUE: set[str] = set()
_SCANNED = 0


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """ray.init replaces the process's SIGTERM handler with its own, which exits at once
    (sys.exit, Ray's stack dump, status 15 and no resume line); the caller's handlers
    (diagym's: unwind, print how to resume, 143) are put back once it has started. Ray's
    processes are still stopped: the executor shuts Ray down as the command unwinds, and
    Ray's atexit hook remains."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)


class RayExecutor:
    """Units as Ray tasks; see the module docstring."""

    name = "ray"
    in_process = False

    def __init__(self, address: str | None = None, workers: int | None = None,
                 max_batch: int = MAX_BATCH) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be an integer >= 1; got {max_batch!r}")
        self.max_batch = max_batch
        self._started = False
        if not ray.is_initialized():
            if address is not None:
                _check_reachable(address)
            with _signal_handlers_kept():
                if address is None:
                    ray.init(address="local", include_dashboard=False, logging_level="warning",
                             object_store_memory=LOCAL_OBJECT_STORE_BYTES)
                else:
                    ray.init(address=address, logging_level="warning")
            self._started = True
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        self.cpus = cpus
        self.workers = max(1, int(cpus)) if workers is None else check_workers(workers)
        self.cpus_per_unit = min(1.0, cpus / self.workers)

    def map(self, fn: Callable[[U], R], units: Iterable[U],
            on_result: Callable[[U, R], None] | None = None) -> list[R]:
        units = list(units)
        if not units:
            return []
        _send_file_modules_by_value()
        try:
            fn_ref = ray.put(fn)  # sent once, not with every unit
        except (TypeError, pickle.PicklingError) as error:
            why = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise TypeError("the ray executor sends the run's env and policy factories to its "
                            f"workers, and they cannot be pickled: {why[:300]}") from None
        remote = _remote_call.options(num_cpus=self.cpus_per_unit)
        results: dict[int, R] = {}
        failure: BaseException | None = None
        running: dict[Any, range] = {}
        start, batch, unit_seconds = 0, 1, None
        try:
            while True:
                while failure is None and len(running) < self.workers and start < len(units):
                    # never so large that a worker would wait for the others' last units
                    size = max(1, min(batch, (len(units) - start) // self.workers))
                    indices = range(start, start + size)
                    start += size
                    running[remote.remote(fn_ref, [units[i] for i in indices])] = indices
                if not running:
                    break
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    indices = running.pop(ref)
                    try:
                        batch_results, failed, seconds = ray.get(ref)
                    except TaskCancelledError as error:
                        failure = failure or error
                        continue
                    except RayError as error:
                        failure = failure or _cause(error)
                        continue
                    for index, result in zip(indices, batch_results, strict=False):
                        results[index] = result
                        if on_result is not None:
                            on_result(units[index], result)
                    if failed is not None:
                        failure = failure or failed.rebuild()
                    played = seconds / (len(batch_results) + (failed is not None))
                    unit_seconds = played if unit_seconds is None else (unit_seconds + played) / 2
                    batch = min(self.max_batch,
                                max(1, math.ceil(TARGET_TASK_SECONDS / max(unit_seconds, 1e-6))))
        except BaseException:
            self._abandon(running)
            raise
        if failure is not None:
            raise failure
        return [results[i] for i in range(len(units))]

    def _abandon(self, running: Iterable[Any]) -> None:
        """On a cluster someone else started the tasks would run on after the driver, so they
        are cancelled. On the executor's own local instance they are not: close() stops the
        instance and its workers, and a cancel racing a task's reply aborts the driver in Ray
        2.60 ("Tried to complete task that was not pending", 1 SIGTERM in 4 here)."""
        if not self._started:
            for ref in running:
                ray.cancel(ref, force=True)

    def share(self, build: Callable[[], T], oneway: tuple[str, ...] = ()) -> T:
        """build() run once inside a hosting actor; a proxy to it for every worker. The
        methods named in `oneway` are sent without waiting for their return (a limiter's
        release: one round trip per call saved; what they raise is not seen)."""
        host = ray.remote(num_cpus=0, max_concurrency=HOST_THREADS)(_Host).remote(build)
        kind = ray.get(host.kind.remote())
        return Hosted(host, kind, frozenset(oneway))  # type: ignore[return-value]

    def close(self) -> None:
        if self._started and ray.is_initialized():
            ray.shutdown()
            self._started = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayExecutor(workers={self.workers}, cpus={self.cpus:g})"


class _Host:
    """The one copy of a shared object, inside an actor (threaded: calls may block)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.obj = build()
        self.pid = os.getpid()

    def kind(self) -> type:
        return type(self.obj)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return getattr(self.obj, name)(*args, **kwargs)
        except Exception as error:
            return _Failure.of(error)

    def read(self, name: str) -> Any:
        return getattr(self.obj, name)


class SharedLost(RuntimeError):
    """The actor hosting a shared object (the run's one rate limit, its one cost meter) died.
    A new copy would start from nothing (spent cost forgotten, so the cost limit would no
    longer hold), so the run stops with one line; what it logged stays and resumes."""


class Hosted:
    """A proxy to an object hosted in an actor: its methods and attributes, over Ray.
    Picklable (the actor handle travels), so every worker's client holds the same one."""

    def __init__(self, host: Any, kind: type, oneway: frozenset[str] = frozenset()) -> None:
        self._host = host
        self._kind = kind
        self._oneway = oneway

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if callable(getattr(self._kind, name, None)):
            def method(*args: Any, **kwargs: Any) -> Any:
                sent = self._host.call.remote(name, args, kwargs)
                return None if name in self._oneway else self._get(sent)

            return method
        return self._get(self._host.read.remote(name))

    def _get(self, ref: Any) -> Any:
        try:
            value = ray.get(ref)
        except RayActorError:
            raise SharedLost(f"the Ray actor holding the run's shared {self._kind.__name__} "
                             "(one for every worker) died, so the run stops; what it logged "
                             "is kept: continue with --resume") from None
        except RayError as error:
            raise _cause(error) from None
        if isinstance(value, _Failure):
            raise value.rebuild()
        return value

    def __repr__(self) -> str:
        return f"Hosted({self._kind.__name__})"
