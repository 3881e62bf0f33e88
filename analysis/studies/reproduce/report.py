"""Turn batched episode arrays into seed 003's result rows, tables and profile plots.

Why this module exists: one runner produces, for a list of grid configurations run on one seed
block, arrays of shape (n_configs, n_seeds); this module is the only place that turns them into
the per-configuration results CSV, the Markdown tables with the shapes of the paper's Tables
3-6 and C.1-C.7, and the structural-profile PNGs. Every aggregate is a coefficient row over
configurations bootstrapped with one shared paired seed resampling (analysis.stats), so a report
over every grid stays fast and every band is paired by seed. Tables appear only for grids present
in the configurations, so a single-grid run still reports.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analysis.plotting import (
    CITATIONS,
    add_caption,
    band_lines,
    coincide_note,
    grouped_bars,
    legend_outside,
    new_figure,
    percent_axis,
    save,
    seed_text,
)
from analysis.stats import (
    EFFECT_FACTORS,
    bootstrap_weights,
    combine,
    endpoint_effects,
    paired_bootstrap,
    wilson_interval,
)
from analysis.studies.reproduce.design import (
    CONDITION_KNOBS,
    condition_label,
    grid_seeds,
    knob_text,
)

SPEC_KEYS = (
    "family", "n_ops", "depth", "width", "candidates", "snapshot_period", "hidden_resampling",
    "error_allowance", "locality", "updates", "labels",
)
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
# The batched runner's columns (controllers.workflow.batched.EPISODE_KEYS) that results.csv
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
FACTOR_TITLES = {
    "depth": "Depth", "candidates": "Candidates", "width": "Width", "observation": "History",
}
CITATION_003 = CITATIONS["003"]
# Table 5's representative cell; the note under the table states it.
CALIBRATION_CELL = {"candidates": 2, "width": 1, "snapshot_period": 1}


# -- helpers ---------------------------------------------------------------------------------
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


def _family_name(family: str) -> str:
    return family[:1].upper() + family[1:]


def _pct(value: float) -> str:
    """Percent with 2 decimals; rounding noise never prints as "-0.00"."""
    return f"{round(100.0 * float(value), 2) + 0.0:.2f}"


def _band(low: float, high: float) -> str:
    return f"[{_pct(low)}, {_pct(high)}]"


def _markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _group(indices: Sequence[int], key: Callable[[int], Hashable]) -> dict[Any, list[int]]:
    """Configuration indices grouped by key, groups in order of first appearance."""
    groups: dict[Any, list[int]] = {}
    for index in indices:
        groups.setdefault(key(index), []).append(index)
    return groups


def _averaging_rows(groups: Sequence[Sequence[int]], n_configs: int) -> np.ndarray:
    """(K, C) coefficients: row k averages the configurations of group k equally."""
    coefficients = np.zeros((len(groups), n_configs))
    for row, members in enumerate(groups):
        coefficients[row, list(members)] = 1.0 / len(members)
    return coefficients


def _group_bands(
    success: np.ndarray, groups: Sequence[Sequence[int]], weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paired bootstrap of equal-weight averages of success over each group of configs.

    Only the configurations used are multiplied, so a table over one grid is cheap.
    """
    used = sorted({i for members in groups for i in members})
    position = {index: k for k, index in enumerate(used)}
    local = [[position[i] for i in members] for members in groups]
    per_seed = combine(success[used], _averaging_rows(local, len(used)))
    return paired_bootstrap(per_seed, weights)


