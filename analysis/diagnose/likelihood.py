"""Mechanism fit: how likely an agent's episode outcomes are under each hypothesised mechanism.

An opaque agent shows only how its episodes end, so an episode's outcome is the triple
(first failure category, operations completed, failed calls) at its end: with R = 0 the
completed count is where the first failure struck, which is what separates a cache of 2 from
a cache of 3; with R > 0 the failed calls separate elimination from guessing with replacement.
Most mechanisms have no closed form for that distribution (reproduce's predictions.py gives
success probabilities only, and not for next-use-2), so every mechanism's distribution is
simulated by the batched runner's own numba loop on SIMULATIONS task seeds from
SIMULATION_SEED on, a range disjoint from the project's other seeds (the grids' 0..10255,
training's held-out evaluation from 10**9), so an agent is never scored on the very tasks
its reference distributions came from.

All mechanisms are simulated on the same seeds (common random numbers): two rows that play
identically on the battery then produce identical tables, exactly, and the model merges them
into one hypothesis with aliases (indexed plays as exact, sham-check-4 as scan-1, a cache of
8 as exact) instead of reporting a tie that no budget can break. Outcome-equivalent rows
whose random draws differ are made to play identically first (`simulated_row`).

Smoothing: probabilities are (count + PSEUDO_COUNT) / (SIMULATIONS + PSEUDO_COUNT * K) over
the K outcomes of a configuration. The Jeffreys pseudo-count 1/2 keeps an outcome a mechanism
never produced in 4096 simulations possible (about 1/8000, a cost of ~9 log-units per such
episode) instead of impossible, so one unexpected episode weighs against a mechanism but
cannot veto it; and it is small against 4096, so the distributions it flattens stay near their
simulated values.

Lapse: any mechanism mixed with a lapse rate epsilon (a uniform slot instead of its own on a
fraction epsilon of decisions, the controller row's K_LAPSE) has no closed-form table either.
A lapsing agent's scattered failures are also explained, at epsilon 0, by some other
mechanism's occasional ones (exact lapsing at 0.2 reads as scan-6, or a cache of 7), so the
lapse must be searched on *every* hypothesis, not on the leaders at epsilon 0: `fit_lapse`
screens every distinct mechanism at each rate of SCREEN_GRID on SCREEN_SIMULATIONS seeds (an
eighth of the model's cost: a ranking needs fewer simulations than a profile), then profiles
the LAPSE_TOP best of that screen on the full LAPSE_GRID, which reaches 1 (every slot uniform)
so a profile still rising at 0.5 is followed to its maximum. Every table is simulated the
first time it is asked for and kept in the model. Intervals come from the profile likelihood
(honesty.profile_interval), interpolated between grid points, so a coarse grid never makes a
single-valued interval.

Ranking: a failure mode (hypotheses.FAILURE_MODES: perseveration, a schedule lapse, a delayed
or missed update, an offset) is exact with one more parameter, and most of them differ from
exact only where exact fails (a perseverating exact shows only after a guess under hidden
resampling), so on an exact agent they fit as well as exact up to simulation noise. They rank
above the others only when their log-likelihood is higher by more than INTERVAL_LOG_UNITS
(the 95% likelihood-ratio test of the extra parameter): `ranking_scores` subtracts that from
theirs. The fits are ordered by that score and their log-LR to the best is the difference of
scores (so it stays <= 0 and sorted); the reported log-likelihood is unpenalised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

# INTERVAL_LOG_UNITS is honesty's rule, imported here too by the fits' callers.
from diagym.analysis.diagnose.honesty import (  # noqa: F401
    INTERVAL_LOG_UNITS,
    integer_interval,
    profile_interval,
)
from diagym.analysis.diagnose.hypotheses import FAILURE_MODES, Mechanism, Row, families, hypotheses
from diagym.controllers.workflow.batched import (
    COMPLETED,
    ERRORS_COL,
    FIRST_FAILURE,
    RECORD_FIELDS,
    run_episodes,
)
from diagym.controllers.workflow.mechanisms import CONTROLLER_FIELDS
from diagym.controllers.workflow.parameters import K_LAPSE, K_SCAN, LAPSE_SCALE, UNLIMITED
from diagym.envs.workflow.kernel import allocate_rows
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.envs.workflow.params import WorkflowParams

SIMULATION_SEED = 3 * 10**9
SIMULATIONS = 4096
PSEUDO_COUNT = 0.5
# Lapse rates profiled by fit_lapse for the LAPSE_TOP best of the screen, which tries every
# hypothesis at SCREEN_GRID on SCREEN_SIMULATIONS seeds.
LAPSE_GRID = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
SCREEN_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
LAPSE_TOP = 5
SCREEN_SIMULATIONS = 512


def outcome_count(spec: WorkflowParams) -> int:
    """K: failure category (none + 3) x completed (0..N) x failed calls (0..R + 1)."""
    return len(FAILURE_NAMES) * (spec.n_ops + 1) * (spec.error_allowance + 2)


def outcome_codes(spec: WorkflowParams, first_failure: np.ndarray, completed: np.ndarray,
                  errors: np.ndarray) -> np.ndarray:
    """The outcome index of each episode; first_failure as codes (0: none) or category names."""
    failure = np.asarray(first_failure)
    if failure.dtype == object or failure.dtype.kind in "US":
        lookup = {name: code for code, name in enumerate(FAILURE_NAMES)}
        failure = np.array([lookup[None if f is None else str(f)] for f in failure],
                           dtype=np.int64)
    failure = failure.astype(np.int64)
    completed = np.asarray(completed, dtype=np.int64)
    errors = np.asarray(errors, dtype=np.int64)
    if (completed < 0).any() or (completed > spec.n_ops).any() or (errors < 0).any() \
            or (errors > spec.error_allowance + 1).any():
        raise ValueError(f"episode outcomes outside the ranges of {spec}")
    return (failure * (spec.n_ops + 1) + completed) * (spec.error_allowance + 2) + errors


def count_outcomes(spec: WorkflowParams, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Outcome counts (length K) of episodes given as columns first_failure, completed, errors
    (an Episodes' `columns`, or the batched runner's)."""
    codes = outcome_codes(spec, columns["first_failure"], columns["completed"],
                          columns["errors"])
    return np.bincount(codes, minlength=outcome_count(spec))


