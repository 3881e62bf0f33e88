"""Agents with one known fault: a reference controller that makes one mistake of a named cause
at a known decision, so every episode it fails carries its decisive step and its cause, exact
by construction. This is what an attributor (analysis/diagnose/attribution.py, or an LLM
judge run on an export) is scored against: no annotator decides the label.

## The faults
`FaultInjector` plays the `base` controller (ReferencePolicy, "exact" by default) and, from a
target decision drawn from the episode's task seed on, replaces the controller's action once
by the fault of the episode's cause (also drawn from the task seed, `cause_of`):

- stale_value: the scheduled operation with the slot of a value its queried register q held
  at an earlier decision after it had left its initial value, and no longer holds;
- initial_value: ... with the slot of q's initial value, where q has left it;
- wrong_register: ... with the slot of another active register's current value (binding);
- guess: ... with a slot drawn uniformly over all b;
- dependency: an operation whose prerequisites are not all done (not ready);
- completed: an operation already done (a repeated call of a success);
- invalid_reply: a reply that is not JSON (the text wrapper's invalid_json): no env call.

The values are the injector's own tracking of what is public (the first observation, the
snapshots, the updates of its successes), kept independently of attribution.py's replay;
the scoring checks that the two agree on every label (analysis/studies/attribution_bench).

## When an injected value is right, or the fault cannot be made
Each residue mod b has exactly one slot (the codes of an operation are a permutation), so a
value fault fails iff its slot differs from the reference slot, which is right for the
configurations the benchmark plays (the base never fails there, checked). A drawn value or
guess whose slot is the right one would succeed: it is not injected, counted in
`fault_masked`, and the injector draws again at the next decision. A fault with nothing to
draw from at a decision (no stale value yet, one active register, no blocked or no completed
operation) waits for the next decision; one that never became possible leaves the episode
unfaulted (`fault_step` -1), and it succeeds. An injected slot may also fit other
explanations (a stale value equal to another register's residue): the label stays the
injector's cause, and the scoring reports how often the attribution calls it ambiguous.

## The decisive step with an error allowance R > 0
AgentRx (Barke et al., arXiv:2602.02475) annotates the critical failure step as the earliest
failure the agent never recovers from. A failed call changes nothing in StatefulWorkflow, so
a single failed call is recoverable while R > 0; to make the fault decisive the injector
repeats the injected call at every later decision (the same action fails the same way, the
"repeated failed call"), until the errors exceed R and the env ends the episode R calls
later. The decisive step is the first injected call (`fault_step`): from it on the agent
never recovers. The call that exhausts the budget, where the env makes success impossible
for any continuation, is the episode's last call (`fault_terminal`, fault_step + R). With
R = 0 the two coincide. An invalid reply ends the episode at once, whatever R.

The label rides in the episode record's counters (`fault_*`, LABEL_KEYS), so a run log
carries its labels next to its traces and an export reads both from the log alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym.analysis.diagnose.attribution import GUESS, INITIAL, STALE, WRONG_REGISTER
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs.workflow.layout import ALREADY_COMPLETED, DEPENDENCY, FAILURE_NAMES, NO_FAILURE
from diagym.envs.workflow.params import REGISTER_SLOTS, WorkflowParams
from diagym.llm_policies.text_actions import INVALID_JSON

NOT_READY, REPEATED_SUCCESS = FAILURE_NAMES[DEPENDENCY], FAILURE_NAMES[ALREADY_COMPLETED]
INVALID_REPLY = "invalid_reply"
VALUE_CAUSES = (STALE, INITIAL, WRONG_REGISTER)
SLOT_CAUSES = (*VALUE_CAUSES, GUESS)
CAUSES = (*SLOT_CAUSES, NOT_READY, REPEATED_SUCCESS, INVALID_REPLY)
# The env's failure category of an injected call, per cause; an invalid reply is no call.
ENV_FAILURE = {**dict.fromkeys(SLOT_CAUSES, "candidate"), NOT_READY: NOT_READY,
               REPEATED_SUCCESS: REPEATED_SUCCESS}
TEXT_FAILURE = {INVALID_REPLY: INVALID_JSON}
INVALID_TEXT = "I would run the next ready operation with its matching candidate."
FAULT_STREAM = 0x46A17  # the injector's draws: numpy's generator on (task seed, this)
LABEL_KEYS = ("fault_cause", "fault_step", "fault_terminal", "fault_op", "fault_slot",
              "fault_register", "fault_value", "fault_masked", "fault_target")


def cause_of(task_seed: int, causes: Sequence[str]) -> str:
    """The cause an episode's fault has: the causes in turn along the task seeds."""
    return causes[task_seed % len(causes)]


@dataclass(frozen=True)
class Label:
    """An episode's exact label: the cause, the decisive decision (0-based; the decisions of
    a text run are its replies, of which the executed ones are its calls), the decision that
    ended the episode, the injected action, the register whose value it used (-1: none) and
    that value (-1: none), and how many drawn faults were masked before it."""

    cause: str
    step: int
    terminal: int
    op: int
    slot: int
    register: int
    value: int
    masked: int


def label_of(counters: Mapping[str, Any]) -> Label | None:
    """The label in an episode record's counters; None for an episode of another policy or
    one whose fault was never injected."""
    if not all(key in counters for key in LABEL_KEYS) or int(counters["fault_step"]) < 0:
        return None
    return Label(str(counters["fault_cause"]), int(counters["fault_step"]),
                 int(counters["fault_terminal"]), int(counters["fault_op"]),
                 int(counters["fault_slot"]), int(counters["fault_register"]),
                 int(counters["fault_value"]), int(counters["fault_masked"]))


