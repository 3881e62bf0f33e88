"""Whether the fitted hypothesis fails the way the agent fails: the fit test's second half.

The fit test (fit_test.py) sees an episode's outcome only (first failure category, operations
completed, failed calls), so a mechanism that fails as often and as early as the agent fits,
whatever the failures were. A deterministic reader of the wrong register fails like a uniform
guesser with perseveration, and an agent that applies each update with the wrong sign fails
like one that never applies them; the attribution of the agent's own failed calls
(attribution.py: 97% another register's value where guessing gives 87%) says otherwise. So the
hypothesis's failures are checked as well: the hypothesis plays the agent's configurations on
SIMULATED_PER_EPISODE fresh task seeds per agent episode (from FAILURE_SEED, disjoint from the
agent's, the model's, the fit test's and the forecasts' seeds), through the batched runner
with its trace kept, and those traces are attributed exactly as the agent's are.

Each episode becomes a vector of its failed calls counted by cause (attribution.COUNT_KEYS)
and by step (the operations completed before the failed call). The statistic is the
G-squared of the 2 x K table (agent against hypothesis) of causes plus that of steps, pooled
over configurations. Its null distribution comes from PERMUTATIONS permutations of the
agent/hypothesis labels among the episodes of each configuration: an episode's failed calls
move together, so several failures of one episode are not counted as independent evidence
(a retrying agent's are not), and the configurations keep their episode counts. Below
FIT_ALPHA (the fit test's level) the failures do not fit; the headline then says "fits the
outcomes, but not the failures" and names the cause or step whose share differs most.

Only episodes with an env outcome take part (as in the fit test). With fewer than
MIN_FAILURES failed calls there is no check (None): nothing to split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym.analysis.diagnose.attribution import (
    COUNT_KEYS,
    OK,
    Decision,
    Replayer,
    Trace,
    attribute,
    replay,
)
from diagym.analysis.diagnose.fit_test import SEED_STRIDE, Hypothesis
from diagym.analysis.diagnose.honesty import FIT_ALPHA, MIN_FAILURES, bootstrap_p_value
from diagym.analysis.diagnose.likelihood import MechanismModel, simulated_row, with_lapse
from diagym.controllers.workflow.batched import ERRORS_COL, RECORD_FIELDS, run_episodes
from diagym.controllers.workflow.mechanisms import CONTROLLER_FIELDS
from diagym.envs.workflow.kernel import allocate_rows
from diagym.envs.workflow.params import WorkflowParams

FAILURE_SEED = 7 * 10**9
SIMULATED_PER_EPISODE = 2
PERMUTATIONS = 400
CAUSES = COUNT_KEYS


def play_traces(spec: WorkflowParams, row: Sequence[int], seeds: np.ndarray
                ) -> tuple[list[tuple[tuple[int, int], ...]], np.ndarray]:
    """The actions of mechanism `row` on the tasks of `seeds`, from the batched runner's loop
    (the trajectory the env and the Policy adapter give, controllers/workflow/batched.py),
    and each episode's failed calls."""
    row = simulated_row(spec, tuple(row))
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    params = spec.to_params()
    horizon = spec.n_ops + spec.error_allowance
    records = np.zeros((seeds.shape[0], RECORD_FIELDS), dtype=np.int64)
    trace = np.full((seeds.shape[0], horizon, 2), -1, dtype=np.int64)
    cstate = np.zeros((1, CONTROLLER_FIELDS), dtype=np.int64)
    bad = run_episodes(params, np.array(row, dtype=np.int64), seeds, *allocate_rows(params, 1),
                       cstate, records, trace)
    if bad >= 0:
        raise RuntimeError(f"row {row} on {spec} exceeded the call horizon on seed {seeds[bad]}")
    return ([tuple((int(op), int(slot)) for op, slot in actions if op >= 0)
             for actions in trace], records[:, ERRORS_COL].copy())


