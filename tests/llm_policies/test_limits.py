"""AdaptiveLimit: the AIMD window threaded LLM runs share.

Why these tests: the window decides how hard a run pushes a rate-limited provider. It must
stay within [1, max], halve on every 429, widen by one only after a full window of
successes, and never admit more attempts than the window, however many threads ask.
"""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from diagym.llm_policies.client.limits import AdaptiveLimit
from tests.conftest import scaled


def test_a_429_halves_the_window_down_to_one() -> None:
    limit = AdaptiveLimit(8)
    seen = [limit.limit]
    for _ in range(5):
        limit.acquire()
        limit.release(throttled=True)
        seen.append(limit.limit)
    assert seen == [8, 4, 2, 1, 1, 1]


def test_the_window_widens_by_one_after_a_window_of_successes() -> None:
    limit = AdaptiveLimit(3)
    for _ in range(2):  # 3 -> 1
        limit.acquire()
        limit.release(throttled=True)
    seen = []
    for _ in range(8):
        limit.acquire()
        limit.release(throttled=False)
        seen.append(limit.limit)
    # 1 success widens 1 -> 2, 2 more 2 -> 3, then it stays at the maximum
    assert seen == [2, 2, 3, 3, 3, 3, 3, 3]


def test_a_429_restarts_the_count_of_successes() -> None:
    limit = AdaptiveLimit(8)
    for throttled in (True, True):  # 8 -> 2
        limit.acquire()
        limit.release(throttled)
    for throttled in (False, True, False, False):  # 2, then 1, then 2 after one success
        limit.acquire()
        limit.release(throttled)
    assert limit.limit == 2
    assert limit.snapshot() == {"limit": 2, "max_concurrency": 8, "in_flight": 0,
                                "throttled": 3, "ok": 3}


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.lists(st.booleans(), max_size=200))
def test_every_step_follows_the_aimd_rule(max_concurrency: int, events: list[bool]) -> None:
    limit = AdaptiveLimit(max_concurrency)
    assert limit.limit == max_concurrency
    streak = 0  # successes since the window last changed or a 429
    for throttled in events:
        before = limit.limit
        limit.acquire()
        limit.release(throttled)
        after = limit.limit
        assert 1 <= after <= max_concurrency
        if throttled:
            assert after == max(1, before // 2)
            streak = 0
        else:
            streak += 1
            grows = before < max_concurrency and streak == before
            assert after == (before + 1 if grows else before)
            if grows:
                streak = 0


class WindowMachine(RuleBasedStateMachine):
    """Single-threaded: below the window acquire() returns at once, and the count in flight
    and the window stay consistent whatever order attempts start and end in."""

    def __init__(self) -> None:
        super().__init__()
        self.limit = AdaptiveLimit(5)
        self.in_flight = 0

    @precondition(lambda self: self.in_flight < self.limit.limit)
    @rule()
    def start(self) -> None:
        self.limit.acquire()  # would block the test forever if the window were miscounted
        self.in_flight += 1

    @precondition(lambda self: self.in_flight > 0)
    @rule(throttled=st.booleans())
    def end(self, throttled: bool) -> None:
        self.limit.release(throttled)
        self.in_flight -= 1

    @invariant()
    def consistent(self) -> None:
        snap = self.limit.snapshot()
        assert 1 <= snap["limit"] <= 5
        assert snap["in_flight"] == self.in_flight


TestWindowMachine = WindowMachine.TestCase
TestWindowMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_threads_never_exceed_the_window_and_do_fill_it() -> None:
    width, threads, rounds = 4, 12, 3
    limit = AdaptiveLimit(width)
    lock = threading.Lock()
    in_flight, peak, errors = [0], [0], []
    full = threading.Barrier(width, timeout=10)  # only passes with `width` attempts inside

    def worker() -> None:
        try:
            for _ in range(rounds):
                limit.acquire()
                with lock:
                    in_flight[0] += 1
                    peak[0] = max(peak[0], in_flight[0])
                full.wait()
                with lock:
                    in_flight[0] -= 1
                limit.release(throttled=False)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=scaled(30))
    assert errors == [] and not any(t.is_alive() for t in pool)
    assert peak[0] == width
    assert limit.snapshot()["ok"] == threads * rounds and limit.snapshot()["in_flight"] == 0


def test_a_narrowed_window_admits_one_at_a_time() -> None:
    limit = AdaptiveLimit(4)
    for _ in range(2):  # 4 -> 1
        limit.acquire()
        limit.release(throttled=True)
    lock = threading.Lock()
    in_flight, peak = [0], [0]

    def worker() -> None:
        limit.acquire()
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.005)  # room for a second attempt to overlap, were it let in
        with lock:
            in_flight[0] -= 1
        limit.release(throttled=True)  # keeps the window at 1

    pool = [threading.Thread(target=worker) for _ in range(8)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=scaled(30))
    assert peak[0] == 1 and limit.limit == 1


def test_release_without_acquire_is_a_bug_named() -> None:
    with pytest.raises(RuntimeError, match=r"^AdaptiveLimit.release\(\) without a matching "
                                           r"acquire\(\)$"):
        AdaptiveLimit(2).release(throttled=False)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4", None])
def test_max_concurrency_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        AdaptiveLimit(bad)  # type: ignore[arg-type]
    assert str(info.value) == f"max_concurrency must be an integer >= 1 (got {bad!r})"
