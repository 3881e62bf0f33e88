"""Text actions: a model's raw answer in, a legal env action or a failure out.

Seed 003's language-model runs send one JSON action per decision and end the episode, without
retry, when the answer is not JSON (`invalid_json`), not the action object
(`invalid_schema`) or names an operation or slot that does not exist (`invalid_action`).
`parse_json_action` is the one definition of that rule, for any env's fields (StatefulWorkflow:
{"operation", "candidate"}; DACSSteering: {"answer"}): the wrapper applies it, and an LLM
policy calls the same function to count its schema-valid answers. It never raises.

A model that answers through native tool calls (the `tools` harness) fails in its own ways:
no call (`no_tool_call`), several (`multiple_tool_calls`), a function the env does not offer
(`unknown_tool`) or arguments that are not exactly the function's integer fields
(`invalid_arguments`); an argument out of range is `invalid_action` as before.
`judge_tool_call` is that rule, applied by the wrapper and counted by the policy alike.

A model that may think before it acts (the harnesses' think-then-act answer,
docs/REASONING.md) writes free text and then its action: `split_reasoned_reply` takes the last
JSON object of the reply as the action and the text before it as the reasoning; a reply cut at
the token limit before any action is `cut_reasoning`, not `invalid_json`.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from diagym.envs._core.failures import failure_name
from diagym.llm_policies.families import ActionFields, ToolSpec, text_family
from diagym.llm_policies.prompts.dacs import ANSWER_KEY

__all__ = ["ANSWER_KEY", "FAILURE_REASONS", "INVALID_ACTION", "INVALID_ARGUMENTS",
           "INVALID_JSON", "INVALID_SCHEMA", "MULTIPLE_TOOL_CALLS", "NO_TOOL_CALL", "REASONING_CUT",
           "TEXT_FAILURES", "TOOL_FAILURES", "UNKNOWN_TOOL", "InvalidReply", "TextActionWrapper",
           "ToolCallAction", "judge_tool_call", "parse_action", "parse_json_action",
           "split_reasoned_reply", "text_action_fields"]

INVALID_JSON, INVALID_SCHEMA, INVALID_ACTION = "invalid_json", "invalid_schema", "invalid_action"
TEXT_FAILURES = (INVALID_JSON, INVALID_SCHEMA, INVALID_ACTION)
NO_TOOL_CALL, MULTIPLE_TOOL_CALLS = "no_tool_call", "multiple_tool_calls"
UNKNOWN_TOOL, INVALID_ARGUMENTS = "unknown_tool", "invalid_arguments"
TOOL_FAILURES = (NO_TOOL_CALL, MULTIPLE_TOOL_CALLS, UNKNOWN_TOOL, INVALID_ARGUMENTS)
REASONING_CUT = "cut_reasoning"
# What each failure means, in the words a re-asked model is told.
FAILURE_REASONS = {
    INVALID_JSON: "not one JSON object",
    INVALID_SCHEMA: "not exactly the integer fields asked for",
    INVALID_ACTION: "a value outside its range",
    NO_TOOL_CALL: "no function call",
    MULTIPLE_TOOL_CALLS: "more than one function call",
    UNKNOWN_TOOL: "a call of a function that is not offered",
    INVALID_ARGUMENTS: "arguments that are not one JSON object of exactly the function's "
                       "integer fields",
    REASONING_CUT: "cut at the token limit before its action",
}
MAX_ANSWER_CHARS = 4096


@dataclass(frozen=True)
class ToolCallAction:
    """A step by native tool call: the function's name and its raw arguments JSON text."""

    name: str
    arguments: str


@dataclass(frozen=True)
class InvalidReply:
    """A step by a reply the harness already knows cannot be executed (a tool-calling reply
    with no call or several): it ends the episode with `category` like any invalid reply."""

    category: str
    detail: str = ""

    def __post_init__(self) -> None:
        allowed = (*TEXT_FAILURES, *TOOL_FAILURES, REASONING_CUT)
        if self.category not in allowed:
            raise ValueError(f"category must be one of {' | '.join(allowed)}; "
                             f"got {self.category!r}")

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_FENCE_OPENER = re.compile(r"```[\w-]*\s*$")  # a code fence around the action is not reasoning


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


def split_reasoned_reply(text: str, fields: ActionFields) -> tuple[str, str | None]:
    """(the reasoning, the action's JSON text) of a think-then-act reply: the action is the
    last JSON object in `text` with exactly the keys of `fields`, else the last JSON object of
    any keys (which parse_json_action then judges invalid_schema); the reasoning is the text
    before it, stripped, without a code fence opened around the action. (the whole text
    stripped, None) when the reply holds no JSON object. Never raises."""
    decoder = json.JSONDecoder()
    keys = {key for key, _ in fields}
    last: tuple[int, int] | None = None
    start = len(text)
    while (start := text.rfind("{", 0, start)) >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, dict):
            continue
        if set(value) == keys:
            last = (start, end)
            break
        if last is None:
            last = (start, end)
    if last is None:
        return text.strip(), None
    return _FENCE_OPENER.sub("", text[:last[0]]).strip(), text[last[0]:last[1]]