def _validate(
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


def _predicted_array(predicted: np.ndarray | None, n_configs: int) -> np.ndarray:
    if predicted is None:
        return np.full(n_configs, np.nan)
    values = np.asarray(predicted, dtype=np.float64)
    if values.shape != (n_configs,):
        raise ValueError(f"predicted must have shape ({n_configs},); got {values.shape}")
    return values


# -- results CSV -----------------------------------------------------------------------------
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
    n_seeds = _validate(configs, episodes, RESULT_COLUMNS)
    prediction = _predicted_array(predicted, len(configs))
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


# -- Markdown tables -------------------------------------------------------------------------
def _table3(
    configs: Sequence[Any], primary: list[int], success: np.ndarray, prediction: np.ndarray,
    weights: np.ndarray,
) -> str:
    groups = _group(primary, lambda i: (configs[i].spec.family, configs[i].controller))
    estimate, low, high = _group_bands(success, list(groups.values()), weights)
    rows = []
    for k, ((family, controller), members) in enumerate(groups.items()):
        values = prediction[members]
        shown = NOT_DERIVED if np.isnan(values).any() else _pct(float(values.mean()))
        rows.append((
            _family_name(family), controller_name(controller), _pct(estimate[k]),
            _band(low[k], high[k]), shown,
        ))
    caption = (
        "Table 3. Success per family x controller, averaged equally over that family's primary "
        "cells (depth x candidates x width x observation); paired seed-bootstrap 95% band of "
        "that average; predicted averaged over the same cells."
    )
    headers = ("Family", "Controller", "Success (%)", "95% interval", "Predicted (%)")
    return caption + "\n\n" + _markdown_table(headers, rows)


def _table4(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray) -> str:
    effects = endpoint_effects(configs, success, weights)
    main: dict[tuple[str, str], dict[str, float]] = {}
    interactions = []
    for effect in effects:
        key = (effect["family"], effect["controller"])
        if effect["order"] == 1:
            main.setdefault(key, {})[effect["factors"][0]] = effect["estimate"]
        else:
            interactions.append(effect)
    main_rows = [
        (_family_name(family), controller_name(controller),
         *(_pct(values[f]) for f in EFFECT_FACTORS))
        for (family, controller), values in main.items()
    ]
    caption = (
        "Table 4. High-minus-low main contrasts in percentage points (depth 8-1, candidates "
        "8-2, width 8-1, history minus snapshot), each averaging all other factor levels "
        "equally within family x controller."
    )
    headers = ("Family", "Controller", *(FACTOR_TITLES[f] for f in EFFECT_FACTORS))
    text = caption + "\n\n" + _markdown_table(headers, main_rows)
    inter_rows = [
        (_family_name(e["family"]), controller_name(e["controller"]),
         " x ".join(FACTOR_TITLES[f].lower() for f in e["factors"]), e["order"],
         _pct(e["estimate"]), _band(e["low"], e["high"]))
        for e in interactions
    ]
    caption = (
        "Table 4 (interactions). Endpoint interactions of orders 2-4 in percentage points: "
        "signed sums over endpoint cells, each cell averaging all unaffected factor levels "
        "equally; paired seed-bootstrap 95% bands."
    )
    headers = ("Family", "Controller", "Interaction", "Order", "Estimate (pp)", "95% interval")
    return text + "\n\n" + caption + "\n\n" + _markdown_table(headers, inter_rows)


def _table5(
    configs: Sequence[Any], primary: list[int], success: np.ndarray, prediction: np.ndarray,
) -> str | None:
    cells = [
        i for i in primary
        if configs[i].controller == "random-schedule"
        and all(getattr(configs[i].spec, k) == v for k, v in CALIBRATION_CELL.items())
    ]
    if not cells:
        return None
    cells.sort(key=lambda i: configs[i].spec.depth)
    order = list(dict.fromkeys(configs[i].spec.family for i in primary))
    cells.sort(key=lambda i: order.index(configs[i].spec.family))
    n_seeds = success.shape[1]
    hits = success[cells].sum(axis=1)
    low, high = wilson_interval(hits, n_seeds)
    rows = []
    for k, i in enumerate(cells):
        exact = prediction[i]
        rows.append((
            _family_name(configs[i].spec.family), configs[i].spec.depth,
            _pct(hits[k] / n_seeds), _band(low[k], high[k]),
            NOT_DERIVED if np.isnan(exact) else f"{100.0 * exact:.4f}",
        ))
    caption = (
        f"Table 5. Random-schedule calibration: one representative primary cell per family x "
        f"depth, {n_seeds} seeds each (no averaging); Wilson 95% binomial intervals."
    )
    note = (
        "Representative cell: candidates = 2, width = 1, snapshot_period = 1 (snapshot). Other "
        "candidate, width and observation cells repeat the same scheduling draws and do not add "
        "trials."
    )
    headers = ("Family", "$d$", "Observed (%)", "Wilson interval", "Exact (%)")
    return caption + "\n\n" + _markdown_table(headers, rows) + "\n\n" + note


def _table6(configs: Sequence[Any], indices: list[int], episodes: dict[str, np.ndarray]) -> str:
    groups = _group(indices, lambda i: (configs[i].spec.candidates, configs[i].controller))
    rate = np.asarray(episodes["success"], dtype=np.float64).mean(axis=1)
    checks = np.asarray(episodes["checks"]).sum(axis=1)
    calls = np.asarray(episodes["calls"]).sum(axis=1)
    prep = np.asarray(episodes["prep_entries"]).mean(axis=1)
    lookups = np.asarray(episodes["lookups"]).mean(axis=1)
    rows = []
    for (b, controller), members in sorted(groups.items(), key=lambda item: item[0][0]):
        total_calls = calls[members].sum()
        per_call = f"{checks[members].sum() / total_calls:.2f}" if total_calls else "n/a"
        rows.append((
            b, controller_name(controller), _pct(rate[members].mean()), per_call,
            f"{prep[members].mean():.2f}", f"{lookups[members].mean():.2f}",
        ))
    caption = (
        "Table 6. Selection grid per b x controller, averaged equally over families: checks per "
        "call = total checks / total calls; build entries = mean preparation entries and lookups "
        "= mean lookup calls per episode."
    )
    headers = ("$b$", "Controller", "Success (%)", "Checks/call", "Build entries", "Lookups")
    return caption + "\n\n" + _markdown_table(headers, rows)


def _appendix_table(
    grid: str, configs: Sequence[Any], indices: list[int], success: np.ndarray,
    calls: np.ndarray, weights: np.ndarray,
) -> str:
    label, title = APPENDIX_TABLES[grid]
    groups = _group(indices, lambda i: (configs[i].condition, configs[i].controller))
    estimate, low, high = _group_bands(success, list(groups.values()), weights)
    rows = [
        (condition, controller_name(controller), _pct(estimate[k]), _pct(low[k]),
         _pct(high[k]), f"{calls[members].mean():.2f}", condition_label(configs[members[0]]))
        for k, ((condition, controller), members) in enumerate(groups.items())
    ]
    caption = (
        f"Table {label}. {title} (grid {grid}): per condition x controller, averaged equally "
        f"over {collapsed_text(configs, list(groups.values()))}; paired seed-bootstrap 95% "
        f"band; calls = mean per episode."
    )
    headers = ("Condition", "Controller", "Success (%)", "Low", "High", "Calls",
               "Condition in words")
    return f"### {label}. {title}\n\n{caption}\n\n" + _markdown_table(headers, rows)


# Section 7's named paired contrasts: (grid, controller and condition of the plus side,
# controller and condition of the minus side, what it measures). Each side averages its
# configurations (families, b, w, depths) equally; both sides share the seed block.
FOLLOW_ON_CONTRASTS = (
    ("work", "cache-2", "n16_p0", "cache-2", "n4_p0", "work N 16 - 4, initial-only snapshots"),
    ("work", "scan-4", "n16_p0", "scan-4", "n4_p0", "work N 16 - 4, scan-limited"),
    ("memory", "next-use-2", "p4", "cache-2", "p4", "next-use minus fixed cache, period 4"),
    ("observation", "cache-2", "p2_shock0", "cache-2", "p0_shock0",
     "snapshot period 2 minus initial-only"),
    ("recovery", "eliminate", "r8_p0", "uniform-candidate", "r8_p0",
     "elimination minus replacement, R = 8"),
    ("locality", "next-use-2", "clustered_additive", "next-use-2", "balanced_additive",
     "clustered minus balanced queries"),
    ("locality", "stale-8", "balanced_static", "stale-8", "balanced_additive",
     "static minus additive updates (stale values)"),
    ("labels", "scan-4", "reverse1_p0", "scan-4", "reverse0_p0", "reversed minus random labels"),
    ("labels", "cache-2", "reverse1_p0", "cache-2", "reverse0_p0", "reversed minus random labels"),
)


def _follow_on_contrasts(configs: Sequence[Any], by_grid: dict[Any, list[int]],
                         success: np.ndarray, weights: np.ndarray) -> str | None:
    labels, rows_plus, rows_minus = [], [], []
    for grid, plus_ctrl, plus_cond, minus_ctrl, minus_cond, meaning in FOLLOW_ON_CONTRASTS:
        members = by_grid.get(grid, [])
        plus = [i for i in members if (configs[i].controller, configs[i].condition)
                == (plus_ctrl, plus_cond)]
        minus = [i for i in members if (configs[i].controller, configs[i].condition)
                 == (minus_ctrl, minus_cond)]
        if plus and minus:
            labels.append((grid, f"{controller_name(plus_ctrl)} {plus_cond} - "
                           f"{controller_name(minus_ctrl)} {minus_cond}", meaning))
            rows_plus.append(plus)
            rows_minus.append(minus)
    if not labels:
        return None
    coefficients = (_averaging_rows(rows_plus, len(configs))
                    - _averaging_rows(rows_minus, len(configs)))
    estimate, low, high = paired_bootstrap(combine(success, coefficients), weights)
    rows = [
        (grid, contrast, meaning, _pct(estimate[k]), _band(low[k], high[k]))
        for k, (grid, contrast, meaning) in enumerate(labels)
    ]
    caption = (
        "Table F.1. Follow-on contrasts named in section 7, in percentage points: each side "
        "averages its configurations (family, b, w, depth) equally; paired seed-bootstrap 95% "
        "band."
    )
    headers = ("Grid", "Contrast", "Measures", "Difference (pp)", "95% interval")
    return (f"### F.1. Follow-on paired contrasts\n\n{caption}\n\n"
            + _markdown_table(headers, rows))


def tables_markdown(
    configs: Sequence[Any],
    episodes: dict[str, np.ndarray],
    predicted: np.ndarray | None,
    weights: np.ndarray,
) -> str:
    """Markdown tables shaped like the paper's Tables 3-6 and C.1-C.7, for grids present."""
    _validate(configs, episodes, ("success", "calls", "checks", "lookups", "prep_entries"))
    prediction = _predicted_array(predicted, len(configs))
    success = np.asarray(episodes["success"], dtype=np.float64)
    by_grid = _group(range(len(configs)), lambda i: configs[i].grid)
    sections = []
    primary = by_grid.get("primary", [])
    if primary:
        sections.append("### Table 3. Measured and predicted success\n\n"
                        + _table3(configs, primary, success, prediction, weights))
        try:
            table4 = _table4(configs, success, weights)
        except ValueError as error:  # e.g. a smoke run over part of the primary grid
            table4 = f"Table 4 omitted: {error}."
        sections.append("### Table 4. Main contrasts and endpoint interactions\n\n" + table4)
        table5 = _table5(configs, primary, success, prediction)
        if table5 is not None:
            sections.append("### Table 5. Random-schedule calibration\n\n" + table5)
    if "selection" in by_grid:
        sections.append("### Table 6. Selection ablation\n\n"
                        + _table6(configs, by_grid["selection"], episodes))
    calls = np.asarray(episodes["calls"]).mean(axis=1)
    for grid in APPENDIX_TABLES:
        if grid in by_grid:
            sections.append(
                _appendix_table(grid, configs, by_grid[grid], success, calls, weights)
            )
    contrasts = _follow_on_contrasts(configs, by_grid, success, weights)
    if contrasts is not None:
        sections.append(contrasts)
    cited = ("Seed 003: Anand, Wang and Du, *What Structurally Breaks an Agent? Auditing "
             "Difficulty in Stateful Tool-Use Workflows*, arXiv:2611.03227.")
    return "\n\n".join([cited, *sections]) + "\n"


# -- plots -----------------------------------------------------------------------------------
# How a spec knob is named in a caption, and the primary factors' knobs.
KNOB_NAMES = {
    "family": "family", "n_ops": "N", "depth": "d", "width": "w", "candidates": "b",
    "snapshot_period": "observation", "hidden_resampling": "hidden resampling",
    "error_allowance": "R", "locality": "locality", "updates": "updates", "labels": "labels",
}
AXIS_NAMES = {"n_ops": "operation count N", "snapshot_period": "observation (feedback)",
              "error_allowance": "error allowance R", "locality": "query locality",
              "candidates": "candidates b", "labels": "operation labels"}
PRIMARY_KNOBS = {"depth": "depth", "candidates": "candidates", "width": "width",
                 "observation": "snapshot_period"}


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
        parts.append(f"{KNOB_NAMES[key]} ({', '.join(shown)})")
    return ", ".join(parts)


def _seed_caption(seeds: Any, n_seeds: int) -> str:
    if seeds is None or len(seeds) != n_seeds:
        return f"{n_seeds} seeds per configuration"
    return f"{seed_text(seeds)}, the same for every configuration"


def _bands(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray,
           members: Sequence[int], key: Callable[[int], tuple[str, Any]],
           levels: Sequence[Any]) -> tuple[dict[str, tuple], list[list[int]]]:
    """Per controller (in order of appearance): mean success (%) and its paired bootstrap
    band at each level; NaN where a controller has no configuration at a level."""
    cells = _group(members, key)
    controllers = list(dict.fromkeys(configs[i].controller for i in members))
    present = [(c, v) for c in controllers for v in levels if (c, v) in cells]
    estimate, low, high = _group_bands(success, [cells[k] for k in present], weights)
    out = {}
    for controller in controllers:
        values = [np.full(len(levels), np.nan) for _ in range(3)]
        for k, (c, v) in enumerate(present):
            if c == controller:
                for row, source in zip(values, (estimate, low, high), strict=True):
                    row[list(levels).index(v)] = 100.0 * source[k]
        out[controller] = tuple(values)
    return out, [cells[k] for k in present]


def _sorted_levels(values: Any) -> list[Any]:
    levels = list(dict.fromkeys(values))
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in levels):
        levels.sort()
    return levels


