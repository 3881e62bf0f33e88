"""A policy's calls kept as a trace, so a run can be diagnosed later from its log alone.

An opaque agent shows the runner only its actions, and a diagnosis (analysis/diagnose) needs
exactly those: the task seed, the env kwargs (both in the run log already) and the calls in
order. `Traced(policy)` records each episode's env actions as (op, slot) integer pairs, and
with each executed action the digest of the observation the policy acted on (`digest`) and
the action's outcome: the name of the env's info["failure"] after it (a code, named by
envs/_core/failures.py: StatefulWorkflow's failure names, DACSSteering's "wrong"; a text
layer's category as it is), or "ok" when there is none. So `diagym report` can check its
replay against what the policy saw and what happened, and a user can match a decision of the
log with one of their own replay (`digest` of a fresh env's observation).

Where an outcome comes from: the outcome of action k is in the info handed to act k+1, and
the last action's in the info of the episode's last step, which the runner hands to
`episode_end(observation, info)` (controllers/rollout.py, an optional hook it calls after an
episode's last step, before `episode_counters`). An episode aborted in act (EpisodeAborted)
has every executed action's outcome already. A reply the env never executed has neither
action, digest nor outcome.

When the trace line is written: the runner asks a policy for its `episode_counters()` exactly
once per episode, after the episode's last step and before it writes the episode line, and it
does so for an aborted episode too. That is the moment an episode's trace is final, so
`Traced.episode_counters()` writes the {"type": "trace", "episode_key", "actions",
"observations", "outcomes"} line then (the three lists of equal length, one entry per
executed action; a log written before observations and outcomes were traced has "actions"
only, and every reader accepts both),
into the log the runner attached. The trace line therefore precedes its episode line: a kill
between the two leaves a trace without an episode line, which the resume's "replay" line voids
with the episode's other lines, and a finished episode always has its trace, the last one
included. The actions are not a counter: counters become Episodes columns and summary means,
and a list per episode would be neither.

Bounded: a trace line is one episode's, about 40 bytes per executed action (at most one per
env step), and no policy state beyond the current episode's is held.

The trace is also handed to `on_trace(task_seed, actions)` when given, so a caller without a
log gets the same traces in memory.

A text policy's act returns a reply, not an env action; `decode` (given by the caller, which
knows the text wrapper's rules) maps what act returned to the (op, slot) the env executed, or
None for a reply the env never executed (not part of a trace).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from diagym.controllers.policy import Policy
from diagym.controllers.runlog import RunLog
from diagym.envs._core.failures import failure_name

TRACE = "trace"
Action = tuple[int, int]
DIGEST_CHARS = 12
OK = "ok"  # the outcome of an action whose step reported no failure


def digest(observation: Any) -> str:
    """The first DIGEST_CHARS hex characters of the sha256 over an observation: for a dict,
    each key in sorted order, its UTF-8 bytes then its value's bytes; a str value's bytes are
    its UTF-8, any other value's `np.ascontiguousarray(value).tobytes()` (the env's dtype, C
    order); an observation that is not a dict is hashed as that one value. The rule a user
    recomputes to match a traced decision with a replay of their own."""
    sha = hashlib.sha256()
    items = sorted(observation.items()) if isinstance(observation, dict) else [("", observation)]
    for key, value in items:
        sha.update(str(key).encode("utf-8"))
        sha.update(value.encode("utf-8") if isinstance(value, str)
                   else np.ascontiguousarray(value).tobytes())
    return sha.hexdigest()[:DIGEST_CHARS]


def outcome(info: dict[str, Any]) -> str:
    """An executed action's outcome from the info of its step (module docstring)."""
    failure = failure_name(info.get("failure"))
    return OK if failure is None else failure


def pair(action: Any) -> Action | None:
    """A StatefulWorkflow action (an integer array, tuple or list) as two ints; None for one
    that is not two integers (the env refuses it in its own words, and nothing executed)."""
    try:
        op, slot = (int(x) for x in action)
    except (TypeError, ValueError, OverflowError, np.ma.MAError):
        return None
    return op, slot


class Traced:
    """`policy` with its episodes' actions recorded (module docstring). It plays and describes
    itself exactly as `policy` does: describe() is the wrapped policy's, so the run's identity
    in a log is unchanged by tracing."""

    def __init__(self, policy: Policy, decode: Callable[[Any], Action | None] = pair,
                 on_trace: Callable[[int | None, tuple[Action, ...]], None] | None = None
                 ) -> None:
        self.policy = policy
        self.decode = decode
        self.on_trace = on_trace
        self.actions: list[Action] = []
        self.observations: list[str] = []
        self.outcomes: list[str] = []
        self._pending = False  # the last act's action was executed; its outcome is to come
        self._seed: int | None = None
        self._log: RunLog | None = None
        self._final = True

    def reset(self, *, seed: int | None = None) -> None:
        self.policy.reset(seed=seed)
        self._seed = seed
        self.actions, self.observations, self.outcomes = [], [], []
        self._pending = False
        self._final = False

    def _settle(self, info: dict[str, Any]) -> None:
        if self._pending:
            self.outcomes.append(outcome(info))
            self._pending = False

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        self._settle(info)
        seen = digest(observation)  # before the policy, which may change the observation
        action = self.policy.act(observation, info)
        executed = self.decode(action)
        if executed is not None:
            self.actions.append(executed)
            self.observations.append(seen)
            self._pending = True
        return action

    def episode_end(self, observation: Any, info: dict[str, Any]) -> None:
        """The runner's hook after an episode's last step: the last action's outcome."""
        self._settle(info)
        end = getattr(self.policy, "episode_end", None)
        if callable(end):
            end(observation, info)

    def attach_log(self, log: RunLog | None) -> None:
        self._log = log
        attach = getattr(self.policy, "attach_log", None)
        if callable(attach):
            attach(log)

    def episode_counters(self) -> dict[str, Any]:
        """The wrapped policy's counters; the first call after an episode also makes its trace
        final (module docstring)."""
        if not self._final:
            self._final = True
            actions = tuple(self.actions)
            if self._log is not None and self._seed is not None:
                self._log.write({"type": TRACE, "episode_key": self._log.key(self._seed),
                                 "actions": [list(a) for a in actions],
                                 "observations": list(self.observations),
                                 "outcomes": list(self.outcomes)})
            if self.on_trace is not None:
                self.on_trace(self._seed, actions)
        counters = getattr(self.policy, "episode_counters", None)
        return dict(counters()) if callable(counters) else {}

    def describe(self) -> Any:
        describe = getattr(self.policy, "describe", None)
        return describe() if callable(describe) else type(self.policy).__name__

    def describe_session(self) -> dict[str, Any] | None:
        describe = getattr(self.policy, "describe_session", None)
        return describe() if callable(describe) else None
