"""Seed 003's tables: Tables 3-6, the appendix's C.1-C.7 and the follow-on contrasts (F.1),
from the episode arrays, each with its caption; a table appears only for grids present. They
are built as data (tables_blocks) and rendered to Markdown from it (tables_markdown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from diagym.analysis.stats import (
    EFFECT_FACTORS,
    combine,
    endpoint_effects,
    paired_bootstrap,
    wilson_interval,
)
from diagym.analysis.studies.reproduce.design import condition_label
from diagym.analysis.studies.reproduce.report import (
    APPENDIX_TABLES,
    NOT_DERIVED,
    averaging_rows,
    collapsed_text,
    controller_name,
    family_title,
    group_bands,
    group_indices,
    predicted_array,
    validate_episodes,
)
from diagym.analysis.studies.study_tables import Block, Heading, markdown, study_table

FACTOR_TITLES = {
    "depth": "Depth", "candidates": "Candidates", "width": "Width", "observation": "History",
}
# Table 5's representative cell; the note under the table states it.
CALIBRATION_CELL = {"candidates": 2, "width": 1, "snapshot_period": 1}


def _pct(value: float) -> str:
    """Percent with 2 decimals; rounding noise never prints as "-0.00"."""
    return f"{round(100.0 * float(value), 2) + 0.0:.2f}"


def _band(low: float, high: float) -> str:
    return f"[{_pct(low)}, {_pct(high)}]"


def _table3(
    configs: Sequence[Any], primary: list[int], success: np.ndarray, prediction: np.ndarray,
    weights: np.ndarray,
) -> list[Block]:
    groups = group_indices(primary, lambda i: (configs[i].spec.family, configs[i].controller))
    estimate, low, high = group_bands(success, list(groups.values()), weights)
    rows = []
    for k, ((family, controller), members) in enumerate(groups.items()):
        values = prediction[members]
        shown = NOT_DERIVED if np.isnan(values).any() else _pct(float(values.mean()))
        rows.append((
            family_title(family), controller_name(controller), _pct(estimate[k]),
            _band(low[k], high[k]), shown,
        ))
    caption = (
        "Table 3. Success per family x controller, averaged equally over that family's primary "
        "cells (depth x candidates x width x observation); paired seed-bootstrap 95% band of "
        "that average; predicted averaged over the same cells."
    )
    headers = ("Family", "Controller", "Success (%)", "95% interval", "Predicted (%)")
    return [study_table(headers, rows, caption)]


def _table4(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray) -> list[Block]:
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
        (family_title(family), controller_name(controller),
         *(_pct(values[f]) for f in EFFECT_FACTORS))
        for (family, controller), values in main.items()
    ]
    caption = (
        "Table 4. High-minus-low main contrasts in percentage points (depth 8-1, candidates "
        "8-2, width 8-1, history minus snapshot), each averaging all other factor levels "
        "equally within family x controller."
    )
    headers = ("Family", "Controller", *(FACTOR_TITLES[f] for f in EFFECT_FACTORS))
    main_table = study_table(headers, main_rows, caption)
    inter_rows = [
        (family_title(e["family"]), controller_name(e["controller"]),
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
    return [main_table, study_table(headers, inter_rows, caption)]


def _table5(
    configs: Sequence[Any], primary: list[int], success: np.ndarray, prediction: np.ndarray,
) -> list[Block] | None:
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
            family_title(configs[i].spec.family), configs[i].spec.depth,
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
    return [study_table(headers, rows, caption), note]


def _table6(configs: Sequence[Any], indices: list[int],
            episodes: dict[str, np.ndarray]) -> list[Block]:
    groups = group_indices(indices, lambda i: (configs[i].spec.candidates, configs[i].controller))
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
    return [study_table(headers, rows, caption)]


def _appendix_table(
    grid: str, configs: Sequence[Any], indices: list[int], success: np.ndarray,
    calls: np.ndarray, weights: np.ndarray,
) -> list[Block]:
    label, title = APPENDIX_TABLES[grid]
    groups = group_indices(indices, lambda i: (configs[i].condition, configs[i].controller))
    estimate, low, high = group_bands(success, list(groups.values()), weights)
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
    return [Heading(f"{label}. {title}"), study_table(headers, rows, caption)]


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
                         success: np.ndarray, weights: np.ndarray) -> list[Block] | None:
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
    coefficients = (averaging_rows(rows_plus, len(configs))
                    - averaging_rows(rows_minus, len(configs)))
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
    return [Heading("F.1. Follow-on paired contrasts"), study_table(headers, rows, caption)]


def tables_blocks(
    configs: Sequence[Any],
    episodes: dict[str, np.ndarray],
    predicted: np.ndarray | None,
    weights: np.ndarray,
) -> list[Block]:
    """Tables shaped like the paper's Tables 3-6 and C.1-C.7, for grids present, as data with
    their headings and captions: tables_markdown and the report's JSON both come from it."""
    validate_episodes(configs, episodes, ("success", "calls", "checks", "lookups", "prep_entries"))
    prediction = predicted_array(predicted, len(configs))
    success = np.asarray(episodes["success"], dtype=np.float64)
    by_grid = group_indices(range(len(configs)), lambda i: configs[i].grid)
    blocks: list[Block] = [
        "Seed 003: Anand, Wang and Du, *What Structurally Breaks an Agent? Auditing "
        "Difficulty in Stateful Tool-Use Workflows*, arXiv:2611.03227."]
    primary = by_grid.get("primary", [])
    if primary:
        blocks += [Heading("Table 3. Measured and predicted success"),
                   *_table3(configs, primary, success, prediction, weights)]
        blocks.append(Heading("Table 4. Main contrasts and endpoint interactions"))
        try:
            blocks += _table4(configs, success, weights)
        except ValueError as error:  # e.g. a smoke run over part of the primary grid
            blocks.append(f"Table 4 omitted: {error}.")
        table5 = _table5(configs, primary, success, prediction)
        if table5 is not None:
            blocks += [Heading("Table 5. Random-schedule calibration"), *table5]
    if "selection" in by_grid:
        blocks += [Heading("Table 6. Selection ablation"),
                   *_table6(configs, by_grid["selection"], episodes)]
    calls = np.asarray(episodes["calls"]).mean(axis=1)
    for grid in APPENDIX_TABLES:
        if grid in by_grid:
            blocks += _appendix_table(grid, configs, by_grid[grid], success, calls, weights)
    contrasts = _follow_on_contrasts(configs, by_grid, success, weights)
    if contrasts is not None:
        blocks += contrasts
    return blocks


def tables_markdown(
    configs: Sequence[Any],
    episodes: dict[str, np.ndarray],
    predicted: np.ndarray | None,
    weights: np.ndarray,
) -> str:
    """tables_blocks as Markdown."""
    return markdown(tables_blocks(configs, episodes, predicted, weights)) + "\n"