def _primary_figure(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray,
                    primary: list[int], factor: str, seeds: Any) -> Any:
    families = _group(primary, lambda i: configs[i].spec.family)
    knob = PRIMARY_KNOBS[factor]
    figure, axes = new_figure(len(families), 4.0)
    groups, notes = [], []
    for axis, (family, members) in zip(axes, families.items(), strict=True):
        levels = _sorted_levels(getattr(configs[i].spec, knob) for i in members)
        series, used = _bands(configs, success, weights, members,
                              lambda i: (configs[i].controller, getattr(configs[i].spec, knob)),
                              levels)
        groups += used
        names = {c: controller_name(c) for c in series}
        x_labels = [knob_text(knob, v) for v in levels]
        if factor == "observation":  # two categories: bars, not a line between them
            grouped_bars(axis, x_labels, series, names)
        else:
            note = coincide_note(band_lines(axis, x_labels, series, names), family)
            notes += [note] if note else []
        # y given: nothing sits above the axes, and an automatic title position would measure
        # every tick label again to make sure (a fifth of a figure's drawing time)
        axis.set_title(_family_name(family), fontsize=9, y=1.0)
        axis.set_xlabel(AXIS_NAMES.get(knob, factor), fontsize=8)
        percent_axis(axis)
    legend_outside(figure, axes[-1], "controller")
    caption = (
        f"Seed 003 ({CITATION_003}) primary factorial: success against {factor}, per family; "
        f"each {'bar' if factor == 'observation' else 'point'} averages equally over "
        f"{collapsed_text(configs, groups)}; "
        f"{_seed_caption(seeds, success.shape[1])}; "
        + ("bars" if factor == "observation" else "shaded bands")
        + " are paired seed-bootstrap 95% intervals of the average."
    )
    add_caption(figure, " ".join([caption, *notes]), width=40 * len(families) + 30)
    return figure


