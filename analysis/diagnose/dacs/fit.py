"""Which window reader a DACSSteering orchestrator plays like, how often it copies another
agent's value or lapses, and whether that best hypothesis fits its answers at all.

## Reader fit
Every reference reader is deterministic given the window, except that it guesses uniformly
(from its seeded stream) when its rule finds no value among the options; as a distribution,
its choice at a decision is therefore one option with probability 1, or uniform over the n
options. Mixed with a lapse epsilon (a uniform option with probability epsilon),
P(choice | reader, epsilon) = (1 - epsilon) P_reader(choice) + epsilon / n, and the trace's
log-likelihood is the sum over its decisions: exact, with no simulation, because the agent's
own windows are the ones each reader is run on. Epsilon is fitted on EPSILON_GRID; its
interval is the likelihood-ratio interval of the profile (honesty.profile_interval, the rule
the workflow diagnosis uses), so its ends fall between grid points. `dacs-reader` and
`flat-reader` are one reader, and any readers whose choice distributions agree on every
decision of the traces tie exactly at every epsilon: they are reported as one fit with
aliases, named by the first in READERS order, or "uniform" when uniform is among them
(registry-only guesses wherever no cascade request binds its rule, so on such traces it is
uniform, and the name should say so). Uniform is every reader's lapse-1 member: when no fit
beats it by more than INTERVAL_LOG_UNITS, the data do not reject pure guessing and uniform is
ranked first (a lapse fitted near 1 would otherwise win on sampling noise: 6 of 10 battery
seeds).

## Copying
`fit_copying` mixes the best reader and its lapse with copying: at a decision whose window
shows lures (other agents' values for the attribute among the options), the agent takes one of
them, each equally likely, with probability `rate`. The rate's profile (epsilon profiled out)
gives its likelihood-ratio interval and its log-LR over none. The hypothesis the diagnosis
settles on is (best reader, copy rate, lapse) at the joint maximum.

## Fit test
A ranking says which hypothesis is least bad, not that it is good (analysis/diagnose/
honesty.py). Each answer falls in one of ANSWER_CATEGORIES: right; a copy of the top lure (the
other agent's value mentioned first in reading order); a copy of another lure; another wrong
option. The hypothesis gives every option of every decision a probability, so per episode its
expected category counts are exact sums over the episode's decisions, and the statistic is the
G-squared of the agent's category counts against them (honesty.g_squared), summed over the
episodes of a configuration and over configurations. The episode is the table's unit because an
agent can change its way per episode (a mixture of readers over episodes looks like a copy rate
in a configuration's totals, and not in each episode's). Each of REPLICATES replicates draws
every answer again from the hypothesis, from a fresh random stream (seeded FIT_SEED, the
workflow test's), on the agent's own episodes and windows, and is scored with the same tables;
the two-sided bootstrap p-value and the configurations outside their band are honesty.FitTest's.
A second table per configuration scores the position (index) of the option chosen against the
hypothesis's expected position counts, exact sums of its option probabilities: the env shuffles
the options, so no reader and no lapse prefers a position, while a deterministic rule the
categories cannot see (the longest option, the first of equal lengths) shows as a position bias;
the replicates' positions are the options they drew. The windows are held as the agent saw them:
a replicate's own answers would have changed later windows (steering histories, cascade
decisions), and the test conditions on the windows as the likelihood does, each answer drawn
given the window it was made in (no episode is played again, so the test takes milliseconds).
Splitting the copies by the lure's position is what rejects a deterministic copier: a hypothesis
that copies takes each lure equally often, an agent that always takes the topmost (or the
nearest) does not. Invalid replies are no category: no reader emits one, and they are tallied as
evidence of their own (analysis/diagnose/dacs/diagnosis.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from diagym.analysis.diagnose.dacs.replay import (
    _KEY_ID,
    DacsDecision,
    configuration_label,
    lures,
    right_value,
)
from diagym.analysis.diagnose.dacs.verdicts import LAPSE_STEP, Copying
from diagym.analysis.diagnose.fit_test import FIT_SEED, REPLICATES
from diagym.analysis.diagnose.honesty import (
    INTERVAL_LOG_UNITS,
    FitTest,
    g_squared,
    profile_interval,
    replicate_counts,
)
from diagym.controllers.dacs.readers import DACS_CONTROLLERS, dacs_controller
from diagym.envs.dacs.scenario import ATTRIBUTE_OF

READERS = tuple(DACS_CONTROLLERS)
UNIFORM = "uniform"
EPSILON_GRID = np.round(np.linspace(0.0, 1.0, round(1 / LAPSE_STEP) + 1), 2)
ANSWER_CATEGORIES = ("right", "copy of the top lure", "copy of another lure", "other wrong")


def reader_distribution(decisions: Sequence[DacsDecision], name: str) -> np.ndarray:
    """P_reader(option) per decision and option (decisions x options) for the reader `name`:
    one-hot where its rule picks an option, uniform where it would guess."""
    reader = dacs_controller(name)
    out = np.zeros((len(decisions), _width(decisions)))
    for i, decision in enumerate(decisions):
        value = reader.value(decision.parsed)
        n = len(decision.options)
        if value in decision.options:
            out[i, decision.options.index(value)] = 1.0
        else:
            out[i, :n] = 1.0 / n
    return out


def _width(decisions: Sequence[DacsDecision]) -> int:
    return max((len(d.options) for d in decisions), default=1)


def _chosen(decisions: Sequence[DacsDecision]) -> np.ndarray:
    return np.array([d.action for d in decisions], dtype=np.int64)


def option_counts(decisions: Sequence[DacsDecision]) -> np.ndarray:
    return np.array([len(d.options) for d in decisions], dtype=np.float64)


def episode_ids(decisions: Sequence[DacsDecision]) -> np.ndarray:
    """Each decision's episode, numbered 0.. in order (an episode's answers start at index
    0)."""
    return np.cumsum([d.index == 0 for d in decisions]) - 1


def _valid(decisions: Sequence[DacsDecision]) -> np.ndarray:
    """Which option columns exist per decision (decisions x options)."""
    width = _width(decisions)
    return np.arange(width)[None, :] < option_counts(decisions)[:, None]


def choice_probabilities(decisions: Sequence[DacsDecision], name: str) -> np.ndarray:
    """P_reader(chosen option) per decision for the reader `name`: 1 or 0 where its rule
    picks an option, 1/n where it would guess (module docstring)."""
    dist = reader_distribution(decisions, name)
    return dist[np.arange(len(decisions)), _chosen(decisions)]


def lapse_log_likelihood(p: np.ndarray, n_options: np.ndarray,
                         epsilons: np.ndarray = EPSILON_GRID) -> np.ndarray:
    """Per epsilon, sum over decisions of log((1 - epsilon) p + epsilon / n)."""
    mixed = (1.0 - epsilons[:, None]) * p[None, :] + epsilons[:, None] / n_options[None, :]
    with np.errstate(divide="ignore"):
        return np.log(mixed).sum(axis=1)


def interval_of(profile: np.ndarray) -> tuple[float, float]:
    """The likelihood-ratio interval of a parameter profiled on EPSILON_GRID, to 4 places."""
    low, high = profile_interval(EPSILON_GRID, profile)
    return round(low, 4), round(high, 4)


@dataclass(frozen=True)
class ReaderFit:
    """A reader (and its aliases, which choose identically on every decision) mixed with its
    maximum-likelihood lapse epsilon, the likelihood-ratio interval of epsilon, the
    log-likelihood there and the log likelihood ratio to the best fit (<= 0)."""

    name: str
    aliases: tuple[str, ...]
    epsilon: float
    interval: tuple[float, float]
    log_likelihood: float
    log_lr_to_best: float

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def as_dict(self) -> dict[str, Any]:
        """The issue's mechanism entry (a reader is its own family; epsilon its parameter)."""
        return {"name": self.name, "family": self.name, "aliases": list(self.aliases),
                "params": {"epsilon_interval": list(self.interval)}, "epsilon": self.epsilon,
                "log_likelihood": self.log_likelihood, "log_lr_to_best": self.log_lr_to_best}


