"""Held-out StatefulWorkflow agents for the honest-diagnosis tests: agents the diagnosis was
never fitted to, written from the failure modes small language models and RL agents show, and
never tuned against its results.

Each agent wraps a reference controller (ReferencePolicy, so its healthy part is exactly the
controller's) and changes one thing by construction. Outside the reference family: a per-episode
mixture of two controllers, an off-by-one reading of the codes, repeating a failed call, public
updates applied one decision late, a partial schedule lapse, a recency cache. Inside it: a
reference controller lapsing to a uniform slot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from diagym.controllers.workflow.adapter import ReferencePolicy


def _sizes(observation: dict[str, Any]) -> tuple[int, int]:
    n = len(observation["completed"])
    return n, len(observation["codes"]) // n


def _slot_of_code(observation: dict[str, Any], op: int, code: int) -> int:
    _, b = _sizes(observation)
    codes = observation["codes"][op * b:(op + 1) * b]
    return int(np.flatnonzero(codes == code % b)[0])


class _Wrapped:
    """A reference controller and a seeded stream of the agent's own."""

    controller = "exact"

    def __init__(self, env: Any) -> None:
        self.inner = ReferencePolicy.for_env(self.controller, env)
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None) -> None:
        self.inner.reset(seed=seed)
        self.rng = np.random.default_rng(None if seed is None else seed + 17)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.inner.act(observation, info)


class Lapsing(_Wrapped):
    """A reference controller whose slot is uniform over all b with probability `epsilon`
    (inside the family: the controller row at that lapse)."""

    epsilon = 0.2

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        op, slot = (int(x) for x in self.inner.act(observation, info))
        if self.rng.random() < self.epsilon:
            slot = int(self.rng.integers(_sizes(observation)[1]))
        return np.array([op, slot])


class ExactLapsing20(Lapsing):
    epsilon = 0.2


class ExactLapsing30(Lapsing):
    epsilon = 0.3


class Cache2Lapsing20(Lapsing):
    controller = "cache-2"
    epsilon = 0.2


class Mixture:
    """exact on some episodes, cache-1 on the others (a coin per episode from the seed)."""

    def __init__(self, env: Any) -> None:
        self.parts = (ReferencePolicy.for_env("exact", env), _cache1(env))
        self.active = self.parts[0]

    def reset(self, *, seed: int | None = None) -> None:
        coin = np.random.default_rng(None if seed is None else seed + 99).random()
        self.active = self.parts[0] if coin < 0.5 else self.parts[1]
        self.active.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.active.act(observation, info)


def _cache1(env: Any) -> Any:
    """cache-1 is a family member, not one of the 19 names: its row through the adapter."""
    from diagym.analysis.diagnose.hypotheses import families

    row = next(m.row for m in families()["cache-k"] if m.params["k"] == 1)
    policy = ReferencePolicy.for_env("cache-2", env)
    policy._cparams = np.array(row, dtype=np.int64)  # the same decision function, k = 1
    return policy


class Offset(_Wrapped):
    """exact's operation, but the slot whose code is one more than the slot exact takes (an
    off-by-one in reading the codes)."""

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        op, slot = (int(x) for x in self.inner.act(observation, info))
        _, b = _sizes(observation)
        code = int(observation["codes"][op * b + slot])
        return np.array([op, _slot_of_code(observation, op, code + 1)])


class Perseverating(_Wrapped):
    """exact, but after a failed call it repeats that same call (op and slot)."""

    def reset(self, *, seed: int | None = None) -> None:
        super().reset(seed=seed)
        self.last: tuple[int, int] | None = None

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        chosen = tuple(int(x) for x in self.inner.act(observation, info))
        if self.last is not None and info.get("failure"):
            chosen = self.last
        self.last = chosen  # type: ignore[assignment]
        return np.array(chosen)


class DelayedUpdate:
    """The reference schedule and slot selection, but each public update is applied one
    decision late: at a decision right after a success the register it updated still holds
    its old value in the agent's memory. Snapshots overwrite memory as shown."""

    def __init__(self, env: Any) -> None:
        self.values = np.zeros(8, dtype=np.int64)
        self.pending: tuple[int, int] | None = None
        self.done = 0

    def reset(self, *, seed: int | None = None) -> None:
        self.pending = None
        self.done = 0

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        if self.pending is not None:  # the update of the success before last
            u, delta = self.pending
            self.values[u] = (self.values[u] + delta) % 8
            self.pending = None
        done = int(observation["completed"].sum())
        if done > self.done:
            u, delta = (int(x) for x in observation["last_update"])
            self.pending = (u, delta)
        self.done = done
        shown = observation["registers"]
        if (shown >= 0).any():
            self.values = np.where(shown >= 0, shown, self.values)
            self.pending = None
        n, b = _sizes(observation)
        op = int(np.flatnonzero(info["action_mask"][:n])[0])
        q = int(observation["query_register"][op])
        return np.array([op, _slot_of_code(observation, op, int(self.values[q]))])


