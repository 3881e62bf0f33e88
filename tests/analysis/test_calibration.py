"""Simulated success against the analytic predictions: two independent paths.

The batched runner plays the controllers (controllers/); analysis/predictions.py derives
success probabilities per instance from the task alone. They must agree within binomial
noise, on the paper's grid and on configurations the paper never ran.
"""

from __future__ import annotations

import numpy as np
import pytest

from diagym.analysis.studies.reproduce.design import grid_configurations, grid_seeds
from diagym.analysis.studies.reproduce.predictions import predict_instances
from diagym.controllers.workflow.batched import run_controller
from diagym.envs.workflow.params import WorkflowParams

TOLERANCE_SD = 4.5


def _assert_agrees(success: np.ndarray, predicted: np.ndarray, label: object) -> None:
    """Mean simulated success within 4.5 SD of the mean instance-conditional prediction; the
    SD is that of a sum of independent Bernoulli(p_i) trials."""
    assert not np.isnan(predicted).any(), label
    n = success.size
    sd = np.sqrt(np.sum(predicted * (1 - predicted))) / n
    gap = abs(success.mean() - predicted.mean())
    assert gap <= TOLERANCE_SD * sd + 1e-12, (label, success.mean(), predicted.mean(), sd)


OFF_GRID = [
    (WorkflowParams(n_ops=12, depth=3, candidates=3, width=3, snapshot_period=0), "cache-2"),
    (WorkflowParams(n_ops=12, depth=3, candidates=5, width=5, snapshot_period=3), "cache-4"),
    (WorkflowParams(n_ops=6, depth=2, family="barriers", candidates=6), "scan-2"),
    (WorkflowParams(n_ops=6, depth=3, candidates=7, snapshot_period=0), "scan-4"),
    (WorkflowParams(n_ops=6, depth=6, candidates=5), "cache-2+scan-4"),
    (WorkflowParams(n_ops=6, depth=2, family="barriers"), "random-schedule"),
    (WorkflowParams(n_ops=6, depth=3), "random-schedule"),
    (WorkflowParams(n_ops=4, depth=1, candidates=3), "uniform-candidate"),
    (WorkflowParams(n_ops=6, depth=2, candidates=3, error_allowance=3), "uniform-candidate"),
    (WorkflowParams(n_ops=6, depth=2, candidates=5, error_allowance=5), "eliminate"),
    (WorkflowParams(n_ops=10, depth=5, candidates=4, error_allowance=4, snapshot_period=0,
                    width=6), "cache-2+eliminate"),
    (WorkflowParams(n_ops=10, depth=2, candidates=6, error_allowance=7), "scan-1+eliminate"),
    (WorkflowParams(n_ops=6, depth=3, candidates=8, hidden_resampling=True,
                    snapshot_period=3), "exact"),
    (WorkflowParams(n_ops=5, depth=5, candidates=2, hidden_resampling=True,
                    snapshot_period=2), "cache-2"),
    (WorkflowParams(n_ops=12, depth=4, candidates=4, snapshot_period=3, width=8), "stale-8"),
    (WorkflowParams(n_ops=8, depth=2, candidates=8, snapshot_period=0), "sham-check-4"),
    (WorkflowParams(n_ops=8, depth=2, candidates=6, snapshot_period=0), "fixed-check-4"),
]


@pytest.mark.parametrize(("spec", "controller"), OFF_GRID,
                         ids=[f"{c}-{i}" for i, (_, c) in enumerate(OFF_GRID)])
def test_simulation_agrees_with_prediction_beyond_the_papers_grid(spec: WorkflowParams,
                                                                  controller: str) -> None:
    seeds = np.arange(50_000, 54_000)
    success = run_controller(spec, controller, seeds)["success"]
    _assert_agrees(success, predict_instances(spec, controller, seeds), (spec, controller))


@pytest.mark.parametrize("grid", ["primary", "work", "memory", "observation", "recovery",
                                  "locality", "selection", "labels"])
def test_simulation_agrees_with_prediction_on_every_derived_cell_group(grid: str) -> None:
    """Per grid, controller and condition (pooling families, b and w, as the tables do)."""
    seeds = grid_seeds(grid)
    groups: dict[tuple[str, str], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for config in grid_configurations(grid):
        predicted = predict_instances(config.spec, config.controller, seeds)
        if np.isnan(predicted).any():
            continue
        success = run_controller(config.spec, config.controller, seeds)["success"]
        key = (config.controller, config.condition if grid != "primary" else config.spec.family)
        sims, preds = groups.setdefault(key, ([], []))
        sims.append(success)
        preds.append(predicted)
    assert groups
    for key, (sims, preds) in groups.items():
        _assert_agrees(np.concatenate(sims), np.concatenate(preds), (grid, key))