def fit_readers(decisions: Sequence[DacsDecision], readers: Sequence[str] = READERS
                ) -> list[ReaderFit]:
    """Every distinct reader with its lapse fitted, best first (ties by `readers` order; an
    epsilon tie by the smaller epsilon), uniform first when no fit rejects it (module
    docstring)."""
    if not decisions:
        raise ValueError("fit_readers needs at least one decision")
    n_options = option_counts(decisions)
    groups: list[tuple[str, list[str], np.ndarray]] = []
    for name in readers:
        p = choice_probabilities(decisions, name)
        same = next((g for g in groups if np.array_equal(g[2], p)), None)
        if same is None:
            groups.append((name, [], p))
        elif name == UNIFORM:  # a reader that only guesses here is named for guessing
            same[1].insert(0, same[0])
            groups[groups.index(same)] = (UNIFORM, same[1], p)
        else:
            same[1].append(name)
    rows = []
    for name, aliases, p in groups:
        ll = lapse_log_likelihood(p, n_options)
        best = int(np.argmax(ll))
        rows.append((name, tuple(aliases), float(EPSILON_GRID[best]), interval_of(ll),
                     float(ll[best])))
    top = max(row[4] for row in rows)
    order = sorted(range(len(rows)), key=lambda i: -rows[i][4])
    guessing = next((i for i, row in enumerate(rows) if UNIFORM in (row[0], *row[1])), None)
    if guessing is not None and rows[guessing][4] >= top - INTERVAL_LOG_UNITS:
        order.remove(guessing)
        order.insert(0, guessing)
    return [ReaderFit(*rows[i], log_lr_to_best=rows[i][4] - top) for i in order]


