"""Grids as data: sizes as section 5 and Table 2 state them, and the reproduce pipeline."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from diagym.analysis.cli import main
from diagym.analysis.studies.reproduce.design import GRID_NAMES, grid_configurations, grid_seeds
from diagym.analysis.studies.reproduce.report import SUMMARY_KEYS


def test_primary_factorial_size() -> None:
    configs = grid_configurations("primary")
    tasks = {config.spec for config in configs}
    seeds = grid_seeds("primary")
    assert len(tasks) * len(seeds) == 49_152
    assert len(configs) * len(seeds) == 393_216
    assert list(seeds) == list(range(256))


def test_follow_on_grid_sizes() -> None:
    follow_on = [c for name in GRID_NAMES[1:] for c in grid_configurations(name)]
    assert len(follow_on) == 1_156
    assert len(follow_on) * 256 == 295_936
    assert len(set(follow_on)) == len(follow_on)
    for name in GRID_NAMES[1:]:
        assert list(grid_seeds(name)) == list(range(10_000, 10_256))
        families = {c.spec.family for c in grid_configurations(name)}
        assert families == {"chains", "barriers"}  # both families in every grid


def test_unknown_grid_is_rejected_by_name() -> None:
    with pytest.raises(ValueError) as error:
        grid_configurations("mystery")
    assert str(error.value) == (
        "grid must be one of all | primary | work | memory | observation | recovery | "
        "locality | selection | labels; got 'mystery'"
    )


def test_reproduce_writes_results_tables_and_plots(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "--grid", "recovery", "--out", str(tmp_path)]) == 0
    assert "256 configurations, 65,536 episodes" in capsys.readouterr().out
    with (tmp_path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 256
    assert tuple(rows[0]) == SUMMARY_KEYS
    # A positive control of the recovery grid: elimination with the worst-case allowance.
    worst = [r for r in rows if r["controller"] == "eliminate"
             and int(r["error_allowance"]) >= 8 * (int(r["candidates"]) - 1)]
    assert worst and all(float(r["success"]) == 1.0 for r in worst)
    tables = (tmp_path / "tables.md").read_text()
    assert "Table 1." in tables and "C.4" in tables
    assert (tmp_path / "profile_recovery.png").stat().st_size > 0
    made = json.loads((tmp_path / "provenance.json").read_text())
    assert made["run"]["grids"] == ["recovery"] and made["run"]["configurations"] == 256
    assert made["run"]["seeds_per_configuration"] == 256 and made["diagym_version"]


def test_a_failing_positive_control_aborts_the_run() -> None:
    import numpy as np

    from diagym.analysis.studies.reproduce.run import check_positive_controls
    from diagym.controllers.workflow.batched import ControllerAbort

    configs = grid_configurations("selection")
    success = np.ones((len(configs), 4), dtype=bool)
    check_positive_controls(configs, success)
    broken = next(i for i, c in enumerate(configs) if c.controller == "indexed")
    success[broken, 2] = False
    with pytest.raises(ControllerAbort, match="positive control indexed failed in selection/"):
        check_positive_controls(configs, success)
