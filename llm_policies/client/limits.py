"""How many chat requests a threaded run keeps in flight, adapted to a provider's rate limits.

Why adaptive: a hosted API answers HTTP 429 when a run sends more than its quota allows, and
the quota is rarely known in advance. Retrying each 429 with backoff keeps the run correct
but wastes the provider's window on requests that are refused; narrowing the window makes
the workers queue here instead. AIMD (additive increase, multiplicative decrease, as TCP
does it) converges on what the provider sustains and recovers when the pressure goes away:

  * the window starts at `max_concurrency`;
  * an attempt that got HTTP 429 halves it (rounding down, never below 1);
  * `limit` consecutive attempts that were not throttled widen it by 1 (never above
    `max_concurrency`); a 429 restarts that count.

A narrower window never cancels requests already in flight: new ones wait until the count
in flight is below the window again. Every `ChatClient(limiter=...)` of a run shares one
AdaptiveLimit; it holds a slot around each HTTP attempt and never during backoff sleeps.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["AdaptiveLimit"]


class AdaptiveLimit:
    """A thread-safe AIMD concurrency window (see the module docstring for the rule)."""

    def __init__(self, max_concurrency: int) -> None:
        if (not isinstance(max_concurrency, int) or isinstance(max_concurrency, bool)
                or max_concurrency < 1):
            raise ValueError(f"max_concurrency must be an integer >= 1 (got {max_concurrency!r})")
        self.max_concurrency = max_concurrency
        self._limit = max_concurrency
        self._in_flight = 0
        self._streak = 0  # attempts not throttled since the window last changed or a 429
        self._throttled = 0
        self._ok = 0
        self._cond = threading.Condition()

    @property
    def limit(self) -> int:
        """The current window: at most this many attempts start while others are in flight."""
        with self._cond:
            return self._limit

    def acquire(self) -> None:
        """Blocks until fewer than `limit` attempts are in flight, then counts one more."""
        with self._cond:
            while self._in_flight >= self._limit:
                self._cond.wait()
            self._in_flight += 1

    def release(self, throttled: bool) -> None:
        """Ends one attempt; `throttled`: it got HTTP 429."""
        with self._cond:
            if self._in_flight <= 0:
                raise RuntimeError("AdaptiveLimit.release() without a matching acquire()")
            self._in_flight -= 1
            if throttled:
                self._throttled += 1
                self._limit = max(1, self._limit // 2)
                self._streak = 0
            else:
                self._ok += 1
                self._streak += 1
                if self._streak >= self._limit and self._limit < self.max_concurrency:
                    self._limit += 1
                    self._streak = 0
            self._cond.notify_all()

    def snapshot(self) -> dict[str, Any]:
        """The window's state and totals, for a run's log lines."""
        with self._cond:
            return {"limit": self._limit, "max_concurrency": self.max_concurrency,
                    "in_flight": self._in_flight, "throttled": self._throttled, "ok": self._ok}

    def __repr__(self) -> str:
        return f"AdaptiveLimit(max_concurrency={self.max_concurrency}, limit={self.limit})"
