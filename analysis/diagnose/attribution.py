"""Per-decision attribution of a StatefulWorkflow trace: which mistakes fit each failed call.

A diagnosis must hold an agent to what it could know, so everything here is derived from the
public task, the agent's actions and the env's outcomes; the env is used only to replay the
actions (it is deterministic given the task seed and the actions), never read for hidden state.

## What is publicly known at a decision
Every feedback mode shows all 8 registers in the first observation, so the initial values are
always known. After that, a register's current value is known when

- the current observation shows it (a snapshot), or
- it was known at the previous decision and no hidden resampling happened since: a failed call
  changes nothing, and a success of v applies the public update x[u_v] += delta_v (mod 8).

Hence: with snapshots or history feedback and no resampling, every register is known at every
decision (the last shown snapshot plus the updates applied since). Under hidden resampling a
success redraws the active registers 0..width-1 unseen, so their current values are unknown
until the next snapshot; the padding registers width..7 are never updated or redrawn and stay
known. An unknown value explains nothing (it is no hypothesis's value), and the decision's
wrong slot is then weighed against what is known.

## Categories
A success is "ok". A failed call is its env failure category (`dependency`: an operation not
ready, a scheduling error; `completed`: an operation already done, a bookkeeping error), or,
for a wrong slot (`candidate`), the explanations whose hypothesised value v fits the chosen
slot, i.e. codes[op, slot] == v mod b. For the queried register q:

- initial_value: q's initial value (the first observation's), unless it is known to be the
  current one (an agent that never tracked anything);
- stale_value: a value q was publicly known to hold at an earlier decision after it had left
  its initial value (changed by an update, or redrawn), and which is no longer its value: a
  value before some of the applied updates, or the last snapshot's value once it has changed;
- wrong_register: the current value of another active register (binding). Only registers
  0..width-1 take part in the task; the padding slots are never queried, and counting them
  would make binding fit at width 1, where there is no other register to confuse.

Initial and stale values come from disjoint sources (the start, and later), not disjoint
values: when q has returned to its initial value by updates and left it again, both fit, which
is a coincidence like any other. A wrong slot that no explanation fits is a "guess"; one that
several fit is "ambiguous" (codes collide at small b) and is counted once, under "ambiguous".

## Likelihood shares (`Attribution.weights`)
Each explanation e is the hypothesis "the agent used one of e's values, each equally likely"
(its members: one initial value, the distinct stale values, the other active registers with
known current values); the probability it gives the chosen slot is the share of its members
whose residue is the slot's code. "guess" gives every slot 1/b. With equal priors over guess
and the explanations that have members, the weights are those probabilities normalised: they
sum to 1 per wrong slot, and guess keeps a share even where an explanation fits, since a
uniform agent lands there by chance too (one fitting single value at b = 8: 8/9 against 1/9).

## Against chance (`Tally.expected`)
A count means little alone: at b = 3 and width 8 almost every wrong slot matches some other
register's value, so a uniform guesser is "binding" on most of its failures too. For each wrong
slot the tally also adds, per category, the share of the decision's wrong slots that would be
given that category: the count a uniform guesser (uniform over the failing slots) would show on
the same decisions. Where the current value of the queried register is unknown (hidden
resampling), the failing slot is not known either and the share is over all b slots.

Successes weigh nothing: the counts decompose failures by cause, they are not a fit of the
hypotheses to the whole trace. A success where every hypothesis predicts the same slot carries
no information; one where they differ would count against the others, which a whole-trace
likelihood would need and this module does not form.

The error budget is no category of its own: the call that exhausts it keeps its failure's
category and the episode ends there. Calls the env never executed (a text answer that did not
parse, llm_policies' invalid_json and invalid_action) are not in a trace; an action outside the
action space is refused on replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import diagym  # noqa: F401  (registers the ids)
from diagym import envs
from diagym.analysis.diagnose.contract import DIAGNOSES
from diagym.envs.workflow.layout import CANDIDATE, FAILURE_NAMES, NO_FAILURE
from diagym.envs.workflow.params import REGISTER_SLOTS, WorkflowParams

ENV_ID = DIAGNOSES[envs.WORKFLOW].env_id
OK = "ok"
CANDIDATE_FAILURE = FAILURE_NAMES[CANDIDATE]
STALE, WRONG_REGISTER, INITIAL = "stale_value", "wrong_register", "initial_value"
EXPLANATIONS = (STALE, WRONG_REGISTER, INITIAL)
GUESS, AMBIGUOUS = "guess", "ambiguous"
# The env's own failure categories other than a wrong slot, then the split of wrong slots.
FAILURE_CATEGORIES = tuple(
    name for name in FAILURE_NAMES if name is not None and name != CANDIDATE_FAILURE
)
COUNT_KEYS = (*FAILURE_CATEGORIES, *EXPLANATIONS, GUESS, AMBIGUOUS)
WEIGHT_KEYS = (*EXPLANATIONS, GUESS)


@dataclass(frozen=True)
class Trace:
    """One StatefulWorkflow episode as an agent played it: the env's gym.make kwargs (a
    preset's are diagym.envs.WORKFLOW_PRESETS[id]), the task seed and the calls, in order."""

    env_kwargs: Mapping[str, Any]
    task_seed: int
    actions: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Decision:
    """One call: the public state before it, the action and its outcome.

    observation is what the agent was shown before acting; failure names info["failure"] after
    it (None for a success). known[r] is register r's publicly known current value (None when
    unknown, see the module docstring), initial the first observation's registers, and
    earlier[r] the values r was known to hold at earlier decisions after leaving its initial
    value.
    """

    index: int
    spec: WorkflowParams
    observation: Mapping[str, np.ndarray]
    action: tuple[int, int]
    failure: str | None
    known: tuple[int | None, ...]
    initial: tuple[int, ...]
    earlier: tuple[frozenset[int], ...]

    @property
    def query(self) -> int:
        """The register the chosen operation reads."""
        return int(self.observation["query_register"][self.action[0]])

    def code(self, slot: int) -> int:
        """The code of `slot` of the chosen operation."""
        b = self.spec.candidates
        return int(self.observation["codes"][self.action[0] * b + slot])


