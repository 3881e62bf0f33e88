"""Policies as a user writes them, loaded by `--policy` in the tests and the README: working
ones of every form the loader accepts, and broken ones for its error messages."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def first_ready(observation: dict[str, Any], info: dict[str, Any]) -> int:
    """The smallest operation whose prerequisites are done (info's action mask)."""
    n = len(observation["completed"])
    return int(np.flatnonzero(info["action_mask"][:n])[0])


class FirstReady:
    """StatefulWorkflow: the smallest ready operation, always slot 0 (a floor baseline)."""

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> tuple[int, int]:
        return first_ready(observation, info), 0


class Greedy:
    """The smallest ready operation and the slot whose code matches its query register."""

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> tuple[int, int]:
        n = len(observation["completed"])
        b = len(observation["codes"]) // n
        v = int(np.flatnonzero(info["action_mask"][:n])[0])
        x = int(observation["registers"][observation["query_register"][v]])  # -1: not shown
        codes = observation["codes"][v * b:(v + 1) * b]
        matches = np.flatnonzero(codes == x % b) if x >= 0 else []
        return v, int(matches[0]) if len(matches) else 0


class JsonFirstReady(FirstReady):
    """FirstReady answering in JSON text, as a chat model does: it plays the text env."""

    text_actions = True

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        return json.dumps({"operation": first_ready(observation, info), "candidate": 0})


class EnvSized:
    """Made with the env (one required parameter): reads the size from its action space."""

    def __init__(self, env: Any) -> None:
        self.n_ops = int(env.action_space.nvec[0])

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> tuple[int, int]:
        return int(np.flatnonzero(info["action_mask"][:self.n_ops])[0]), 0


def make_first_ready(env: Any) -> FirstReady:
    """A factory function taking the env."""
    return FirstReady()


class Agents:
    """Holds a nested class, for a dotted name (Agents.Nested)."""

    class Nested(FirstReady):
        pass


class FirstOption:
    """DACSSteering: always option 0."""

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        return 0


class Described(FirstReady):
    """A policy that describes itself: the run's identity carries its description."""

    def describe(self) -> dict[str, Any]:
        return {"agent": "first-ready", "slot": 0}


class NoAct:
    def reset(self, *, seed: int | None = None) -> None:
        pass


class ActNotCallable:
    act = 3

    def reset(self, *, seed: int | None = None) -> None:
        pass


class ResetWithoutSeed(FirstReady):
    def reset(self) -> None:
        pass


class Raises:
    def __init__(self) -> None:
        raise RuntimeError("no GPU here")


class NeedsTwo:
    def __init__(self, env: Any, model: str) -> None:
        pass


class BadTextActions(FirstReady):
    text_actions = "yes"


def returns_none() -> None:
    """A factory that forgot to return its policy."""


LIMIT = 3  # not callable


class JsonFirstOption(FirstOption):
    """FirstOption answering in JSON text: it plays the DACS env behind the text wrapper."""

    text_actions = True

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        return json.dumps({"answer": 0})


class Counted(FirstReady):
    """Keeps its own counters, which the runner puts in each record."""

    def reset(self, *, seed: int | None = None) -> None:
        self.acts = 0

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> tuple[int, int]:
        self.acts += 1
        return super().act(observation, info)

    def episode_counters(self) -> dict[str, int]:
        return {"acts": self.acts}


class ActRaises(FirstReady):
    """A bug in the user's act: every command names the policy and the episode in one line."""

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> tuple[int, int]:
        return 1 // 0, 0