def simulated_row(spec: WorkflowParams, row: Row) -> Row:
    """The row simulated for `row` on `spec`: a scan limit of b - 1 or more examines every
    slot or is left with one (which it must take), so it plays as an unlimited scan but for
    the word drawn for that forced slot, which shifts later draws without changing their
    distribution. Simulated as unlimited it merges with the unlimited row, instead of
    differing from it by simulation noise alone."""
    if row[K_SCAN] >= spec.candidates - 1:
        return (*row[:K_SCAN], UNLIMITED, *row[K_SCAN + 1:])  # type: ignore[return-value]
    return row


def simulate_codes(spec: WorkflowParams, row: Row, seeds: np.ndarray) -> np.ndarray:
    """Per-episode outcome codes of the mechanism `row` on the tasks of `seeds`, from the
    batched runner's loop (a row need not be one of the reference controllers)."""
    row = simulated_row(spec, row)
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    params = spec.to_params()
    records = np.zeros((seeds.shape[0], RECORD_FIELDS), dtype=np.int64)
    cstate = np.zeros((1, CONTROLLER_FIELDS), dtype=np.int64)
    no_trace = np.zeros((seeds.shape[0], 0, 2), dtype=np.int64)
    bad = run_episodes(params, np.array(row, dtype=np.int64), seeds, *allocate_rows(params, 1),
                       cstate, records, no_trace)
    if bad >= 0:
        raise RuntimeError(f"row {row} on {spec} exceeded the call horizon on seed {seeds[bad]}")
    return outcome_codes(spec, records[:, FIRST_FAILURE], records[:, COMPLETED],
                         records[:, ERRORS_COL])


def simulation_seeds(simulations: int = SIMULATIONS) -> np.ndarray:
    return np.arange(SIMULATION_SEED, SIMULATION_SEED + simulations, dtype=np.int64)