def _grid_figure(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray,
                 members: list[int], grid: str, seeds: Any) -> Any:
    """Grouped bars per condition: the first knob of the condition on the x axis and, for a
    two-knob condition, one panel per level of the second knob (no lines across crossed
    factors)."""
    knobs = CONDITION_KNOBS[grid]
    x_knob = knobs[0]
    panel_knob = knobs[1] if len(knobs) > 1 else None
    panels = (_group(members, lambda i: getattr(configs[i].spec, panel_knob))
              if panel_knob else {None: members})
    panel_order = _sorted_levels(panels)
    label, title = APPENDIX_TABLES[grid]
    figure, axes = new_figure(len(panels), 4.4 if len(panels) > 1 else 6.0)
    groups = []
    for axis, level in zip(axes, panel_order, strict=True):
        inside = panels[level]
        levels = _sorted_levels(getattr(configs[i].spec, x_knob) for i in inside)
        series, used = _bands(configs, success, weights, inside,
                              lambda i: (configs[i].controller, getattr(configs[i].spec, x_knob)),
                              levels)
        groups += used
        # a word level ("clustered") reads on its own under an axis label naming the knob
        x_labels = [str(v) if isinstance(v, str) else knob_text(x_knob, v) for v in levels]
        grouped_bars(axis, x_labels, series, {c: controller_name(c) for c in series},
                     rotate=len(x_labels) * max(len(t) for t in x_labels) > 48)
        axis.set_xlabel(AXIS_NAMES.get(x_knob, KNOB_NAMES[x_knob]), fontsize=8)
        if panel_knob is not None:
            axis.set_title(knob_text(panel_knob, level), fontsize=9, y=1.0)  # as above
        percent_axis(axis)
    legend_outside(figure, axes[0], "controller")
    caption = (
        f"Seed 003 ({CITATION_003}) follow-on grid {grid} (Table {label}, {title.lower()}): "
        f"success per condition and controller; each bar averages equally over "
        f"{collapsed_text(configs, groups)}; {_seed_caption(seeds, success.shape[1])}; "
        "error bars are paired seed-bootstrap 95% intervals of the average."
    )
    add_caption(figure, caption, width=45 * len(panels) + 40)
    return figure


