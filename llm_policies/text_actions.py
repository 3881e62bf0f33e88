"""Text actions for StatefulWorkflow: a model's raw answer in, a legal env action or a failure out.

Seed 003's language-model runs send one JSON action per decision and end the episode, without
retry, when the answer is not JSON (`invalid_json`), not the action object
(`invalid_schema`) or names an operation or slot that does not exist (`invalid_action`).
`parse_action` is the one definition of that rule: the wrapper applies it, and an LLM policy
calls the same function to count its schema-valid answers. It never raises on any text.
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


def parse_action(text: Any, n_ops: int, candidates: int) -> tuple[str, tuple[int, int] | None]:
    """("ok", (operation, candidate)) or (failure category, None).

    Accepted: one JSON object with exactly the integer keys "operation" and "candidate",
    optionally inside a Markdown code fence, with surrounding whitespace. Anything else is a
    failure; nothing raises.
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
    if not isinstance(value, dict) or set(value) != set(ACTION_KEYS):
        return INVALID_SCHEMA, None
    op, slot = value["operation"], value["candidate"]
    if type(op) is not int or type(slot) is not int:
        return INVALID_SCHEMA, None
    if not (0 <= op < n_ops and 0 <= slot < candidates):
        return INVALID_ACTION, None
    return "ok", (op, slot)


class TextActionWrapper(gym.Wrapper):
    """StatefulWorkflow with a `Text` action space: step(answer_text).

    A valid answer is executed as (operation, candidate); an invalid one ends the episode with
    its category in info["failure"] and counts as a decision. info gains "decisions" (answers
    given, valid or not) and "action_status" ("ok" or the category).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        spec = getattr(env.unwrapped, "spec_params", None)
        if spec is None:
            raise ValueError(
                f"TextActionWrapper wraps StatefulWorkflow envs; got {env.unwrapped!r}")
        self._n, self._b = spec.n_ops, spec.candidates
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
        status, parsed = parse_action(action, self._n, self._b)
        if parsed is None:
            observation, info = self._last
            info = {**info, "failure": status, "success": False,
                    "decisions": self._decisions, "action_status": status}
            self._last = None  # the episode is over
            return observation, 0.0, True, False, info
        observation, reward, terminated, truncated, info = self.env.step(
            np.array(parsed, dtype=np.int64))
        info = {**info, "decisions": self._decisions, "action_status": status}
        self._last = None if (terminated or truncated) else (observation, info)
        return observation, reward, terminated, truncated, info
