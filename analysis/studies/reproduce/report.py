"""Seed 003's result rows: batched episode arrays into results.csv, and what its tables and
figures share.

Why this module exists: one runner produces, for a list of grid configurations run on one seed
block, arrays of shape (n_configs, n_seeds); this module turns them into the per-configuration
results CSV and holds the aggregation its two readers share (tables.py: the Markdown tables
shaped like the paper's Tables 3-6 and C.1-C.7; figures.py: the structural-profile PNGs). Every
aggregate is a coefficient row over configurations bootstrapped with one shared paired seed
resampling (analysis.stats), so a report over every grid stays fast and every band is paired by
seed. Tables and figures appear only for grids present in the configurations, so a single-grid
run still reports.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.stats import combine, paired_bootstrap, wilson_interval
from diagym.analysis.studies.reproduce.design import knob_text
from diagym.envs.workflow.params import WorkflowParams

SPEC_KEYS = WorkflowParams.knobs()  # every knob a column of results.csv, a new one included
SUMMARY_KEYS = (
    "grid", "condition", "controller", *SPEC_KEYS,
    "episodes", "success", "success_low", "success_high", "wilson_low", "wilson_high",
    "predicted",
    "mean_completed", "mean_calls", "mean_errors", "mean_checks", "mean_lookups",
    "mean_prep_entries", "mean_cache_entries", "mean_value_bits",
    "failures_dependency", "failures_candidate", "failures_completed",
)
MEAN_FIELDS = (
    "completed", "calls", "errors", "checks", "lookups", "prep_entries", "cache_entries",
    "value_bits",
)
FAILURE_CODES = {"failures_dependency": 1, "failures_candidate": 2, "failures_completed": 3}
# The batched runner's columns (diagym.controllers.workflow.batched.EPISODE_KEYS) that results.csv
# reads; a subset, so a runner column the report does not show (plan_slots) needs no change here.
RESULT_COLUMNS = ("success", *MEAN_FIELDS, "first_failure")
NOT_DERIVED = "not_derived"

# Follow-on grids in appendix order: (appendix table, title).
APPENDIX_TABLES = {
    "work": ("C.1", "Operation count"),
    "memory": ("C.2", "Retention strategy"),
    "observation": ("C.3", "Snapshot cadence and hidden resampling"),
    "recovery": ("C.4", "Recovery and candidate elimination"),
    "locality": ("C.5", "Query locality and state updates"),
    "selection": ("C.6", "Candidate selection and resource controls"),
    "labels": ("C.7", "Operation identifiers"),
}
# How a caption names a spec knob the paper names otherwise; any other knob is named by its
# field name, underscores as spaces (knob_name).
KNOB_NAMES = {
    "n_ops": "N", "depth": "d", "width": "w", "candidates": "b",
    "snapshot_period": "observation", "error_allowance": "R",
}


def knob_name(knob: str) -> str:
    """A spec knob as a caption names it."""
    return KNOB_NAMES.get(knob, knob.replace("_", " "))


def controller_name(name: str) -> str:
    """Display name: "cache-2+scan-4" -> "Cache-2 + Scan-4", "random-schedule" ->
    "Random schedule", "scan-1+eliminate" -> "Scan-1 + eliminate"."""
    parts = []
    for i, part in enumerate(name.split("+")):
        tokens = part.split("-")
        text = part if tokens[-1].isdigit() else " ".join(tokens)
        if i == 0 or tokens[-1].isdigit():
            text = text[:1].upper() + text[1:]
        parts.append(text)
    return " + ".join(parts)


def family_title(family: str) -> str:
    return family[:1].upper() + family[1:]


def group_indices(indices: Sequence[int], key: Callable[[int], Hashable]) -> dict[Any, list[int]]:
    """Configuration indices grouped by key, groups in order of first appearance."""
    groups: dict[Any, list[int]] = {}
    for index in indices:
        groups.setdefault(key(index), []).append(index)
    return groups


def averaging_rows(groups: Sequence[Sequence[int]], n_configs: int) -> np.ndarray:
    """(K, C) coefficients: row k averages the configurations of group k equally."""
    coefficients = np.zeros((len(groups), n_configs))
    for row, members in enumerate(groups):
        coefficients[row, list(members)] = 1.0 / len(members)
    return coefficients


def group_bands(
    success: np.ndarray, groups: Sequence[Sequence[int]], weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paired bootstrap of equal-weight averages of success over each group of configs.

    Only the configurations used are multiplied, so a table over one grid is cheap.
    """
    used = sorted({i for members in groups for i in members})
    position = {index: k for k, index in enumerate(used)}
    local = [[position[i] for i in members] for members in groups]
    per_seed = combine(success[used], averaging_rows(local, len(used)))
    return paired_bootstrap(per_seed, weights)