def judge_tool_call(
    tools: Sequence[ToolSpec], call: ToolCallAction,
) -> tuple[str, ToolSpec | None, tuple[int, ...] | None]:
    """("ok", the tool, its integers in field order), or (failure category, the tool if
    known, None): `unknown_tool`, `invalid_arguments` (the arguments fail parse_json_action's
    JSON or schema check) or `invalid_action` (an integer outside its bound). Never raises."""
    spec = next((tool for tool in tools if tool.name == call.name), None)
    if spec is None:
        return UNKNOWN_TOOL, None, None
    status, numbers = parse_json_action(call.arguments, spec.fields)
    if status in (INVALID_JSON, INVALID_SCHEMA):
        return INVALID_ARGUMENTS, spec, None
    return status, spec, numbers


def parse_action(text: Any, n_ops: int, candidates: int) -> tuple[str, tuple[int, int] | None]:
    """StatefulWorkflow's answer {"operation": v, "candidate": a} (see parse_json_action)."""
    status, numbers = parse_json_action(text, (("operation", n_ops), ("candidate", candidates)))
    return status, None if numbers is None else (numbers[0], numbers[1])


def text_action_fields(env: gym.Env) -> ActionFields:
    """The JSON fields an env's text answers carry (diagym.llm_policies.families): (operation,
    candidate) for StatefulWorkflow, (answer,) bounded by the option count for DACSSteering,
    in every mode, so focus actions stay with non-text policies."""
    return text_family(env).fields(env.unwrapped)


class TextActionWrapper(gym.Wrapper):
    """An env with a `Text` action space: step(answer_text), step(ToolCallAction) or
    step(InvalidReply).

    A tool call is judged by `judge_tool_call` against the family's tools
    (diagym.llm_policies.families) and a valid one executes the tool's env action; an InvalidReply
    is invalid by definition. A valid answer is executed (StatefulWorkflow: (operation,
    candidate); DACSSteering: the option index, or under keyword scoring the reply text
    itself); an invalid one, an index outside the fields' bounds included, ends the episode
    with its category in info["failure"] and counts as a decision. info["failure"] is a name
    here, the text layer's word (None, the env's failure named by envs/_core/failures.py, or
    a text category), where the env under it reports a code. info gains "decisions"
    (answers given, valid or not) and "action_status" ("ok" or the category).

    An env that reports per-episode metrics (the final step's info["episode_metrics"]) does
    so through a method `episode_metrics(extra_wrong: int) -> dict` (DACSSteering, docs/DACS.md);
    when an invalid reply ends its episode the wrapper asks it for the metrics so far with that
    reply counted as one wrong decision, so an episode a model broke is still measured
    instead of silently missing from accuracy. The step's "correct" and "contaminated" are
    then False: the reply answered nothing.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        family = text_family(env)
        self.fields = family.fields(env.unwrapped)
        self._to_action = family.to_action
        self.tools = family.tools(env.unwrapped)
        self.action_space = spaces.Text(max_length=MAX_ANSWER_CHARS, charset=string.printable)
        self._last: tuple[Any, dict[str, Any]] | None = None
        self._decisions = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._decisions = 0
        info = {**info, "failure": failure_name(info.get("failure")), "decisions": 0,
                "action_status": None}
        self._last = (observation, info)
        return observation, info

    def env_action(self, action: Any) -> tuple[str, Any]:
        """(status, the env action) for a reply, or (failure category, None): the one
        judgement of a JSON text, a tool call or an InvalidReply, which `step` executes and a
        reader of logged replies (analysis/diagnose) applies without stepping."""
        if isinstance(action, InvalidReply):
            return action.category, None
        if isinstance(action, ToolCallAction):
            status, tool, parsed = judge_tool_call(self.tools, action)
            ok = tool is not None and parsed is not None
            return status, tool.to_action(parsed) if ok else None
        if self.fields is None:  # a free-text env: the reply itself is the action
            if not isinstance(action, str):
                return INVALID_ACTION, None
            return "ok", action[:MAX_ANSWER_CHARS]
        status, parsed = parse_json_action(action, self.fields)
        return status, None if parsed is None else self._to_action(parsed)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._last is None:
            raise RuntimeError("call reset() before step()")
        self._decisions += 1
        status, env_action = self.env_action(action)
        if env_action is None:
            observation, info = self._last
            info = {**info, **self._invalid_outcome(), "failure": status, "success": False,
                    "decisions": self._decisions, "action_status": status}
            self._last = None  # the episode is over
            return observation, 0.0, True, False, info
        observation, reward, terminated, truncated, info = self.env.step(env_action)
        info = {**info, "failure": failure_name(info.get("failure")),
                "decisions": self._decisions, "action_status": status}
        self._last = None if (terminated or truncated) else (observation, info)
        return observation, reward, terminated, truncated, info

    def _invalid_outcome(self) -> dict[str, Any]:
        """The info an invalid reply ends the episode with, from an env with episode metrics
        (see the class docstring); nothing for an env without them."""
        metrics = getattr(self.env.unwrapped, "episode_metrics", None)
        if not callable(metrics):
            return {}
        return {"correct": False, "contaminated": False,
                "episode_metrics": metrics(extra_wrong=1)}
