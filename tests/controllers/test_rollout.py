"""The runner's two paths for a reference controller, held against each other.

`rollout` plays a ReferencePolicy on a bare workflow env in the batched numba runner and
everything else step by step through the Gymnasium env; the two must give the same records,
the same log lines and the same resume behaviour, and a wrapper that may change what the agent
sees or when an episode ends must send the run down the per-step path.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit

import diagym  # noqa: F401  (registers the ids)
import diagym.controllers.rollout as runner
from diagym.controllers.episodes import Episodes
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.rollout import batched_spec, rollout, rollout_parallel
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES
from diagym.envs.workflow.params import WorkflowParams
from tests.conftest import scaled

SPECS = [
    WorkflowParams(),
    WorkflowParams(snapshot_period=0, width=8, candidates=8, error_allowance=3),
    WorkflowParams(snapshot_period=2, hidden_resampling=True, error_allowance=4),
    WorkflowParams(family="barriers", depth=2, snapshot_period=0, labels="reversed",
                   error_allowance=2, candidates=3),
    WorkflowParams(n_ops=16, depth=4, snapshot_period=1, locality="clustered", width=8,
                   updates="static", error_allowance=1),
]
EPISODES = 40


def play_lines(path: Path) -> list[str]:
    """A log's lines without its session lines (provenance and start time per session), so
    logs written in two sessions or at two moments compare by what was played."""
    return [line for line in path.read_text().splitlines()
            if json.loads(line).get("type") != "session"]


def make_env(spec: WorkflowParams, **make_kwargs: Any) -> gym.Env:
    return gym.make("StatefulWorkflow-v0", **spec.as_dict(), **make_kwargs)


def forbid(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make the runner's function `name` fail if called, to prove which path a run took."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError(f"{name} was called")

    monkeypatch.setattr(runner, name, refuse)


@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_batched_path_records_equal_the_per_step_path(name: str) -> None:
    for spec in SPECS:
        env = make_env(spec)
        policy = ReferencePolicy.for_env(name, env)
        assert batched_spec(env, policy) == spec
        fast = rollout(env, policy, EPISODES, seed=11)
        slow = rollout(env, policy, EPISODES, seed=11, fast=False)
        assert isinstance(fast, Episodes) and isinstance(slow, Episodes)
        assert len(fast) == len(slow) == EPISODES
        for a, b in zip(fast, slow, strict=True):
            assert a == b, (name, spec)
        assert fast == slow


def test_the_batched_path_does_not_step_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(SPECS[2])
    policy = ReferencePolicy.for_env("cache-2", env)
    expected = rollout(env, policy, 30, seed=5, fast=False)
    forbid(monkeypatch, "_play")
    assert rollout(env, policy, 30, seed=5) == expected
    assert rollout_parallel(lambda: make_env(SPECS[2]),
                            lambda e: ReferencePolicy.for_env("cache-2", e), 30, seed=5,
                            workers=3) == expected
    with pytest.raises(AssertionError, match="_play was called"):
        rollout(env, policy, 1, seed=5, fast=False)


def test_log_lines_are_the_same_on_both_paths(tmp_path: Path) -> None:
    spec = SPECS[2]
    env = make_env(spec)
    policy = ReferencePolicy.for_env("random-schedule", env)
    rollout(env, policy, 25, seed=3, log=tmp_path / "fast.jsonl")
    rollout(env, policy, 25, seed=3, log=tmp_path / "slow.jsonl", fast=False)
    fast = play_lines(tmp_path / "fast.jsonl")
    slow = play_lines(tmp_path / "slow.jsonl")
    assert len(fast) == len(slow) == 25
    assert sorted(fast) == sorted(slow)
    assert {json.loads(line)["record"]["first_failure"] for line in fast} >= {"dependency",
                                                                               "candidate"}


@pytest.mark.parametrize("first_fast", [True, False])
def test_resume_after_a_partial_log_loses_and_duplicates_nothing(tmp_path: Path,
                                                                 first_fast: bool) -> None:
    spec = SPECS[1]
    env = make_env(spec)
    policy = ReferencePolicy.for_env("cache-2", env)
    whole = rollout(env, policy, 12, seed=40, fast=False)
    rollout(env, policy, 12, seed=40, log=tmp_path / "whole.jsonl", fast=False)
    path = tmp_path / "run.jsonl"
    rollout(env, policy, 5, seed=40, log=path, fast=first_fast)
    with path.open("a") as sink:  # an interrupted write
        sink.write('{"type": "episode", "episode_key": "x", "rec')
    seen: list[EpisodeRecord] = []
    resumed = rollout(env, policy, 12, seed=40, log=path, resume=True, fast=not first_fast,
                      on_record=seen.append)
    assert resumed == whole
    assert [r.episode for r in resumed] == list(range(12))
    assert seen == list(whole)[5:]
    assert sorted(play_lines(path)) == sorted(play_lines(tmp_path / "whole.jsonl"))
    assert [json.loads(x)["type"] for x in path.read_text().splitlines()].count("session") == 2
    for fast in (True, False):  # a finished log: nothing is played or written again
        again = rollout(env, policy, 12, seed=40, log=path, resume=True,
                        on_record=seen.append, fast=fast)
        assert again == whole and len(seen) == 7
        assert len(play_lines(path)) == 12 and len(path.read_text().splitlines()) == 14


def test_on_record_sees_every_played_record_in_order_on_both_paths() -> None:
    env = make_env(SPECS[3])
    policy = ReferencePolicy.for_env("uniform-candidate", env)
    fast: list[EpisodeRecord] = []
    slow: list[EpisodeRecord] = []
    rollout(env, policy, 20, seed=9, on_record=fast.append)
    rollout(env, policy, 20, seed=9, on_record=slow.append, fast=False)
    assert fast == slow and [r.episode for r in fast] == list(range(20))


class _Relabel(gym.ObservationWrapper):
    """An observation wrapper that changes what the agent sees (every register hidden)."""

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**observation, "registers": np.full_like(observation["registers"], -1)}


class _Subclass(ReferencePolicy):
    """A ReferencePolicy subclass: it may act differently, so it is not batched."""


def _per_step_only(env: gym.Env, policy: Any, monkeypatch: pytest.MonkeyPatch) -> Episodes:
    assert batched_spec(env, policy) is None
    with monkeypatch.context() as patch:
        forbid(patch, "episode_columns")
        played = rollout(env, policy, 15, seed=2)
    assert played == rollout(env, policy, 15, seed=2, fast=False)
    return played


def test_wrapped_envs_and_other_policies_play_step_by_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WorkflowParams(error_allowance=3, snapshot_period=0)
    bare = rollout(make_env(spec), ReferencePolicy("exact", spec), 15, seed=2)
    timed = make_env(spec, max_episode_steps=3)
    limited = _per_step_only(timed, ReferencePolicy.for_env("exact", timed), monkeypatch)
    assert max(r.calls for r in limited) == 3 and limited != bare
    hidden = _Relabel(make_env(spec))
    relabelled = _per_step_only(hidden, ReferencePolicy.for_env("exact", hidden), monkeypatch)
    assert relabelled != bare
    explicit = TimeLimit(make_env(spec).unwrapped, max_episode_steps=50)
    _per_step_only(explicit, ReferencePolicy.for_env("exact", explicit), monkeypatch)
    _per_step_only(make_env(spec), _Subclass("exact", spec), monkeypatch)
    # A controller built for other rules than the env's plays those rules step by step.
    _per_step_only(make_env(spec), ReferencePolicy("exact", spec.replace(error_allowance=0)),
                   monkeypatch)


def test_the_bare_env_and_gym_make_default_wrappers_take_the_batched_path() -> None:
    spec = WorkflowParams()
    core = make_env(spec).unwrapped
    assert batched_spec(core, ReferencePolicy("exact", spec)) == spec
    checked = gym.make("StatefulWorkflow-v0", disable_env_checker=True)
    assert batched_spec(checked, ReferencePolicy("exact", spec)) == spec


def test_an_empty_run_and_record_fields_of_the_batched_path() -> None:
    env = make_env(SPECS[0])
    policy = ReferencePolicy.for_env("exact", env)
    assert len(rollout(env, policy, 0, seed=0)) == 0
    played = rollout(env, policy, 4, seed=100)
    assert played.columns["task_seed"].tolist() == [100, 101, 102, 103]
    assert all(dataclasses.asdict(r)["metrics"] == {} for r in played)
    assert played.columns["episode_return"].tolist() == [1.0] * 4


@pytest.mark.parametrize("fast", [True, False])
def test_both_paths_hold_the_log_lock_and_void_an_interrupted_episode(tmp_path: Path,
                                                                      fast: bool) -> None:
    from diagym.controllers.runlog import LogInUse, RunLog, call_totals

    env = make_env(SPECS[1])
    policy = ReferencePolicy.for_env("cache-2", env)
    whole = rollout(env, policy, 6, seed=2, fast=False)
    path = tmp_path / "run.jsonl"
    rollout(env, policy, 3, seed=2, log=path, fast=fast)
    key = json.loads(play_lines(path)[0])["episode_key"].split(":")[0] + ":5"
    with path.open("a") as sink:  # a line an interrupted attempt at episode 5 left behind
        sink.write(json.dumps({"type": "call", "episode_key": key, "decision": 0}) + "\n")

    def refuse_a_second_writer(_record: EpisodeRecord) -> None:
        with pytest.raises(LogInUse):
            RunLog(path, resume=True)

    resumed = rollout(env, policy, 6, seed=2, log=path, resume=True, fast=fast,
                      on_record=refuse_a_second_writer)
    assert resumed == whole
    entries = [json.loads(line) for line in play_lines(path)]
    assert [x["type"] for x in entries].count("replay") == 1
    replay = next(i for i, x in enumerate(entries) if x["type"] == "replay")
    assert entries[replay]["episode_key"] == key
    assert [i for i, x in enumerate(entries) if x.get("episode_key") == key] == [
        3, replay, next(i for i, x in enumerate(entries) if x["type"] == "episode"
                        and x["episode_key"] == key)]
    totals = call_totals(path)
    assert (totals.calls, totals.replayed) == (0, 1)  # the interrupted attempt counts for nothing


def test_a_failing_worker_stops_the_episodes_not_yet_started() -> None:
    import threading

    started: list[int] = []
    failed = threading.Event()

    class Failing:
        """Episode 1 fails; every other episode waits for that failure before it goes on, so
        the test does not depend on how fast the workers start."""

        def reset(self, *, seed: int | None = None) -> None:
            started.append(int(seed or 0))
            if seed == 1:
                failed.set()
                raise RuntimeError("cost limit reached")
            assert failed.wait(timeout=scaled(60))

        def act(self, observation: Any, info: dict[str, Any]) -> Any:
            return np.array([0, 0])

    with pytest.raises(RuntimeError, match="cost limit reached"):
        rollout_parallel(lambda: make_env(SPECS[0]), lambda _env: Failing(), 200, seed=0,
                         workers=2)
    # Episode 0 was in flight when 1 failed; at most one more had been taken by then.
    assert 1 in started and len(started) <= 3


def test_a_policy_gets_what_the_last_step_returned_once_per_episode() -> None:
    """The optional episode_end hook: the last action's outcome reaches no act."""
    class Ends:
        def __init__(self) -> None:
            self.inner = ReferencePolicy.for_env("uniform-candidate", env)
            self.ends: list[dict[str, Any]] = []

        def reset(self, *, seed: int | None = None) -> None:
            self.inner.reset(seed=seed)

        def act(self, observation: Any, info: dict[str, Any]) -> Any:
            return self.inner.act(observation, info)

        def episode_end(self, observation: Any, info: dict[str, Any]) -> None:
            self.ends.append(info)

    env = gym.make("StatefulWorkflow-v0", error_allowance=2)
    policy = Ends()
    episodes = rollout(env, policy, 4, seed=0)
    assert [info["calls"] for info in policy.ends] == [r.calls for r in episodes]
    assert [info["success"] for info in policy.ends] == [r.success for r in episodes]
    assert not all(r.success for r in episodes)  # episodes ended by a failed call too
