"""Analytic predictions (analysis/studies/reproduce/predictions.py) against algebra, brute force
and the env.

Expected values come from enumeration (diagym.analysis.audit), scipy, brute-force sums over failure
tuples, a plain-Python re-derivation on `env.unwrapped.task`, and Monte Carlo play of small
contract-following controllers in the real env; never from the paper's tables.
"""

from __future__ import annotations

import itertools
import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import diagym  # noqa: F401  (registers StatefulWorkflow-v0)
from diagym.analysis.audit import audit, divisors
from diagym.analysis.studies.reproduce import predictions as P
from diagym.analysis.studies.reproduce.design import GridConfiguration, grid_configurations
from diagym.controllers.workflow import parameters as traits
from diagym.envs._core.failures import failure_name
from diagym.envs.workflow.params import WorkflowParams

ENV_ID = "diagym:StatefulWorkflow-v0"
SEEDS = np.arange(0, 64, dtype=np.int64)


# --- closed forms -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("family", "n", "depth"),
    [(f, n, d) for n in (4, 8) for f in ("chains", "barriers") for d in divisors(n)],
)
def test_random_schedule_equals_valid_orders_over_permutations(
    family: str, n: int, depth: int
) -> None:
    orders = audit(family, n, depth)["orders"]
    assert P.random_schedule_success(family, n, depth) == pytest.approx(
        orders / math.factorial(n), rel=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 16),
    p=st.floats(0.01, 1.0),
    r=st.integers(0, 80),
)
def test_replacement_retry_is_negative_binomial_cdf(n: int, p: float, r: int) -> None:
    assert P.replacement_retry_success(n, p, r) == pytest.approx(
        float(stats.nbinom.cdf(r, n, p)), rel=1e-9, abs=1e-12
    )


def test_replacement_retry_edges() -> None:
    assert P.replacement_retry_success(8, 1.0, 0) == 1.0
    assert P.replacement_retry_success(8, 0.0, 100) == 0.0
    assert P.replacement_retry_success(8, 0.25, 0) == pytest.approx(0.25**8)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    r=st.integers(0, 14),
)
def test_elimination_convolution_equals_brute_force(counts: list[int], r: int) -> None:
    tuples = list(itertools.product(*(range(m) for m in counts)))
    expected = sum(1 for t in tuples if sum(t) <= r) / len(tuples)
    assert P.elimination_retry_success(counts, r) == pytest.approx(expected, abs=1e-12)


def test_elimination_is_certain_at_worst_case_budget() -> None:
    for n, b in [(4, 2), (8, 4), (8, 8)]:
        assert P.elimination_retry_success([b] * n, n * (b - 1)) == pytest.approx(1.0)
        assert P.elimination_retry_success([b] * n, n * (b - 1) - 1) < 1.0


def test_scan_per_decision_and_ceiling() -> None:
    assert P.scan_success_per_decision(1, 4) == 0.5
    assert P.scan_success_per_decision(4, 4) == 1.0
    assert P.scan_success_per_decision(4, 8) == 5 / 8
    assert P.scan_ensemble_success(8, 1, 8) == pytest.approx(0.25**8)
    assert P.visible_decisions(8, 0) == 1
    assert P.visible_decisions(8, 3) == 3
    assert P.hidden_ceiling(8, 4, 1) == 1.0
    assert P.hidden_ceiling(8, 4, 2) == pytest.approx(4.0**-4)
    assert P.hidden_ceiling(8, 8, 0) == pytest.approx(8.0**-7)


# --- instance predictions -----------------------------------------------------------------

DETERMINISTIC_SPECS = [
    WorkflowParams(family=f, n_ops=n, depth=d, width=w, candidates=b, snapshot_period=h,
                   updates=u, locality=loc)
    for f, (n, d), w, b, h, u, loc in [
        ("chains", (8, 4), 4, 4, 0, "additive", "balanced"),
        ("barriers", (8, 2), 8, 8, 1, "additive", "clustered"),
        ("chains", (16, 4), 2, 8, 4, "static", "balanced"),
        ("barriers", (16, 4), 8, 2, 3, "additive", "concentrated"),
        ("chains", (4, 1), 1, 4, 2, "additive", "balanced"),
    ]
]


@pytest.mark.parametrize("spec", DETERMINISTIC_SPECS)
@pytest.mark.parametrize("controller", ["exact", "residue-8", "precomputed-plan", "indexed"])
def test_positive_controls_predict_one(spec: WorkflowParams, controller: str) -> None:
    assert np.all(P.predict_instances(spec, controller, SEEDS) == 1.0)


