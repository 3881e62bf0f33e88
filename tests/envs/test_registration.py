"""Every registered id: Gymnasium's checker, seeded determinism, make_vec (MiniGrid's pattern)."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.workflow.params import WorkflowSpec

ENV_IDS = sorted(envs.WORKFLOW_PRESETS)


def test_every_preset_is_registered() -> None:
    registered = {env_id for env_id in gym.registry if env_id.startswith("StatefulWorkflow")}
    assert registered == set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env(env_id: str) -> None:
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_presets_have_documented_parameters(env_id: str) -> None:
    env = gym.make(env_id)
    expected = WorkflowSpec(**envs.WORKFLOW_PRESETS[env_id])
    assert env.unwrapped.spec_params == expected


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_trajectory(env_id: str) -> None:
    actions = np.random.default_rng(7).integers(0, [8, 4], size=(40, 2))

    def trajectory() -> list:
        env = gym.make(env_id)
        out = []
        observation, info = env.reset(seed=11)
        out.append((observation, info["task_seed"]))
        for action in actions:
            observation, reward, terminated, truncated, info = env.step(action)
            out.append((observation, reward, terminated, info["failure"]))
            if terminated:
                observation, info = env.reset()
                out.append((observation, info["task_seed"]))
        return out

    first, second = trajectory(), trajectory()
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert gym.utils.env_checker.data_equivalence(a, b)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_vec(env_id: str) -> None:
    vec = gym.make_vec(env_id, num_envs=3)
    observations, infos = vec.reset(seed=0)
    assert observations in vec.observation_space
    actions = vec.action_space.sample()
    observations, rewards, terminated, truncated, infos = vec.step(actions)
    assert observations in vec.observation_space
    assert rewards.shape == terminated.shape == truncated.shape == (3,)
    vec.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_parameter_is_a_make_kwarg(env_id: str) -> None:
    env = gym.make(env_id, family="barriers", n_ops=6, depth=3, width=2, candidates=3,
                   snapshot_period=2, error_allowance=1, locality="clustered", updates="static",
                   labels="reversed")
    spec = env.unwrapped.spec_params
    assert (spec.family, spec.n_ops, spec.depth, spec.width, spec.candidates) == (
        "barriers", 6, 3, 2, 3)
    assert env.action_space == gym.spaces.MultiDiscrete([6, 3])


def test_make_with_module_prefix_needs_no_import() -> None:
    code = (
        "import gymnasium as gym; env = gym.make('envs:StatefulWorkflow-v0'); "
        "obs, info = env.reset(seed=0); print(obs['codes'].shape, env.unwrapped.task.codes.shape)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "(32,) (8, 4)"


def test_ansi_render_shows_rules_task_and_observation() -> None:
    env = gym.make("StatefulWorkflow-v0", render_mode="ansi")
    env.reset(seed=3)
    text = env.render()
    task = env.unwrapped.task
    assert "execute(v, a)" in text
    for v in range(8):
        codes = " ".join(str(int(c)) for c in task.codes[v])
        assert f"op {v}: " in text and f"codes [{codes}]" in text
    assert "registers: x[0]=" in text