def lure_matrix(decisions: Sequence[DacsDecision]) -> np.ndarray:
    """Which options are lures per decision (decisions x options)."""
    out = np.zeros((len(decisions), _width(decisions)), dtype=bool)
    for i, decision in enumerate(decisions):
        members = lures(decision)
        for j, value in enumerate(decision.options):
            out[i, j] = value in members
    return out


def fit_copying(decisions: Sequence[DacsDecision], name: str,
                epsilon: float | None = None) -> Copying:
    """The copy rate over the reader `name` and its lapse, fitted jointly: at a decision whose
    window shows lures, P = rate * [chosen is a lure] / lures + (1 - rate) * P_lapse, where
    P_lapse = (1 - epsilon) P_reader + epsilon / n is the reader fit's probability (elsewhere
    P = P_lapse). The rate's likelihood is profiled over epsilon (both on EPSILON_GRID), so a
    lapse and copying are told apart by where the wrong answers land; its interval is the
    profile's likelihood-ratio interval, its log-LR over none the profile's maximum over its
    value at rate 0 (the reader fit itself), and its epsilon the lapse at the joint maximum
    (`epsilon`, the reader fit's, where no window showed a lure)."""
    n_options = option_counts(decisions)
    lapse = (1.0 - EPSILON_GRID[:, None]) * choice_probabilities(decisions, name)[None, :] \
        + EPSILON_GRID[:, None] / n_options[None, :]
    table = lure_matrix(decisions)
    shown = table.any(axis=1)
    if not shown.any():
        fallback = float(EPSILON_GRID[int(np.argmax(np.log(lapse).sum(axis=1)))]) \
            if epsilon is None else epsilon
        return Copying(0.0, (0.0, 1.0), 0.0, 0, fallback)
    share = np.where(shown, table[np.arange(len(decisions)), _chosen(decisions)]
                     / np.maximum(table.sum(axis=1), 1), 0.0)
    with np.errstate(divide="ignore"):
        fixed = np.log(lapse[:, ~shown]).sum(axis=1)
        joint = np.array([
            fixed + np.log(rate * share[shown] + (1.0 - rate) * lapse[:, shown]).sum(axis=1)
            for rate in EPSILON_GRID])  # rate x epsilon
    profile = joint.max(axis=1)
    best = int(np.argmax(profile))
    log_lr = float(profile[best] - profile[0]) if np.isfinite(profile[0]) else float("inf")
    return Copying(float(EPSILON_GRID[best]), interval_of(profile), log_lr, int(shown.sum()),
                   float(EPSILON_GRID[int(np.argmax(joint[best]))]))


@dataclass(frozen=True)
class DacsHypothesis:
    """What the diagnosis settled on: a reader (by name) with its copy rate and lapse."""

    reader: str
    rate: float
    epsilon: float

    @property
    def name(self) -> str:
        lapse = f"@{self.epsilon:g}" if self.epsilon else ""
        copying = f"+copy {self.rate:g}" if self.rate else ""
        return f"{self.reader}{lapse}{copying}"

    def option_probabilities(self, decisions: Sequence[DacsDecision]) -> np.ndarray:
        """P(option) per decision and option under the hypothesis (module docstring)."""
        valid = _valid(decisions)
        n = option_counts(decisions)[:, None]
        lapse = (1.0 - self.epsilon) * reader_distribution(decisions, self.reader) \
            + np.where(valid, self.epsilon / n, 0.0)
        table = lure_matrix(decisions)
        count = table.sum(axis=1, keepdims=True)
        copy = np.where(count > 0, table / np.maximum(count, 1), 0.0)
        return np.where(count > 0, self.rate * copy + (1.0 - self.rate) * lapse, lapse)

    def parts(self) -> tuple[tuple[float, DacsHypothesis], ...]:
        """The (weight, component) pairs the fit test plays: this hypothesis alone (a
        mixture, analysis/diagnose/dacs/mixture.py, has two)."""
        return ((1.0, self),)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "reader": self.reader, "copy_rate": self.rate,
                "epsilon": self.epsilon}


class Playable(Protocol):
    """What the fit test replicates: a name and its (weight, DacsHypothesis) components."""

    @property
    def name(self) -> str: ...

    def parts(self) -> tuple[tuple[float, DacsHypothesis], ...]: ...


