"""Seed 003's structural-profile figures: success against each primary factor (one panel per
family) and per follow-on grid (grouped bars per condition), with paired seed-bootstrap bands
and captions that say what each point averages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from diagym.analysis.plotting import (
    CITATIONS,
    add_caption,
    band_lines,
    coincide_note,
    grouped_bars,
    legend_outside,
    name_figure,
    new_figure,
    percent_axis,
    seed_text,
)
from diagym.analysis.stats import EFFECT_FACTORS, bootstrap_weights
from diagym.analysis.studies.reproduce.design import CONDITION_KNOBS, grid_seeds, knob_text
from diagym.analysis.studies.reproduce.report import (
    APPENDIX_TABLES,
    collapsed_text,
    controller_name,
    family_title,
    group_bands,
    group_indices,
    knob_name,
    validate_episodes,
)

CITATION_003 = CITATIONS["003"]
# How a figure's axis names a spec knob, and the primary factors' knobs.
AXIS_NAMES = {"n_ops": "operation count N", "snapshot_period": "observation (feedback)",
              "error_allowance": "error allowance R", "locality": "query locality",
              "candidates": "candidates b", "labels": "operation labels"}
PRIMARY_KNOBS = {"depth": "depth", "candidates": "candidates", "width": "width",
                 "observation": "snapshot_period"}


def _seed_caption(seeds: Any, n_seeds: int) -> str:
    if seeds is None or len(seeds) != n_seeds:
        return f"{n_seeds} seeds per configuration"
    return f"{seed_text(seeds)}, the same for every configuration"


def _bands(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray,
           members: Sequence[int], key: Callable[[int], tuple[str, Any]],
           levels: Sequence[Any]) -> tuple[dict[str, tuple], list[list[int]]]:
    """Per controller (in order of appearance): mean success (%) and its paired bootstrap
    band at each level; NaN where a controller has no configuration at a level."""
    cells = group_indices(members, key)
    controllers = list(dict.fromkeys(configs[i].controller for i in members))
    present = [(c, v) for c in controllers for v in levels if (c, v) in cells]
    estimate, low, high = group_bands(success, [cells[k] for k in present], weights)
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
    families = group_indices(primary, lambda i: configs[i].spec.family)
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
        axis.set_title(family_title(family), fontsize=9, y=1.0)
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
    return name_figure(figure, f"Primary factorial: success against {factor}, per family")


def _grid_figure(configs: Sequence[Any], success: np.ndarray, weights: np.ndarray,
                 members: list[int], grid: str, seeds: Any) -> Any:
    """Grouped bars per condition: the first knob of the condition on the x axis and, for a
    two-knob condition, one panel per level of the second knob (no lines across crossed
    factors)."""
    knobs = CONDITION_KNOBS[grid]
    x_knob = knobs[0]
    panel_knob = knobs[1] if len(knobs) > 1 else None
    panels = (group_indices(members, lambda i: getattr(configs[i].spec, panel_knob))
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
        axis.set_xlabel(AXIS_NAMES.get(x_knob, knob_name(x_knob)), fontsize=8)
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
    return name_figure(figure, f"Table {label}, {title.lower()}: success per condition and "
                               "controller")


FigureJobs = dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]
# Every profile figure in the order they are listed: the primary factors, then the follow-on
# grids in appendix order.
FIGURE_NAMES = (*(f"profile_primary_{factor}.png" for factor in EFFECT_FACTORS),
                *(f"profile_{grid}.png" for grid in APPENDIX_TABLES))


def figure_names(grid: str) -> list[str]:
    """The profile figures one grid's episodes draw (file names, in FIGURE_NAMES order)."""
    if grid == "primary":
        return [f"profile_primary_{factor}.png" for factor in EFFECT_FACTORS]
    return [f"profile_{grid}.png"] if grid in APPENDIX_TABLES else []


def grid_figure_jobs(configs: Sequence[Any], seeds: Any) -> FigureJobs:
    """The profile figures of one grid's configurations (every one of them of that grid) by
    file name, as (builder, its arguments after (configs, success, weights)): each figure
    reads one grid only, so it can be drawn as soon as that grid has played, in this process
    or another."""
    grid = configs[0].grid
    if any(config.grid != grid for config in configs):
        raise ValueError(f"configurations of several grids given as grid {grid!r}")
    members = list(range(len(configs)))
    if grid == "primary":
        return {name: (_primary_figure, (members, factor, seeds))
                for name, factor in zip(figure_names(grid), EFFECT_FACTORS, strict=True)}
    return {name: (_grid_figure, (members, grid, seeds)) for name in figure_names(grid)}


def grid_seeds_of(seeds: dict[str, Any] | None) -> Callable[[str], Any]:
    """A grid's seeds for its caption: from `seeds` when it names the grid, else the design's."""
    given = dict(seeds or {})
    return lambda grid: given[grid] if grid in given else grid_seeds(grid)


def profile_figures(
    configs: Sequence[Any], episodes: dict[str, np.ndarray],
    weights: np.ndarray | None = None, seeds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The structural-profile Figures by file name: per primary factor (one panel per
    family) and per follow-on grid (grouped bars per condition). `weights` are the tables'
    bootstrap weights (drawn afresh with the same defaults when None); `seeds` maps a grid to
    the seeds its episodes were played on (design.grid_seeds when None), for the caption."""
    n_seeds = validate_episodes(configs, episodes, ("success",))
    weights = bootstrap_weights(n_seeds) if weights is None else weights
    seeds_of = grid_seeds_of(seeds)
    figures = {}
    for grid, members in group_indices(range(len(configs)), lambda i: configs[i].grid).items():
        inside = [configs[i] for i in members]
        success = np.asarray(episodes["success"][members], dtype=np.float64)
        for name, (build, args) in grid_figure_jobs(inside, seeds_of(grid)).items():
            figures[name] = build(inside, success, weights, *args)
    return {name: figures[name] for name in FIGURE_NAMES if name in figures}