class PartialSchedule(_Wrapped):
    """exact, but on a fifth of its decisions it runs an incomplete operation that is not
    ready (when there is one) with the slot exact would take for it."""

    rho = 0.2

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        op, slot = (int(x) for x in self.inner.act(observation, info))
        n, _ = _sizes(observation)
        blocked = np.flatnonzero((observation["completed"] == 0) & ~info["action_mask"][:n])
        if len(blocked) and self.rng.random() < self.rho:
            op = int(self.rng.choice(blocked))
        return np.array([op, slot])


class RecencyCache:
    """Keeps the values of the 2 registers touched most recently (queried or updated, or shown
    by a snapshot in index order) and guesses the slot for any other register."""

    capacity = 2

    def __init__(self, env: Any) -> None:
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(None if seed is None else seed + 5)
        self.known: dict[int, int] = {}
        self.done = 0

    def _touch(self, register: int, value: int) -> None:
        self.known.pop(register, None)
        self.known[register] = value % 8
        while len(self.known) > self.capacity:
            self.known.pop(next(iter(self.known)))

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        done = int(observation["completed"].sum())
        if done > self.done:
            u, delta = (int(x) for x in observation["last_update"])
            if u in self.known:
                self._touch(u, self.known[u] + delta)
        self.done = done
        shown = observation["registers"]
        n, b = _sizes(observation)
        op = int(np.flatnonzero(info["action_mask"][:n])[0])
        q = int(observation["query_register"][op])
        if (shown >= 0).any():
            for r in np.flatnonzero(shown >= 0)[::-1]:
                if r != q:
                    self._touch(int(r), int(shown[r]))
            self._touch(q, int(shown[q]))
        if q in self.known:
            value = self.known[q]
            self._touch(q, value)
            return np.array([op, _slot_of_code(observation, op, value)])
        return np.array([op, int(self.rng.integers(b))])


class WidthBound(_Wrapped):
    """exact where the width is at most 4; a uniform slot on every decision where it is wider
    (a competence that depends on the configuration, which no single row has)."""

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        op, slot = (int(x) for x in self.inner.act(observation, info))
        _, b = _sizes(observation)
        if b > 4:
            slot = int(self.rng.integers(b))
        return np.array([op, slot])


class Fatigued(_Wrapped):
    """exact whose slot is uniform with a probability that grows by 0.1 with every decision of
    the episode (a lapse that is not constant)."""

    def reset(self, *, seed: int | None = None) -> None:
        super().reset(seed=seed)
        self.decisions = 0

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        op, slot = (int(x) for x in self.inner.act(observation, info))
        if self.rng.random() < min(1.0, 0.1 * self.decisions):
            slot = int(self.rng.integers(_sizes(observation)[1]))
        self.decisions += 1
        return np.array([op, slot])


LAPSE, FAILURE_MODE, OUTSIDE_FAMILY = "lapse", "failure mode", "outside"

# name -> (class, what it is, where it lies: LAPSE (inside, "name@epsilon"), FAILURE_MODE
# (inside by a failure-mode family or a mixture: the family's name prefix), OUTSIDE_FAMILY)
HELD_OUT: dict[str, tuple[type, str, str]] = {
    "exact lapsing 0.2": (ExactLapsing20, "exact@0.2", LAPSE),
    "exact lapsing 0.3": (ExactLapsing30, "exact@0.3", LAPSE),
    "cache-2 lapsing 0.2": (Cache2Lapsing20, "cache-2@0.2", LAPSE),
    "mixture exact / cache-1": (Mixture, "mixture", FAILURE_MODE),
    "offset +1": (Offset, "offset", FAILURE_MODE),
    "perseverating": (Perseverating, "perseverate", FAILURE_MODE),
    "delayed update": (DelayedUpdate, "update-delay", FAILURE_MODE),
    "partial schedule 0.2": (PartialSchedule, "schedule-lapse", FAILURE_MODE),
    "recency cache 2": (RecencyCache, "the 2 registers touched last", OUTSIDE_FAMILY),
    "width-bound": (WidthBound, "exact at width 4, guessing at 8", OUTSIDE_FAMILY),
    "fatigued": (Fatigued, "a lapse of 0.1 per decision", OUTSIDE_FAMILY),
}
