"""The RL capacity study (analysis/studies/rl_study/capacity.py): the Spearman analysis
recovers programmed orderings, behaves as a rank statistic should, the pipeline trains,
diagnoses and writes one line per checkpoint, and a rerun trains nothing."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.analysis.cli.main import main
from diagym.analysis.studies.rl_study import capacity
from diagym.analysis.studies.rl_study.capacity import RUNS_NAME, CapacityRow, load_rows
from diagym.analysis.studies.rl_study.capacity_report import grouped_rho, lapse_rho, retention_rho
from tests.analysis.error_lines import one_error_line

WIDTHS = (4, 16, 64)


def _row(width: int, seed: int, checkpoint: int, retention: int,
         epsilon: float = 0.1) -> CapacityRow:
    return CapacityRow(arch="entity-lstm", width=width, seed=seed, checkpoint=checkpoint,
                       steps=checkpoint, retention=retention, retention_low=0,
                       retention_high=8, best=f"cache-{retention}", epsilon=epsilon,
                       epsilon_low=0.0, epsilon_high=1.0, success=0.5, success_low=0.4,
                       success_high=0.6, episodes=10, diagnosis_episodes=10, verdict="")


def test_retention_that_rises_with_width_gives_rho_one_and_a_point_interval() -> None:
    rows = [_row(w, s, 100, k) for w, k in zip(WIDTHS, (1, 2, 4), strict=True)
            for s in (0, 1)]
    rho = retention_rho(rows)
    assert (rho.rho, rho.low, rho.high, rho.n) == (1.0, 1.0, 1.0, 6)
    # of the 6! pairings of the values with the widths, 2! 2! 2! give rho +1 and as many -1
    assert rho.p_value == pytest.approx(2 * 8 / 720)
    falling = retention_rho([_row(w, s, 100, 8 - k) for w, k in
                             zip(WIDTHS, (1, 2, 4), strict=True) for s in (0, 1)])
    assert (falling.rho, falling.low, falling.high) == (-1.0, -1.0, -1.0)


def test_the_last_checkpoint_is_analysed_unless_one_is_named() -> None:
    early = [_row(w, s, 100, 2) for w in WIDTHS for s in (0, 1)]
    late = [_row(w, s, 200, k) for w, k in zip(WIDTHS, (0, 1, 3), strict=True)
            for s in (0, 1)]
    assert retention_rho(early + late).rho == 1.0
    flat = retention_rho(early + late, checkpoint=100)
    assert math.isnan(flat.rho) and flat.low is None  # no variation: undefined, no interval


def test_one_seed_per_width_has_no_interval() -> None:
    rho = retention_rho([_row(w, 0, 100, k) for w, k in zip(WIDTHS, (2, 1, 3), strict=True)])
    assert rho.rho == pytest.approx(0.5) and rho.low is None and rho.high is None


def test_a_lapse_falling_with_training_gives_rho_minus_one() -> None:
    rows = [_row(w, s, c, 1, epsilon=e) for w in WIDTHS for s in (0, 1)
            for c, e in ((1000, 0.4), (2000, 0.2), (4000, 0.05))]
    rho = lapse_rho(rows)
    assert (rho.rho, rho.low, rho.high, rho.n) == (-1.0, -1.0, -1.0, 18)


groups = st.lists(st.integers(0, 8), min_size=2, max_size=3)


@settings(max_examples=12, deadline=None)
@given(st.tuples(groups, groups, groups))
def test_rho_is_a_rank_statistic_with_an_interval_that_flips_with_the_sign(
        values: tuple[list[int], ...]) -> None:
    rho = grouped_rho(list(zip(WIDTHS, values, strict=True)))
    if math.isnan(rho.rho):
        assert len({v for vs in values for v in vs}) == 1 and rho.low is None
        return
    assert -1.0 <= rho.low <= rho.high <= 1.0 and -1.0 <= rho.rho <= 1.0
    monotone = grouped_rho([(w, [3 * v + 1 for v in vs]) for w, vs in
                            zip(WIDTHS, values, strict=True)])
    assert (monotone.rho, monotone.low, monotone.high) == pytest.approx(
        (rho.rho, rho.low, rho.high))
    mirrored = grouped_rho([(w, [-v for v in vs]) for w, vs in
                            zip(WIDTHS, values, strict=True)])
    assert (mirrored.rho, mirrored.low, mirrored.high) == pytest.approx(
        (-rho.rho, -rho.high, -rho.low))


def test_the_pipeline_trains_diagnoses_and_resumes_without_retraining(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # rollouts of 8 envs x 32 steps and two epochs: the pipeline, not learning, is checked
    design = capacity.CapacityDesign(arch="mlp", widths=(2, 8), seeds=(0,),
                                     checkpoints=(256, 512), budget=24, episodes=8,
                                     hyperparameters={"n_steps": 32, "n_epochs": 2,
                                                      "batch_size": 64})
    first = capacity.run_capacity(design, tmp_path)
    lines = (tmp_path / RUNS_NAME).read_text().splitlines()
    assert len(lines) == 4 == len(first)
    rows = load_rows(tmp_path)
    assert {(r.width, r.checkpoint) for r in rows} == {(2, 256), (2, 512), (8, 256),
                                                       (8, 512)}
    for r in rows:
        assert r.steps >= r.checkpoint and r.diagnosis_episodes == 24 and r.episodes == 8
        assert r.retention_low <= r.retention <= r.retention_high
        assert r.epsilon_low <= r.epsilon <= r.epsilon_high
        assert r.verdict.startswith("retention")
    config = json.loads((tmp_path / "mlp_h8_s0" / "config.json").read_text())
    assert config["hyperparameters"]["policy_kwargs"] == {"lstm_hidden_size": 8}
    assert config["hyperparameters"]["n_steps"] == 32

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished checkpoint was trained again")

    monkeypatch.setattr(capacity, "train", no_training)
    argv = ["rl-study", "--capacity", "2,8", "--arch", "mlp", "--checkpoints", "256,512",
            "--episodes", "8", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == [dataclasses.asdict(r) for r in first]
    assert printed["retention_rho"]["n"] == 2 and (tmp_path / "capacity.md").exists()
    assert (tmp_path / RUNS_NAME).read_text().splitlines() == lines


@pytest.mark.parametrize(("extra", "message"), [
    (["--capacity", "0"], "argument --capacity: must be a comma-separated list of integers "
                          ">= 1; got '0'"),
    (["--capacity", "4", "--checkpoints", "200,100"],
     "--checkpoints: steps must be increasing integers >= 1; got [200, 100]"),
    (["--capacity", "4", "--arch", "entity"],
     "--arch: the capacity study needs one memory architecture, entity-lstm | mlp; got "
     "'entity'"),
    (["--checkpoints", "100"], "--checkpoints: needs --capacity WIDTHS"),
])
def test_bad_capacity_flags_are_one_line(extra: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error_line(["rl-study", "--out", str(tmp_path), *extra], capsys)
    assert message in line
