"""Text actions: a model's raw answer in, a legal env action or a failure out.

Seed 003's language-model runs send one JSON action per decision and end the episode, without
retry, when the answer is not JSON (`invalid_json`), not the action object
(`invalid_schema`) or names an operation or slot that does not exist (`invalid_action`).
`parse_json_action` is the one definition of that rule, for any env's fields (StatefulWorkflow:
{"operation", "candidate"}; DACSSteering: {"answer"}): the wrapper applies it, and an LLM
policy calls the same function to count its schema-valid answers. It never raises.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

INVALID_JSON, INVALID_SCHEMA, INVALID_ACTION = "invalid_json", "invalid_schema", "invalid_action"
TEXT_FAILURES = (INVALID_JSON, INVALID_SCHEMA, INVALID_ACTION)
ACTION_KEYS = ("operation", "candidate")
MAX_ANSWER_CHARS = 4096

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


ActionFields = tuple[tuple[str, int], ...]  # (JSON key, exclusive upper bound) per field
WORKFLOW_KEYS = ("operation", "candidate")
ANSWER_KEY = "answer"


def parse_json_action(text: Any, fields: ActionFields) -> tuple[str, tuple[int, ...] | None]:
    """("ok", integers in field order) or (failure category, None).

    Accepted: one JSON object with exactly the integer keys of `fields`, optionally inside a
    Markdown code fence, with surrounding whitespace. Anything else is a failure; nothing
    raises.
    """
    if not isinstance(text, str):
        return INVALID_JSON, None
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return INVALID_JSON, None
    if not isinstance(value, dict) or set(value) != {key for key, _ in fields}:
        return INVALID_SCHEMA, None
    numbers = tuple(value[key] for key, _ in fields)
    if any(type(x) is not int for x in numbers):
        return INVALID_SCHEMA, None
    if not all(0 <= x < bound for x, (_, bound) in zip(numbers, fields, strict=True)):
        return INVALID_ACTION, None
    return "ok", numbers


def parse_action(text: Any, n_ops: int, candidates: int) -> tuple[str, tuple[int, int] | None]:
    """StatefulWorkflow's answer {"operation": v, "candidate": a} (see parse_json_action)."""
    status, numbers = parse_json_action(text, (("operation", n_ops), ("candidate", candidates)))
    return status, None if numbers is None else (numbers[0], numbers[1])


def text_action_fields(env: gym.Env) -> ActionFields:
    """The JSON fields an env's text answers carry: (operation, candidate) for
    StatefulWorkflow, (answer,) for an env whose answers are Discrete option indices
    (DACSSteering: its `n_options`, so focus actions stay with non-text policies)."""
    core = env.unwrapped
    spec = getattr(core, "spec_params", None)
    if spec is not None and hasattr(spec, "candidates"):
        return (("operation", spec.n_ops), ("candidate", spec.candidates))
    if isinstance(env.action_space, spaces.Discrete):
        return ((ANSWER_KEY, int(getattr(core, "n_options", env.action_space.n))),)
    raise ValueError(f"no text action format for {core!r}: expected StatefulWorkflow or a "
                     f"Discrete-answer env")


class TextActionWrapper(gym.Wrapper):
    """An env with a `Text` action space: step(answer_text).

    A valid answer is executed (StatefulWorkflow: (operation, candidate); a Discrete-answer
    env: the option index); an invalid one ends the episode with its category in
    info["failure"] and counts as a decision. info gains "decisions" (answers given, valid or
    not) and "action_status" ("ok" or the category).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.fields = text_action_fields(env)
        self._vector = len(self.fields) > 1
        self.action_space = spaces.Text(max_length=MAX_ANSWER_CHARS, charset=string.printable)
        self._last: tuple[Any, dict[str, Any]] | None = None
        self._decisions = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._decisions = 0
        info = {**info, "decisions": 0, "action_status": None}
        self._last = (observation, info)
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._last is None:
            raise RuntimeError("call reset() before step()")
        self._decisions += 1
        status, parsed = parse_json_action(action, self.fields)
        if parsed is None:
            observation, info = self._last
            info = {**info, "failure": status, "success": False,
                    "decisions": self._decisions, "action_status": status}
            self._last = None  # the episode is over
            return observation, 0.0, True, False, info
        act = np.array(parsed, dtype=np.int64) if self._vector else int(parsed[0])
        observation, reward, terminated, truncated, info = self.env.step(act)
        info = {**info, "decisions": self._decisions, "action_status": status}
        self._last = None if (terminated or truncated) else (observation, info)
        return observation, reward, terminated, truncated, info
