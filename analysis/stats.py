"""Interval estimates for seed 003's grids: Wilson intervals and a paired seed-block bootstrap.

Why this module exists and why it looks like this:

* Every configuration of a grid is run on the same block of seeds, so seeds are paired blocks
  across levels and controllers (section 5). A band for a rate, an average over cells, a
  contrast or an interaction must resample *seeds*, and must resample them *identically* for
  every estimate so that contrasts stay paired. `bootstrap_weights` draws one multinomial
  resampling of the seed blocks, shared by everything.
* Every estimate in the paper's tables is a linear combination over configurations of
  per-seed values (an average over cells, high minus low, a signed sum over endpoint cells).
  So an estimate is a coefficient row over configurations (`combine`), and all its bootstrap
  replicates are one matrix product with the weights (`paired_bootstrap`). This keeps a report
  over thousands of configurations x 256 seeds x 2,000 resamples well under a second.
* A zero-width bootstrap band does not bound an unseen rare event (section 6.3), so
  `wilson_interval` gives the binomial interval used for sparse cells (Table 5).
* `endpoint_effects` builds the primary factorial's main contrasts and every endpoint
  interaction of orders two to four (section 5.1) as coefficient rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import ndtri  # norm.ppf itself, without importing scipy.stats (0.3-0.8 s)

DEFAULT_RESAMPLES = 2000

# The four primary factors in the order used for effect names. "observation" is high for
# history (snapshot_period 0) and low for snapshot (snapshot_period 1): the paper's contrast is
# history minus snapshot.
EFFECT_FACTORS = ("depth", "candidates", "width", "observation")


def wilson_interval(
    successes: Any, trials: Any, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion, elementwise over numpy arrays.

    Matches scipy.stats.binomtest(k, n).proportion_ci(method="wilson"), including the exact
    endpoints 0 at k = 0 and 1 at k = n.
    """
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= successes <= trials and trials > 0")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    z = float(ndtri(0.5 + 0.5 * confidence))
    p = k / n
    denom = 2.0 * (n + z**2)
    center = (2.0 * n * p + z**2) / denom
    delta = z / denom * np.sqrt(4.0 * n * p * (1.0 - p) + z**2)
    low = np.where(k == 0, 0.0, center - delta)
    high = np.where(k == n, 1.0, center + delta)
    return low, high


