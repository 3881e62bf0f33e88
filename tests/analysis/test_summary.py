"""The one episode summary against hand computations, for records and for columns."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from diagym.analysis.summary import format_summary, summarise
from diagym.controllers.episodes import Episodes
from diagym.controllers.policy import EpisodeRecord


def record(i: int, success: bool, completed: int, calls: int, failure: str | None,
           ret: float, counters: dict[str, Any] | None = None,
           metrics: dict[str, Any] | None = None) -> EpisodeRecord:
    return EpisodeRecord(episode=i, task_seed=100 + i, success=success, completed=completed,
                         calls=calls, errors=0, first_failure=failure, episode_return=ret,
                         counters=counters or {}, metrics=metrics or {})


FIVE = [
    record(0, True, 8, 8, None, 1.0),
    record(1, False, 3, 4, "candidate", 0.0),
    record(2, True, 8, 9, None, 1.0),
    record(3, False, 0, 1, "dependency", -0.5),
    record(4, False, 5, 6, "candidate", 0.0),
]


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval written out from its textbook formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (0.0 if k == 0 else centre - half, 1.0 if k == n else centre + half)


def test_rates_means_and_first_failures_match_hand_counts() -> None:
    s = summarise(FIVE)
    assert (s.episodes, s.successes, s.success) == (5, 2, 0.4)
    assert s.success_ci == pytest.approx(wilson(2, 5), abs=1e-12)
    assert s.mean_completed == 24 / 5
    assert s.mean_calls == 28 / 5
    assert s.mean_return == pytest.approx(1.5 / 5)
    assert s.failures == {"candidate": 2, "dependency": 1}
    assert list(s.failures) == sorted(s.failures)
    assert s.steering is None and s.model_calls is None


def test_episodes_columns_and_a_list_of_records_give_the_same_summary() -> None:
    assert summarise(Episodes.from_records(FIVE)) == summarise(FIVE)
    assert summarise(Episodes.from_records(FIVE)[1:4]) == summarise(FIVE[1:4])


def test_columns_are_summarised_without_building_a_record_per_episode(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = 10_000
    failure = np.array([None, "dependency", "candidate"], dtype=object)[np.arange(n) % 3]
    episodes = Episodes({
        "episode": np.arange(n), "task_seed": np.arange(n), "success": failure == None,  # noqa: E711
        "completed": np.arange(n) % 9, "calls": np.full(n, 8), "errors": np.zeros(n),
        "first_failure": failure, "episode_return": np.zeros(n)})

    def no_records(*_args: Any) -> Any:
        raise AssertionError("the summary built a per-episode record")

    monkeypatch.setattr(Episodes, "__getitem__", no_records)
    monkeypatch.setattr(Episodes, "__iter__", no_records)
    s = summarise(episodes)
    assert s.successes == len(range(0, n, 3))
    assert s.failures == {"candidate": len(range(2, n, 3)), "dependency": len(range(1, n, 3))}
    assert s.mean_completed == sum(i % 9 for i in range(n)) / n


def test_a_run_without_failures_has_an_empty_failure_dict() -> None:
    s = summarise([record(i, True, 8, 8, None, 1.0) for i in range(3)])
    assert s.failures == {}
    assert s.success_ci == (pytest.approx(wilson(3, 3)[0]), 1.0)
    assert s.to_json()["failures"] == {}
    assert "first failures  none" in format_summary(s)


def test_steering_rates_are_weighted_by_decisions_and_tokens_pooled() -> None:
    one = {"accuracy": 1.0, "contamination": 0.0, "window_tokens": [100]}
    three = {"accuracy": 0.0, "contamination": 2 / 3, "window_tokens": [10, 20, 30]}
    s = summarise([record(0, True, 0, 1, None, 1.0, metrics=one),
                   record(1, False, 0, 3, None, 0.0, metrics=three)])
    assert s.steering is not None
    assert s.steering.decisions == 4
    assert s.steering.accuracy == pytest.approx(1 / 4)  # not the episode mean 1/2
    assert s.steering.contamination == pytest.approx(2 / 4)  # 2 contaminated of 4 decisions
    assert s.steering.mean_tokens == pytest.approx(160 / 4)
    # 95th percentile of 10, 20, 30, 100 by linear interpolation: rank 0.95 * 3 = 2.85.
    assert s.steering.p95_tokens == pytest.approx(30 + 0.85 * 70)
    shown = s.to_json()
    assert shown["accuracy"] == s.steering.accuracy
    assert shown["p95_tokens"] == s.steering.p95_tokens


def test_steering_leaves_out_and_counts_episodes_without_metrics() -> None:
    metrics = {"accuracy": 1.0, "contamination": 0.0, "window_tokens": [5]}
    s = summarise([record(0, True, 0, 1, None, 1.0, metrics=metrics),
                   record(1, False, 0, 0, "provider_error", 0.0)])
    assert s.steering is not None
    assert (s.steering.decisions, s.steering.accuracy, s.steering.unmeasured) == (1, 1.0, 1)
    assert s.to_json()["unmeasured"] == 1
    assert "unmeasured      1 episodes" in format_summary(s)


def test_workflow_runs_have_no_steering_and_keep_the_success_headline() -> None:
    s = summarise(FIVE)
    assert s.steering is None and "accuracy" not in s.to_json()
    text = format_summary(s)
    assert text.splitlines()[0].startswith("success         40.00%")
    assert "accuracy" not in text and "mean completed  4.80" in text


def test_invalid_replies_are_wrong_uncontaminated_decisions_and_counted() -> None:
    # Episode 0 answered 3 decisions (2 right, 1 contaminated) and ended on an invalid reply:
    # the env reports 4 decisions, accuracy 2/4, contamination 1/4, invalid 1.
    broken = {"accuracy": 2 / 4, "contamination": 1 / 4, "window_tokens": [10, 10, 10, 10],
              "invalid": 1}
    whole = {"accuracy": 1.0, "contamination": 0.0, "window_tokens": [20] * 4, "invalid": 0}
    s = summarise([record(0, False, 0, 4, "invalid_json", 2.0, metrics=broken),
                   record(1, False, 0, 4, None, 4.0, metrics=whole)])
    assert s.steering is not None
    assert (s.steering.decisions, s.steering.invalid) == (8, 1)
    assert s.steering.accuracy == pytest.approx(6 / 8)
    assert s.steering.contamination == pytest.approx(1 / 8)
    assert s.steering.accuracy_ci == pytest.approx(wilson(6, 8), abs=1e-12)
    shown = s.to_json()
    assert (shown["invalid"], shown["decisions"]) == (1, 8)


def test_dacs_headline_is_accuracy_not_success() -> None:
    metrics = {"accuracy": 1.0, "contamination": 0.0, "window_tokens": [7, 9], "invalid": 0}
    s = summarise([record(0, False, 0, 2, None, 2.0, metrics=metrics)])
    lines = format_summary(s).splitlines()
    assert lines[0].startswith("accuracy        1.000")
    assert "over 2 decisions, 0 invalid replies" in lines[0]
    assert not any(line.startswith(("success", "mean completed")) for line in lines)
    assert any(line.startswith("contamination   0.000") for line in lines)


def test_model_call_metrics_from_a_chat_models_counters() -> None:
    first = {"decisions": 2, "schema_valid": 2, "latency_s": 1.0}
    second = {"decisions": 3, "schema_valid": 1, "latency_s": 4.0}
    s = summarise([record(0, True, 8, 2, None, 1.0, counters=first),
                   record(1, False, 1, 3, "invalid_json", 0.0, counters=second)])
    assert s.model_calls is not None
    assert s.model_calls.decisions == 5
    assert s.model_calls.schema_valid_rate == 3 / 5
    assert s.model_calls.mean_decision_latency_s == 5.0 / 5
    assert s.model_calls.median_episode_latency_s == 2.5
    none_answered = {"decisions": 0, "schema_valid": 0, "latency_s": 0.5}
    silent = summarise([record(0, False, 0, 0, "provider_error", 0.0, counters=none_answered)])
    assert silent.model_calls is not None and silent.model_calls.schema_valid_rate is None


def test_no_episodes_is_an_error_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="episodes: a summary needs at least one episode"):
        summarise([])


def test_cost_and_success_per_dollar_from_the_counters() -> None:
    counters = [{"decisions": 2, "schema_valid": 2, "latency_s": 1.0, "cost_usd": 0.25,
                 "cache_hits": 1, "invalid_retries": 0},
                {"decisions": 3, "schema_valid": 3, "latency_s": 1.0, "cost_usd": 0.75,
                 "cache_hits": 0, "invalid_retries": 2},
                {"decisions": 1, "schema_valid": 0, "latency_s": 1.0, "cost_usd": None,
                 "cache_hits": 0, "invalid_retries": 0}]
    s = summarise([record(i, i < 2, 8, 2, None if i < 2 else "invalid_json", 1.0, counters=c)
                   for i, c in enumerate(counters)])
    m = s.model_calls
    assert m is not None
    assert (m.cost_usd, m.success_per_usd, m.cache_hits, m.invalid_retries) == (1.0, 2.0, 1, 2)
    assert s.to_json()["model_calls"]["success_per_usd"] == 2.0
    assert "cost $1.0000, 2.00 successes per USD, cache hits 1" in format_summary(s)
    free = summarise([record(0, True, 8, 2, None, 1.0, counters={**counters[0],
                                                                  "cost_usd": 0.0})])
    assert free.model_calls is not None and free.model_calls.success_per_usd is None
    unknown = summarise([record(0, True, 8, 2, None, 1.0, counters=counters[2])])
    assert unknown.model_calls is not None and unknown.model_calls.cost_usd is None
    assert "cost unknown price" in format_summary(unknown)