def smoothed_log_p(counts: np.ndarray) -> np.ndarray:
    """log of (count + PSEUDO_COUNT) / (total + PSEUDO_COUNT * K), along the last axis."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum(axis=-1, keepdims=True) + PSEUDO_COUNT * counts.shape[-1]
    return np.log(counts + PSEUDO_COUNT) - np.log(total)


@dataclass(frozen=True)
class MechanismModel:
    """Simulated outcome distributions of the distinct-playing mechanisms on a battery.

    mechanisms[i] represents every name in aliases[mechanisms[i].name] (same play on every
    battery configuration and simulation seed); log_p[c][i] is its smoothed log-distribution
    on battery[c]; index maps every hypothesis name (aliases and family members included) to
    its row in log_p."""

    battery: tuple[WorkflowParams, ...]
    mechanisms: tuple[Mechanism, ...]
    aliases: dict[str, tuple[str, ...]]
    log_p: tuple[np.ndarray, ...]
    index: dict[str, int]
    simulations: int
    # (representative index, lapse in parts of LAPSE_SCALE, simulations) -> log_p per
    # configuration, filled by lapse_log_p on first use.
    lapse_cache: dict[tuple[int, int, int], tuple[np.ndarray, ...]] = field(
        default_factory=dict, compare=False, repr=False)


def build_model(battery: Sequence[WorkflowParams], simulations: int = SIMULATIONS,
                candidates: Sequence[Mechanism] | None = None,
                without: Sequence[str] = ()) -> MechanismModel:
    """Simulate every candidate (default: `hypotheses()`, which covers every family member,
    less the families named in `without`) on every battery configuration and merge the ones
    that play identically. With explicit candidates only their names are indexed, so
    fit_family needs the default."""
    kept, row_aliases = hypotheses()
    kept = [m for m in kept if m.family not in without]
    if candidates is not None:
        kept, row_aliases = list(candidates), {}
    seeds = simulation_seeds(simulations)
    battery = tuple(battery)
    codes = {m.name: [simulate_codes(spec, m.row, seeds) for spec in battery] for m in kept}
    by_play: dict[bytes, int] = {}
    mechanisms: list[Mechanism] = []
    aliases: dict[str, list[str]] = {}
    index: dict[str, int] = {}
    for mechanism in kept:
        key = b"".join(c.astype(np.int32).tobytes() for c in codes[mechanism.name])
        at = by_play.setdefault(key, len(mechanisms))
        if at == len(mechanisms):
            mechanisms.append(mechanism)
            aliases[mechanism.name] = []
        else:
            aliases[mechanisms[at].name].append(mechanism.name)
        for name in (mechanism.name, *row_aliases.get(mechanism.name, ())):
            index[name] = at
            if name != mechanisms[at].name and name not in aliases[mechanisms[at].name]:
                aliases[mechanisms[at].name].append(name)
    log_p = tuple(
        smoothed_log_p(np.stack([
            np.bincount(codes[m.name][c], minlength=outcome_count(spec)) for m in mechanisms
        ]))
        for c, spec in enumerate(battery)
    )
    return MechanismModel(battery, tuple(mechanisms),
                          {name: tuple(names) for name, names in aliases.items()}, log_p,
                          index, simulations)


def log_likelihoods(model: MechanismModel, agent_counts: Sequence[np.ndarray]) -> np.ndarray:
    """Sum over configurations and outcomes of n log p, per distinct mechanism."""
    if len(agent_counts) != len(model.battery):
        raise ValueError(f"agent_counts needs one count vector per battery configuration "
                         f"({len(model.battery)}); got {len(agent_counts)}")
    total = np.zeros(len(model.mechanisms))
    for log_p, counts in zip(model.log_p, agent_counts, strict=True):
        total += log_p @ np.asarray(counts, dtype=np.float64)
    return total


def log_likelihood(model: MechanismModel, agent_counts: Sequence[np.ndarray],
                   name: str) -> float:
    """The log-likelihood of one hypothesis, by any of its names (aliases included)."""
    return float(log_likelihoods(model, agent_counts)[model.index[name]])


@dataclass(frozen=True)
class Fit:
    """A mechanism's log-likelihood and its log likelihood ratio to the best (<= 0, of the
    ranking scores: a failure mode's lowered by INTERVAL_LOG_UNITS), at its
    lapse rate `epsilon`; `epsilon_interval` is the range of LAPSE_GRID values within
    INTERVAL_LOG_UNITS of its profile maximum, None where epsilon was not profiled (held at 0)."""

    mechanism: Mechanism
    aliases: tuple[str, ...]
    log_likelihood: float
    log_lr_to_best: float
    epsilon: float = 0.0
    epsilon_interval: tuple[float, float] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.mechanism.name, *self.aliases)


def ranking_scores(model: MechanismModel, ll: Sequence[float]) -> np.ndarray:
    """Log-likelihoods with a failure mode's lowered by INTERVAL_LOG_UNITS (module
    docstring): what the fits are ranked by."""
    penalty = np.array([INTERVAL_LOG_UNITS if m.family in FAILURE_MODES else 0.0
                        for m in model.mechanisms])
    return np.asarray(ll, dtype=np.float64) - penalty


def fit(model: MechanismModel, agent_counts: Sequence[np.ndarray]) -> list[Fit]:
    """Every distinct mechanism, best first by `ranking_scores` (ties: hypothesis order)."""
    ll = log_likelihoods(model, agent_counts)
    score = ranking_scores(model, ll)
    order = sorted(range(len(ll)), key=lambda i: (-score[i], i))
    best = float(score[order[0]])
    return [Fit(model.mechanisms[i], model.aliases[model.mechanisms[i].name], float(ll[i]),
                float(score[i]) - best) for i in order]


@dataclass(frozen=True)
class FamilyFit:
    """Maximum-likelihood member of a family and, per parameter, the range of values whose
    profile log-likelihood is within INTERVAL_LOG_UNITS of the maximum (95%, Wilks)."""

    family: str
    params: dict[str, int]
    log_likelihood: float
    intervals: dict[str, tuple[int, int]]


def fit_family(model: MechanismModel, agent_counts: Sequence[np.ndarray],
               family: str, lapse_grid: Sequence[float] = SCREEN_GRID) -> FamilyFit:
    """MLE of `family`'s parameters with profile likelihood-ratio intervals, the lapse rate
    profiled out as a nuisance parameter on `lapse_grid` (each member at its best epsilon
    there), so a lapsing agent's scattered failures do not pin a capacity to one value."""
    members = families()[family]
    counts = _check_counts(model, agent_counts)
    member_ll = np.array([max(_lapse_log_likelihood(model, counts, model.index[m.name], e)
                              for e in lapse_grid) for m in members])
    best = int(np.argmax(member_ll))
    top = float(member_ll[best])
    intervals = {}
    for key in members[0].params:
        values = sorted({m.params[key] for m in members})
        profile = [max(member_ll[i] for i, m in enumerate(members) if m.params[key] == v)
                   for v in values]
        intervals[key] = integer_interval(values, profile)
    return FamilyFit(family, dict(members[best].params), top, intervals)