def bootstrap_weights(
    n_seeds: int, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> np.ndarray:
    """One paired resampling of seed blocks: (resamples, n_seeds) multinomial counts / n_seeds.

    Row r weights each seed by how often it was drawn in bootstrap resample r, so
    `per_seed @ weights.T` gives every resample's mean at once.
    """
    if n_seeds < 1 or resamples < 1:
        raise ValueError(f"need n_seeds >= 1 and resamples >= 1; got {n_seeds}, {resamples}")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    flat = (draws + n_seeds * np.arange(resamples)[:, None]).ravel()
    counts = np.bincount(flat, minlength=resamples * n_seeds).reshape(resamples, n_seeds)
    return counts / n_seeds


def combine(per_seed_by_config: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """Per-seed values of K linear estimates: coefficients (K, C) @ per_seed_by_config (C, S)."""
    values = np.asarray(per_seed_by_config, dtype=np.float64)
    coefs = np.asarray(coefficients, dtype=np.float64)
    if coefs.ndim != 2 or values.ndim != 2 or coefs.shape[1] != values.shape[0]:
        raise ValueError(
            f"coefficients (K, C) and per_seed_by_config (C, S) disagree: "
            f"{coefs.shape} vs {values.shape}"
        )
    return coefs @ values


def paired_bootstrap(
    per_seed: np.ndarray, weights: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate (plain mean over seeds) and percentile band of K per-seed series, each (K,).

    `weights` comes from `bootstrap_weights`; using the same weights for every call keeps all
    estimates paired by seed.
    """
    values = np.asarray(per_seed, dtype=np.float64)
    if values.ndim == 1:
        values = values[None, :]
    if values.shape[1] != weights.shape[1]:
        raise ValueError(
            f"per_seed has {values.shape[1]} seeds but weights have {weights.shape[1]}"
        )
    estimate = values.mean(axis=1)
    replicates = values @ weights.T
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(replicates, [tail, 100.0 - tail], axis=1)
    return estimate, low, high


def _factor_level(config: Any, factor: str) -> int:
    spec = config.spec
    if factor == "observation":
        return spec.snapshot_period
    return getattr(spec, factor)


def _endpoint_vector(factor: str, levels: Sequence[int]) -> np.ndarray:
    """+1 at the high endpoint, -1 at the low endpoint, 0 elsewhere."""
    vector = np.zeros(len(levels))
    if factor == "observation":
        high, low = levels.index(0), levels.index(1)  # history minus snapshot
    else:
        high, low = int(np.argmax(levels)), int(np.argmin(levels))
    vector[high], vector[low] = 1.0, -1.0
    return vector


def effect_coefficients(
    configs: Sequence[Any],
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Coefficient rows over `configs` of every primary endpoint effect.

    For each family x controller of the primary grid and every non-empty factor set F of
    EFFECT_FACTORS, the effect is the sum over F's 2^|F| endpoint combinations of the product
    of signs (+1 high, -1 low) times the cell success rate averaged equally over all levels of
    the factors not in F. The coefficient array is the outer product of one vector per factor
    (the endpoint signs for factors in F, 1/levels for the others). Returns the row labels
    (family, controller, factors, order) and the (K, len(configs)) coefficients.
    """
    groups: dict[tuple[str, str], dict[tuple[int, ...], int]] = {}
    for index, config in enumerate(configs):
        if config.grid != "primary":
            continue
        key = (config.spec.family, config.controller)
        cell = tuple(_factor_level(config, f) for f in EFFECT_FACTORS)
        groups.setdefault(key, {})[cell] = index
    labels: list[dict[str, Any]] = []
    rows: list[np.ndarray] = []
    for (family, controller), cells in groups.items():
        levels = [sorted({cell[i] for cell in cells}) for i in range(len(EFFECT_FACTORS))]
        shape = tuple(len(level) for level in levels)
        if len(cells) != int(np.prod(shape)):
            raise ValueError(f"primary cells of {family}/{controller} are not a full factorial")
        if set(levels[3]) != {0, 1}:
            raise ValueError("observation needs snapshot_period levels 0 (history) and 1")
        index_grid = np.empty(shape, dtype=np.int64)
        for cell, index in cells.items():
            position = tuple(levels[i].index(cell[i]) for i in range(len(cell)))
            index_grid[position] = index
        endpoints = [_endpoint_vector(f, lv) for f, lv in zip(EFFECT_FACTORS, levels, strict=True)]
        uniform = [np.full(len(lv), 1.0 / len(lv)) for lv in levels]
        for order in range(1, len(EFFECT_FACTORS) + 1):
            for chosen in itertools.combinations(range(len(EFFECT_FACTORS)), order):
                tensor = np.ones(())
                for i in range(len(EFFECT_FACTORS)):
                    vector = endpoints[i] if i in chosen else uniform[i]
                    tensor = np.multiply.outer(tensor, vector)
                row = np.zeros(len(configs))
                row[index_grid.ravel()] = tensor.ravel()
                rows.append(row)
                labels.append({
                    "family": family, "controller": controller,
                    "factors": tuple(EFFECT_FACTORS[i] for i in chosen), "order": order,
                })
    coefficients = np.array(rows) if rows else np.zeros((0, len(configs)))
    return labels, coefficients


def endpoint_effects(
    configs: Sequence[Any], success: np.ndarray, weights: np.ndarray, confidence: float = 0.95
) -> list[dict[str, Any]]:
    """Main contrasts and endpoint interactions (orders 2-4) of the primary grid, with bands.

    `success` is (len(configs), n_seeds); non-primary configurations are ignored. Each dict has
    family, controller, factors (tuple of names), order, estimate, low, high, as fractions.
    """
    labels, coefficients = effect_coefficients(configs)
    if not labels:
        return []
    per_seed = combine(np.asarray(success, dtype=np.float64), coefficients)
    estimate, low, high = paired_bootstrap(per_seed, weights, confidence)
    return [
        {**label, "estimate": float(e), "low": float(lo), "high": float(hi)}
        for label, e, lo, hi in zip(labels, estimate, low, high, strict=True)
    ]
