"""The batched runner against facts computed outside it, from the env's own step infos."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import diagym  # noqa: F401  (registers the ids)
import diagym.controllers.workflow.batched as batched
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.batched import episode_columns, run_controller
from diagym.envs._core.failures import failure_name
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.envs.workflow.params import WorkflowParams


def failures_per_episode(spec: WorkflowParams, controller: str, seeds: np.ndarray
                         ) -> list[list[str]]:
    """The failure category of every failed call, episode by episode, read from the infos of
    gym.make's env stepped by the per-step adapter."""
    env = gym.make("StatefulWorkflow-v0", **spec.as_dict())
    policy = ReferencePolicy.for_env(controller, env)
    result = []
    for seed in seeds.tolist():
        observation, info = env.reset(seed=seed)
        policy.reset(seed=seed)
        failures, terminated = [], False
        while not terminated:
            observation, _, terminated, _, info = env.step(policy.act(observation, info))
            if info["failure"]:
                failures.append(failure_name(info["failure"]))
        result.append(failures)
    return result


def test_the_batched_runner_records_the_first_failure_not_the_last() -> None:
    # random-schedule fails on dependencies (it ignores prerequisites) and, with hidden
    # resampling between snapshots, on candidates, so with an allowance of 6 one episode
    # often fails in both categories, in either order.
    spec = WorkflowParams(snapshot_period=2, hidden_resampling=True, error_allowance=6)
    seeds = np.arange(200)
    failures = failures_per_episode(spec, "random-schedule", seeds)
    first = [f[0] if f else None for f in failures]
    assert sum(1 for f in failures if f and f[0] != f[-1]) >= 10  # the test can tell them apart
    codes = run_controller(spec, "random-schedule", seeds)["first_failure"]
    assert [FAILURE_NAMES[c] for c in codes.tolist()] == first
    columns, _ = episode_columns(spec, "random-schedule", seeds)
    assert columns["first_failure"].tolist() == first
    assert run_controller(spec, "random-schedule", seeds)["errors"].tolist() == [
        len(f) for f in failures]


def test_episode_columns_survive_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WorkflowParams(error_allowance=2, snapshot_period=0)
    seeds = np.arange(1000, 1037)
    whole, whole_counters = episode_columns(spec, "cache-2", seeds)
    chunks: list[tuple[int, int]] = []
    monkeypatch.setattr(batched, "CHUNK", 8)
    parts, part_counters = episode_columns(
        spec, "cache-2", seeds,
        on_chunk=lambda start, cols, _c: chunks.append((start, len(cols["calls"]))))
    assert chunks == [(0, 8), (8, 8), (16, 8), (24, 8), (32, 5)]
    for key, values in whole.items():
        assert values.tolist() == parts[key].tolist(), key
    for key, values in whole_counters.items():
        assert values.tolist() == part_counters[key].tolist(), key
