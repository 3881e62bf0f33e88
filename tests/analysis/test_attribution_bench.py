"""The fault injector's labels are exact (checked against the env's own outcomes on replay, and
against the attribution's independent tracking of what is public), and the attribution
recovers the causes the env itself reports (positive controls)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from diagym.analysis.diagnose.attribution import explanation_values, replay
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.faults import (
    CAUSES,
    INVALID_REPLY,
    NOT_READY,
    REPEATED_SUCCESS,
    FaultInjector,
)
from diagym.analysis.studies.attribution_bench.design import BenchDesign
from diagym.analysis.studies.attribution_bench.report import check, kappa, score
from diagym.analysis.studies.attribution_bench.run import Case, cases, play

# history with R = 2 (b = 3) and a snapshot every other success with R = 0 (b = 8)
SMALL = BenchDesign(configurations=(DEFAULT_BATTERY[0], DEFAULT_BATTERY[2]), episodes=28)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    log = tmp_path_factory.mktemp("faults") / "faults.jsonl"
    play(SMALL, log)
    return cases(log)


def test_every_failure_is_the_injected_one_and_its_label_is_exact(played: list[Case]) -> None:
    result = score(played, resamples=50)
    assert result["check_failures"] == []
    assert result["unlabelled_failed"] == 0 and result["labelled_succeeded"] == 0
    assert set(result["per_cause"]) == set(CAUSES)
    assert result["labelled_failed"] >= 40


def test_the_env_reported_causes_are_attributed_exactly(played: list[Case]) -> None:
    per_cause = score(played, resamples=50)["per_cause"]
    for cause in (NOT_READY, REPEATED_SUCCESS, INVALID_REPLY):
        assert per_cause[cause]["cause"]["rate"] == 1.0
    assert per_cause[INVALID_REPLY]["step_trace_only"]["rate"] == 0.0  # never in a trace
    assert per_cause[INVALID_REPLY]["step"]["rate"] == 1.0  # the record says where


def test_a_wrong_label_is_caught(played: list[Case]) -> None:
    case = next(c for c in played if c.label is not None and c.label.cause == "stale_value")
    decisions = replay(case.trace)
    assert check(case, decisions) == []
    moved = dataclasses.replace(case, label=dataclasses.replace(case.label,
                                                                step=case.label.step + 1))
    assert check(moved, decisions)
    members = explanation_values(decisions[case.label.step])["stale_value"]
    outside = next(v for v in range(8) if v not in members)
    renamed = dataclasses.replace(case, label=dataclasses.replace(case.label, value=outside))
    assert check(renamed, decisions)


def test_kappa_by_hand() -> None:
    # p_o = 3/4, p_e = (2*1 + 2*3) / 16 = 1/2: kappa = (3/4 - 1/2) / (1 - 1/2) = 1/2
    assert kappa(["a", "a", "b", "b"], ["a", "b", "b", "b"]) == (0.5, 0.5)
    assert kappa(["a", "b"], ["a", "b"])[0] == 1.0


def test_invalid_reply_needs_text() -> None:
    with pytest.raises(ValueError, match="the invalid_reply cause needs text=True"):
        FaultInjector(DEFAULT_BATTERY[0], text=False)
    with pytest.raises(ValueError, match="causes must be some of stale_value"):
        FaultInjector(DEFAULT_BATTERY[0], causes=("typo",))


def test_a_resumed_run_adds_nothing(tmp_path: Path) -> None:
    design = dataclasses.replace(SMALL, episodes=7)
    log = tmp_path / "faults.jsonl"
    play(design, log)
    first = cases(log)
    play(design, log, resume=True)
    assert [(c.run_id, c.trace, c.label) for c in cases(log)] == \
        [(c.run_id, c.trace, c.label) for c in first]
