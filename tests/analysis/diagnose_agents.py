"""Programmed StatefulWorkflow agents whose mistakes are known, and a loop recording traces.

Each agent makes one kind of mistake by construction, so the attribution of its failures is a
positive control: a diagnosis that does not recover the mistake is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.diagnose.attribution import ENV_ID, Trace
from diagym.controllers.policy import Policy


def sizes(observation: Mapping[str, np.ndarray]) -> tuple[int, int]:
    """(N, b) of the observation's task."""
    n = len(observation["completed"])
    return n, len(observation["codes"]) // n


def smallest_ready(observation: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> int:
    """The smallest-labelled ready operation (the reference schedule)."""
    n, _ = sizes(observation)
    return int(np.flatnonzero(info["action_mask"][:n])[0])


def slot_for(observation: Mapping[str, np.ndarray], op: int, value: int) -> int:
    """The slot of `op` whose code is value mod b (codes are a permutation of 0..b-1)."""
    _, b = sizes(observation)
    codes = observation["codes"][op * b:(op + 1) * b]
    return int(np.flatnonzero(codes == value % b)[0])


class Tracker:
    """Register values from what an agent sees: a snapshot overwrites them and, when `apply`,
    each success applies its public update (read from last_update)."""

    def __init__(self, apply: bool) -> None:
        self.apply = apply
        self.values = np.zeros(8, dtype=np.int64)
        self.done = 0

    def reset(self) -> None:
        self.done = 0

    def see(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        done = int(observation["completed"].sum())
        if self.apply and done > self.done:
            u, delta = (int(x) for x in observation["last_update"])
            self.values[u] = (self.values[u] + delta) % 8
        self.done = done
        shown = observation["registers"]
        self.values = np.where(shown >= 0, shown, self.values)
        return self.values


class StaleAgent:
    """The reference schedule, each slot from the last shown register values: it never applies
    updates (a stale value, or the initial value under history feedback)."""

    def __init__(self) -> None:
        self.tracker = Tracker(apply=False)

    def reset(self, *, seed: int | None = None) -> None:
        self.tracker.reset()

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        values = self.tracker.see(observation)
        op = smallest_ready(observation, info)
        q = int(observation["query_register"][op])
        return np.array([op, slot_for(observation, op, int(values[q]))])


class WrongRegister:
    """Tracks every register exactly, but reads the next active register after the queried
    one, (query + 1) mod width (a binding error; the width is a public rule)."""

    def __init__(self, width: int) -> None:
        self.tracker = Tracker(apply=True)
        self.width = width

    def reset(self, *, seed: int | None = None) -> None:
        self.tracker.reset()

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        values = self.tracker.see(observation)
        op = smallest_ready(observation, info)
        q = int(observation["query_register"][op])
        return np.array([op, slot_for(observation, op, int(values[(q + 1) % self.width]))])


class Guesser:
    """The reference schedule and a uniform slot, from its own seeded stream."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        _, b = sizes(observation)
        return np.array([smallest_ready(observation, info), int(self.rng.integers(b))])


class BadScheduler:
    """Calls the smallest incomplete operation that is not ready (a scheduling error), else the
    smallest ready one with slot 0."""

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        n, _ = sizes(observation)
        blocked = np.flatnonzero((observation["completed"] == 0) & ~info["action_mask"][:n])
        op = int(blocked[0]) if len(blocked) else smallest_ready(observation, info)
        return np.array([op, 0])


class Repeater:
    """Calls an operation it has completed again (a bookkeeping error); before any success,
    the smallest ready one with the slot the shown registers make right."""

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        done = np.flatnonzero(observation["completed"])
        if len(done):
            return np.array([int(done[0]), 0])
        op = smallest_ready(observation, info)
        value = int(observation["registers"][observation["query_register"][op]])
        return np.array([op, slot_for(observation, op, value)])


class Scripted:
    """Plays a fixed list of actions, cyclically (random traces for invariants)."""

    def __init__(self, actions: Iterable[tuple[int, int]]) -> None:
        self.actions = list(actions)
        self.step = 0

    def reset(self, *, seed: int | None = None) -> None:
        self.step = 0

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        n, b = sizes(observation)
        op, slot = self.actions[self.step % len(self.actions)]
        self.step += 1
        return np.array([op % n, slot % b])


def play(agent: Policy, env_kwargs: Mapping[str, Any], seeds: Iterable[int]) -> list[Trace]:
    """One episode of `agent` per task seed, recorded as traces."""
    env = gym.make(ENV_ID, **dict(env_kwargs))
    traces = []
    for seed in seeds:
        observation, info = env.reset(seed=seed)
        agent.reset(seed=seed)
        actions: list[tuple[int, int]] = []
        ended = False
        while not ended:
            action = agent.act(observation, info)
            actions.append((int(action[0]), int(action[1])))
            observation, _, ended, _, info = env.step(action)
        traces.append(Trace(dict(env_kwargs), seed, tuple(actions)))
    env.close()
    return traces


class HiddenController:
    """A reference controller behind a user's policy class: subclasses name the controller,
    and `diagnose --policy FILE:Subclass` sees only the class, never the controller's name."""

    controller = ""

    def __init__(self, env: Any) -> None:
        from diagym.controllers.workflow.adapter import ReferencePolicy

        self.inner = ReferencePolicy.for_env(self.controller, env)

    def reset(self, *, seed: int | None = None) -> None:
        self.inner.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.inner.act(observation, info)


class Rerouted(HiddenController):
    """A reference controller (subclasses name it) whose failures are re-routed to another
    cause: where its slot would fail, it takes the slot of the next active register's
    current value instead, when that one fails too. It fails on the same calls as the
    controller, so its outcomes are the controller's, but its failed calls read another
    register. It peeks at the env's true registers to know when it would fail: a programmed
    positive control, not a policy a user could write."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.env = env.unwrapped

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        op, slot = (int(x) for x in self.inner.act(observation, info))
        if not info["action_mask"][op] or observation["completed"][op]:
            return np.array([op, slot])
        right = self.env.correct_slot(op)
        if slot != right:
            q = int(observation["query_register"][op])
            other = int(self.env.registers[(q + 1) % self.env.params.width])
            rerouted = slot_for(observation, op, other)
            if rerouted != right:
                slot = rerouted
        return np.array([op, slot])


class KeepsTwo:
    """Tracks registers 0 and 1 exactly (the updates applied) and takes a uniform slot, from
    its own seeded stream, for any other register: a fixed memory of two registers, which no
    hypothesis holds (a cache keeps the most recently used ones)."""

    def __init__(self) -> None:
        self.tracker = Tracker(apply=True)
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None) -> None:
        self.tracker.reset()
        self.rng = np.random.default_rng(seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        values = self.tracker.see(observation)
        op = smallest_ready(observation, info)
        q = int(observation["query_register"][op])
        if q < 2:
            return np.array([op, slot_for(observation, op, int(values[q]))])
        _, b = sizes(observation)
        return np.array([op, int(self.rng.integers(b))])
