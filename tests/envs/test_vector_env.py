"""The numba vector env and single envs stepped one by one give equal trajectories."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from diagym import envs  # noqa: F401

SPECS = [
    {},
    {"family": "barriers", "depth": 2, "snapshot_period": 0, "error_allowance": 3},
    {"n_ops": 12, "depth": 3, "width": 8, "candidates": 3, "hidden_resampling": True,
     "snapshot_period": 2, "error_allowance": 1, "locality": "clustered", "labels": "reversed"},
]


@pytest.mark.parametrize("spec", SPECS)
def test_vector_matches_single_envs_across_autoresets(spec: dict) -> None:
    num_envs, steps = 5, 60
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=num_envs, **spec)
    singles = [gym.make("StatefulWorkflow-v0", **spec) for _ in range(num_envs)]
    n = singles[0].unwrapped.params.n_ops
    b = singles[0].unwrapped.params.candidates
    rng = np.random.default_rng(3)

    vec_obs, vec_info = vec.reset(seed=100)
    single_obs, single_info = zip(*(env.reset(seed=100 + i) for i, env in enumerate(singles)),
                                  strict=True)
    pending_reset = [False] * num_envs
    _assert_batch_equal(vec_obs, vec_info, single_obs, single_info)
    for _ in range(steps):
        # Mostly legal operations so episodes run long enough to exercise updates and snapshots.
        actions = np.stack([
            (rng.choice(np.flatnonzero(vec_info["action_mask"][i][:n])) if rng.random() < 0.9
             else rng.integers(n), rng.integers(b)) for i in range(num_envs)
        ]).astype(np.int64)
        vec_obs, rewards, terminated, truncated, vec_info = vec.step(actions)
        single_obs, single_info = [], []
        for i, env in enumerate(singles):
            if pending_reset[i]:  # next-step autoreset: this step starts the next task
                obs, info = env.reset()
                reward, done = 0.0, False
            else:
                obs, reward, done, _, info = env.step(actions[i])
            single_obs.append(obs)
            single_info.append(info)
            assert rewards[i] == reward and terminated[i] == done
            pending_reset[i] = done
        assert not truncated.any()
        _assert_batch_equal(vec_obs, vec_info, single_obs, single_info)


def _assert_batch_equal(vec_obs: dict, vec_info: dict, single_obs, single_info) -> None:
    for i, (obs, info) in enumerate(zip(single_obs, single_info, strict=True)):
        assert data_equivalence({k: v[i] for k, v in vec_obs.items()}, obs)
        for key in ("completed_ops", "calls", "errors", "success", "task_seed"):
            assert vec_info[key][i] == info[key]
        assert np.array_equal(vec_info["action_mask"][i], info["action_mask"])
        assert type(info["failure"]) is int  # one type: the vector env's int codes
        assert vec_info["failure"][i] == info["failure"]


def test_observations_are_fresh_every_step() -> None:
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=2)
    first, _ = vec.reset(seed=0)
    core = vec.unwrapped
    state = (core._task.copy(), core._state.copy(), core._work.copy(), core._obs.copy())
    for array in first.values():
        array[...] = 5  # a user scribbling on returned data
    assert all(np.array_equal(x, y) for x, y in
               zip(state, (core._task, core._state, core._work, core._obs), strict=True))
    second, *_ = vec.step(np.zeros((2, 2), dtype=np.int64))
    for key in first:
        assert not np.shares_memory(first[key], second[key])


def test_seed_list_and_int_agree() -> None:
    a, _ = gym.make_vec("StatefulWorkflow-v0", num_envs=3).reset(seed=7)
    b, _ = gym.make_vec("StatefulWorkflow-v0", num_envs=3).reset(seed=[7, 8, 9])
    assert data_equivalence(a, b)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_vectorizers_agree_with_the_numba_vector_env(mode: str) -> None:
    """SyncVectorEnv and (forked) AsyncVectorEnv over the single env give the same data."""
    ours = gym.make_vec("StatefulWorkflow-v0", num_envs=2)
    theirs = gym.make_vec("StatefulWorkflow-v0", num_envs=2, vectorization_mode=mode)
    try:
        a, _ = ours.reset(seed=3)
        b, _ = theirs.reset(seed=3)
        assert data_equivalence(a, b)
        actions = np.array([[0, 0], [1, 1]], dtype=np.int64)
        a, ra, ta, _, _ = ours.step(actions)
        b, rb, tb, _, _ = theirs.step(actions)
        assert data_equivalence(a, b)
        assert np.array_equal(ra, rb) and np.array_equal(ta, tb)
    finally:
        theirs.close()


def test_unseeded_reset_draws_fresh_tasks_and_large_seeds_are_checked() -> None:
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=3)
    first, info_a = vec.reset()
    second, info_b = vec.reset()
    assert not np.array_equal(info_a["task_seed"], info_b["task_seed"])
    assert first in vec.observation_space and second in vec.observation_space
    with pytest.raises(ValueError, match=r"^seed must be an integer or list of integers"):
        vec.reset(seed=2**63 - 2)  # env 2 would get 2**63
    vec.reset(seed=2**63 - 3)


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_vector_render_shows_each_env_as_its_single_env_would(mode: str) -> None:
    """Frame i is env i's own state, through steps and a next-step autoreset."""
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=2, render_mode=mode)
    singles = [gym.make("StatefulWorkflow-v0", render_mode=mode) for _ in range(2)]
    vec.reset(seed=40)
    for i, env in enumerate(singles):
        env.reset(seed=40 + i)
    actions = np.array([[0, 0], [1, 1]], dtype=np.int64)
    pending = [False, False]
    autoreset = False
    for _ in range(4):
        frames = vec.render()
        for frame, env in zip(frames, singles, strict=True):
            assert data_equivalence(frame, env.render())
        _, _, terminated, _, _ = vec.step(actions)
        for i, env in enumerate(singles):
            if pending[i]:
                env.reset()
                autoreset = True
            else:
                assert env.step(actions[i])[2] == terminated[i]
            pending[i] = bool(terminated[i]) and not pending[i]
    assert autoreset, "the actions must end an episode for the autoreset to be rendered"
    assert gym.make_vec("StatefulWorkflow-v0", num_envs=2).render() is None