@dataclass(frozen=True)
class Attribution:
    """A decision's category ("ok", an env failure category, one explanation, "guess" or
    "ambiguous"), the explanations that fit it and, for a wrong slot, each hypothesis's
    likelihood share (WEIGHT_KEYS, summing to 1; empty otherwise)."""

    category: str
    explanations: frozenset[str]
    weights: Mapping[str, float]


@dataclass(frozen=True)
class Tally:
    """Attributions summed over traces: `counts` (COUNT_KEYS, each decision once), `weighted`
    (WEIGHT_KEYS: likelihood shares summed over wrong slots), the decisions and successes
    behind them (successes weigh nothing), and `expected`: per wrong-slot category, the count
    a uniform guesser would show on the same wrong-slot decisions (module docstring)."""

    counts: dict[str, int]
    weighted: dict[str, float]
    decisions: int
    successes: int
    expected: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def wrong_slots(self) -> int:
        return sum(self.counts.get(key, 0) for key in (*EXPLANATIONS, GUESS, AMBIGUOUS))


def replay(trace: Trace) -> list[Decision]:
    """The trace's decisions, replayed on the env; refuses an action outside the action space
    and actions after the episode ended (ValueError naming the call)."""
    env = gym.make(ENV_ID, **dict(trace.env_kwargs))
    try:
        return _replay_on(env, trace)
    finally:
        env.close()


def _replay_on(env: gym.Env, trace: Trace) -> list[Decision]:
    """`replay` on `env`, an env made with the trace's kwargs: reset with the task seed, it
    plays the task afresh whatever it played before (the env is deterministic given the task
    seed and the actions), so one env serves every trace of a configuration."""
    observation, info = env.reset(seed=trace.task_seed)
    spec: WorkflowParams = env.unwrapped.params
    initial = tuple(int(x) for x in observation["registers"])
    known: list[int | None] = list(initial)
    left_initial = [False] * REGISTER_SLOTS
    seen_since: list[set[int]] = [set() for _ in range(REGISTER_SLOTS)]
    decisions: list[Decision] = []
    ended = False
    for index, (op, slot) in enumerate(trace.actions):
        if ended:
            raise ValueError(f"call {index} of the trace of seed {trace.task_seed} comes "
                             f"after the episode ended ({index} calls)")
        for r, shown in enumerate(observation["registers"].tolist()):
            if shown >= 0:
                known[r] = shown
        decision_before = observation
        try:
            observation, _, ended, _, info = env.step((op, slot))
        except ValueError as error:
            raise ValueError(f"call {index} of the trace of seed {trace.task_seed}: "
                             f"{error}") from error
        decisions.append(Decision(
            index=index, spec=spec, observation=decision_before, action=(int(op), int(slot)),
            failure=FAILURE_NAMES[info["failure"]], known=tuple(known), initial=initial,
            earlier=tuple(frozenset(values) for values in seen_since),
        ))
        for r in range(REGISTER_SLOTS):
            value = known[r]
            if left_initial[r] and value is not None:
                seen_since[r].add(value)
        if info["failure"] == NO_FAILURE:
            _apply_success(decision_before, op, spec, info["resampled"], known, left_initial)
    return decisions


def _apply_success(observation: Mapping[str, np.ndarray], op: int, spec: WorkflowParams,
                   resampled: bool, known: list[int | None], left_initial: list[bool]) -> None:
    """What a success of `op` makes public: its update, or (resampling) that the active
    registers are now unknown."""
    u = int(observation["update_register"][op])
    delta = int(observation["delta"][op])
    value = known[u]
    if delta % 8:
        left_initial[u] = True
        if value is not None:
            known[u] = (value + delta) % 8
    if resampled:
        for r in range(spec.width):
            known[r] = None
            left_initial[r] = True