def chosen_log_likelihood(decisions: Sequence[DacsDecision],
                          hypothesis: DacsHypothesis) -> float:
    """The log-likelihood of the answers given under `hypothesis`."""
    p = hypothesis.option_probabilities(decisions)[np.arange(len(decisions)),
                                                   _chosen(decisions)]
    with np.errstate(divide="ignore"):
        return float(np.log(p).sum())


def answer_categories(decisions: Sequence[DacsDecision]) -> np.ndarray:
    """The ANSWER_CATEGORIES index of every option per decision (decisions x options)."""
    out = np.full((len(decisions), _width(decisions)), 3, dtype=np.int64)
    for i, decision in enumerate(decisions):
        members = lures(decision)
        parsed = decision.parsed
        attribute = ATTRIBUTE_OF[_KEY_ID[decision.key]]
        top = next((m.value for m in parsed.mentions if m.value in members
                    and m.agent != parsed.requester
                    and ATTRIBUTE_OF[_KEY_ID[m.key]] == attribute), None)
        right = right_value(decision)
        for j, value in enumerate(decision.options):
            out[i, j] = 0 if value == right else 1 if value == top else \
                2 if value in members else 3
    return out


def fit_test(per_configuration: Sequence[tuple[Mapping[str, Any], Sequence[DacsDecision]]],
             hypothesis: Playable, replicates: int = REPLICATES) -> FitTest | None:
    """The parametric-bootstrap fit test of `hypothesis` (module docstring): a mixture's
    replicate draws each episode's component by weight; None without any answer."""
    parts = [(kwargs, list(group)) for kwargs, group in per_configuration if group]
    if not parts:
        return None
    rng = np.random.default_rng(FIT_SEED)
    weights = np.array([w for w, _ in hypothesis.parts()], dtype=np.float64)
    weights /= weights.sum()
    observed = np.zeros(len(parts))
    replicated = np.zeros((replicates, len(parts)))
    for c, (_, decisions) in enumerate(parts):
        p = np.stack([h.option_probabilities(decisions) for _, h in hypothesis.parts()])
        categories = answer_categories(decisions)
        chosen = _chosen(decisions)
        episode = episode_ids(decisions)
        drawn = np.zeros((replicates, len(decisions)), dtype=np.int64)
        mixed = np.zeros(p.shape[1:])
        for e in np.unique(episode):
            rows = np.flatnonzero(episode == e)
            pick = (np.zeros(replicates, dtype=np.int64) if len(weights) == 1 else
                    rng.choice(len(weights), size=replicates, p=weights))
            drawn[:, rows] = _draw_options(p[:, rows], pick, rng)
            mixed[rows] = np.tensordot(weights, p[:, rows], axes=1)
            log_p = _log_shares(np.stack([np.where(categories[rows] == j, mixed[rows], 0.0)
                                          .sum(axis=1) for j in range(len(ANSWER_CATEGORIES))],
                                         axis=1))
            observed[c] += float(g_squared(replicate_counts(categories[rows, chosen[rows]][None],
                                                   len(ANSWER_CATEGORIES))[0], log_p))
            replicated[:, c] += g_squared(replicate_counts(
                np.take_along_axis(categories[rows][None].repeat(replicates, 0),
                                   drawn[:, rows, None], axis=2)[:, :, 0],
                len(ANSWER_CATEGORIES)), log_p)
        width = mixed.shape[1]
        log_p = _log_shares(mixed)
        observed[c] += float(g_squared(replicate_counts(chosen[None], width)[0], log_p))
        replicated[:, c] += g_squared(replicate_counts(drawn, width), log_p)
    return FitTest.of_replicates(hypothesis.name, observed, replicated,
                                 [configuration_label(kwargs) for kwargs, _ in parts])


def _log_shares(per_row: np.ndarray) -> np.ndarray:
    """The log of the expected share of each column over the rows of `per_row` (rows x k,
    each row a probability distribution over the k columns)."""
    with np.errstate(divide="ignore"):
        return np.log(per_row.sum(axis=0) / per_row.shape[0])


def _draw_options(p: np.ndarray, pick: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One option per replicate and answer (replicates x answers), drawn from the component
    `pick[r]` of `p` (components x answers x options) for replicate r."""
    cumulative = np.cumsum(p, axis=2)
    cumulative /= cumulative[:, :, -1:]
    last = p.shape[2] - 1 - np.argmax(p[:, :, ::-1] > 0, axis=2)  # rounding lands below
    draws = rng.random((pick.shape[0], p.shape[1]))
    return np.minimum((draws[:, :, None] >= cumulative[pick]).sum(axis=2), last[pick])
