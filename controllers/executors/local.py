"""The local executor: units on threads of this process (one worker: in the caller's thread).

Threads suit units that wait on I/O (a chat server) and the numba kernels, which release the
GIL; each worker keeps its own state through `worker_state`. See the package docstring for
the contract this implements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

U = TypeVar("U")
R = TypeVar("R")
T = TypeVar("T")


def check_workers(workers: Any) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    return workers


class LocalExecutor:
    """`workers` units in flight on threads of this process."""

    name = "local"
    in_process = True

    def __init__(self, workers: int = 1) -> None:
        self.workers = check_workers(workers)

    def map(self, fn: Callable[[U], R], units: Iterable[U],
            on_result: Callable[[U, R], None] | None = None) -> list[R]:
        units = list(units)
        if self.workers == 1 or len(units) <= 1:
            results = []
            for unit in units:
                result = fn(unit)
                if on_result is not None:
                    on_result(unit, result)
                results.append(result)
            return results
        return _threaded(fn, units, on_result, self.workers)

    def share(self, build: Callable[[], T], oneway: tuple[str, ...] = ()) -> T:
        return build()

    def close(self) -> None:
        return None

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalExecutor(workers={self.workers})"


def _threaded(fn: Callable[[U], R], units: list[U], on_result: Callable[[U, R], None] | None,
              workers: int) -> list[R]:
    """At most `workers` submitted at once, so a failure leaves nothing queued to cancel."""
    results: dict[int, R] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict[Future[R], int] = {}
        upcoming = iter(range(len(units)))
        try:
            while True:
                while failure is None and len(running) < workers:
                    index = next(upcoming, None)
                    if index is None:
                        break
                    running[pool.submit(fn, units[index])] = index
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    index = running.pop(future)
                    error = future.exception()
                    if error is not None:
                        failure = failure or error
                        continue
                    results[index] = future.result()
                    if on_result is not None:
                        on_result(units[index], results[index])
        except BaseException:
            for future in running:
                future.cancel()
            raise
    if failure is not None:
        raise failure
    return [results[i] for i in range(len(units))]
