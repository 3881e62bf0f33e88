"""The configurations an agent is played on, and how many episodes each, so that its episodes
separate the mechanisms.

One configuration cannot do it: under a snapshot after every success a cache of 2 plays as
exact (every decision is visible), residue-8 plays as exact whenever b divides 8, and without
retries elimination plays as guessing. Each mechanism is told apart only where its rule
binds, so the battery is chosen by measured separation. The separation of a true mechanism i
from an alternative j on configuration c is KL(p_i || p_j) of their simulated outcome
distributions (analysis/diagnose/likelihood.py): the expected log likelihood ratio per
episode played there. A budget split with shares w over the pool separates the pair by
sum_c w_c KL_c(i || j) per episode, linear in w, so the shares that maximise the weakest
separation solve a linear program (scipy's HiGHS): maximise t subject to
sum_c w_c KL_c(i || j) >= t for every pair, sum_c w_c = 1, w >= 0. The battery is the
configurations with a share of at least one episode in DEFAULT_BUDGET; the true mechanisms
are the reference controllers and the cache-k and scan-s families, the alternatives every
hypothesis that does not play identically to i on the whole pool, less the failure modes
(hypotheses.FAILURE_MODES): a perseverating exact differs from exact only where exact fails,
so as an alternative it would pull the whole budget to hidden resampling, and the failure
modes are named by the battery chosen for the mechanisms (tests/analysis/test_failure_modes.py).

The pool (`candidate_pool`) is N = 8 chains with depth, width, b, snapshot period, hidden
resampling and error allowance varied: 192 configurations. `choose_battery()` (1024
simulations per mechanism and configuration, about 15 s) gives CHOSEN_BATTERY and its shares:

    share  depth  width  b  snapshot  hidden  R   episodes of 512
    0.7227      8      8  3  history   no      2   370
    0.1093      2      8  3  history   no      2    56
    0.0686      2      4  8  every 2   no      0    35
    0.0323      8      8  6  every     yes     2    17
    0.0238      8      4  8  every 2   no      0    12
    0.0147      2      4  3  history   yes     2     8
    0.0132      2      8  8  history   no      2     7
    0.0079      8      4  8  every     yes     2     4
    0.0049      8      4  6  every 2   no      0     2
    0.0026      2      8  4  history   no      2     1

Most of the budget goes where most rules bind at once: history with b = 3 and retries (caches
lose registers, scans miss, elimination shortens retries, residues mod 3 drift from updates
mod 8); the small shares separate what that configuration cannot (hidden resampling for the
precomputed plan, R = 0 and b = 8 for scan limits). The weakest separation at the optimum is
0.0249 nats per episode (several pairs bind there: scan-2 against scan-3, scan-5
against scan-6, cache-0 against cache-0+scan-6), 12.8 nats at the default budget; an even
split over eight configurations chosen greedily for the same criterion reaches about 0.010.
The shares are an optimum of simulated separations, so other simulation seeds give other,
about equally separating, shares. Identification by budget is measured by
benchmarks/diagnose.py (40 runs per controller): at DEFAULT_BUDGET = 512 episodes the
top-ranked hypothesis is the true reference controller or a play alias in 99.3% of runs and
in at least 95% for every controller (worst: scan-2, against scan-2 with elimination).

DEFAULT_BATTERY is CHOSEN_BATTERY and one configuration more, played for the support of
forecasts rather than for separation: barriers (depth 2, width 8, b 3, history, R 2), the
graph family the chains-only pool never varies, so a forecast on barriers is not extrapolated
(fit_test.outside_support). It takes SUPPORT_SHARE (16 of 512 episodes) from the chosen
shares in proportion, so the allocation is 359, 54, 34, 16, 12, 7, 7, 4, 2, 1 and 16, and the
weakest separation is 0.0241 nats per episode (scan-3 against scan-4, 12.3 nats at the
default budget; 0.0249 and 12.7 without it, measured with choose_battery's simulations).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from diagym.analysis.diagnose.defaults import DEFAULT_BUDGET
from diagym.analysis.diagnose.hypotheses import (
    FAILURE_MODES,
    FITTED_FAMILIES,
    REFERENCE,
    Mechanism,
    families,
    hypotheses,
)
from diagym.analysis.diagnose.likelihood import build_model
from diagym.envs.workflow.params import WorkflowParams

SELECTION_SIMULATIONS = 1024
# The seed plan: configuration c plays its episodes on task seeds seed + c * SEED_BLOCK + i,
# so no two configurations share a task. With one block of tasks for all (the "shared" plan
# of logs written before, every configuration from `seed`), an agent's outcomes on the
# configurations are correlated through the tasks while the likelihood multiplies them as
# independent: an exact cache-6@0.05's 95% lapse interval held the truth in 54 of 60 runs
# (59 of 60 with a block per configuration, benchmarks/diagnose.py --only coverage).
SEED_BLOCK = 10**6
BLOCKS, SHARED = "blocks", "shared"
SEED_PLANS = (BLOCKS, SHARED)


def first_seed(seed: int, configuration: int, plan: str = BLOCKS) -> int:
    """The task seed of episode 0 of battery configuration `configuration` under `plan`
    (SEED_PLANS; SHARED reads and resumes a log written before the blocks)."""
    if plan not in SEED_PLANS:
        raise ValueError(f"seed plan must be one of {', '.join(SEED_PLANS)}; got {plan!r}")
    return seed + configuration * SEED_BLOCK if plan == BLOCKS else seed


def _spec(depth: int, width: int, b: int, period: int, hidden: bool, r: int,
          family: str = "chains") -> WorkflowParams:
    return WorkflowParams(family=family, n_ops=8, depth=depth, width=width, candidates=b,
                          snapshot_period=period, hidden_resampling=hidden, error_allowance=r)


# ((depth, width, b, snapshot period, hidden resampling, R), share) from choose_battery().
_CHOSEN: tuple[tuple[tuple[int, int, int, int, bool, int], float], ...] = (
    ((8, 8, 3, 0, False, 2), 0.7227),
    ((2, 8, 3, 0, False, 2), 0.1093),
    ((2, 4, 8, 2, False, 0), 0.0686),
    ((8, 8, 6, 1, True, 2), 0.0323),
    ((8, 4, 8, 2, False, 0), 0.0238),
    ((2, 4, 3, 0, True, 2), 0.0147),
    ((2, 8, 8, 0, False, 2), 0.0132),
    ((8, 4, 8, 1, True, 2), 0.0079),
    ((8, 4, 6, 2, False, 0), 0.0049),
    ((2, 8, 4, 0, False, 2), 0.0026),
)
CHOSEN_BATTERY = tuple(_spec(*levels) for levels, _ in _CHOSEN)
CHOSEN_SHARES = tuple(share for _, share in _CHOSEN)
# Configurations played for the support of forecasts, not for separation (the pool is chains
# only, so the linear program never sees them): a graph family the battery did not play is
# extrapolated for every forecast there (fit_test.outside_support). Barriers at the levels of
# the second configuration, depth 2 (two layers of four; at depth 8 barriers are one chain),
# take SUPPORT_SHARE of the budget from the chosen shares in proportion, so every pair keeps
# at least 1 - SUPPORT_SHARE of its separation. They come last, so the chosen configurations
# keep their index and their block of task seeds (first_seed).
SUPPORT_SHARE = 16 / DEFAULT_BUDGET
_SUPPORT: tuple[tuple[int, int, int, int, bool, int, str], ...] = (
    (2, 8, 3, 0, False, 2, "barriers"),
)
SUPPORT_BATTERY = tuple(_spec(*levels) for levels in _SUPPORT)
DEFAULT_BATTERY = CHOSEN_BATTERY + SUPPORT_BATTERY
DEFAULT_SHARES = (tuple(share * (1 - SUPPORT_SHARE * len(_SUPPORT)) for share in CHOSEN_SHARES)
                  + (SUPPORT_SHARE,) * len(_SUPPORT))


def candidate_pool() -> list[WorkflowParams]:
    """Every combination of the factors that decide which rule binds: depth (how many ready
    operations a random schedule may wrongly pick), width (which cache sizes matter), b (scan
    limits; b in {3, 6} keeps residues mod b from commuting with updates mod 8), snapshot
    period (history, every success, every other), hidden resampling and error allowance."""
    return [_spec(*levels) for levels in itertools.product(
        (2, 8), (4, 8), (3, 4, 6, 8), (0, 1, 2), (False, True), (0, 2))]


def allocate(shares: Sequence[float], budget: int = DEFAULT_BUDGET,
             minimum: int = 0) -> tuple[int, ...]:
    """Episodes per configuration: budget x shares, rounded by largest remainder (sum: budget),
    with at least `minimum` each where the budget allows (taken from the largest shares)."""
    exact = np.asarray(shares, dtype=np.float64) * budget / float(np.sum(shares))
    episodes = np.floor(exact).astype(np.int64)
    for c in np.argsort(-(exact - episodes), kind="stable")[:budget - int(episodes.sum())]:
        episodes[c] += 1
    if minimum and budget >= minimum * len(episodes):
        for c in np.flatnonzero(episodes < minimum):
            while episodes[c] < minimum:
                episodes[int(np.argmax(episodes))] -= 1
                episodes[c] += 1
    return tuple(int(e) for e in episodes)


DEFAULT_ALLOCATION = allocate(DEFAULT_SHARES)


def shape_pool(n_ops: int, candidates: int, error_allowance: int) -> list[WorkflowParams]:
    """candidate_pool for an agent of one shape: every configuration whose observation and
    action spaces are those of (n_ops, candidates, error_allowance), which is what a trained
    network can be played on (its input and output sizes are fixed; the errors field's bound
    is R + 1). Depth (2 and N, the divisors the default pool uses), width (4 and 8), snapshot
    period and hidden resampling still vary, so scheduling, retention and selection are told
    apart; recovery only where the agent was trained with retries."""
    depths = sorted({d for d in (2, n_ops) if n_ops % d == 0})
    return [WorkflowParams(n_ops=n_ops, depth=depth, width=width, candidates=candidates,
                           snapshot_period=period, hidden_resampling=hidden,
                           error_allowance=error_allowance)
            for depth, width, period, hidden in itertools.product(
                depths, (4, 8), (0, 1, 2), (False, True))]


@functools.cache
def battery_for(n_ops: int, candidates: int, error_allowance: int) -> BatteryDesign:
    """The battery of an agent of one shape (`shape_pool`), chosen by `choose_battery` at
    first use (a few seconds; deterministic: the simulations are seeded). Its allocation is
    `allocate(shares, budget, minimum=1)`: every configuration kept is played."""
    return choose_battery(shape_pool(n_ops, candidates, error_allowance))



def target_names() -> list[str]:
    """The mechanisms a battery must identify: the references, cache-k and scan-s."""
    named = [m.name for m in hypotheses()[0] if m.family == REFERENCE]
    members = [m.name for f in FITTED_FAMILIES for m in families()[f]]
    return list(dict.fromkeys([*named, *members]))


def kl_matrix(log_p: np.ndarray) -> np.ndarray:
    """KL(p_i || p_j) between the rows of a (mechanisms, outcomes) log-probability table."""
    p = np.exp(log_p)
    kl = (p * log_p).sum(axis=1)[:, None] - p @ log_p.T
    return np.where(kl < 1e-12, 0.0, kl)  # rounding of equal rows is no separation


@dataclass(frozen=True)
class BatteryDesign:
    """The chosen configurations, their budget shares and the weakest pair separation."""

    battery: tuple[WorkflowParams, ...]
    shares: tuple[float, ...]
    weakest: float
    weakest_pair: tuple[str, str]


def choose_battery(pool: Sequence[WorkflowParams] | None = None,
                   simulations: int = SELECTION_SIMULATIONS,
                   candidates: Sequence[Mechanism] | None = None,
                   targets: Sequence[str] | None = None,
                   budget: int = DEFAULT_BUDGET) -> BatteryDesign:
    """The maximin budget shares over `pool` (see the module docstring)."""
    pool = list(candidate_pool() if pool is None else pool)
    model = build_model(pool, simulations, candidates, without=tuple(FAILURE_MODES))
    wanted = set(target_names() if targets is None else targets)
    true = [i for i, m in enumerate(model.mechanisms)
            if wanted & {m.name, *model.aliases[m.name]}]
    kl = np.stack([kl_matrix(log_p) for log_p in model.log_p])  # (config, i, j)
    pairs = [(i, j) for i in true for j in range(len(model.mechanisms)) if i != j]
    separation = np.stack([kl[:, i, j] for i, j in pairs])  # (pair, config)
    configs = len(pool)
    solution = linprog(
        c=np.r_[np.zeros(configs), -1.0],
        A_ub=np.hstack([-separation, np.ones((len(pairs), 1))]), b_ub=np.zeros(len(pairs)),
        A_eq=np.r_[np.ones(configs), 0.0][None, :], b_eq=[1.0],
        bounds=[(0, None)] * configs + [(None, None)], method="highs",
    )
    if not solution.success:
        raise RuntimeError(f"battery design failed: {solution.message}")
    shares = solution.x[:configs]
    kept = [c for c in range(configs) if shares[c] * budget >= 1]
    kept.sort(key=lambda c: -shares[c])
    weights = shares[kept] / shares[kept].sum()
    achieved = separation[:, kept] @ weights
    # A share under one episode can be the only one that separates a pair (hidden resampling
    # is the only configuration where the precomputed plan differs from exact): dropping it
    # would leave that pair unseparated, so the largest such shares come back until every pair
    # keeps half the optimum's separation (allocate(minimum=1) then plays each at least once).
    dropped = sorted((c for c in range(configs) if c not in kept and shares[c] > 1e-9),
                     key=lambda c: -shares[c])
    while dropped and achieved.min() < 0.5 * solution.x[-1]:
        kept.append(dropped.pop(0))
        weights = shares[kept] / shares[kept].sum()
        achieved = separation[:, kept] @ weights
    # Several pairs can bind at the optimum with the same separation: the tie is broken by
    # name, so the pair reported does not depend on the order the hypotheses are listed in.
    names = [(model.mechanisms[i].name, model.mechanisms[j].name) for i, j in pairs]
    worst = min(range(len(pairs)), key=lambda k: (round(float(achieved[k]), 9), names[k]))
    pair = names[worst]
    return BatteryDesign(tuple(pool[c] for c in kept), tuple(float(w) for w in weights),
                  float(achieved[worst]), pair)