@pytest.mark.parametrize(("n", "b"), [(4, 2), (8, 4), (8, 8)])
@pytest.mark.parametrize("period", [0, 1])
def test_elimination_controllers_certain_at_worst_case_budget(n: int, b: int, period: int) -> None:
    spec = WorkflowParams(n_ops=n, depth=4, candidates=b, snapshot_period=period,
                          error_allowance=n * (b - 1))
    for controller in ("eliminate", "cache-2+eliminate", "scan-1+eliminate"):
        assert np.allclose(P.predict_instances(spec, controller, SEEDS), 1.0)
    assert np.all(P.predict_instances(spec.replace(error_allowance=0), "eliminate", SEEDS)
                  == float(b) ** -n)


@pytest.mark.parametrize("controller", ["exact", "cache-2", "cache-4", "residue-8", "indexed"])
@pytest.mark.parametrize("width", [4, 8])
def test_snapshot_every_step_beats_hidden_resampling(controller: str, width: int) -> None:
    spec = WorkflowParams(depth=4, width=width, snapshot_period=1, hidden_resampling=True)
    assert np.all(P.predict_instances(spec, controller, SEEDS) == 1.0)


@pytest.mark.parametrize("period", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("b", [2, 4, 8])
def test_exact_attains_hidden_ceiling(period: int, b: int) -> None:
    spec = WorkflowParams(depth=4, candidates=b, snapshot_period=period, hidden_resampling=True)
    for controller in ("exact", "cache-2"):
        values = P.predict_instances(spec, controller, SEEDS)
        assert np.allclose(values, P.hidden_ceiling(8, b, period), rtol=1e-12)
    # invisible decisions are guesses for every controller: nobody beats the ceiling
    for controller in ("scan-1", "scan-4", "stale-8", "cache-2+scan-4", "uniform-candidate"):
        values = P.predict_instances(spec, controller, SEEDS)
        assert np.all(values <= P.hidden_ceiling(8, b, period) * (1 + 1e-12))


def test_closed_forms_agree_with_kernel() -> None:
    """The kernel's generic rules reproduce the closed forms `predict` uses directly."""
    for r in (0, 2, 8):
        spec = WorkflowParams(depth=4, candidates=4, snapshot_period=1, error_allowance=r)
        task, work = P._generate(spec, SEEDS)
        out = P._run_kernel(spec, ["uniform-candidate", "eliminate"], task, work)
        assert np.allclose(out[0], P.replacement_retry_success(8, 0.25, r), rtol=1e-10)
        assert np.allclose(out[1], P.elimination_retry_success([4] * 8, r), rtol=1e-10)


@pytest.mark.parametrize(("s", "b", "n"), [(1, 4, 4), (2, 8, 4), (4, 8, 4), (1, 2, 8)])
def test_scan_instance_mean_approaches_ensemble(s: int, b: int, n: int) -> None:
    spec = WorkflowParams(n_ops=n, depth=2, candidates=b, width=4, snapshot_period=0)
    values = P.predict_instances(spec, f"scan-{s}", np.arange(20_000, 24_000))
    target = P.scan_ensemble_success(n, s, b)
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert abs(values.mean() - target) < 5 * se + 1e-9


def reference_instance(spec: WorkflowParams, controller: str, seed: int) -> float:
    """Plain-Python re-derivation on the env's 2-D WorkflowTask (R = 0, no hidden)."""
    env = gym.make(ENV_ID, **spec.as_dict())
    env.reset(seed=seed)
    task = env.unwrapped.task
    env.close()
    n, b, h = spec.n_ops, spec.candidates, spec.snapshot_period
    x = [int(v) for v in task.initial_registers]
    stale = list(x)
    done: set[int] = set()
    prob = 1.0
    for t in range(n):
        v = min(u for u in range(n) if u not in done
                and all(task.prereq[u, p] == 0 or p in done for p in range(n)))
        visible = t == 0 or (h > 0 and t % h == 0)
        if visible:
            stale = list(x)
        q = int(task.query[v])
        pos = list(task.codes[v]).index(x[q] % b)
        if controller == "stale-8":
            prob *= 1.0 if stale[q] % b == x[q] % b else 0.0
        else:
            known = controller != "uniform-candidate" and (
                not controller.startswith("cache-2") or q < 2 or visible)
            limit = {"scan-1": 1, "scan-2": 2, "cache-2+scan-4": 4}.get(controller, b)
            limit = min(limit, b)
            if not known:
                prob *= 1.0 / b
            elif pos >= limit:
                prob *= 1.0 / (b - limit)
        x[int(task.update[v])] = (x[int(task.update[v])] + int(task.delta[v])) % 8
        done.add(v)
    return prob


@pytest.mark.parametrize("spec", DETERMINISTIC_SPECS[:4])
@pytest.mark.parametrize(
    "controller", ["cache-2", "scan-1", "scan-2", "cache-2+scan-4", "stale-8", "exact"]
)
def test_kernel_matches_reference_on_env_task(spec: WorkflowParams, controller: str) -> None:
    seeds = np.arange(100, 106)
    got = P.predict_instances(spec, controller, seeds)
    want = [reference_instance(spec, controller, int(s)) for s in seeds]
    assert np.allclose(got, want, rtol=1e-12, atol=0)


def play(env: gym.Env, seed: int, rng: np.random.Generator, cache: int, limit: int,
         eliminate: bool) -> bool:
    """One episode of a contract-following controller: retain registers < cache (8 = all),
    scan `limit` slots, guess uniformly among the rest (minus eliminated slots)."""
    obs, info = env.reset(seed=seed)
    task = env.unwrapped.task
    n, b = task.spec.n_ops, task.spec.candidates
    x = obs["registers"].astype(int)
    current, eliminated = -1, set()
    terminated = False
    while not terminated:
        v = int(np.flatnonzero(info["action_mask"][:n])[0])
        if v != current:
            current, eliminated = v, set()
        shown = obs["registers"][0] >= 0
        if shown:
            x = obs["registers"].astype(int)
        q = int(task.query[v])
        options = [a for a in range(b) if a not in eliminated]
        if shown or q < cache:
            examined = range(min(limit, b))
            match = [a for a in examined if task.codes[v, a] == x[q] % b]
            options = match if match else [a for a in options if a not in examined]
        a = int(rng.choice(options))
        obs, _, terminated, _, info = env.step(np.array([v, a]))
        if failure_name(info["failure"]) == "candidate" and eliminate:
            eliminated.add(a)
        if not info["failure"] and not info["success"]:
            u, delta = (int(z) for z in obs["last_update"])
            x[u] = (x[u] + delta) % 8
    return bool(info["success"])


@pytest.mark.parametrize(
    ("controller", "spec_kwargs", "cache", "limit", "eliminate"),
    [
        ("cache-2", {"snapshot_period": 2, "width": 4, "candidates": 2}, 2, 8, False),
        ("cache-2+eliminate", {"snapshot_period": 0, "width": 8, "error_allowance": 3}, 2, 8,
         True),
        ("scan-1+eliminate", {"snapshot_period": 0, "error_allowance": 4}, 8, 1, True),
        ("cache-2", {"snapshot_period": 0, "candidates": 2, "error_allowance": 2}, 2, 8, False),
    ],
)
def test_monte_carlo_play_matches_instance_prediction(
    controller: str, spec_kwargs: dict, cache: int, limit: int, eliminate: bool
) -> None:
    spec = WorkflowParams(depth=4, **spec_kwargs)
    seeds = np.arange(300, 340)
    predicted = P.predict_instances(spec, controller, seeds)
    seed = int(seeds[np.argmin(np.abs(predicted - 0.5))])  # most informative instance
    p = float(P.predict_instances(spec, controller, [seed])[0])
    env = gym.make(ENV_ID, **spec.as_dict())
    rng = np.random.default_rng(seed)
    episodes = 600
    wins = sum(play(env, seed, rng, cache, limit, eliminate) for _ in range(episodes))
    env.close()
    se = math.sqrt(max(p * (1 - p), 1e-4) / episodes)
    assert abs(wins / episodes - p) < 4.5 * se


# --- grids, not_derived, errors, speed ----------------------------------------------------

def test_all_grids_in_unit_interval_and_not_derived_labels() -> None:
    configs = grid_configurations("all")
    values = P.predict(configs)
    assert values.shape == (len(configs),)
    derived = ~np.isnan(values)
    assert np.all((values[derived] >= 0) & (values[derived] <= 1))
    for config, value in zip(configs, values, strict=True):
        reason = P.not_derived_reason(config.spec, config.controller)
        assert (reason is None) == (not np.isnan(value)), config
    missing = {c.controller for c, v in zip(configs, values, strict=True) if np.isnan(v)}
    assert missing == {"next-use-2"}


def test_predict_means_instance_predictions() -> None:
    spec = WorkflowParams(depth=4, snapshot_period=2)
    configs = [GridConfiguration("t", "x", spec, c) for c in ("cache-2", "scan-1", "stale-8")]
    configs.append(GridConfiguration("t", "x", spec.replace(candidates=8), "cache-2"))
    got = P.predict(configs, SEEDS)
    want = [P.predict_instances(c.spec, c.controller, SEEDS).mean() for c in configs]
    assert np.allclose(got, want, rtol=1e-12)


def test_not_derived_cases_are_nan() -> None:
    hidden_retry = WorkflowParams(hidden_resampling=True, error_allowance=2)
    for controller in ("exact", "uniform-candidate", "eliminate", "cache-2"):
        assert np.all(np.isnan(P.predict_instances(hidden_retry, controller, SEEDS)))
    for spec in (WorkflowParams(error_allowance=1), WorkflowParams(hidden_resampling=True)):
        assert np.all(np.isnan(P.predict_instances(spec, "random-schedule", SEEDS)))
    assert np.all(np.isnan(P.predict_instances(WorkflowParams(), "next-use-2", SEEDS)))
    assert np.all(np.isnan(
        P.predict_instances(WorkflowParams(hidden_resampling=True), "precomputed-plan", SEEDS)))


def test_random_schedule_and_uniform_use_closed_forms() -> None:
    spec = WorkflowParams(family="barriers", n_ops=8, depth=2, candidates=4)
    assert np.all(P.predict_instances(spec, "random-schedule", SEEDS)
                  == P.random_schedule_success("barriers", 8, 2))
    assert np.allclose(P.predict_instances(spec, "uniform-candidate", SEEDS), 4.0**-8)


def test_unknown_controller_raises() -> None:
    allowed = " | ".join(repr(c) for c in traits.CONTROLLERS)
    message = f"controller must be one of {allowed}; got 'cache-3'"
    with pytest.raises(ValueError) as caught:
        P.predict_instances(WorkflowParams(), "cache-3", SEEDS)
    assert str(caught.value) == message
    with pytest.raises(ValueError) as caught:
        P.predict([GridConfiguration("t", "x", WorkflowParams(), "cache-3")], SEEDS)
    assert str(caught.value) == message


def test_a_controller_added_to_the_trait_table_is_predicted_from_its_traits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new row of the one trait table needs nothing here: a copy of scan-2's and of
    cache-2+eliminate's traits under new names is predicted exactly as they are, and a row
    with a failure mode (a lapse) is not derived, with its reason, instead of refused."""
    table = dict(traits.CONTROLLERS)
    table["my-scan"] = table["scan-2"]
    table["my-cache"] = table["cache-2+eliminate"]
    lapse = list(table["exact"])
    lapse[traits.K_LAPSE] = 100
    table["my-lapse"] = tuple(lapse)
    monkeypatch.setattr(traits, "CONTROLLERS", table)
    for spec in (WorkflowParams(candidates=8), WorkflowParams(candidates=8, error_allowance=2),
                 WorkflowParams(snapshot_period=0, hidden_resampling=True)):
        for mine, theirs in (("my-scan", "scan-2"), ("my-cache", "cache-2+eliminate")):
            np.testing.assert_array_equal(P.predict_instances(spec, mine, SEEDS),
                                          P.predict_instances(spec, theirs, SEEDS))
    assert np.all(np.isnan(P.predict_instances(WorkflowParams(), "my-lapse", SEEDS)))
    assert P.not_derived_reason(WorkflowParams(), "my-lapse") == (
        "my-lapse: a failure mode in its traits, no exact derivation")


def test_every_grid_configuration_is_predicted_or_says_why_not() -> None:
    """(Its speed is measured in benchmarks/grid.py, not here.)"""
    configs = grid_configurations("all")
    predicted = P.predict(configs)
    assert predicted.shape == (len(configs),)
    for config, value in zip(configs, predicted, strict=True):
        reason = P.not_derived_reason(config.spec, config.controller)
        if reason is None:
            assert 0.0 <= value <= 1.0, config
        else:
            assert np.isnan(value) and reason, config
