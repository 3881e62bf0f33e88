"""Seed 003's experiments as data: the primary factorial and the seven follow-on grids.

A configuration is a task spec plus a controller; a grid is a list of configurations run on
one block of seeds. Keeping grids as data lets one runner, one statistics module and one
report serve all of them, and lets tests count them against section 5 and Table 2
(49,152 tasks / 393,216 episodes primary; 1,156 configurations / 295,936 episodes follow-on).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from diagym.analysis.studies.seeds import FOLLOW_ON_SEEDS, PRIMARY_SEEDS
from diagym.envs.workflow.params import GRAPH_SHAPES, WorkflowParams

PRIMARY_CONTROLLERS = (
    "exact", "cache-2", "cache-4", "scan-1", "scan-4", "cache-2+scan-4", "random-schedule",
    "uniform-candidate",
)
WORK_CONTROLLERS = ("cache-2", "exact", "random-schedule", "scan-4")
MEMORY_CONTROLLERS = (
    "next-use-2", "cache-2", "cache-4", "residue-8", "precomputed-plan", "stale-8",
)
OBSERVATION_CONTROLLERS = ("cache-2", "exact", "scan-4", "uniform-candidate")
RECOVERY_CONTROLLERS = ("cache-2+eliminate", "scan-1+eliminate", "uniform-candidate", "eliminate")
LOCALITY_CONTROLLERS = ("next-use-2", "cache-2", "exact", "stale-8")
SELECTION_CONTROLLERS = ("exact", "indexed", "scan-1", "sham-check-4", "scan-2", "fixed-check-4")
LABELS_CONTROLLERS = ("cache-2", "exact", "random-schedule", "scan-4")

GRID_NAMES = (
    "primary", "work", "memory", "observation", "recovery", "locality", "selection", "labels",
)
GRID_CHOICES = (*GRID_NAMES, "all")  # what `diagym reproduce --grid` accepts


@dataclass(frozen=True)
class GridConfiguration:
    """One row of a grid: where it belongs, the appendix-style condition label, the task
    spec and the controller."""

    grid: str
    condition: str
    spec: WorkflowParams
    controller: str


def _both_endpoints(
    grid: str, controllers: tuple[str, ...], conditions: list[tuple[str, dict]],
    candidates: tuple[int, ...] = (4, 8), widths: tuple[int, ...] = (4, 8),
) -> list[GridConfiguration]:
    """Every condition x family x b x w x controller, with Table 2's default b and w."""
    rows = []
    for (condition, kwargs), family, b, w, controller in itertools.product(
        conditions, GRAPH_SHAPES, candidates, widths, controllers
    ):
        spec = WorkflowParams(family=family, candidates=b, width=w, **kwargs)
        rows.append(GridConfiguration(grid, condition, spec, controller))
    return rows


def primary() -> list[GridConfiguration]:
    """2 families x 4 depths x b in {2, 4, 8} x w in {1, 2, 4, 8} x snapshot/history x 8."""
    rows = []
    for family, depth, b, w, period, controller in itertools.product(
        GRAPH_SHAPES, (1, 2, 4, 8), (2, 4, 8), (1, 2, 4, 8), (1, 0), PRIMARY_CONTROLLERS
    ):
        spec = WorkflowParams(family=family, n_ops=8, depth=depth, width=w, candidates=b,
                              snapshot_period=period)
        condition = f"d{depth}_b{b}_w{w}_p{period}"
        rows.append(GridConfiguration("primary", condition, spec, controller))
    return rows


def work() -> list[GridConfiguration]:
    conditions = [
        (f"n{n}_p{p}", {"n_ops": n, "depth": d, "snapshot_period": p})
        for n in (4, 8, 16) for d in (2, 4) for p in (0, 1)
    ]
    return _both_endpoints("work", WORK_CONTROLLERS, conditions, widths=(4,))


def memory() -> list[GridConfiguration]:
    conditions = [(f"p{p}", {"n_ops": 16, "depth": 4, "snapshot_period": p}) for p in (0, 4)]
    return _both_endpoints("memory", MEMORY_CONTROLLERS, conditions)


