"""Positive controls of the mechanism fit: programmed agents whose mechanism is known.

Each reference controller is played as an agent on the default battery, on seeds disjoint
from the model's simulation seeds, at the default budget; the fit ranks it first (or first a
hypothesis that plays identically, named in PLAYS_AS) in every run but the recorded MISSES,
which are the weakest pairs of the design. Family members that are not among the 19 are
recovered with their parameter inside the likelihood-ratio interval, and so are lapse rates.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from diagym.analysis.diagnose.battery import (
    CHOSEN_BATTERY,
    CHOSEN_SHARES,
    DEFAULT_ALLOCATION,
    DEFAULT_BATTERY,
    DEFAULT_BUDGET,
    SUPPORT_BATTERY,
    allocate,
    candidate_pool,
    choose_battery,
)
from diagym.analysis.diagnose.hypotheses import REFERENCE, Mechanism, families, hypotheses
from diagym.analysis.diagnose.likelihood import (
    INTERVAL_LOG_UNITS,
    LAPSE_GRID,
    PSEUDO_COUNT,
    SIMULATION_SEED,
    SIMULATIONS,
    MechanismModel,
    build_model,
    count_outcomes,
    fit,
    fit_family,
    fit_lapse,
    lapse_units,
    log_likelihood,
    outcome_codes,
    outcome_count,
    simulate_codes,
    with_lapse,
)
from diagym.controllers.rollout import rollout
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.batched import episode_columns
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES, CONTROLLERS, K_LAPSE
from diagym.envs.workflow.params import WorkflowParams

REPEATS = 8
RECOVERY_REPEATS = 20
# Reference controllers that no outcome can tell apart, and the one each plays as.
PLAYS_AS = {"indexed": "exact", "sham-check-4": "scan-1", "fixed-check-4": "scan-4"}
# (true, ranked first) -> runs out of REPEATS at the default budget: the weakest reference
# pairs (exact with and without elimination differ only in guesses under hidden resampling;
# indexed plays as exact on the same seeds, so it misses in the same run). scan-2 against
# scan-2+eliminate is told apart on the hidden-resampling configurations alone; repeat 5 was
# a near tie (log-LR 0.08 for scan-2) and the barriers configuration's 16 episodes, taken in
# proportion from the others, took one episode from d8 w8 b6 snapshot hidden that carried
# 0.55 of it (-0.09 now; the barriers episodes weigh 0 for that pair), so it misses twice.
MISSES = {("exact", "cache-8+eliminate"): 1, ("indexed", "cache-8+eliminate"): 1,
          ("scan-2", "scan-2+eliminate"): 2, ("scan-2", "scan-3"): 1}
# Runs out of RECOVERY_REPEATS whose interval holds the true parameter: the 95% intervals miss
# scan-3 once (s = 4 fitted, by the 18 episodes at b = 6), as 95% intervals may.
COVERED = {"cache-3": 20, "cache-5": 20, "scan-3": 20, "cache-2+scan-4": 20}


def agent_seeds(repeat: int, config: int) -> np.ndarray:
    episodes = DEFAULT_ALLOCATION[config]
    seeds = repeat * 10**6 + config * 10**4 + np.arange(episodes, dtype=np.int64)
    assert seeds.max() < SIMULATION_SEED
    return seeds


def controller_counts(name: str, repeat: int) -> list[np.ndarray]:
    """Outcome counts of reference controller `name` played as an agent."""
    return [count_outcomes(spec, episode_columns(spec, name, agent_seeds(repeat, c))[0])
            for c, spec in enumerate(DEFAULT_BATTERY)]


def member_counts(mechanism: Mechanism, repeat: int) -> list[np.ndarray]:
    """Outcome counts of a family member (no name among the 19) played as an agent."""
    return [np.bincount(simulate_codes(spec, mechanism.row, agent_seeds(repeat, c)),
                        minlength=outcome_count(spec))
            for c, spec in enumerate(DEFAULT_BATTERY)]


@pytest.fixture(scope="module")
def model(default_model: MechanismModel) -> MechanismModel:
    return default_model


def test_hypotheses_hold_the_references_and_each_row_once() -> None:
    kept, aliases = hypotheses()
    rows = [m.row for m in kept]
    assert len(rows) == len(set(rows)) == 135 + 17  # the 17 failure-mode rows on exact
    assert [m.name for m in kept if m.family == REFERENCE] == list(CONTROLLER_NAMES)
    assert aliases["exact"] == ("scan-8",)
    assert aliases["cache-2"] == ("cache-2+scan-8",)
    assert {m.row for m in families()["cache-k"]} >= {CONTROLLERS["cache-2"],
                                                      CONTROLLERS["cache-4"]}


def test_play_aliases_are_merged_and_named(model: MechanismModel) -> None:
    for name, plays_as in PLAYS_AS.items():
        assert name in model.aliases[plays_as]
    # A scan of b - 1 slots leaves one slot, so it plays as an unlimited scan.
    assert {"scan-7", "cache-8", "indexed"} <= set(model.aliases["exact"])
    representatives = {model.index[name] for name in CONTROLLER_NAMES}
    assert len(representatives) == len(CONTROLLER_NAMES) - len(PLAYS_AS)
    # 98 without the failure modes; of their 17 rows the offsets play as one and
    # update-miss-1 (never applies an update) as stale-8
    assert {"offset-1", "offset+2"} <= set(model.aliases["offset+1"])
    assert "update-miss-1" in model.aliases["stale-8"]
    assert len(model.mechanisms) == 98 + 14


def test_outcome_codes_read_names_and_codes_alike() -> None:
    spec = WorkflowParams(error_allowance=2)
    names = np.array([None, "candidate", "dependency", None], dtype=object)
    codes = np.array([0, 2, 1, 0])
    completed, errors = np.array([8, 3, 0, 8]), np.array([0, 3, 3, 2])
    assert (outcome_codes(spec, names, completed, errors)
            == outcome_codes(spec, codes, completed, errors)).all()
    # (failure * (N + 1) + completed) * (R + 2) + errors
    assert outcome_codes(spec, codes, completed, errors).tolist() == [32, 87, 39, 34]
    with pytest.raises(ValueError, match="outside"):
        outcome_codes(spec, codes, completed, np.array([0, 4, 0, 0]))


def test_log_likelihood_is_n_log_smoothed_p() -> None:
    spec = WorkflowParams(snapshot_period=1)  # exact succeeds on every task
    exact = Mechanism("exact", REFERENCE, {}, CONTROLLERS["exact"])
    uniform = Mechanism("uniform-candidate", REFERENCE, {}, CONTROLLERS["uniform-candidate"])
    model = build_model([spec], candidates=[exact, uniform])
    successes = np.zeros(outcome_count(spec), dtype=np.int64)
    successes[outcome_codes(spec, [0], [8], [0])[0]] = 10
    k = outcome_count(spec)
    expected = 10 * math.log((SIMULATIONS + PSEUDO_COUNT) / (SIMULATIONS + PSEUDO_COUNT * k))
    assert log_likelihood(model, [successes], "exact") == pytest.approx(expected, rel=1e-12)
    ranked = fit(model, [successes])
    assert [f.mechanism.name for f in ranked] == ["exact", "uniform-candidate"]
    assert ranked[0].log_lr_to_best == 0.0
    # b^-N = 4^-8: uniform-candidate never succeeded in 4096 simulations.
    never = 10 * math.log(PSEUDO_COUNT / (SIMULATIONS + PSEUDO_COUNT * k))
    assert ranked[1].log_lr_to_best == pytest.approx(never - expected, rel=1e-12)


def test_reference_controllers_are_ranked_first(model: MechanismModel) -> None:
    names = list(CONTROLLER_NAMES)
    confusion = np.zeros((len(names), len(names) + 1), dtype=np.int64)  # last: not a reference
    misses: dict[tuple[str, str], int] = {}
    for row, name in enumerate(names):
        for repeat in range(REPEATS):
            ranked = fit(model, controller_counts(name, repeat))
            top = ranked[0]
            assert [f.log_lr_to_best for f in ranked] == sorted(
                (f.log_lr_to_best for f in ranked), reverse=True)
            if name in top.names:
                confusion[row, row] += 1
                continue
            misses[(name, top.mechanism.name)] = misses.get((name, top.mechanism.name), 0) + 1
            column = names.index(top.mechanism.name) if top.mechanism.name in names else -1
            confusion[row, column] += 1
    print("\n", "\n".join(f"{n:>18} {confusion[i].tolist()}" for i, n in enumerate(names)))
    assert misses == MISSES
    assert confusion.sum() == len(names) * REPEATS
    assert np.trace(confusion) == len(names) * REPEATS - sum(MISSES.values())


def test_per_step_agents_count_as_the_batched_runner(model: MechanismModel) -> None:
    for name, config in (("next-use-2", 0), ("cache-2+eliminate", 1), ("stale-8", 2)):
        spec = DEFAULT_BATTERY[config]
        env = gym.make("StatefulWorkflow-v0", **spec.as_dict())
        episodes = rollout(env, ReferencePolicy.for_env(name, env), 48, seed=777, fast=False)
        per_step = count_outcomes(spec, episodes.columns)
        batched = count_outcomes(spec, episode_columns(
            spec, name, 777 + np.arange(48, dtype=np.int64))[0])
        assert per_step.sum() == 48
        assert (per_step == batched).all(), name


@pytest.mark.parametrize(("family", "name"), [
    ("cache-k", "cache-3"), ("cache-k", "cache-5"), ("scan-s", "scan-3"),
    ("cache-k+scan-s", "cache-2+scan-4"),
])
def test_family_parameters_are_recovered(model: MechanismModel, family: str, name: str) -> None:
    member = next(m for m in families()[family] if m.name == name)
    assert name not in CONTROLLERS or family == "cache-k+scan-s"
    covered = 0
    for repeat in range(RECOVERY_REPEATS):
        counts = member_counts(member, repeat)
        found = fit_family(model, counts, family)
        inside = all(found.intervals[key][0] <= value <= found.intervals[key][1]
                     for key, value in member.params.items())
        covered += inside
        if inside:
            assert found.params == member.params, (name, repeat, found)
            # the lapse is profiled out: at least the member's lapse-free likelihood
            assert found.log_likelihood >= log_likelihood(model, counts, name) - 1e-9
    assert covered == COVERED[name]


def test_no_episodes_leave_every_parameter_inside(model: MechanismModel) -> None:
    assert INTERVAL_LOG_UNITS == pytest.approx(1.9207, abs=1e-4)  # chi2(1) 95% / 2
    empty = [np.zeros(outcome_count(spec), dtype=np.int64) for spec in DEFAULT_BATTERY]
    found = fit_family(model, empty, "cache-k+scan-s")
    assert found.intervals == {"k": (0, 8), "s": (0, 8)}
    assert found.log_likelihood == 0.0


def test_choose_battery_picks_the_configuration_that_separates() -> None:
    snapshot, history = WorkflowParams(snapshot_period=1), WorkflowParams(snapshot_period=0)
    pair = [Mechanism(n, REFERENCE, {}, CONTROLLERS[n]) for n in ("exact", "cache-2")]
    chosen = choose_battery([snapshot, history], simulations=256, candidates=pair,
                            targets=["exact", "cache-2"])
    assert chosen.battery == (history,)
    assert chosen.shares == (1.0,)
    assert chosen.weakest > 0


def test_allocation_spends_the_budget_by_share() -> None:
    assert sum(DEFAULT_ALLOCATION) == DEFAULT_BUDGET
    # the chosen shares less SUPPORT_SHARE in proportion, and 16 episodes on barriers
    assert DEFAULT_ALLOCATION == (359, 54, 34, 16, 12, 7, 7, 4, 2, 1, 16)
    assert allocate(CHOSEN_SHARES) == (370, 56, 35, 17, 12, 8, 7, 4, 2, 1)
    assert allocate([0.5, 0.3, 0.2], 7) == (4, 2, 1)  # 3.5, 2.1, 1.4: the largest remainder
    assert allocate([1, 1, 1], 10) == (4, 3, 3)


def test_default_battery_is_what_choose_battery_picks() -> None:
    chosen = choose_battery()
    assert len(candidate_pool()) == 192
    assert chosen.battery == CHOSEN_BATTERY
    assert chosen.shares == pytest.approx(CHOSEN_SHARES, abs=1e-4)
    assert DEFAULT_BATTERY == CHOSEN_BATTERY + SUPPORT_BATTERY
    assert {spec.family for spec in SUPPORT_BATTERY} == {"barriers"}
    assert chosen.weakest == pytest.approx(0.02491, abs=1e-5)
    # many pairs bind at the optimum; the tie is broken by name
    assert chosen.weakest_pair == ("cache-0", "cache-0+scan-6")


def test_lapse_is_a_field_of_the_row_in_parts_of_ten_thousand() -> None:
    assert with_lapse(CONTROLLERS["cache-2"], 0.1) == (*CONTROLLERS["cache-2"][:K_LAPSE], 1000,
                                                       *CONTROLLERS["cache-2"][K_LAPSE + 1:])
    assert all(row[K_LAPSE] == 0 for row in CONTROLLERS.values())
    assert lapse_units(0.02) == 200
    with pytest.raises(ValueError, match="probability"):
        lapse_units(1.5)
    # Epsilon 1: every slot is uniform, so exact never succeeds at N = 8, b = 4 but by luck.
    spec = WorkflowParams(snapshot_period=1)
    codes = simulate_codes(spec, with_lapse(CONTROLLERS["exact"], 1.0),
                           np.arange(2000, dtype=np.int64))
    assert (codes == outcome_codes(spec, [0], [8], [0])[0]).sum() == 0


def test_a_lapse_rate_is_recovered_at_the_default_budget(model: MechanismModel) -> None:
    """cache-2 lapsing at 0.1, 512 episodes, 5 runs: cache-2 ranks first with 0.1 inside its
    epsilon interval; exact without a lapse gets epsilon 0 inside its own."""
    lapsing = Mechanism("cache-2 lapsing", "test", {}, with_lapse(CONTROLLERS["cache-2"], 0.1))
    exact = Mechanism("exact", REFERENCE, {}, CONTROLLERS["exact"])
    covered = 0
    for repeat in range(5):
        ranked = fit_lapse(model, member_counts(lapsing, repeat))
        top = ranked[0]
        assert top.mechanism.name == "cache-2", (repeat, top)
        assert abs(top.epsilon - 0.1) <= 0.05  # a grid step of the finer LAPSE_GRID
        assert top.epsilon_interval is not None
        covered += top.epsilon_interval[0] <= 0.1 <= top.epsilon_interval[1]
        assert LAPSE_GRID[0] <= top.epsilon_interval[0] < top.epsilon_interval[1] <= LAPSE_GRID[-1]
        assert [f.log_lr_to_best for f in ranked] == sorted(
            (f.log_lr_to_best for f in ranked), reverse=True)
        plain = fit_lapse(model, member_counts(exact, repeat))[0]
        assert {"exact", "cache-8+eliminate"} & set(plain.names)
        assert plain.epsilon == 0.0 and plain.epsilon_interval[0] == 0.0
        assert plain.epsilon_interval[1] < LAPSE_GRID[1]  # the profile falls before 0.02
    # 95% intervals from the interpolated profile: all 5 hold 0.1 (with the allocation before
    # the barriers configuration, one run's interval, 0.1045..0.192, missed it).
    assert covered == 5


def test_lapse_tables_are_simulated_once(model: MechanismModel) -> None:
    counts = controller_counts("scan-2", 0)
    first = fit_lapse(model, counts)
    cached = len(model.lapse_cache)
    assert cached > 0
    assert fit_lapse(model, counts) == first
    assert len(model.lapse_cache) == cached
    # Unprofiled mechanisms keep epsilon 0 and their fit() log-likelihood.
    plain = {f.mechanism.name: f.log_likelihood for f in fit(model, counts)}
    for f in first:
        if f.epsilon_interval is None:
            assert f.epsilon == 0.0 and f.log_likelihood == plain[f.mechanism.name]
