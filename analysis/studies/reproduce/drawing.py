"""When and where seed 003's profile figures are drawn: each grid's figures as soon as that
grid has played, in drawing processes started with the study.

Why a module of its own: drawing the eleven figures takes longer than playing the 689,152
episodes, and it is independent of the tables. The drawing processes are started (and
import matplotlib) while the grids play, a grid's figures are handed to them as soon as its
episodes exist, and they draw beside the remaining grids and the tables; what each figure
shows is figures.py's alone, and a figure drawn in a process is byte-identical to the same
figure drawn in this one (tests/analysis/test_report.py). Figures are written into a staging
folder and moved into place only when all are drawn, so a study that fails part-way leaves
no partial set of pictures beside its outputs.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.plotting import save
from diagym.analysis.stats import DEFAULT_RESAMPLES, bootstrap_weights
from diagym.analysis.studies.reproduce.figures import (
    FIGURE_NAMES,
    figure_names,
    grid_figure_jobs,
    grid_seeds_of,
)
from diagym.analysis.studies.reproduce.report import group_indices, validate_episodes

# (builder, its arguments, the grid's configurations, their success (configs, seeds), path)
Job = tuple[Any, tuple[Any, ...], Sequence[Any], np.ndarray, Path]


class _Painter:
    """Draws one figure job with the study's bootstrap weights: the given ones, or drawn
    once per seed count with `resamples` (the tables' weights, as analysis.stats draws them)."""

    def __init__(self, weights: np.ndarray | None, resamples: int) -> None:
        self.weights = weights
        self.resamples = resamples
        self._drawn: dict[int, np.ndarray] = {}

    def weights_for(self, n_seeds: int) -> np.ndarray:
        if self.weights is not None:
            return self.weights
        if n_seeds not in self._drawn:
            self._drawn[n_seeds] = bootstrap_weights(n_seeds, resamples=self.resamples)
        return self._drawn[n_seeds]

    def draw(self, job: Job) -> tuple[Path, float]:
        """The figure written to its path, and the seconds it took."""
        start = time.perf_counter()
        build, args, configs, success, path = job
        rates = np.asarray(success, dtype=np.float64)
        save(build(configs, rates, self.weights_for(rates.shape[1]), *args), path)
        return path, time.perf_counter() - start


_PAINTER: _Painter | None = None  # a drawing process's painter


def _start_drawing(weights: np.ndarray | None, resamples: int) -> None:
    """A drawing process's start: Ctrl-C is the study's to handle (it shuts the processes
    down), SIGTERM ends the process, and matplotlib is imported and its font loaded by one
    small picture, while the grids still play."""
    global _PAINTER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _PAINTER = _Painter(weights, resamples)
    import io

    from diagym.analysis.plotting import new_figure

    figure, (axis,) = new_figure(1, 1.0, 1.0)
    axis.set_title("warm-up", fontsize=9)
    figure.savefig(io.BytesIO(), format="png")


def _ready() -> None:
    """Nothing: submitted once so the drawing processes start with the study."""


def _draw_there(job: Job) -> tuple[Path, float]:
    assert _PAINTER is not None, "_start_drawing runs first in every drawing process"
    return _PAINTER.draw(job)


def drawing_workers(figures: int, workers: int | None = None) -> int:
    """Processes for `figures` figures: `workers`, or one per core, at most one per figure;
    1 draws them in this process."""
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    return max(1, min(workers, figures))


class ProfileDrawer:
    """Draws the profile figures of each grid handed to `add_grid` into `out_dir`.

    With several workers the figures are drawn in processes started here (so started before
    the grids play) as soon as their grid arrives; with one, in this process when `paths` is
    called, after the other stages. `paths` waits for every figure and moves them into
    `out_dir`; leaving the `with` block any other way stops the processes and writes nothing.
    `drawing_seconds` adds up how long each figure took to draw, wherever it was drawn.
    """

    def __init__(self, out_dir: str | Path, figures: int, weights: np.ndarray | None = None,
                 resamples: int = DEFAULT_RESAMPLES, seeds: dict[str, Any] | None = None,
                 workers: int | None = None) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self._staging = Path(tempfile.mkdtemp(prefix=".profiles-", dir=self.out))
        self._seeds_of = grid_seeds_of(seeds)
        self._painter = _Painter(weights, resamples)
        self._waiting: list[Job] = []
        self._drawing: list[Future[tuple[Path, float]]] = []
        self._pool: ProcessPoolExecutor | None = None
        self.drawing_seconds = 0.0
        if drawing_workers(figures, workers) > 1:
            self._pool = ProcessPoolExecutor(max_workers=drawing_workers(figures, workers),
                                             initializer=_start_drawing,
                                             initargs=(weights, resamples))
            self._pool.submit(_ready)

    def add_grid(self, configs: Sequence[Any], success: np.ndarray) -> None:
        """Draw the figures of one grid's configurations and their success (configs, seeds)."""
        if not len(configs):
            return
        for name, (build, args) in grid_figure_jobs(configs, self._seeds_of(configs[0].grid)
                                                    ).items():
            job: Job = (build, args, list(configs), np.asarray(success), self._staging / name)
            if self._pool is None:
                self._waiting.append(job)
            else:
                self._drawing.append(self._pool.submit(_draw_there, job))

    def paths(self) -> list[Path]:
        """Every figure drawn, moved into out_dir; their paths in FIGURE_NAMES order."""
        drawn = [self._painter.draw(job) for job in self._waiting]
        drawn += [future.result() for future in self._drawing]
        self._waiting, self._drawing = [], []
        self.drawing_seconds += sum(seconds for _, seconds in drawn)
        names = {path.name for path, _ in drawn}
        paths = []
        for name in (name for name in FIGURE_NAMES if name in names):
            paths.append(self.out / name)
            os.replace(self._staging / name, paths[-1])
        self.close()
        return paths

    def close(self) -> None:
        """Stop the drawing processes (figures not yet drawn are dropped) and the staging."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        shutil.rmtree(self._staging, ignore_errors=True)

    def __enter__(self) -> ProfileDrawer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def study_figures(grids: Sequence[str]) -> int:
    """How many profile figures the grids draw."""
    return sum(len(figure_names(grid)) for grid in grids)


def plot_profiles(
    configs: Sequence[Any], episodes: dict[str, np.ndarray], out_dir: str | Path,
    weights: np.ndarray | None = None, seeds: dict[str, Any] | None = None,
    workers: int | None = None,
) -> list[Path]:
    """Write figures.profile_figures as PNGs into out_dir; returns the paths written. The
    figures are drawn by `workers` processes (None: one per core, at most one per figure);
    `weights` and `seeds` as profile_figures takes them."""
    validate_episodes(configs, episodes, ("success",))
    grids = group_indices(range(len(configs)), lambda i: configs[i].grid)
    with ProfileDrawer(out_dir, study_figures(list(grids)), weights=weights, seeds=seeds,
                       workers=workers) as drawer:
        for members in grids.values():
            drawer.add_grid([configs[i] for i in members], episodes["success"][members])
        return drawer.paths()
