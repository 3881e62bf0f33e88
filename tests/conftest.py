"""Shared test helpers: an oracle that plays from public information only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


class TrackingOracle:
    """Tracks every register from the initial observation and public updates.

    Runs the smallest-labelled ready operation and the slot whose code matches the tracked
    value mod b; reads registers whenever they are shown. It uses only what an agent sees.
    """

    def __init__(self) -> None:
        self.x = np.zeros(8, dtype=np.int64)

    def reset(self, observation: dict[str, Any]) -> None:
        self.x = observation["registers"].astype(np.int64)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> tuple[int, int]:
        if observation["registers"][0] >= 0:
            self.x = observation["registers"].astype(np.int64)
        n = observation["completed"].shape[0]
        ready = info["action_mask"][:n]
        v = int(np.flatnonzero(ready)[0])
        b = observation["codes"].shape[1]
        target = self.x[observation["query"][v]] % b
        a = int(np.flatnonzero(observation["codes"][v] == target)[0])
        return v, a

    def observe_success(self, observation: dict[str, Any]) -> None:
        reg, delta = (int(x) for x in observation["last_update"])
        self.x[reg] = (self.x[reg] + delta) % 8


def play_oracle(env: Any, seed: int) -> tuple[dict[str, Any], float, list[tuple[int, int]]]:
    """One oracle episode; returns the final info, the return and the actions taken."""
    oracle = TrackingOracle()
    observation, info = env.reset(seed=seed)
    oracle.reset(observation)
    total, actions, terminated = 0.0, [], False
    while not terminated:
        action = oracle.act(observation, info)
        actions.append(action)
        observation, reward, terminated, truncated, info = env.step(action)
        assert not truncated
        total += reward
        if info["failure"] is None:
            oracle.observe_success(observation)
    return info, total, actions


@pytest.fixture
def oracle_episode():
    return play_oracle
