"""A policy's calls kept as a trace, so a run can be diagnosed later from its log alone.

An opaque agent shows the runner only its actions, and a diagnosis (analysis/diagnose) needs
exactly those: the task seed, the env kwargs (both in the run log already) and the calls in
order. `Traced(policy)` records each episode's env actions as (op, slot) integer pairs.

When the trace line is written: the runner asks a policy for its `episode_counters()` exactly
once per episode, after the episode's last step and before it writes the episode line, and it
does so for an aborted episode too. That is the moment an episode's trace is final, so
`Traced.episode_counters()` writes the {"type": "trace", "episode_key", "actions"} line then,
into the log the runner attached. The trace line therefore precedes its episode line: a kill
between the two leaves a trace without an episode line, which the resume's "replay" line voids
with the episode's other lines, and a finished episode always has its trace, the last one
included. The actions are not a counter: counters become Episodes columns and summary means,
and a list per episode would be neither.

The trace is also handed to `on_trace(task_seed, actions)` when given, so a caller without a
log gets the same traces in memory.

A text policy's act returns a reply, not an env action; `decode` (given by the caller, which
knows the text wrapper's rules) maps what act returned to the (op, slot) the env executed, or
None for a reply the env never executed (not part of a trace).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controllers.policy import Policy
from controllers.runlog import RunLog

TRACE = "trace"
Action = tuple[int, int]


def pair(action: Any) -> Action:
    """A StatefulWorkflow action (an integer array, tuple or list) as two ints."""
    op, slot = (int(x) for x in action)
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
        self._seed: int | None = None
        self._log: RunLog | None = None
        self._final = True

    def reset(self, *, seed: int | None = None) -> None:
        self.policy.reset(seed=seed)
        self._seed = seed
        self.actions = []
        self._final = False

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        action = self.policy.act(observation, info)
        executed = self.decode(action)
        if executed is not None:
            self.actions.append(executed)
        return action

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
                                 "actions": [list(a) for a in actions]})
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
