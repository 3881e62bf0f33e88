"""Every study figure, drawn from a small real run: a PNG is written, the legend sits outside
every axes, every axis is labelled, the caption names the seeds that were played and the
factors that were averaged, no raw condition code is shown, equal series stay visible, and a
controller has one colour in every figure."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from matplotlib.colors import to_hex

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.plotting import (
    COLOURS,
    PALETTE_ORDER,
    band_lines,
    caption_of,
    colour,
    new_figure,
    save,
    seed_text,
)
from diagym.analysis.studies.reproduce.design import condition_label, grid_configurations
from diagym.analysis.studies.reproduce.figures import profile_figures
from diagym.controllers.workflow.batched import run_many

PNG = b"\x89PNG\r\n\x1a\n"


def _legend_outside(figure: Any) -> None:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    legends = [*figure.legends, *(a.get_legend() for a in figure.axes if a.get_legend())]
    assert legends, "the figure has no legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for axis in figure.axes:
            assert not box.overlaps(axis.get_window_extent(renderer)), (
                f"legend {box} overlaps axes {axis.get_title()!r}")


def _labelled(figure: Any) -> None:
    for axis in figure.axes:
        assert axis.get_xlabel().strip() and axis.get_ylabel().strip(), axis.get_title()


def _legend_colours(figure: Any) -> dict[str, str]:
    """Legend entry -> colour of its handle (a bar's face or a line's colour)."""
    legend = figure.legends[0]
    colours = {}
    for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
        shown = handle.get_facecolor() if hasattr(handle, "get_facecolor") and not hasattr(
            handle, "get_xdata") else handle.get_color()
        colours[text.get_text()] = to_hex(shown)
    return colours


def _tick_texts(figure: Any) -> list[str]:
    return [t.get_text() for a in figure.axes for t in a.get_xticklabels()]


def _check(figure: Any, path: Path) -> None:
    written = save(figure, path)
    assert written.read_bytes()[:8] == PNG and written.stat().st_size > 5000
    _legend_outside(figure)
    _labelled(figure)


# -- reproduce -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reproduction() -> tuple[list, dict, dict]:
    seeds = {"primary": np.arange(0, 4), "work": np.arange(10_000, 10_004),
             "recovery": np.arange(10_000, 10_004), "locality": np.arange(10_000, 10_004)}
    configs, parts = [], []
    for grid, block in seeds.items():
        grid_configs = grid_configurations(grid)
        parts.append(run_many([(c.spec, c.controller) for c in grid_configs], block))
        configs += grid_configs
    episodes = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    return configs, episodes, seeds


def test_reproduce_figures_read_as_paper_figures(reproduction: tuple, tmp_path: Path) -> None:
    configs, episodes, seeds = reproduction
    figures = profile_figures(configs, episodes, seeds=seeds)
    assert set(figures) == {"profile_primary_depth.png", "profile_primary_candidates.png",
                            "profile_primary_width.png", "profile_primary_observation.png",
                            "profile_work.png", "profile_recovery.png", "profile_locality.png"}
    codes = {c.condition for c in configs if c.grid != "primary"}
    for name, figure in figures.items():
        _check(figure, tmp_path / name)
        caption = caption_of(figure)
        grid = "primary" if "primary" in name else name[len("profile_"):-len(".png")]
        assert seed_text(seeds[grid]) in caption, caption
        assert "arXiv:2611.03227" in caption
        shown = " ".join([*_tick_texts(figure), caption, *(a.get_title() for a in figure.axes)])
        raw = [code for code in codes if re.search(rf"\b{re.escape(code)}\b", shown)]
        assert not raw, f"{name} shows raw condition codes {raw}"


def test_captions_name_the_factors_actually_averaged(reproduction: tuple) -> None:
    configs, episodes, seeds = reproduction
    figures = profile_figures(configs, episodes, seeds=seeds)

    def averaged(name: str) -> str:
        return caption_of(figures[name]).split("averages equally over ", 1)[1].split(";")[0]

    work = averaged("profile_work.png")
    # the work grid's condition code omits depth, and its width is fixed at 4
    assert "d (2, 4)" in work and "family (chains, barriers)" in work and "b (4, 8)" in work
    assert "w (" not in work
    depth = averaged("profile_primary_depth.png")
    assert "d (" not in depth and "w (1, 2, 4, 8)" in depth and "b (2, 4, 8)" in depth
    assert "observation (snapshots, history)" in depth
    locality = averaged("profile_locality.png")
    assert locality == "family (chains, barriers), w (4, 8), b (4, 8)"


def test_crossed_conditions_are_bars_in_panels_not_lines(reproduction: tuple) -> None:
    configs, episodes, seeds = reproduction
    figure = profile_figures(configs, episodes, seeds=seeds)["profile_recovery.png"]
    assert [a.get_title() for a in figure.axes] == ["history", "snapshots"]
    for axis in figure.axes:
        # the only Line2D are error-bar caps: markers, never a line joining conditions
        assert all(line.get_linestyle() == "None" for line in axis.get_lines())
        assert [t.get_text() for t in axis.get_xticklabels()] == [
            "R = 0", "R = 2", "R = 8", "R = 56"]
        assert len(axis.patches) == 4 * 4  # conditions x controllers


def test_condition_labels_are_one_to_one_with_codes() -> None:
    configs = grid_configurations("all")
    by_code: dict[tuple[str, str], set[str]] = {}
    for config in configs:
        by_code.setdefault((config.grid, config.condition), set()).add(condition_label(config))
    assert all(len(labels) == 1 for labels in by_code.values())
    per_grid: dict[str, list[str]] = {}
    for (grid, _), labels in by_code.items():
        per_grid.setdefault(grid, []).append(next(iter(labels)))
    assert all(len(set(labels)) == len(labels) for labels in per_grid.values())
    recovery = next(c for c in configs if (c.grid, c.condition) == ("recovery", "r0_p0"))
    assert condition_label(recovery) == "R = 0, history"
    observation = next(c for c in configs
                       if (c.grid, c.condition) == ("observation", "p0_shock0"))
    assert condition_label(observation) == "history, no resampling"


def test_equal_lines_are_dodged_and_named_in_the_caption(reproduction: tuple) -> None:
    configs, episodes, seeds = reproduction
    forced = {key: value.copy() for key, value in episodes.items()}
    exact = [i for i, c in enumerate(configs) if c.grid == "primary" and c.controller == "exact"]
    cache = [i for i, c in enumerate(configs)
             if c.grid == "primary" and c.controller == "cache-4"]
    forced["success"][cache] = forced["success"][exact]  # same order of cells in the grid
    figure = profile_figures(configs, forced, seeds=seeds)["profile_primary_depth.png"]
    assert "Exact and Cache-4 coincide (chains)" in caption_of(figure)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert list(lines["Exact"].get_ydata()) == list(lines["Cache-4"].get_ydata())
    assert not np.array_equal(lines["Exact"].get_xdata(), lines["Cache-4"].get_xdata())


def test_band_lines_returns_coinciding_groups() -> None:
    _, (axis,) = new_figure(1, 4)
    same = ([50.0, 60.0], [40.0, 50.0], [60.0, 70.0])
    groups = band_lines(axis, ["a", "b"], {"exact": same, "cache-2": same,
                                           "scan-1": ([1.0, 2.0], [0.0, 1.0], [2.0, 3.0])})
    assert groups == [["exact", "cache-2"]]


# -- colours ---------------------------------------------------------------------------------
def test_palette_is_one_distinct_colour_per_known_name() -> None:
    assert set(PALETTE_ORDER) == set(COLOURS)
    assert len(set(COLOURS.values())) == len(COLOURS)
    assert colour("my.module:Mine") == colour("my.module:Mine")  # a user's policy: stable


def test_a_controller_has_one_colour_across_figures(reproduction: tuple,
                                                   rl_rows: list) -> None:
    from diagym.analysis.studies.rl_study.report import profile_figure

    configs, episodes, seeds = reproduction
    figures = profile_figures(configs, episodes, seeds=seeds)
    in_lines = _legend_colours(figures["profile_primary_depth.png"])  # lines
    in_bars = _legend_colours(figures["profile_work.png"])  # bars
    in_rl = _legend_colours(profile_figure(rl_rows))
    assert in_lines["Cache-2"] == in_bars["Cache-2"] == in_rl["cache-2"] == colour("cache-2")
    assert in_lines["Exact"] == in_bars["Exact"] == in_rl["exact"] == colour("exact")


# -- rl-study --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rl_rows() -> list:
    """Rows of the rl-study's reference arms (the runner, no training), on 4 held-out seeds."""
    from diagym.analysis.studies.rl_study.design import (
        ENV_ID,
        EVAL_SEEDS,
        FEEDBACK,
        PRESET,
        REFERENCES,
        WIDTHS,
    )
    from diagym.analysis.studies.rl_study.run import _row
    from diagym.controllers.rollout import rollout
    from diagym.controllers.workflow.adapter import ReferencePolicy

    rows = []
    for (feedback, period), width in itertools.product(FEEDBACK.items(), WIDTHS):
        env = gym.make(ENV_ID, **PRESET, width=width, snapshot_period=period)
        for name in REFERENCES:
            records = rollout(env, ReferencePolicy.for_env(name, env), 4,
                              seed=int(EVAL_SEEDS[0]))
            rows.append(_row(name, feedback, width, records, 0))
    return rows