def explanation_values(decision: Decision) -> dict[str, tuple[int, ...]]:
    """Each explanation's members (values) for the decision's queried register; an
    explanation with no member does not apply."""
    q = decision.query
    current = decision.known[q]
    initial = decision.initial[q]
    return {
        STALE: tuple(sorted(decision.earlier[q] - {current})),
        WRONG_REGISTER: tuple(value for r, value in enumerate(decision.known[:decision.spec.width])
                              if r != q and value is not None),
        INITIAL: (initial,) if initial != current else (),
    }


def _slot_category(decision: Decision, slot: int,
                   members: Mapping[str, tuple[int, ...]]) -> tuple[str, frozenset[str],
                                                               dict[str, float]]:
    """(category, fitting explanations, likelihood shares) of a wrong `slot` at `decision`."""
    b = decision.spec.candidates
    code = decision.code(slot)
    likelihood = {name: sum(value % b == code for value in values) / len(values)
                  for name, values in members.items() if values}
    fits = frozenset(name for name, share in likelihood.items() if share > 0)
    likelihood[GUESS] = 1.0 / b
    total = sum(likelihood.values())
    weights = {name: likelihood.get(name, 0.0) / total for name in WEIGHT_KEYS}
    if not fits:
        category = GUESS
    elif len(fits) == 1:
        (category,) = fits
    else:
        category = AMBIGUOUS
    return category, fits, weights


def attribute(decision: Decision) -> Attribution:
    """The decision's category, fitting explanations and likelihood shares."""
    if decision.failure is None:
        return Attribution(OK, frozenset(), {})
    if decision.failure != CANDIDATE_FAILURE:
        return Attribution(decision.failure, frozenset(), {})
    category, fits, weights = _slot_category(decision, decision.action[1],
                                             explanation_values(decision))
    return Attribution(category, fits, weights)


def guessing_shares(decision: Decision) -> dict[str, float]:
    """Per wrong-slot category, the share of the decision's failing slots given it: what a
    guesser uniform over those slots is counted as, on average (module docstring)."""
    b = decision.spec.candidates
    current = decision.known[decision.query]
    members = explanation_values(decision)
    slots = [a for a in range(b)
             if current is None or decision.code(a) != current % b]
    shares = dict.fromkeys((*EXPLANATIONS, GUESS, AMBIGUOUS), 0.0)
    for slot in slots:
        shares[_slot_category(decision, slot, members)[0]] += 1.0 / len(slots)
    return shares


def tally(decisions: Sequence[Decision]) -> Tally:
    """The counts and likelihood shares of `decisions`."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    weighted = dict.fromkeys(WEIGHT_KEYS, 0.0)
    expected = dict.fromkeys((*EXPLANATIONS, GUESS, AMBIGUOUS), 0.0)
    successes = 0
    for decision in decisions:
        attribution = attribute(decision)
        if attribution.category == OK:
            successes += 1
            continue
        counts[attribution.category] += 1
        for name, share in attribution.weights.items():
            weighted[name] += share
        if decision.failure == CANDIDATE_FAILURE:
            for name, share in guessing_shares(decision).items():
                expected[name] += share
    return Tally(counts, weighted, len(decisions), successes, expected)


class Replayer:
    """`replay` on one env per configuration, kept for every later trace of it (a
    diagnosis's 512 traces on its 10: making an env costs more than replaying an episode).
    A context manager: the envs close with it."""

    def __init__(self) -> None:
        self._envs: dict[WorkflowParams, gym.Env] = {}

    def __call__(self, trace: Trace) -> list[Decision]:
        key = WorkflowParams.from_kwargs(**dict(trace.env_kwargs))  # any spelling of a spec
        if key not in self._envs:
            self._envs[key] = gym.make(ENV_ID, **dict(trace.env_kwargs))
        return _replay_on(self._envs[key], trace)

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *_exc: object) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def attribution_counts(traces: Iterable[Trace]) -> Tally:
    """The tally of every decision of `traces`, replayed on one env per configuration."""
    with Replayer() as replay_one:
        return tally([decision for trace in traces for decision in replay_one(trace)])


def explain(result: Tally) -> str:
    """One sentence: what the failures were, and how much of the wrong-slot mass each
    explanation carries."""
    failures = result.decisions - result.successes
    wrong = sum(result.counts[key] for key in (*EXPLANATIONS, GUESS, AMBIGUOUS))
    head = (f"Of {result.decisions} calls, {result.successes} succeeded (not evidence) and "
            f"{failures} failed")
    if not failures:
        return head + "."
    parts = [f"{result.counts[key]} {key.replace('_', ' ')}" for key in FAILURE_CATEGORIES]
    if wrong:
        split = ", ".join(f"{result.counts[key]} {key.replace('_', ' ')}"
                          for key in (*EXPLANATIONS, GUESS, AMBIGUOUS))
        shares = ", ".join(f"{key.replace('_', ' ')} {result.weighted[key] / wrong:.0%}"
                           for key in WEIGHT_KEYS)
        parts.append(f"{wrong} wrong slots ({split}; likelihood shares {shares})")
    return f"{head}: {', '.join(parts)}."