Shared = tuple[Sequence[Any], np.ndarray, np.ndarray]  # configs, success, weights


def _figure_jobs(
    configs: Sequence[Any], episodes: dict[str, np.ndarray],
    weights: np.ndarray | None = None, seeds: dict[str, Any] | None = None,
) -> tuple[Shared, dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]]:
    """What every profile figure reads (configurations, success, bootstrap weights) and each
    figure by file name as (builder, its own arguments after those), so the figures can be
    drawn in this process or in several (they are independent) with the shared arrays sent
    once per process, not once per figure."""
    n_seeds = _validate(configs, episodes, ("success",))
    if weights is None:
        weights = bootstrap_weights(n_seeds)
    success = np.asarray(episodes["success"], dtype=np.float64)
    by_grid = _group(range(len(configs)), lambda i: configs[i].grid)
    seeds = dict(seeds or {})

    def seeds_of(grid: str) -> Any:
        return seeds[grid] if grid in seeds else grid_seeds(grid)

    jobs: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
    primary = by_grid.get("primary", [])
    if primary:
        for factor in EFFECT_FACTORS:
            jobs[f"profile_primary_{factor}.png"] = (_primary_figure, (
                primary, factor, seeds_of("primary")))
    for grid in APPENDIX_TABLES:
        if grid in by_grid:
            jobs[f"profile_{grid}.png"] = (_grid_figure, (by_grid[grid], grid, seeds_of(grid)))
    return (configs, success, weights), jobs


