"""SB3 accepts the envs: its own checker, make_vec_env on every workflow id, a short PPO run."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from diagym import envs  # noqa: F401

torch = pytest.importorskip("torch")
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402


@pytest.mark.parametrize("env_id", sorted(envs.WORKFLOW_PRESETS))
def test_sb3_check_env(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3 warns about spaces it cannot handle well
        check_env(gym.make(env_id).unwrapped, warn=True)


def test_multi_input_policy_trains_and_predicts() -> None:
    torch.set_num_threads(1)
    env = gym.make("StatefulWorkflow-v0")
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0,
                device="cpu")
    model.learn(total_timesteps=128)
    observation, _ = env.reset(seed=0)
    action, _ = model.predict(observation, deterministic=True)
    assert env.action_space.contains(action)


def test_maskable_ppo_reads_action_masks() -> None:
    """sb3-contrib finds `action_masks()` and only ever samples ready operations."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    torch.set_num_threads(1)
    env = gym.make("StatefulWorkflow-v0", family="barriers", depth=4)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0,
                        device="cpu")
    model.learn(total_timesteps=128)
    for seed in range(20):
        observation, info = env.reset(seed=seed)
        masks = get_action_masks(model.get_env())[0]
        assert masks.shape == (8 + 4,)
        action, _ = model.predict(observation, action_masks=info["action_mask"])
        assert info["action_mask"][action[0]], "a masked-out operation was chosen"


@pytest.mark.parametrize("env_id", sorted(envs.WORKFLOW_PRESETS))
def test_make_vec_env_builds_and_steps_every_workflow_id(env_id: str) -> None:
    """SB3's make_vec_env asks for render_mode="rgb_array"; its VecEnv then steps and renders."""
    vec = make_vec_env(env_id, n_envs=2, seed=0)
    observations = vec.reset()
    assert set(observations) == set(gym.make(env_id).observation_space.spaces)
    assert vec.render_mode == "rgb_array"
    for _ in range(5):
        actions = np.array([vec.action_space.sample() for _ in range(2)])
        observations, rewards, dones, infos = vec.step(actions)
        assert rewards.shape == dones.shape == (2,)
    frames = vec.get_images()
    assert len(frames) == 2
    assert all(f.dtype == np.uint8 and f.ndim == 3 and f.shape[2] == 3 for f in frames)
    vec.close()