def observation() -> list[GridConfiguration]:
    conditions = [
        (f"p{p}_shock{int(h)}", {"depth": 4, "snapshot_period": p, "hidden_resampling": h})
        for p in (0, 1, 2, 4) for h in (False, True)
    ]
    return _both_endpoints("observation", OBSERVATION_CONTROLLERS, conditions)


def recovery() -> list[GridConfiguration]:
    conditions = [
        (f"r{r}_p{p}", {"depth": 4, "error_allowance": r, "snapshot_period": p})
        for r in (0, 2, 8, 56) for p in (0, 1)
    ]
    return _both_endpoints("recovery", RECOVERY_CONTROLLERS, conditions)


def locality() -> list[GridConfiguration]:
    conditions = [
        (f"{where}_{how}", {"n_ops": 16, "depth": 4, "snapshot_period": 0,
                            "locality": where, "updates": how})
        for where in ("balanced", "clustered", "concentrated") for how in ("additive", "static")
    ]
    return _both_endpoints("locality", LOCALITY_CONTROLLERS, conditions)


def selection() -> list[GridConfiguration]:
    conditions = [(f"b{b}", {"depth": 4, "snapshot_period": 1}) for b in (2, 4, 8)]
    rows = []
    for (condition, kwargs), b in zip(conditions, (2, 4, 8), strict=True):
        rows += _both_endpoints("selection", SELECTION_CONTROLLERS, [(condition, kwargs)],
                                candidates=(b,), widths=(4,))
    return rows


def labels() -> list[GridConfiguration]:
    conditions = [
        (f"reverse{int(rev)}_p{p}",
         {"depth": 4, "labels": "reversed" if rev else "random", "snapshot_period": p})
        for rev in (False, True) for p in (0, 1)
    ]
    return _both_endpoints("labels", LABELS_CONTROLLERS, conditions)


# The spec knobs each grid's condition code names, in the code's order: the code is the
# data's key, the knobs give the words a reader sees (condition_label).
CONDITION_KNOBS = {
    "primary": ("depth", "candidates", "width", "snapshot_period"),
    "work": ("n_ops", "snapshot_period"),
    "memory": ("snapshot_period",),
    "observation": ("snapshot_period", "hidden_resampling"),
    "recovery": ("error_allowance", "snapshot_period"),
    "locality": ("locality", "updates"),
    "selection": ("candidates",),
    "labels": ("labels", "snapshot_period"),
}


def knob_text(knob: str, value: object) -> str:
    """A knob's level in words: snapshot_period 0 -> "history", 2 -> "snapshot every 2"."""
    if knob == "snapshot_period":
        return {0: "history", 1: "snapshots"}.get(int(value), f"snapshot every {value}")
    if knob == "hidden_resampling":
        return "hidden resampling" if value else "no resampling"
    if knob in ("locality", "updates", "labels"):
        noun = {"locality": "queries", "updates": "updates", "labels": "labels"}[knob]
        return f"{value} {noun}"
    symbol = {"n_ops": "N", "depth": "d", "candidates": "b", "width": "w",
              "error_allowance": "R"}[knob]
    return f"{symbol} = {value}"


def condition_label(config: GridConfiguration) -> str:
    """The condition of a configuration in words: "r0_p0" -> "R = 0, history"."""
    return ", ".join(knob_text(knob, getattr(config.spec, knob))
                     for knob in CONDITION_KNOBS[config.grid])


_BUILDERS = {
    "primary": primary, "work": work, "memory": memory, "observation": observation,
    "recovery": recovery, "locality": locality, "selection": selection, "labels": labels,
}


def grid_configurations(name: str) -> list[GridConfiguration]:
    """The configurations of one grid, or of every grid for name="all"."""
    if name == "all":
        return [row for grid in GRID_NAMES for row in _BUILDERS[grid]()]
    if name not in _BUILDERS:
        allowed = " | ".join(("all",) + GRID_NAMES)
        raise ValueError(f"grid must be one of {allowed}; got {name!r}")
    return _BUILDERS[name]()


def grid_seeds(name: str) -> np.ndarray:
    """Seeds 0..255 for the primary factorial, 10000..10255 for every follow-on grid."""
    if name not in _BUILDERS:
        raise ValueError(f"grid must be one of {' | '.join(GRID_NAMES)}; got {name!r}")
    return PRIMARY_SEEDS if name == "primary" else FOLLOW_ON_SEEDS