def lapse_units(epsilon: float) -> int:
    """epsilon as the controller row's K_LAPSE (parts of LAPSE_SCALE)."""
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"a lapse rate is a probability; got {epsilon}")
    return int(round(epsilon * LAPSE_SCALE))


def with_lapse(row: Row, epsilon: float) -> Row:
    """`row` mixed with lapse rate epsilon."""
    return (*row[:K_LAPSE], lapse_units(epsilon), *row[K_LAPSE + 1:])  # type: ignore[return-value]


def lapse_log_p(model: MechanismModel, index: int, epsilon: float,
                simulations: int | None = None) -> tuple[np.ndarray, ...]:
    """Smoothed log-distributions, per battery configuration, of distinct mechanism `index`
    mixed with lapse rate epsilon, on the first `simulations` of the model's seeds (default:
    all); simulated once, then cached. Epsilon 0 on all seeds is the model's own table."""
    units = lapse_units(epsilon)
    simulations = model.simulations if simulations is None else simulations
    if units == 0 and simulations == model.simulations:
        return tuple(log_p[index] for log_p in model.log_p)
    key = (index, units, simulations)
    if key not in model.lapse_cache:
        row = with_lapse(model.mechanisms[index].row, epsilon)
        seeds = simulation_seeds(simulations)
        model.lapse_cache[key] = tuple(
            smoothed_log_p(np.bincount(simulate_codes(spec, row, seeds),
                                       minlength=outcome_count(spec)))
            for spec in model.battery
        )
    return model.lapse_cache[key]


def _check_counts(model: MechanismModel, agent_counts: Sequence[np.ndarray]) -> list[np.ndarray]:
    if len(agent_counts) != len(model.battery):
        raise ValueError(f"agent_counts needs one count vector per battery configuration "
                         f"({len(model.battery)}); got {len(agent_counts)}")
    return [np.asarray(c, dtype=np.float64) for c in agent_counts]


def _lapse_log_likelihood(model: MechanismModel, counts: Sequence[np.ndarray], index: int,
                          epsilon: float, simulations: int | None = None) -> float:
    return sum(float(log_p @ c) for log_p, c in
               zip(lapse_log_p(model, index, epsilon, simulations), counts, strict=True))