def profile_figures(
    configs: Sequence[Any], episodes: dict[str, np.ndarray],
    weights: np.ndarray | None = None, seeds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The structural-profile Figures by file name: per primary factor (one panel per
    family) and per follow-on grid (grouped bars per condition). `weights` are the tables'
    bootstrap weights (drawn afresh with the same defaults when None); `seeds` maps a grid to
    the seeds its episodes were played on (design.grid_seeds when None), for the caption."""
    shared, jobs = _figure_jobs(configs, episodes, weights, seeds)
    return {name: build(*shared, *args) for name, (build, args) in jobs.items()}


_SHARED: Shared | None = None  # a drawing process's copy of what every figure reads


def _share(shared: Shared) -> None:
    global _SHARED
    _SHARED = shared


def _draw(job: tuple[Callable[..., Any], tuple[Any, ...], Path]) -> Path:
    build, args, path = job
    assert _SHARED is not None, "_share runs first in every drawing process"
    return save(build(*_SHARED, *args), path)


def plot_profiles(
    configs: Sequence[Any], episodes: dict[str, np.ndarray], out_dir: str | Path,
    weights: np.ndarray | None = None, seeds: dict[str, Any] | None = None,
    workers: int | None = None,
) -> list[Path]:
    """Write `profile_figures` as PNGs into out_dir; returns the paths written. The figures
    are drawn by `workers` processes (None: one per core, at most one per figure), since
    drawing them is most of the study's time and each is independent."""
    import os

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shared, named = _figure_jobs(configs, episodes, weights, seeds)
    jobs = [(build, args, out / name) for name, (build, args) in named.items()]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(len(jobs), cores or 1) if workers is None else min(workers, len(jobs))
    if workers <= 1:
        return [save(build(*shared, *args), path) for build, args, path in jobs]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, initializer=_share,
                             initargs=(shared,)) as pool:
        return list(pool.map(_draw, jobs))
