"""DACSSteering's numeric observation mode: SB3's checker accepts it, it says the same as the
text mode's numeric fields, and an SB3 agent trains on it with focus actions."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from diagym import envs  # noqa: F401


@pytest.mark.parametrize("focus", [False, True])
def test_sb3_check_env_accepts_the_numeric_observation_without_a_warning(focus: bool) -> None:
    from stable_baselines3.common.env_checker import check_env

    env = gym.make("DACSSteering-v0", observation_mode="numeric", agent_chosen_focus=focus)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, warn=True)
    assert not any(isinstance(s, gym.spaces.Text) for s in env.observation_space.spaces.values())


def test_sb3_check_env_refuses_the_text_observation() -> None:
    """The control: the default observation (its window is Text) is what SB3 cannot take."""
    from stable_baselines3.common.env_checker import check_env

    with pytest.raises(AssertionError):
        check_env(gym.make("DACSSteering-v0").unwrapped, warn=False)


@pytest.mark.parametrize("focus", [False, True])
def test_numeric_fields_agree_with_the_text_mode_step_by_step(focus: bool) -> None:
    kwargs = {"n_agents": 4, "agent_chosen_focus": focus, "window": 1024}
    text = gym.make("DACSSteering-v0", **kwargs)
    numeric = gym.make("DACSSteering-v0", observation_mode="numeric", **kwargs)
    rng = np.random.default_rng(7)
    a, info_a = text.reset(seed=3)
    b, info_b = numeric.reset(seed=3)
    for _ in range(40):
        assert info_a == info_b
        assert set(b) == set(a) - {"window"} | {"focused", "window_fill"}
        for key in ("visible_facts", "visible_decisions"):
            np.testing.assert_array_equal(b[key], np.asarray(a[key]).reshape(-1))
        for key in ("requester", "key", "options", "depends_on"):
            np.testing.assert_array_equal(b[key], a[key])
        shown = numeric.unwrapped.current_window.tokens  # the window of the new request
        assert b["window_fill"][0] == pytest.approx(min(shown / 1024, 1.0))
        assert numeric.observation_space.contains(b)
        action = int(rng.integers(numeric.action_space.n))
        a, _, done_a, _, info_a = text.step(action)
        b, _, done_b, _, info_b = numeric.step(action)
        assert done_a == done_b
        if focus and "focus" in info_b:
            assert int(b["focused"]) == info_b["focus"] + 1
        if done_a:
            seed = int(rng.integers(100))
            a, info_a = text.reset(seed=seed)
            b, info_b = numeric.reset(seed=seed)


def test_focused_is_the_requester_under_dacs_and_none_under_flat() -> None:
    dacs = gym.make("DACSSteering-v0", observation_mode="numeric")
    flat = gym.make("DACSSteering-v0", observation_mode="numeric", context_mode="flat")
    obs, info = dacs.reset(seed=1)
    assert int(obs["focused"]) == info["requester"] + 1
    obs, _ = flat.reset(seed=1)
    assert int(obs["focused"]) == 0


def test_the_text_mode_is_unchanged_by_default() -> None:
    env = gym.make("DACSSteering-v0")
    assert env.unwrapped.observation_mode == "text"
    assert list(env.observation_space.spaces) == [
        "depends_on", "key", "options", "requester", "visible_decisions", "visible_facts",
        "window"]
    assert env.observation_space["visible_facts"].shape == (10, 70)


def test_a_bad_observation_mode_fails_naming_it() -> None:
    with pytest.raises(ValueError, match="observation_mode"):
        gym.make("DACSSteering-v0", observation_mode="pixels")


def test_ppo_trains_with_focus_actions_end_to_end(tmp_path: Path) -> None:
    from diagym.analysis.training import TrainConfig, read_curve, train
    from diagym.controllers.rollout import rollout
    from diagym.controllers.sb3.policy import SB3Policy

    kwargs = {"n_agents": 3, "observation_mode": "numeric", "agent_chosen_focus": True,
              "window": 1024}
    config = TrainConfig(algo="ppo", env="DACSSteering-v0", env_kwargs=kwargs, steps=2048,
                         n_envs=2, eval_episodes=2, joint_actions=False,
                         hyperparameters={"n_steps": 512, "batch_size": 256, "n_epochs": 2})
    train(config, tmp_path)
    assert read_curve(tmp_path / "curve.csv")[-1]["steps"] >= 2048
    env = gym.make("DACSSteering-v0", **kwargs)
    records = rollout(env, SB3Policy.load(tmp_path), episodes=2, seed=0)
    assert all(0 <= r.metrics["accuracy"] <= 1 for r in records)
