"""Each battery configuration plays its own block of task seeds, so the episodes the
likelihood multiplies as independent are independent, and the lapse interval holds its level;
a log played before the blocks (every configuration on the same seeds) is still read by the
seeds it records and resumed on its own plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from diagym.analysis.diagnose.battery import (
    BLOCKS,
    DEFAULT_ALLOCATION,
    DEFAULT_BATTERY,
    SEED_BLOCK,
    SHARED,
    first_seed,
)
from diagym.analysis.diagnose.honesty import profile_interval
from diagym.analysis.diagnose.likelihood import (
    LAPSE_GRID,
    SIMULATION_SEED,
    lapse_profile,
    outcome_count,
    simulate_codes,
    with_lapse,
)
from diagym.analysis.diagnose.run import (
    check_battery_seed,
    diagnose_log,
    diagnose_policy,
    mechanism_model,
)
from diagym.controllers.workflow.adapter import ReferencePolicy

RUNS = 60
TRUTH = ("cache-6", 0.05)


def lapse_interval_holds(run: int, plan: str) -> bool:
    """One diagnosis of an agent that is exactly cache-6@0.05, its outcomes simulated through
    the model's own kernel on the task seeds `plan` gives battery seed run * 1000: whether
    cache-6's 95% lapse interval holds 0.05."""
    model = mechanism_model(DEFAULT_BATTERY)
    index = model.index[TRUTH[0]]
    row = with_lapse(model.mechanisms[index].row, TRUTH[1])
    counts = [np.bincount(simulate_codes(spec, row, first_seed(run * 1000, c, plan)
                                         + np.arange(n, dtype=np.int64)),
                          minlength=outcome_count(spec))
              for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, DEFAULT_ALLOCATION,
                                                strict=True))]
    low, high = profile_interval(LAPSE_GRID, lapse_profile(model, counts, index, LAPSE_GRID))
    return low <= TRUTH[1] <= high


def test_the_lapse_interval_of_a_family_member_covers_at_its_level() -> None:
    """>= 93% over 60 seeded runs on the seed plan the diagnosis plays (the shared plan of
    before held the truth in 54 of 60)."""
    held = sum(lapse_interval_holds(run, BLOCKS) for run in range(RUNS))
    assert held >= 0.93 * RUNS, held


def test_each_configuration_plays_its_own_block_of_task_seeds(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    allocation = (2,) * len(DEFAULT_BATTERY)
    diagnosis = diagnose_policy(lambda env: ReferencePolicy.for_env("exact", env),
                                allocation=allocation, seed=7, log=log)
    seeds = [sorted(int(s) for s in c.episodes.columns["task_seed"])
             for c in diagnosis.configurations]
    assert seeds == [[7 + c * SEED_BLOCK, 8 + c * SEED_BLOCK] for c in range(len(seeds))]
    design = [json.loads(line) for line in log.read_text().splitlines()
              if json.loads(line)["type"] == "design"]
    assert design == [{"type": "design", "mode": "fixed", "seed": 7, "seed_plan": BLOCKS}]


def test_a_log_of_the_shared_plan_is_read_and_resumed_on_its_own_seeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log written before the blocks (every configuration on seeds 0, 1, ...; no seed plan
    recorded) is diagnosed from the seeds it holds, and a resume continues those seeds
    rather than starting each configuration's block beside them."""
    from diagym.analysis.diagnose import run

    log = tmp_path / "old.jsonl"
    policy = lambda env: ReferencePolicy.for_env("exact", env)  # noqa: E731
    monkeypatch.setattr(run, "seed_plan", lambda log, resume: SHARED)
    diagnose_policy(policy, allocation=(2,) * len(DEFAULT_BATTERY), log=log)
    monkeypatch.undo()
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines()
                           if json.loads(line)["type"] != "design"))
    read = diagnose_log(log)
    assert [sorted(int(s) for s in c.episodes.columns["task_seed"])
            for c in read.configurations] == [[0, 1]] * len(DEFAULT_BATTERY)
    resumed = diagnose_policy(policy, allocation=(3,) * len(DEFAULT_BATTERY), log=log,
                              resume=True)
    assert [sorted(int(s) for s in c.episodes.columns["task_seed"])
            for c in resumed.configurations] == [[0, 1, 2]] * len(DEFAULT_BATTERY)


def test_the_seed_range_leaves_every_block_below_the_simulation_seeds() -> None:
    configurations = len(DEFAULT_BATTERY)
    top = SIMULATION_SEED - (configurations - 1) * SEED_BLOCK - 370
    check_battery_seed(top, [370], configurations)
    with pytest.raises(ValueError, match=rf"^--seed must be in 0\.\.{top} "):
        check_battery_seed(top + 1, [370], configurations)
    with pytest.raises(ValueError, match=rf"^at most {SEED_BLOCK} episodes per configuration"):
        check_battery_seed(0, [SEED_BLOCK + 1], configurations)