def validate_episodes(
    configs: Sequence[Any], episodes: dict[str, np.ndarray], keys: Sequence[str]
) -> int:
    """Check every needed episode array is (n_configs, n_seeds); return n_seeds."""
    missing = [key for key in keys if key not in episodes]
    if missing:
        raise ValueError(f"episodes is missing {missing}")
    shape = np.shape(episodes["success"])
    if len(shape) != 2 or shape[0] != len(configs) or shape[1] < 1:
        raise ValueError(
            f"episodes['success'] must have shape ({len(configs)}, n_seeds); got {shape}"
        )
    for key in keys:
        if np.shape(episodes[key]) != shape:
            raise ValueError(f"episodes[{key!r}] has shape {np.shape(episodes[key])}, not {shape}")
    return int(shape[1])


def predicted_array(predicted: np.ndarray | None, n_configs: int) -> np.ndarray:
    if predicted is None:
        return np.full(n_configs, np.nan)
    values = np.asarray(predicted, dtype=np.float64)
    if values.shape != (n_configs,):
        raise ValueError(f"predicted must have shape ({n_configs},); got {values.shape}")
    return values


def collapsed_text(configs: Sequence[Any], groups: Sequence[Sequence[int]]) -> str:
    """What each plotted point averages: the spec knobs that take several values inside a
    group, with their levels ("family (chains, barriers), b (4, 8)"), or "nothing"."""
    varying: dict[str, list[Any]] = {}
    for members in groups:
        for key in SPEC_KEYS:
            levels = list(dict.fromkeys(getattr(configs[i].spec, key) for i in members))
            if len(levels) > 1:
                known = varying.setdefault(key, [])
                known += [v for v in levels if v not in known]
    if not varying:
        return "nothing (one configuration per point)"
    parts = []
    for key, levels in varying.items():
        shown = [knob_text(key, v) if key == "snapshot_period" else str(v) for v in levels]
        parts.append(f"{knob_name(key)} ({', '.join(shown)})")
    return ", ".join(parts)


def summary_rows(
    configs: Sequence[Any],
    episodes: dict[str, np.ndarray],
    predicted: np.ndarray | None,
    weights: np.ndarray,
) -> list[dict[str, Any]]:
    """One dict per configuration, keys SUMMARY_KEYS; rates are fractions in 0..1.

    success_low/high is the paired seed-bootstrap band of the configuration's rate, wilson_*
    the Wilson 95% interval; predicted is a float or "not_derived" (NaN from predictions).
    """
    n_seeds = validate_episodes(configs, episodes, RESULT_COLUMNS)
    prediction = predicted_array(predicted, len(configs))
    success = np.asarray(episodes["success"], dtype=np.float64)
    rate, low, high = paired_bootstrap(success, weights)
    wilson_low, wilson_high = wilson_interval(success.sum(axis=1), n_seeds)
    columns: dict[str, list[Any]] = {
        "success": rate.tolist(), "success_low": low.tolist(), "success_high": high.tolist(),
        "wilson_low": wilson_low.tolist(), "wilson_high": wilson_high.tolist(),
        "predicted": [NOT_DERIVED if np.isnan(p) else p for p in prediction.tolist()],
    }
    for field in MEAN_FIELDS:
        columns[f"mean_{field}"] = np.asarray(episodes[field]).mean(axis=1).tolist()
    first_failure = np.asarray(episodes["first_failure"])
    for key, code in FAILURE_CODES.items():
        columns[key] = (first_failure == code).sum(axis=1).tolist()
    names = list(columns)
    rows = []
    for i, config in enumerate(configs):
        spec = config.spec
        row: dict[str, Any] = {
            "grid": config.grid, "condition": config.condition, "controller": config.controller,
        }
        for key in SPEC_KEYS:
            row[key] = getattr(spec, key)
        row["episodes"] = n_seeds
        for name in names:
            row[name] = columns[name][i]
        rows.append({key: row[key] for key in SUMMARY_KEYS})
    return rows


def write_results_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write summary rows to a CSV whose header is SUMMARY_KEYS, in that order."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SUMMARY_KEYS))
        writer.writeheader()
        writer.writerows(rows)
    return path
