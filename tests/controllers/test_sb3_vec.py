"""WorkflowVecEnv keeps SB3's VecEnv contract and plays exactly what single envs play.

The equality test is the one that matters: the numba rows with same-step autoreset must give,
step for step, the observations, rewards, dones and infos of `gym.make` envs seeded the same
way and reset() after each episode, or training on the fast path would train on another task.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.controllers.sb3.actions import (
    JointActionWrapper,
    decode_joint,
    encode_joint,
    joint_masks,
)
from diagym.controllers.sb3.vec_env import WorkflowVecEnv

torch = pytest.importorskip("torch")
from sb3_contrib import MaskablePPO  # noqa: E402
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor  # noqa: E402

SMALL = {"n_ops": 4, "depth": 2, "width": 1, "candidates": 2, "snapshot_period": 1}


def _assert_obs_equal(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    assert got.keys() == want.keys(), where
    for key in want:
        g, w = np.asarray(got[key]), np.asarray(want[key])
        assert g.shape == w.shape and g.dtype == w.dtype, f"{where} {key}: {g!r} vs {w!r}"
        np.testing.assert_array_equal(g, w, err_msg=f"{where} {key}")


def _row(observation: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    return {key: value[i] for key, value in observation.items()}


def _random_actions(rng: np.random.Generator, singles: list[gym.Env]) -> np.ndarray:
    """Per env: often a right action (ready operation, right slot), else any in-space action
    (a dependency, candidate or already-completed failure), so episodes last several steps."""
    actions = []
    for env in singles:
        base = env.unwrapped
        ready = np.flatnonzero(base.action_masks()[: base._n])
        if ready.size and rng.random() < 0.75:
            op = int(rng.choice(ready))
            actions.append((op, base.correct_slot(op)))
        else:
            actions.append((int(rng.integers(base._n)), int(rng.integers(base._b))))
    return np.array(actions, dtype=np.int64)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "joint"),
    [
        ("StatefulWorkflow-v0", {"error_allowance": 2}, False),
        ("StatefulWorkflowHidden-v0", {"error_allowance": 1, "family": "barriers"}, True),
        ("StatefulWorkflow-v0", SMALL, True),
    ],
)
def test_trajectories_equal_single_envs(env_id: str, kwargs: dict[str, Any], joint: bool) -> None:
    num_envs, base_seed = 6, 1234
    vec = WorkflowVecEnv(num_envs, env_id=env_id, joint_actions=joint, **kwargs)
    singles = [gym.make(env_id, **kwargs) for _ in range(num_envs)]
    b = singles[0].unwrapped._b
    assert vec.seed(base_seed) == [base_seed + i for i in range(num_envs)]
    observation = vec.reset()
    expected = [env.reset(seed=base_seed + i)[0] for i, env in enumerate(singles)]
    rng = np.random.default_rng(7)
    episodes = np.zeros(num_envs, dtype=int)
    for t in range(240):
        if t == 120:  # a reset() mid-episode moves every env to its next seed, as reset() does
            observation = vec.reset()
            expected = [env.reset()[0] for env in singles]
        for i in range(num_envs):
            _assert_obs_equal(_row(observation, i), expected[i], f"t={t} env={i}")
        pairs = _random_actions(rng, singles)
        actions = encode_joint(pairs[:, 0], pairs[:, 1], b) if joint else pairs
        observation, rewards, dones, infos = vec.step(actions)
        for i, env in enumerate(singles):
            obs_i, reward, terminated, truncated, info = env.step(pairs[i])
            assert rewards[i] == np.float32(reward)
            assert dones[i] == (terminated or truncated)
            for key in ("success", "failure", "task_seed"):
                assert infos[i][key] == info[key], (t, i, key)
            assert ("terminal_observation" in infos[i]) == bool(dones[i])
            if dones[i]:
                _assert_obs_equal(infos[i]["terminal_observation"], obs_i, f"t={t} env={i} end")
                assert infos[i]["episode"]["r"] == pytest.approx(info["completed_ops"] / env.
                                                                 unwrapped._n)
                assert infos[i]["episode"]["l"] == info["calls"]
                obs_i, _ = env.reset()
                episodes[i] += 1
            expected[i] = obs_i
    assert episodes.min() >= 3, episodes


def test_vec_env_contract_under_sb3_wrappers() -> None:
    num_envs = 5
    raw = WorkflowVecEnv(num_envs, monitor=False, error_allowance=1)
    assert raw.env_is_wrapped(Monitor) == [False] * num_envs
    venv = VecMonitor(VecCheckNan(raw, raise_exception=True))
    venv.seed(3)
    observation = venv.reset()
    space = venv.observation_space
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(60):
        for key, sub in space.spaces.items():
            assert observation[key].shape == (num_envs, *sub.shape), key
        assert all(space.contains(_row(observation, i)) for i in range(num_envs))
        actions = rng.integers(0, venv.action_space.nvec, size=(num_envs, 2))
        previous = {key: value.copy() for key, value in observation.items()}
        observation, rewards, dones, infos = venv.step(actions)
        for key in previous:  # SB3 keeps earlier observations: a step must not change them
            assert previous[key] is not observation[key]
        assert rewards.shape == (num_envs,) and rewards.dtype == np.float32
        assert dones.shape == (num_envs,) and dones.dtype == np.bool_
        assert len(infos) == num_envs
        for i, info in enumerate(infos):
            assert ("terminal_observation" in info) == bool(dones[i])
            assert ("episode" in info) == bool(dones[i])  # VecMonitor's, since monitor=False
            assert info["TimeLimit.truncated"] is False
            if dones[i]:
                assert space.contains(info["terminal_observation"])
                finished += 1
    assert finished > 0
    with pytest.raises(ValueError, match="actions"):
        venv.step(np.full((num_envs, 2), 99))
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.zeros(num_envs, dtype=np.int64))


def test_monitor_info_and_attribute_api() -> None:
    vec = WorkflowVecEnv(3, joint_actions=True)
    assert vec.env_is_wrapped(Monitor) == [True] * 3
    assert vec.env_is_wrapped(JointActionWrapper, indices=[0]) == [True]
    assert vec.get_attr("render_mode") == [None] * 3
    with pytest.warns(UserWarning, match="Monitor"):  # VecMonitor sees the Monitor contract
        monitored = VecMonitor(vec)
    assert vec.has_attr("action_masks") and is_masking_supported(monitored)
    with pytest.raises(AttributeError):
        vec.env_method("render")
    with pytest.raises(ValueError, match="share"):
        vec.set_attr("monitor", False, indices=[1])
    vec.reset()
    with pytest.raises(ValueError, match="integer in 0..31"):
        vec.step(np.array([0, 32, 1]))
    dones = np.zeros(3, dtype=bool)
    while not dones.all():
        _, _, step_dones, infos = vec.step(np.zeros(3, dtype=np.int64))
        for info, done in zip(infos, step_dones, strict=True):
            if done:
                assert set(info["episode"]) == {"r", "l", "t"}
        dones |= step_dones


def test_joint_masks_are_outer_products() -> None:
    n, b = 8, 4
    multi = WorkflowVecEnv(7, n_ops=n, candidates=b, family="barriers")
    joint = WorkflowVecEnv(7, joint_actions=True, n_ops=n, candidates=b, family="barriers")
    for env in (multi, joint):
        env.seed(11)
        env.reset()
    rng = np.random.default_rng(1)
    for _ in range(30):
        md = multi.action_masks()
        jm = joint.action_masks()
        assert md.shape == (7, n + b) and jm.shape == (7, n * b)
        want = (md[:, :n, None] & md[:, None, n:]).reshape(7, n * b)
        np.testing.assert_array_equal(jm, want)
        np.testing.assert_array_equal(get_action_masks(joint), jm)
        pairs = rng.integers(0, [n, b], size=(7, 2))
        multi.step(pairs)
        joint.step(encode_joint(pairs[:, 0], pairs[:, 1], b))
    k = np.arange(n * b)
    np.testing.assert_array_equal(encode_joint(*decode_joint(k, b).T, b), k)


def test_joint_wrapper_passes_check_env_and_matches() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(JointActionWrapper(gym.make("StatefulWorkflow-v0").unwrapped), warn=True)
    env = JointActionWrapper(gym.make("StatefulWorkflow-v0", family="barriers"))
    assert env.action_space == gym.spaces.Discrete(8 * 4)
    _, info = env.reset(seed=5)
    inner = env.unwrapped.action_masks()
    np.testing.assert_array_equal(env.action_masks(), joint_masks(inner, 8, 4))
    np.testing.assert_array_equal(info["action_mask"], env.action_masks())
    ready = int(np.flatnonzero(inner[:8])[0])
    slot = env.unwrapped.correct_slot(ready)
    _, reward, _, _, info = env.step(np.int64(ready * 4 + slot))
    assert reward == pytest.approx(1 / 8) and info["failure"] == 0
    with pytest.raises(ValueError):
        env.step(32)
    with pytest.raises(ValueError):
        env.step(True)


def test_maskable_ppo_trains_and_respects_joint_masks() -> None:
    torch.set_num_threads(1)
    env = WorkflowVecEnv(8, joint_actions=True, **SMALL)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=128, n_epochs=2,
                        seed=0, device="cpu")
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    assert len(model.ep_info_buffer) > 0  # info["episode"] reached SB3's logger
    observation = env.reset()
    for _ in range(64):
        masks = get_action_masks(env)
        actions, _ = model.predict(observation, action_masks=masks)
        assert masks[np.arange(env.num_envs), actions].all(), "a masked action was chosen"
        observation, _, _, _ = env.step(actions)


def test_ppo_multi_input_policy_trains_on_multidiscrete() -> None:
    torch.set_num_threads(1)
    env = WorkflowVecEnv(4, **SMALL)
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                device="cpu")
    model.learn(total_timesteps=256)
    observation = env.reset()
    actions, _ = model.predict(observation, deterministic=True)
    assert actions.shape == (4, 2)
    env.step(actions)