def hypothesis_traces(model: MechanismModel, hypothesis: Hypothesis, spec: WorkflowParams,
                      seeds: np.ndarray, rng: np.random.Generator
                      ) -> tuple[list[Trace], np.ndarray]:
    """The hypothesis's traces on `seeds` and their failed calls: each episode from one
    component, drawn by weight (every component plays every seed), as fit_test plays its
    outcome codes."""
    played = [play_traces(spec, with_lapse(model.mechanisms[c.index].row, c.epsilon), seeds)
              for c in hypothesis.components]
    weights = np.array([c.weight for c in hypothesis.components], dtype=np.float64)
    pick = (np.zeros(len(seeds), dtype=np.int64) if len(played) == 1 else
            rng.choice(len(played), size=len(seeds), p=weights / weights.sum()))
    kwargs = spec.as_dict()
    return ([Trace(kwargs, int(seed), played[k][0][i])
             for i, (seed, k) in enumerate(zip(seeds, pick, strict=True))],
            np.array([played[k][1][i] for i, k in enumerate(pick)], dtype=np.int64))


def failure_vector(trace: Trace, steps: int, failed: int | None = None,
                   replay_one: Callable[[Trace], list[Decision]] = replay) -> np.ndarray:
    """An episode's failed calls by cause (CAUSES) then by operations completed before the
    call (0 .. steps - 1, the last bin holding any deeper); an episode known to have no
    failed call (`failed` 0) is not replayed. `replay_one` replays it (attribution's
    Replayer keeps one env per configuration)."""
    out = np.zeros(len(CAUSES) + steps, dtype=np.int64)
    if failed == 0:
        return out
    done = 0
    for decision in replay_one(trace):
        category = attribute(decision).category
        if category == OK:
            done += 1
            continue
        out[CAUSES.index(category)] += 1
        out[len(CAUSES) + min(done, steps - 1)] += 1
    return out


