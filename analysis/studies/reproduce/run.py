"""Seed 003's whole study in one call: run the grids, predict, summarise, tabulate, plot.

This is the pipeline behind `diagym reproduce` and `make demo`: the batched runner
(controllers/workflow/batched.py) plays every configuration, this study's predictions.py
derives what each should score, analysis/stats.py and this study's report.py, tables.py and
figures.py turn the episodes into results.csv, tables.md and the profile plots. Each stage is
its own module; this one only wires them and times them, so the benchmark and the command
line report the same stages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.audit import audit_table
from diagym.analysis.stats import DEFAULT_RESAMPLES, bootstrap_weights
from diagym.analysis.studies.reproduce.design import (
    GRID_CHOICES,
    GRID_NAMES,
    GridConfiguration,
    grid_configurations,
    grid_seeds,
)
from diagym.analysis.studies.reproduce.drawing import ProfileDrawer, study_figures
from diagym.analysis.studies.reproduce.predictions import predict
from diagym.analysis.studies.reproduce.report import summary_rows, write_results_csv
from diagym.analysis.studies.reproduce.tables import tables_blocks
from diagym.analysis.studies.study_tables import Block, Heading, study_table, write_study_tables
from diagym.controllers.executors import Executor, LocalExecutor
from diagym.controllers.provenance import write_provenance
from diagym.controllers.workflow.batched import ControllerAbort, run_many
from diagym.envs.workflow.params import WorkflowParams


@dataclass
class Reproduction:
    """What a reproduction wrote, its size, and how long each stage took (seconds).

    `seconds` are consecutive spans of the wall clock (they add up to the whole): the figures
    are drawn beside the first two stages, so the last is only the wait for the figures not
    drawn by the time the tables are written. `drawing_seconds` adds up how long each figure
    took to draw, wherever and whenever it was drawn."""

    results_csv: Path
    tables_md: Path
    plots: list[Path]
    configurations: int
    episodes: int
    seconds: dict[str, float] = field(default_factory=dict)
    drawing_seconds: float = 0.0


def _table1_blocks() -> list[Block]:
    rows = [(r["family"].capitalize(), r["depth"], r["edges"], r["masks"], r["orders"],
             f"{r['ready_nodes']:.2f}") for r in audit_table(8)]
    caption = ("Masks: reachable sets of completed operations; orders: successful operation "
               "permutations; ready nodes averaged over nonterminal reachable masks.")
    return [Heading("Table 1. Exact structural audit at N = 8", level=2),
            study_table(("Family", "d", "Edges", "Masks", "Orders", "Ready nodes"), rows,
                        caption)]


# The last stage: waiting for the figures still being drawn once the tables are written.
PLOTS_STAGE = "plots after the tables"
POSITIVE_CONTROLS = ("exact", "residue-8", "precomputed-plan", "indexed")


def check_positive_controls(configs: list[GridConfiguration], success: np.ndarray) -> None:
    """Abort like the paper's runner when a designated positive control fails: the
    unrestricted controllers on deterministic tasks, and elimination with R >= N(b-1)."""
    for config, wins in zip(configs, success, strict=True):
        spec = config.spec
        positive = (
            (config.controller in POSITIVE_CONTROLS and not spec.hidden_resampling
             and (config.controller != "residue-8" or 8 % spec.candidates == 0))
            or (config.controller == "eliminate"
                and spec.error_allowance >= spec.n_ops * (spec.candidates - 1))
        )
        if positive and not wins.all():
            raise ControllerAbort(
                f"positive control {config.controller} failed in {config.grid}/"
                f"{config.condition} on {spec}"
            )


Shard = tuple[tuple[tuple[WorkflowParams, str], ...], np.ndarray]


def play_shard(shard: Shard) -> dict[str, np.ndarray]:
    """A few configurations of one grid on its seeds: a pure function of the shard, so the
    arrays do not depend on where it plays."""
    pairs, seeds = shard
    return run_many(pairs, seeds)


def shards(grid: list[GridConfiguration], seeds: np.ndarray, workers: int) -> list[Shard]:
    """The grid's configurations in order, about four shards per worker."""
    size = max(1, -(-len(grid) // (4 * workers)))
    pairs = [(config.spec, config.controller) for config in grid]
    return [(tuple(pairs[start:start + size]), seeds) for start in range(0, len(pairs), size)]


GridArrived = Callable[[list[GridConfiguration], dict[str, np.ndarray]], None]


def run_grids(names: tuple[str, ...], progress: bool = False,
              executor: Executor | None = None, on_grid: GridArrived | None = None,
              ) -> tuple[list[GridConfiguration], dict[str, np.ndarray], np.ndarray]:
    """Configurations, stacked episode arrays (configs, 256 seeds) and predictions; with
    `progress`, one step per configuration (diagym.analysis.progress: a bar, or log lines).
    `executor` (diagym.controllers.executors) plays the shards of configurations (default: one at a
    time here); the arrays come back in configuration order either way. `on_grid` gets each
    grid's configurations and episode arrays as soon as that grid has played and passed its
    positive controls."""
    executor = LocalExecutor() if executor is None else executor
    configs: list[GridConfiguration] = []
    parts: list[dict[str, np.ndarray]] = []
    predicted: list[np.ndarray] = []
    grids = {name: grid_configurations(name) for name in names}
    bar = None
    if progress:
        from diagym.analysis.progress import progress as progress_bar

        bar = progress_bar(total=sum(map(len, grids.values())), desc="reproduce",
                           unit="configuration")

    def arrived(shard: Shard, _result: Any) -> None:
        if bar is not None:
            bar.update(len(shard[0]))

    for name, grid in grids.items():
        seeds = grid_seeds(name)
        played = executor.map(play_shard, shards(grid, seeds, executor.workers),
                              on_result=arrived)
        parts.append({key: np.concatenate([p[key] for p in played]) for key in played[0]})
        check_positive_controls(grid, parts[-1]["success"])
        if on_grid is not None:
            on_grid(grid, parts[-1])
        predicted.append(predict(grid, seeds))
        configs += grid
    if bar is not None:
        bar.close()
    episodes = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    return configs, episodes, np.concatenate(predicted)


def reproduce(grid: str = "all", out: Path = Path("results"), progress: bool = False,
              resamples: int = DEFAULT_RESAMPLES,
              executor: Executor | None = None) -> Reproduction:
    """Run `grid` ("all" or one of GRID_NAMES) and write results.csv, tables.md and PNGs;
    `executor` plays the configurations (run_grids). The figures are drawn by
    drawing.ProfileDrawer, started first: each grid's figures are drawn beside the grids
    still to play and the tables."""
    if grid not in GRID_CHOICES:
        raise ValueError(f"grid must be one of {' | '.join(GRID_CHOICES)}; got {grid!r}")
    names = GRID_NAMES if grid == "all" else (grid,)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    with ProfileDrawer(out, study_figures(names), resamples=resamples) as drawer:
        configs, episodes, predicted = run_grids(
            names, progress=progress, executor=executor,
            on_grid=lambda grid, played: drawer.add_grid(grid, played["success"]))
        seconds["run and predict"] = time.perf_counter() - start

        start = time.perf_counter()
        weights = bootstrap_weights(episodes["success"].shape[1], resamples=resamples)
        rows = summary_rows(configs, episodes, predicted, weights)
        results_csv = write_results_csv(rows, out / "results.csv")
        tables_md = write_study_tables(out / "tables.md", [
            Heading("Seed 003 reproduced by diagym", level=1), *_table1_blocks(),
            *tables_blocks(configs, episodes, predicted, weights)], end="\n\n")
        seconds["statistics and tables"] = time.perf_counter() - start

        start = time.perf_counter()
        plots = drawer.paths()
        seconds[PLOTS_STAGE] = time.perf_counter() - start
    write_provenance(out, {"command": "reproduce", "grids": list(names),
                           "configurations": len(configs),
                           "seeds_per_configuration": int(episodes["success"].shape[1]),
                           "resamples": resamples})
    return Reproduction(
        results_csv=results_csv,
        tables_md=tables_md,
        plots=plots,
        configurations=len(configs),
        episodes=int(episodes["success"].size),
        seconds=seconds,
        drawing_seconds=drawer.drawing_seconds,
    )