def lapse_profile(model: MechanismModel, agent_counts: Sequence[np.ndarray], index: int,
                  grid: Sequence[float] = LAPSE_GRID) -> np.ndarray:
    """Log-likelihood of distinct mechanism `index` at each lapse rate of `grid`."""
    counts = _check_counts(model, agent_counts)
    return np.array([_lapse_log_likelihood(model, counts, index, e) for e in grid])


def screen(model: MechanismModel, agent_counts: Sequence[np.ndarray],
           grid: Sequence[float] = SCREEN_GRID) -> np.ndarray:
    """Log-likelihood of every distinct mechanism (rows) at each lapse rate of `grid`
    (columns), on SCREEN_SIMULATIONS seeds."""
    counts = _check_counts(model, agent_counts)
    simulations = min(SCREEN_SIMULATIONS, model.simulations)
    total = np.zeros((len(model.mechanisms), len(grid)))
    for c, n in enumerate(counts):
        if n.any():  # a configuration not played adds 0 to every entry
            total += _screen_stack(model, tuple(grid), simulations, c) @ n
    return total


# (id of the model, grid, simulations, configuration) -> (the model, its stacked screen tables)
_SCREEN_STACKS: dict[tuple[int, tuple[float, ...], int, int],
                     tuple[MechanismModel, np.ndarray]] = {}


def _screen_stack(model: MechanismModel, grid: tuple[float, ...], simulations: int,
                  c: int) -> np.ndarray:
    """The lapse tables of every mechanism at every rate of `grid` on configuration c, as one
    (mechanisms, rates, K) array, so the screen is one product per configuration."""
    key = (id(model), grid, simulations, c)
    found = _SCREEN_STACKS.get(key)
    if found is None or found[0] is not model:
        stack = np.stack([[lapse_log_p(model, i, e, simulations)[c] for e in grid]
                          for i in range(len(model.mechanisms))])
        found = _SCREEN_STACKS[key] = (model, stack)
    return found[1]


def lapse_candidates(model: MechanismModel, agent_counts: Sequence[np.ndarray],
                     top: int = LAPSE_TOP) -> list[int]:
    """The distinct mechanisms fit_lapse profiles: the `top` best of the screen (every
    mechanism at every SCREEN_GRID rate, each at its best rate), then the `top` leaders at
    epsilon 0 on all seeds (ties: hypothesis order)."""
    if top <= 0:
        return []
    counts = _check_counts(model, agent_counts)
    screened = screen(model, counts).max(axis=1)
    by_screen = sorted(range(len(screened)), key=lambda i: (-screened[i], i))[:top]
    ll = log_likelihoods(model, counts)
    at_zero = sorted(range(len(ll)), key=lambda i: (-ll[i], i))[:top]
    return list(dict.fromkeys([*by_screen, *at_zero]))


def fit_lapse(model: MechanismModel, agent_counts: Sequence[np.ndarray],
              top: int = LAPSE_TOP, grid: Sequence[float] = LAPSE_GRID) -> list[Fit]:
    """`fit` with the `lapse_candidates` mixed with their maximum-likelihood lapse rate on
    `grid` and re-ranked; the others keep epsilon 0 and no interval (a lower bound of their
    profile). The interval is honesty.profile_interval of the profile: its ends interpolated
    between grid points. Ties keep the lower epsilon, then the hypothesis order."""
    grid = tuple(sorted(grid))
    counts = _check_counts(model, agent_counts)
    ll = log_likelihoods(model, counts)
    fitted: dict[int, tuple[float, float, tuple[float, float] | None]] = {
        i: (float(ll[i]), 0.0, None) for i in range(len(ll))}
    for i in lapse_candidates(model, counts, top):
        profile = lapse_profile(model, counts, i, grid)
        best = int(np.argmax(profile))
        fitted[i] = (float(profile[best]), grid[best], profile_interval(grid, profile))
    score = ranking_scores(model, [fitted[i][0] for i in range(len(ll))])
    order = sorted(fitted, key=lambda i: (-score[i], i))
    top = float(score[order[0]])
    return [Fit(model.mechanisms[i], model.aliases[model.mechanisms[i].name], fitted[i][0],
                float(score[i]) - top, fitted[i][1], fitted[i][2]) for i in order]
