"""Behaviour of analysis.stats: Wilson intervals, the paired seed bootstrap, endpoint effects."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from diagym.analysis.stats import (
    EFFECT_FACTORS,
    bootstrap_weights,
    combine,
    effect_coefficients,
    endpoint_effects,
    paired_bootstrap,
    wilson_interval,
)
from diagym.analysis.studies.reproduce.design import GridConfiguration, grid_configurations
from diagym.envs.workflow.params import WorkflowParams

PRIMARY = grid_configurations("primary")


def _level(config: GridConfiguration, factor: str) -> int:
    spec = config.spec
    return spec.snapshot_period if factor == "observation" else getattr(spec, factor)


def _levels(configs: list[GridConfiguration], factor: str) -> list[int]:
    return sorted({_level(c, factor) for c in configs if c.grid == "primary"})


def _endpoints(configs: list[GridConfiguration], factor: str) -> tuple[int, int]:
    """(high, low) level of a factor; observation: history (0) is high, snapshot (1) low."""
    if factor == "observation":
        return 0, 1
    levels = _levels(configs, factor)
    return max(levels), min(levels)


# -- Wilson ----------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 400), data=st.data(),
    confidence=st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]),
)
def test_wilson_matches_scipy(n: int, data: st.DataObject, confidence: float) -> None:
    k = data.draw(st.integers(0, n))
    expected = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert low == pytest.approx(expected.low, abs=1e-12)
    assert high == pytest.approx(expected.high, abs=1e-12)


def test_wilson_is_vectorised_and_exact_at_the_ends() -> None:
    n = 256
    k = np.array([0, 1, 10, 128, 255, 256])
    low, high = wilson_interval(k, n)
    assert low.shape == high.shape == k.shape
    assert low[0] == 0.0 and high[-1] == 1.0
    assert high[0] > 0.0 and low[-1] < 1.0  # zero observed successes still leaves uncertainty
    for i, ki in enumerate(k):
        ci = binomtest(int(ki), n).proportion_ci(confidence_level=0.95, method="wilson")
        assert low[i] == pytest.approx(ci.low, abs=1e-12)
        assert high[i] == pytest.approx(ci.high, abs=1e-12)
    assert np.all(low <= k / n) and np.all(k / n <= high)


@pytest.mark.parametrize("k, n, confidence", [(-1, 5, 0.95), (6, 5, 0.95), (1, 0, 0.95),
                                              (1, 5, 1.0), (1, 5, 0.0)])
def test_wilson_rejects_bad_input(k: int, n: int, confidence: float) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n, confidence)


# -- bootstrap -------------------------------------------------------------------------------
def test_bootstrap_weights_are_multinomial_resamplings() -> None:
    weights = bootstrap_weights(37, resamples=500, seed=3)
    assert weights.shape == (500, 37)
    counts = weights * 37
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert np.all(weights >= 0)
    np.testing.assert_array_equal(weights, bootstrap_weights(37, resamples=500, seed=3))
    assert not np.array_equal(weights, bootstrap_weights(37, resamples=500, seed=4))
    # every seed is drawn with probability 1/n per draw: mean weight close to 1/n
    assert abs(weights.mean(axis=0) - 1 / 37).max() < 0.01


def test_bootstrap_default_resamples() -> None:
    assert bootstrap_weights(8).shape == (2000, 8)


@settings(max_examples=50, deadline=None)
@given(value=st.floats(-10, 10, allow_nan=False), n_seeds=st.integers(1, 64))
def test_band_of_a_constant_is_degenerate(value: float, n_seeds: int) -> None:
    weights = bootstrap_weights(n_seeds, resamples=200)
    estimate, low, high = paired_bootstrap(np.full((3, n_seeds), value), weights)
    np.testing.assert_allclose(estimate, value, atol=1e-12)
    np.testing.assert_allclose(low, value, atol=1e-12)
    np.testing.assert_allclose(high, value, atol=1e-12)


def test_paired_contrast_of_shifted_series_is_degenerate() -> None:
    """Pairing: the same resampling is applied to both series, so a constant shift survives
    every resample exactly while each series alone has a wide band."""
    rng = np.random.default_rng(0)
    weights = bootstrap_weights(128, resamples=500)
    base = (rng.random(128) < 0.5).astype(float)
    per_config = np.vstack([base, base + 0.25])
    contrast = combine(per_config, np.array([[-1.0, 1.0]]))
    estimate, low, high = paired_bootstrap(contrast, weights)
    np.testing.assert_allclose([estimate[0], low[0], high[0]], 0.25, atol=1e-12)
    _, low_one, high_one = paired_bootstrap(base, weights)
    assert high_one[0] - low_one[0] > 0.05


def test_paired_bootstrap_estimate_is_the_mean_and_band_brackets_it() -> None:
    rng = np.random.default_rng(1)
    per_seed = (rng.random((20, 256)) < rng.random((20, 1))).astype(float)
    weights = bootstrap_weights(256, resamples=1000)
    estimate, low, high = paired_bootstrap(per_seed, weights)
    np.testing.assert_allclose(estimate, per_seed.mean(axis=1))
    assert np.all(low <= estimate + 1e-12) and np.all(estimate <= high + 1e-12)
    replicates = per_seed @ weights.T
    np.testing.assert_allclose(low, np.percentile(replicates, 2.5, axis=1))
    np.testing.assert_allclose(high, np.percentile(replicates, 97.5, axis=1))
    # a wider confidence level gives a wider band
    _, low90, high90 = paired_bootstrap(per_seed, weights, confidence=0.9)
    assert np.all(low <= low90 + 1e-12) and np.all(high90 <= high + 1e-12)


def test_paired_bootstrap_rejects_mismatched_seeds() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros((2, 5)), bootstrap_weights(6, resamples=10))


def test_combine_is_a_linear_combination() -> None:
    rng = np.random.default_rng(2)
    values = rng.random((5, 7))
    coefficients = rng.normal(size=(3, 5))
    expected = np.array([[sum(coefficients[k, c] * values[c, s] for c in range(5))
                          for s in range(7)] for k in range(3)])
    np.testing.assert_allclose(combine(values, coefficients), expected)
    with pytest.raises(ValueError):
        combine(values, coefficients[:, :4])


# -- endpoint effects ------------------------------------------------------------------------
def test_effect_rows_cover_every_factor_set_and_sum_to_zero() -> None:
    labels, coefficients = effect_coefficients(PRIMARY)
    groups = {(c.spec.family, c.controller) for c in PRIMARY}
    per_group = 2 ** len(EFFECT_FACTORS) - 1
    assert len(labels) == len(groups) * per_group == coefficients.shape[0]
    assert coefficients.shape[1] == len(PRIMARY)
    np.testing.assert_allclose(coefficients.sum(axis=1), 0.0, atol=1e-12)
    for label in labels:
        assert label["order"] == len(label["factors"])
    orders = [label["order"] for label in labels]
    for order in range(1, len(EFFECT_FACTORS) + 1):
        expected = len(list(itertools.combinations(EFFECT_FACTORS, order)))
        assert orders.count(order) == len(groups) * expected
    # each row only touches its own family x controller
    for label, row in zip(labels, coefficients, strict=True):
        touched = np.flatnonzero(row)
        assert {(PRIMARY[i].spec.family, PRIMARY[i].controller) for i in touched} == {
            (label["family"], label["controller"])
        }


def _pattern_success(configs: list[GridConfiguration], value, n_seeds: int = 4) -> np.ndarray:
    rates = np.array([value(c) for c in configs])
    return np.repeat(rates[:, None], n_seeds, axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_additive_pattern_has_no_interactions(seed: int) -> None:
    rng = np.random.default_rng(seed)
    level_effect = {
        (f, level): rng.uniform(-0.1, 0.1)
        for f in EFFECT_FACTORS for level in _levels(PRIMARY, f)
    }
    offset = {(c.spec.family, c.controller): rng.uniform(0.4, 0.6) for c in PRIMARY}

    def value(c: GridConfiguration) -> float:
        total = offset[(c.spec.family, c.controller)]
        return total + sum(level_effect[(f, _level(c, f))] for f in EFFECT_FACTORS)

    success = _pattern_success(PRIMARY, value)
    effects = endpoint_effects(PRIMARY, success, bootstrap_weights(4, resamples=50))
    for effect in effects:
        if effect["order"] == 1:
            (factor,) = effect["factors"]
            high, low = _endpoints(PRIMARY, factor)
            expected = level_effect[(factor, high)] - level_effect[(factor, low)]
        else:
            expected = 0.0
        assert effect["estimate"] == pytest.approx(expected, abs=1e-12)
        assert effect["low"] == pytest.approx(expected, abs=1e-12)
        assert effect["high"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_multiplicative_pattern_has_analytic_effects(seed: int) -> None:
    """rate = prod_f u_f(level): effect over F = prod_{F} (u_high - u_low) * prod_{not F} mean."""
    rng = np.random.default_rng(seed)
    u = {(f, level): rng.uniform(0.2, 1.0) for f in EFFECT_FACTORS
         for level in _levels(PRIMARY, f)}

    def value(c: GridConfiguration) -> float:
        return float(np.prod([u[(f, _level(c, f))] for f in EFFECT_FACTORS]))

    success = _pattern_success(PRIMARY, value)
    effects = endpoint_effects(PRIMARY, success, bootstrap_weights(4, resamples=50))
    for effect in effects:
        expected = 1.0
        for f in EFFECT_FACTORS:
            if f in effect["factors"]:
                high, low = _endpoints(PRIMARY, f)
                expected *= u[(f, high)] - u[(f, low)]
            else:
                expected *= np.mean([u[(f, level)] for level in _levels(PRIMARY, f)])
        assert effect["estimate"] == pytest.approx(expected, abs=1e-12)


def test_width_by_observation_interaction_is_the_difference_of_differences() -> None:
    """I = [S(w8, history) - S(w1, history)] - [S(w8, snapshot) - S(w1, snapshot)] on a
    pattern that fails only at wide width without refreshes."""
    def value(c: GridConfiguration) -> float:
        return 0.0 if (c.spec.width == 8 and c.spec.snapshot_period == 0) else 1.0

    success = _pattern_success(PRIMARY, value)
    effects = endpoint_effects(PRIMARY, success, bootstrap_weights(4, resamples=20))
    by_name = {(e["family"], e["controller"], e["factors"]): e["estimate"] for e in effects}
    key = ("chains", "exact")
    assert by_name[(*key, ("width", "observation"))] == pytest.approx(-1.0)
    assert by_name[(*key, ("width",))] == pytest.approx(-0.5)
    assert by_name[(*key, ("observation",))] == pytest.approx(-1.0 / 4)  # 1 of 4 widths
    assert by_name[(*key, ("depth",))] == pytest.approx(0.0)


def test_effects_on_a_small_factorial_and_other_grids_are_ignored() -> None:
    configs = [
        GridConfiguration("primary", f"d{d}_b{b}_w{w}_p{p}",
                      WorkflowParams(family="chains", n_ops=4, depth=d, width=w, candidates=b,
                                     snapshot_period=p), "exact")
        for d, b, w, p in itertools.product((1, 2, 4), (2, 4), (1, 4), (1, 0))
    ]
    extra = GridConfiguration("work", "x", WorkflowParams(), "exact")
    all_configs = [extra, *configs]
    rng = np.random.default_rng(5)
    success = (rng.random((len(all_configs), 32)) < 0.5).astype(float)
    effects = endpoint_effects(all_configs, success, bootstrap_weights(32, resamples=100))
    assert len(effects) == 15
    depth = next(e for e in effects if e["factors"] == ("depth",))
    rates = success.mean(axis=1)
    high = np.mean([rates[i + 1] for i, c in enumerate(configs) if c.spec.depth == 4])
    low = np.mean([rates[i + 1] for i, c in enumerate(configs) if c.spec.depth == 1])
    assert depth["estimate"] == pytest.approx(high - low)
    assert depth["low"] <= depth["estimate"] <= depth["high"]


def test_incomplete_factorial_is_rejected() -> None:
    with pytest.raises(ValueError, match="full factorial"):
        effect_coefficients(PRIMARY[:-1])


def test_no_primary_configs_gives_no_effects() -> None:
    work = grid_configurations("work")
    success = np.zeros((len(work), 4))
    assert endpoint_effects(work, success, bootstrap_weights(4, resamples=10)) == []