class FaultInjector:
    """The `base` reference controller with one fault per episode (module docstring). With
    `text` it answers in JSON text (play it behind llm_policies' TextActionWrapper), which the
    invalid_reply cause needs; otherwise env actions."""

    def __init__(self, spec: WorkflowParams, *, base: str = "exact",
                 causes: Sequence[str] = CAUSES, text: bool = True) -> None:
        unknown = [c for c in causes if c not in CAUSES]
        if unknown or not causes:
            raise ValueError(f"causes must be some of {' | '.join(CAUSES)}; got {list(causes)}")
        if INVALID_REPLY in causes and not text:
            raise ValueError("the invalid_reply cause needs text=True (a reply the text "
                             "wrapper refuses)")
        self.spec = spec
        self.base = base
        self.causes = tuple(causes)
        self.text = text
        self.inner = ReferencePolicy(base, spec)
        self._episode(0)

    def _episode(self, seed: int) -> None:
        self._seed = seed
        self._rng = np.random.default_rng([seed, FAULT_STREAM])
        self.cause = cause_of(seed, self.causes)
        self._target = int(self._rng.integers(self.spec.n_ops))
        self._t = 0
        self._injected: Any = None
        self._label: dict[str, Any] = {"fault_step": -1, "fault_op": -1, "fault_slot": -1,
                                       "fault_register": -1, "fault_value": -1}
        self._masked = 0
        self._known: list[int | None] = []
        self._initial: list[int] = []
        self._left = [False] * REGISTER_SLOTS
        self._seen: list[set[int]] = [set() for _ in range(REGISTER_SLOTS)]

    def reset(self, *, seed: int | None = None) -> None:
        self.inner.reset(seed=seed)
        self._episode(0 if seed is None else int(seed))

    def describe(self) -> dict[str, Any]:
        return {"controller": self.base, "faults": list(self.causes), "text": self.text}

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> Any:
        reference = self.inner.act(observation, info)
        op, slot = int(reference[0]), int(reference[1])
        self._track(observation, info)
        action: Any = self._injected
        if action is None and self._t >= self._target:
            action = self._inject(observation, op, slot)
        for r in range(REGISTER_SLOTS):
            value = self._known[r]
            if self._left[r] and value is not None:
                self._seen[r].add(value)
        self._t += 1
        if action is None:
            action = (op, slot)
        if action == INVALID_TEXT:
            return INVALID_TEXT
        if self.text:
            return json.dumps({"operation": action[0], "candidate": action[1]})
        return np.array(action, dtype=np.int64)

    def _track(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> None:
        """What is public now: the first observation's registers, a success's update (or,
        under hidden resampling, that the active registers are unknown), a snapshot."""
        registers = [int(x) for x in observation["registers"]]
        if self._t == 0:
            self._initial = registers
            self._known = list(registers)
        elif int(observation["failure"]) == NO_FAILURE:
            u, delta = (int(x) for x in observation["last_update"])
            if delta % 8:
                self._left[u] = True
                value = self._known[u]
                if value is not None:
                    self._known[u] = (value + delta) % 8
            if info.get("resampled"):
                for r in range(self.spec.width):
                    self._known[r] = None
                    self._left[r] = True
        for r, shown in enumerate(registers):
            if shown >= 0:
                self._known[r] = shown

    def _inject(self, observation: Mapping[str, Any], op: int, slot: int) -> Any:
        """The fault's action at this decision, or None (not possible yet, or masked)."""
        n, b = self.spec.n_ops, self.spec.candidates
        completed = [bool(x) for x in observation["completed"]]
        cause = self.cause
        register, value = -1, -1
        if cause == INVALID_REPLY:
            action: Any = INVALID_TEXT
            op, slot = -1, -1
        elif cause in (NOT_READY, REPEATED_SUCCESS):
            prereq = np.asarray(observation["prereq"]).reshape(n, n)
            if cause == NOT_READY:
                pool = [v for v in range(n) if not completed[v]
                        and any(prereq[v, u] and not completed[u] for u in range(n))]
            else:
                pool = [v for v in range(n) if completed[v]]
            if not pool:
                return None
            op, slot = pool[int(self._rng.integers(len(pool)))], 0
            action = (op, slot)
        else:
            q = int(observation["query_register"][op])
            codes = [int(c) for c in np.asarray(observation["codes"])[op * b:(op + 1) * b]]
            right = slot
            if cause == GUESS:
                slot = int(self._rng.integers(b))
            else:
                members = self._members(cause, q)
                if not members:
                    return None
                register, value = members[int(self._rng.integers(len(members)))]
                slot = codes.index(value % b)
            if slot == right:
                self._masked += 1
                return None
            action = (op, slot)
        self._injected = action
        self._label = {"fault_step": self._t, "fault_op": op, "fault_slot": slot,
                       "fault_register": register, "fault_value": value}
        return action

    def _members(self, cause: str, q: int) -> list[tuple[int, int]]:
        """(register, value) pairs the value fault draws from; none while q's current value
        is not public."""
        current = self._known[q]
        if current is None:
            return []
        if cause == STALE:
            return [(q, v) for v in sorted(self._seen[q] - {current})]
        if cause == INITIAL:
            return [(q, self._initial[q])] if self._initial[q] != current else []
        return [(r, value) for r, value in enumerate(self._known[:self.spec.width])
                if r != q and value is not None]

    def episode_counters(self) -> dict[str, Any]:
        """The base controller's counters and the label (LABEL_KEYS; fault_step -1: not
        injected, the cause is then still the episode's drawn cause)."""
        step = self._label["fault_step"]
        terminal = -1 if step < 0 else self._t - 1
        return {**self.inner.episode_counters(), "fault_cause": self.cause, **self._label,
                "fault_terminal": terminal, "fault_masked": self._masked,
                "fault_target": self._target}