def _g_table(agent: np.ndarray, other: np.ndarray) -> np.ndarray:
    """G-squared of the 2 x K tables (agent rows against other rows, along the last axis) of
    homogeneity; columns empty in both add nothing."""
    table = np.stack([agent, other], axis=-2).astype(np.float64)
    total = table.sum(axis=(-2, -1), keepdims=True)
    expected = table.sum(axis=-1, keepdims=True) * table.sum(axis=-2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(total > 0, expected / total, 0.0)
        terms = np.where(table > 0, table * np.log(table / expected), 0.0)
    return 2.0 * terms.sum(axis=(-2, -1))


def _statistic(agent: np.ndarray, other: np.ndarray) -> np.ndarray:
    """The causes' G-squared plus the steps'."""
    k = len(CAUSES)
    return _g_table(agent[..., :k], other[..., :k]) + _g_table(agent[..., k:], other[..., k:])


@dataclass(frozen=True)
class FailureCheck:
    """The agent's failed calls against the hypothesis's: the statistic, its permutation
    p-value, the median permuted statistic, the failed calls on each side, and the cause or
    step whose share differs most (name, agent's share, hypothesis's share)."""

    hypothesis: str
    statistic: float
    p_value: float
    permutations: int
    expected: float
    agent_failures: int
    hypothesis_failures: int
    differs_most: tuple[str, float, float]

    @property
    def rejected(self) -> bool:
        return self.p_value < FIT_ALPHA

    def p_text(self) -> str:
        """'p = 0.43', or 'p < 0.0025' at the permutations' resolution; a rejected p-value
        that two digits would round up to the level keeps a third ('p = 0.00998')."""
        floor = 1.0 / (self.permutations + 1)
        if self.p_value <= floor + 5e-6:
            return f"p < {floor:.2g}"
        text = f"{self.p_value:.2g}"
        if self.rejected and float(text) >= FIT_ALPHA:
            text = f"{self.p_value:.3g}"
        return f"p = {text}"

    def words(self) -> str:
        """'another register's value (wrong register) on 97% of failed calls where
        perseverate-1@1 gives 87%'."""
        name, agent, predicted = self.differs_most
        return f"{name} on {agent:.0%} of failed calls where {self.hypothesis} gives " \
               f"{predicted:.0%}"

    def to_json(self) -> dict[str, Any]:
        name, agent, predicted = self.differs_most
        return {"hypothesis": self.hypothesis, "statistic": round(self.statistic, 3),
                "p_value": round(self.p_value, 5), "permutations": self.permutations,
                "expected_statistic": round(self.expected, 3),
                "agent_failed_calls": self.agent_failures,
                "hypothesis_failed_calls": self.hypothesis_failures,
                "differs_most": {"what": name, "agent_share": round(agent, 3),
                                 "hypothesis_share": round(predicted, 3)},
                "verdict": "does not fit" if self.rejected else "fits"}


def _differs_most(agent: np.ndarray, other: np.ndarray, steps: int) -> tuple[str, float, float]:
    """The column (cause, or 'failing after N operations') with the largest share gap."""
    k = len(CAUSES)
    names = [c.replace("_", " ") for c in CAUSES] + [
        f"failing after {s}{' or more' if s == steps - 1 else ''} operation"
        f"{'' if s == 1 and s < steps - 1 else 's'}" for s in range(steps)]
    best, gap, shares = 0, -1.0, (0.0, 0.0)
    for part in (slice(0, k), slice(k, k + steps)):
        a, o = agent[part], other[part]
        if a.sum() == 0 or o.sum() == 0:
            continue
        sa, so = a / a.sum(), o / o.sum()
        j = int(np.argmax(np.abs(sa - so)))
        if abs(sa[j] - so[j]) > gap:
            best, gap, shares = part.start + j, float(abs(sa[j] - so[j])), (sa[j], so[j])
    return names[best], float(shares[0]), float(shares[1])


def failure_check(model: MechanismModel, hypothesis: Hypothesis,
                  agent: Sequence[tuple[WorkflowParams, Sequence[Trace], Sequence[int]]],
                  per_episode: int = SIMULATED_PER_EPISODE,
                  permutations: int = PERMUTATIONS) -> FailureCheck | None:
    """The check (module docstring) of the agent's traces per configuration (only episodes
    with an env outcome) with each one's failed calls (the episodes' errors column: an
    episode without one is not replayed) against `hypothesis`; None with fewer than
    MIN_FAILURES failed calls."""
    played = [(spec, list(traces), list(failed)) for spec, traces, failed in agent if traces]
    if not played:
        return None
    steps = max(spec.n_ops for spec, _, _ in played) + 1
    rng = np.random.default_rng(FAILURE_SEED)
    groups = []
    with Replayer() as replay_one:
        for spec, traces, failed in played:
            c = model.battery.index(spec) if spec in model.battery else len(model.battery)
            seeds = FAILURE_SEED + c * SEED_STRIDE + np.arange(per_episode * len(traces),
                                                               dtype=np.int64)
            simulated, simulated_failed = hypothesis_traces(model, hypothesis, spec, seeds, rng)
            groups.append((
                np.array([failure_vector(t, steps, int(f), replay_one)
                          for t, f in zip(traces, failed, strict=True)]),
                np.array([failure_vector(t, steps, int(f), replay_one)
                          for t, f in zip(simulated, simulated_failed, strict=True)])))
    agent_total = sum(a.sum(axis=0) for a, _ in groups)
    other_total = sum(o.sum(axis=0) for _, o in groups)
    k = len(CAUSES)
    if agent_total[:k].sum() < MIN_FAILURES:
        return None
    observed = float(_statistic(agent_total, other_total))
    permuted_agent = np.zeros((permutations, agent_total.shape[0]))
    for a, o in groups:
        pooled = np.concatenate([a, o])
        order = rng.permuted(np.tile(np.arange(len(pooled)), (permutations, 1)), axis=1)
        permuted_agent += pooled[order[:, :len(a)]].sum(axis=1)
    pooled_total = agent_total + other_total
    replicated = _statistic(permuted_agent, pooled_total - permuted_agent)
    return FailureCheck(hypothesis.name, observed, bootstrap_p_value(observed, replicated),
                        permutations, float(np.median(replicated)),
                        int(agent_total[:k].sum()), int(other_total[:k].sum()),
                        _differs_most(agent_total, other_total, steps))


def check_played(model: MechanismModel, hypothesis: Hypothesis,
                 configurations: Sequence[Any]) -> FailureCheck | None:
    """failure_check of a diagnosis's configurations (run.Configuration: spec, traces,
    episodes, ended_by_env), on their episodes with an env outcome."""
    return failure_check(model, hypothesis, [
        (c.spec, [t for t, kept in zip(c.traces, c.ended_by_env, strict=True) if kept],
         c.episodes.columns["errors"][c.ended_by_env]) for c in configurations])
