"""Behaviour of the reproduction study's report on synthetic episode arrays in the batched
runner's format."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from diagym.analysis.plotting import save
from diagym.analysis.stats import bootstrap_weights, paired_bootstrap, wilson_interval
from diagym.analysis.studies.reproduce.design import GRID_NAMES, grid_configurations
from diagym.analysis.studies.reproduce.drawing import ProfileDrawer, plot_profiles
from diagym.analysis.studies.reproduce.figures import profile_figures
from diagym.analysis.studies.reproduce.report import (
    APPENDIX_TABLES,
    SUMMARY_KEYS,
    controller_name,
    summary_rows,
    write_results_csv,
)
from diagym.analysis.studies.reproduce.tables import tables_blocks, tables_markdown
from diagym.analysis.studies.study_tables import StudyTable

N_SEEDS = 16
INT_FIELDS = ("completed", "calls", "errors", "checks", "lookups", "prep_entries",
              "cache_entries", "value_bits", "plan_slots")
ALL = grid_configurations("all")


def synthetic_episodes(n_configs: int, n_seeds: int = N_SEEDS, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    episodes: dict[str, np.ndarray] = {
        "success": rng.random((n_configs, n_seeds)) < rng.random((n_configs, 1)),
    }
    for key in INT_FIELDS:
        episodes[key] = rng.integers(0, 20, (n_configs, n_seeds), dtype=np.int64)
    episodes["calls"] += 1
    episodes["first_failure"] = np.where(
        episodes["success"], 0, rng.integers(1, 4, (n_configs, n_seeds))
    ).astype(np.int8)
    return episodes


@pytest.fixture(scope="module")
def weights() -> np.ndarray:
    return bootstrap_weights(N_SEEDS, resamples=200)


@pytest.fixture(scope="module")
def all_episodes() -> dict:
    return synthetic_episodes(len(ALL))


# -- summary rows and CSV --------------------------------------------------------------------
def test_summary_rows_keys_counts_and_rates(all_episodes: dict, weights: np.ndarray) -> None:
    predicted = np.linspace(0, 1, len(ALL))
    predicted[::7] = np.nan
    rows = summary_rows(ALL, all_episodes, predicted, weights)
    assert len(rows) == len(ALL)
    success = all_episodes["success"].astype(float)
    _, band_low, band_high = paired_bootstrap(success, weights)
    w_low, w_high = wilson_interval(success.sum(axis=1), N_SEEDS)
    for i in (0, 1, 500, len(ALL) - 1):
        row, config = rows[i], ALL[i]
        assert tuple(row) == SUMMARY_KEYS
        assert (row["grid"], row["condition"], row["controller"]) == (
            config.grid, config.condition, config.controller)
        assert row["family"] == config.spec.family and row["depth"] == config.spec.depth
        assert row["episodes"] == N_SEEDS
        assert row["success"] == pytest.approx(success[i].mean())
        assert 0.0 <= row["success_low"] <= row["success"] <= row["success_high"] <= 1.0
        assert row["success_low"] == pytest.approx(band_low[i])
        assert row["success_high"] == pytest.approx(band_high[i])
        assert (row["wilson_low"], row["wilson_high"]) == pytest.approx((w_low[i], w_high[i]))
        if np.isnan(predicted[i]):
            assert row["predicted"] == "not_derived"
        else:
            assert row["predicted"] == pytest.approx(predicted[i])
        assert row["mean_calls"] == pytest.approx(all_episodes["calls"][i].mean())
        assert row["mean_value_bits"] == pytest.approx(all_episodes["value_bits"][i].mean())
        failures = [row["failures_dependency"], row["failures_candidate"],
                    row["failures_completed"]]
        for code, count in enumerate(failures, start=1):
            assert count == int((all_episodes["first_failure"][i] == code).sum())
        assert sum(failures) + success[i].sum() == N_SEEDS


def test_summary_rows_accept_missing_predictions(weights: np.ndarray) -> None:
    configs = grid_configurations("selection")
    rows = summary_rows(configs, synthetic_episodes(len(configs)), None, weights)
    assert {row["predicted"] for row in rows} == {"not_derived"}


def test_bad_shapes_are_rejected(weights: np.ndarray) -> None:
    configs = grid_configurations("selection")
    episodes = synthetic_episodes(len(configs) - 1)
    with pytest.raises(ValueError, match="shape"):
        summary_rows(configs, episodes, None, weights)
    episodes = synthetic_episodes(len(configs))
    episodes["calls"] = episodes["calls"][:, :3]
    with pytest.raises(ValueError, match="calls"):
        tables_markdown(configs, episodes, None, weights)
    del episodes["lookups"]
    with pytest.raises(ValueError, match="missing"):
        summary_rows(configs, episodes, None, weights)
    with pytest.raises(ValueError, match="predicted"):
        summary_rows(configs, synthetic_episodes(len(configs)), np.zeros(3), weights)


def test_results_csv_round_trip(tmp_path: Path, weights: np.ndarray) -> None:
    configs = grid_configurations("memory")
    predicted = np.full(len(configs), np.nan)
    predicted[0] = 0.25
    rows = summary_rows(configs, synthetic_episodes(len(configs)), predicted, weights)
    path = write_results_csv(rows, tmp_path / "out" / "results.csv")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == SUMMARY_KEYS
        read = list(reader)
    assert len(read) == len(configs)
    assert read[0]["predicted"] == "0.25" and read[1]["predicted"] == "not_derived"
    assert float(read[3]["success"]) == pytest.approx(rows[3]["success"])
    assert read[3]["controller"] == configs[3].controller


# -- Markdown tables -------------------------------------------------------------------------
def _section(markdown: str, heading: str) -> str:
    start = markdown.index(heading)
    end = markdown.find("\n### ", start + 1)
    return markdown[start:] if end < 0 else markdown[start:end]


def _table_lines(section: str) -> list[list[str]]:
    """Data rows of every table in a section (headers and separators dropped)."""
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    data = [
        line for k, line in enumerate(lines)
        if not line.startswith("| ---")
        and not (k + 1 < len(lines) and lines[k + 1].startswith("| ---"))
    ]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in data]


def test_tables_for_every_grid(all_episodes: dict, weights: np.ndarray) -> None:
    markdown = tables_markdown(ALL, all_episodes, np.full(len(ALL), 0.5), weights)
    for heading in ("### Table 3.", "### Table 4.", "### Table 5.", "### Table 6."):
        assert heading in markdown
    for label, _ in APPENDIX_TABLES.values():
        assert f"### {label}." in markdown
    cited, *sections = markdown.split("\n\n### ")
    assert cited.startswith("Seed 003: Anand, Wang and Du") and "arXiv:2611.03227" in cited
    assert len(sections) == 4 + len(APPENDIX_TABLES) + 1  # + the follow-on contrasts
    for section in sections:
        # a one-line caption starting "Table" before every table
        body = section.splitlines()[1:]  # below the heading
        captions = [line for line in body if line.startswith("Table ")]
        separators = [line for line in body if line.startswith("| ---")]
        assert len(captions) == len(separators) >= 1
    table3 = _table_lines(_section(markdown, "### Table 3."))
    families_controllers = {(c.spec.family, c.controller) for c in ALL if c.grid == "primary"}
    assert len(table3) == len(families_controllers)
    assert all(row[4] == "50.00" for row in table3)
    table4 = _section(markdown, "### Table 4.")
    header = next(line for line in table4.splitlines() if line.startswith("| Family"))
    assert header == "| Family | Controller | Depth | Candidates | Width | History |"
    interactions = _table_lines(table4)[len(families_controllers):]
    assert len(interactions) == 11 * len(families_controllers)
    assert {row[3] for row in interactions} == {"2", "3", "4"}


def test_only_grids_present_are_tabled(weights: np.ndarray) -> None:
    work = grid_configurations("work")
    markdown = tables_markdown(work, synthetic_episodes(len(work)), None, weights)
    assert "### C.1." in markdown
    for absent in ("Table 3", "Table 4", "Table 5", "Table 6", "C.2", "C.7"):
        assert absent not in markdown
    rows = _table_lines(_section(markdown, "### C.1."))
    conditions = {(c.condition, c.controller) for c in work}
    assert len(rows) == len(conditions)


def test_partial_primary_grid_still_reports(weights: np.ndarray) -> None:
    configs = grid_configurations("primary")[:100]
    markdown = tables_markdown(configs, synthetic_episodes(len(configs)), None, weights)
    assert "### Table 3." in markdown
    assert "Table 4 omitted" in markdown and "full factorial" in markdown


def test_table3_averages_cells_with_a_paired_band(weights: np.ndarray) -> None:
    configs = grid_configurations("primary")
    episodes = synthetic_episodes(len(configs))
    always = [i for i, c in enumerate(configs) if c.controller == "exact"]
    episodes["success"][always] = True
    predicted = np.full(len(configs), 0.125)
    predicted[[i for i, c in enumerate(configs)
               if c.controller == "scan-1" and c.spec.family == "barriers"][0]] = np.nan
    markdown = tables_markdown(configs, episodes, predicted, weights)
    rows = {(r[0], r[1]): r for r in _table_lines(_section(markdown, "### Table 3."))}
    assert rows[("Chains", "Exact")][2:] == ["100.00", "[100.00, 100.00]", "12.50"]
    assert rows[("Barriers", "Scan-1")][4] == "not_derived"
    assert rows[("Chains", "Scan-1")][4] == "12.50"
    members = [i for i, c in enumerate(configs)
               if c.controller == "cache-2" and c.spec.family == "chains"]
    per_seed = episodes["success"][members].mean(axis=0, keepdims=True)
    estimate, low, high = paired_bootstrap(per_seed, weights)
    row = rows[("Chains", "Cache-2")]
    assert row[2] == f"{100 * estimate[0]:.2f}"
    assert row[3] == f"[{100 * low[0]:.2f}, {100 * high[0]:.2f}]"


def test_table4_main_contrast_of_a_depth_pattern(weights: np.ndarray) -> None:
    configs = grid_configurations("primary")
    episodes = synthetic_episodes(len(configs))
    episodes["success"][:] = np.array([c.spec.depth == 1 for c in configs])[:, None]
    markdown = tables_markdown(configs, episodes, None, weights)
    main = _table_lines(_section(markdown, "### Table 4."))[:16]
    for row in main:
        assert row[2:] == ["-100.00", "0.00", "0.00", "0.00"]
    assert "-0.00" not in markdown


def test_table5_uses_the_representative_cell(weights: np.ndarray) -> None:
    configs = grid_configurations("primary")
    episodes = synthetic_episodes(len(configs))
    predicted = np.arange(len(configs)) / len(configs)
    markdown = tables_markdown(configs, episodes, predicted, weights)
    section = _section(markdown, "### Table 5.")
    assert "candidates = 2, width = 1, snapshot_period = 1" in section
    rows = _table_lines(section)
    cells = [i for i, c in enumerate(configs)
             if c.controller == "random-schedule" and c.spec.candidates == 2
             and c.spec.width == 1 and c.spec.snapshot_period == 1]
    assert len(rows) == len(cells)
    for row in rows:
        i = next(i for i in cells if configs[i].spec.family.capitalize() == row[0]
                 and str(configs[i].spec.depth) == row[1])
        k = int(episodes["success"][i].sum())
        low, high = wilson_interval(k, N_SEEDS)
        assert row[2] == f"{100 * k / N_SEEDS:.2f}"
        assert row[3] == f"[{100 * low:.2f}, {100 * high:.2f}]"
        assert row[4] == f"{100 * predicted[i]:.4f}"


def test_table6_checks_per_call_is_a_ratio_of_totals(weights: np.ndarray) -> None:
    configs = grid_configurations("selection")
    episodes = synthetic_episodes(len(configs))
    episodes["checks"] = 3 * episodes["calls"]
    episodes["prep_entries"][:] = np.array([c.spec.candidates * 8 for c in configs])[:, None]
    episodes["lookups"][:] = 2
    markdown = tables_markdown(configs, episodes, None, weights)
    rows = _table_lines(_section(markdown, "### Table 6."))
    assert len(rows) == len({(c.spec.candidates, c.controller) for c in configs})
    for row in rows:
        assert row[3] == "3.00" and row[5] == "2.00"
        assert row[4] == f"{8 * int(row[0]):.2f}"


def test_appendix_average_over_family_b_w(weights: np.ndarray) -> None:
    configs = grid_configurations("labels")
    episodes = synthetic_episodes(len(configs))
    markdown = tables_markdown(configs, episodes, None, weights)
    rows = _table_lines(markdown)
    condition, controller = configs[0].condition, configs[0].controller
    members = [i for i, c in enumerate(configs)
               if (c.condition, c.controller) == (condition, controller)]
    assert len(members) == 8  # 2 families x 2 b x 2 w
    row = next(r for r in rows if r[0] == condition and r[1] == controller_name(controller))
    rate = episodes["success"][members].mean()
    assert row[2] == f"{100 * rate:.2f}"
    assert float(row[3]) <= float(row[2]) <= float(row[4])
    assert row[5] == f"{episodes['calls'][members].mean():.2f}"


@pytest.mark.parametrize("name, shown", [
    ("exact", "Exact"), ("cache-2+scan-4", "Cache-2 + Scan-4"),
    ("random-schedule", "Random schedule"), ("scan-1+eliminate", "Scan-1 + eliminate"),
    ("next-use-2", "Next-use-2"), ("precomputed-plan", "Precomputed plan"),
])
def test_controller_names(name: str, shown: str) -> None:
    assert controller_name(name) == shown


# -- plots -----------------------------------------------------------------------------------
def test_plot_profiles_writes_pngs(tmp_path: Path, all_episodes: dict) -> None:
    paths = plot_profiles(ALL, all_episodes, tmp_path / "plots")
    follow_on = [g for g in GRID_NAMES if g != "primary"]
    assert len(paths) == 4 + len(follow_on)
    names = {path.name for path in paths}
    for factor in ("depth", "candidates", "width", "observation"):
        assert f"profile_primary_{factor}.png" in names
    for grid in follow_on:
        assert f"profile_{grid}.png" in names
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_plot_profiles_for_one_grid(tmp_path: Path) -> None:
    configs = grid_configurations("recovery")
    paths = plot_profiles(configs, synthetic_episodes(len(configs)), tmp_path)
    assert [p.name for p in paths] == ["profile_recovery.png"]
    assert re.fullmatch(r".*\.png", str(paths[0])) and paths[0].stat().st_size > 0


def test_figures_drawn_in_processes_are_the_figures_drawn_here(tmp_path: Path) -> None:
    """Each grid's figures drawn by the drawing processes, grid by grid (as reproduce hands
    them over), are byte for byte the figures built in one process from every grid at once."""
    configs = [*grid_configurations("recovery"), *grid_configurations("memory")]
    episodes = synthetic_episodes(len(configs))
    (tmp_path / "here").mkdir()
    here = [save(figure, tmp_path / "here" / name)
            for name, figure in profile_figures(configs, episodes).items()]
    one = plot_profiles(configs, episodes, tmp_path / "one", workers=1)
    there = plot_profiles(configs, episodes, tmp_path / "there", workers=2)
    assert [p.name for p in here] == [p.name for p in there] == [p.name for p in one]
    assert [p.name for p in here] == ["profile_memory.png", "profile_recovery.png"]
    for a, b, c in zip(here, one, there, strict=True):
        assert a.read_bytes() == b.read_bytes() == c.read_bytes(), a.name


def test_a_study_stopped_part_way_leaves_no_figures(tmp_path: Path) -> None:
    configs = grid_configurations("memory")
    with pytest.raises(RuntimeError, match="stopped"):
        with ProfileDrawer(tmp_path, figures=2, workers=2) as drawer:
            drawer.add_grid(configs, synthetic_episodes(len(configs))["success"])
            raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []


def test_a_drawer_takes_one_grid_at_a_time(tmp_path: Path) -> None:
    configs = [*grid_configurations("recovery"), *grid_configurations("memory")]
    with ProfileDrawer(tmp_path, figures=2, workers=1) as drawer, pytest.raises(
            ValueError, match="configurations of several grids given as grid 'recovery'"):
        drawer.add_grid(configs, synthetic_episodes(len(configs))["success"])


def test_follow_on_contrasts_are_differences_of_group_means(all_episodes: dict,
                                                            weights: np.ndarray) -> None:
    from diagym.analysis.studies.reproduce.tables import FOLLOW_ON_CONTRASTS

    text = tables_markdown(ALL, all_episodes, None, weights)
    section = text[text.index("### F.1. Follow-on paired contrasts"):]
    success = all_episodes["success"].astype(float)
    table_rows = [line for line in section.splitlines() if line.startswith("| ")][2:]
    assert len(table_rows) == len(FOLLOW_ON_CONTRASTS)
    for line, (grid, pc, pcond, mc, mcond, _) in zip(table_rows, FOLLOW_ON_CONTRASTS,
                                                     strict=True):
        plus = [i for i, c in enumerate(ALL) if (c.grid, c.controller, c.condition)
                == (grid, pc, pcond)]
        minus = [i for i, c in enumerate(ALL) if (c.grid, c.controller, c.condition)
                 == (grid, mc, mcond)]
        expected = 100 * (success[plus].mean() - success[minus].mean())
        shown = float(line.split("|")[4])
        assert shown == pytest.approx(expected, abs=0.006)


def test_the_report_reads_only_columns_the_batched_runner_writes() -> None:
    from diagym.analysis.studies.reproduce.report import RESULT_COLUMNS
    from diagym.controllers.workflow.batched import EPISODE_KEYS

    assert set(RESULT_COLUMNS) <= set(EPISODE_KEYS)


def test_the_tables_as_data_are_the_markdown_tables(all_episodes: dict,
                                                    weights: np.ndarray) -> None:
    """tables_blocks (what the report reads) and tables_markdown (the file) hold the same rows:
    the Markdown's data lines, read back here, equal the blocks' rows in order."""
    blocks = tables_blocks(ALL, all_episodes, None, weights)
    rows = [list(row) for b in blocks if isinstance(b, StudyTable) for row in b.rows]
    assert len(rows) > 100
    assert rows == _table_lines(tables_markdown(ALL, all_episodes, None, weights))