def test_rl_figure_and_table_name_the_seeds_played(rl_rows: list, tmp_path: Path) -> None:
    from diagym.analysis.studies.rl_study.report import format_rows, profile_figure

    figure = profile_figure(rl_rows)
    _check(figure, tmp_path / "rl.png")
    for text in (caption_of(figure), format_rows(rl_rows).splitlines()[0]):
        assert "seeds 10000..10003 (4)" in text and "10255" not in text


# -- dacs-study ------------------------------------------------------------------------------
def test_dacs_figures_label_every_axis_and_count_decisions(tmp_path: Path) -> None:
    from diagym.analysis.studies.dacs_study.design import PHASES, env_kwargs
    from diagym.analysis.studies.dacs_study.report import decisions, phase_figure, plot_study
    from diagym.analysis.studies.dacs_study.run import play_phases, reference_env
    from diagym.analysis.summary import summarise
    from diagym.controllers.registry import make_reference_policy
    from diagym.controllers.rollout import rollout

    results = play_phases(make_reference_policy, episodes=2, phases=("agents",))
    figure = phase_figure(results, "agents")
    _check(figure, tmp_path / "dacs.png")
    assert [a.get_ylabel() for a in figure.axes] == [
        "steering accuracy (%)", "wrong-agent contamination (%)",
        "mean window tokens at steering"]
    assert "seeds 0..1 (2)" in caption_of(figure)
    assert [p.name for p in plot_study(results, tmp_path)] == ["dacs_agents.png"]
    # the decisions behind a bar's Wilson interval, against the summary of a fresh run
    for cell in (PHASES["agents"][2], PHASES["density"][1]):
        env = reference_env({**env_kwargs(cell), "context_mode": "dacs", "window": None})
        steering = summarise(rollout(env, make_reference_policy("dacs-reader", env), 2,
                                     seed=0)).steering
        arm = dataclasses.replace(results[0], cell=cell, episodes=2)
        assert decisions(arm) == steering.decisions


# -- training curve --------------------------------------------------------------------------
def test_training_curve_names_its_evaluation_seeds(tmp_path: Path) -> None:
    import torch

    from diagym.analysis.plotting import curve_figure
    from diagym.analysis.training import EVAL_SEED, TrainConfig, read_curve, train

    torch.set_num_threads(1)
    config = TrainConfig(algo="ppo", env="StatefulWorkflow-v0",
                         env_kwargs={"n_ops": 4, "depth": 2, "width": 1, "candidates": 2},
                         steps=256, n_envs=2, eval_episodes=3, joint_actions=False)
    train(config, tmp_path)
    assert (tmp_path / "curve.png").read_bytes()[:8] == PNG
    figure = curve_figure(read_curve(tmp_path / "curve.csv"), "ppo", "ppo", range(
        EVAL_SEED, EVAL_SEED + 3), 3)
    _legend_outside(figure)
    _labelled(figure)
    assert f"seeds {EVAL_SEED}..{EVAL_SEED + 2} (3)" in caption_of(figure)
