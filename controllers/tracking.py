"""A StatefulWorkflow player that tracks every register from public information.

It is the behaviour seed 003 calls Exact: run the smallest-labelled ready operation and pick
the slot whose code matches the tracked value mod b, reading registers whenever they are
shown and otherwise applying the public update of each success. It uses only what any agent
sees (observation and info), so it is the positive control the tests and the demo play, and
it satisfies the Policy interface: reset(seed=...) then act(observation, info).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class TrackingController:
    """Exact play from the initial registers, snapshots and public updates."""

    def __init__(self) -> None:
        self._x = np.zeros(8, dtype=np.int64)
        self._started = False

    def reset(self, *, seed: int | None = None) -> None:
        self._started = False

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        self._observe(observation, info)
        n = observation["completed"].shape[0]
        ready = np.flatnonzero(info["action_mask"][:n])
        if ready.size == 0:
            raise ValueError("no operation is ready: the episode should have ended")
        v = int(ready[0])
        b = observation["codes"].shape[0] // n
        target = self._x[int(observation["query_register"][v])] % b
        matches = np.flatnonzero(observation["codes"][v * b:(v + 1) * b] == target)
        return np.array([v, int(matches[0])], dtype=np.int64)

    def _observe(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        registers = observation["registers"]
        if registers[0] >= 0:  # shown: initial observation or a snapshot
            self._x = registers.astype(np.int64)
        elif self._started and info.get("failure") is None:
            reg, delta = (int(x) for x in observation["last_update"])
            self._x[reg] = (self._x[reg] + delta) % 8
        self._started = True
