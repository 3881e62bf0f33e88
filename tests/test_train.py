"""SB3 agents: train briefly, save, reload, and evaluate through the shared runner."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import envs  # noqa: F401
from analysis.cli import main
from analysis.train import TrainConfig, read_curve, train
from controllers.policy import rollout
from controllers.sb3_agents import SB3Policy

SMALL = {"n_ops": 4, "depth": 2, "width": 1, "candidates": 2, "snapshot_period": 1}


@pytest.mark.parametrize("algo", ["maskable-ppo", "recurrent-ppo", "ppo"])
def test_train_save_reload_and_evaluate_deterministically(algo: str, tmp_path: Path) -> None:
    config = TrainConfig(algo=algo, env="StatefulWorkflow-v0", env_kwargs=SMALL, steps=1024,
                         n_envs=4, eval_episodes=8, joint_actions=algo != "ppo")
    model_path = train(config, tmp_path)
    assert model_path.exists() and (tmp_path / "curve.png").stat().st_size > 0
    curve = read_curve(tmp_path / "curve.csv")
    assert curve[0]["steps"] == 0 and curve[-1]["steps"] >= 1024
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["algo"] == algo and saved["env_kwargs"] == SMALL
    env = gym.make("StatefulWorkflow-v0", **SMALL)
    policy = SB3Policy.load(model_path)
    first = rollout(env, policy, episodes=12, seed=5)
    second = rollout(env, SB3Policy.load(tmp_path), episodes=12, seed=5)
    assert first == second  # deterministic by seed, recurrent state reset per episode
    assert {r.first_failure for r in first} <= {None, "candidate", "dependency", "completed"}


def test_maskable_agent_never_takes_a_masked_operation(tmp_path: Path) -> None:
    config = TrainConfig(algo="maskable-ppo", env="StatefulWorkflow-v0",
                         env_kwargs={**SMALL, "n_ops": 8, "depth": 4}, steps=512, n_envs=4,
                         eval_episodes=4)
    train(config, tmp_path)
    env = gym.make("StatefulWorkflow-v0", n_ops=8, depth=4, width=1, candidates=2)
    records = rollout(env, SB3Policy.load(tmp_path), episodes=40, seed=0)
    assert all(r.first_failure != "dependency" for r in records)
    assert all(r.first_failure != "completed" for r in records)


def test_run_accepts_an_sb3_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--algo", "maskable-ppo", "--env", "StatefulWorkflow-v0",
                 "--env-kwargs", json.dumps(SMALL), "--steps", "512", "--n-envs", "4",
                 "--eval-episodes", "4", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["run", "--env", "StatefulWorkflow-v0", "--env-kwargs", json.dumps(SMALL),
                 "--policy", f"sb3:{tmp_path / 'model.zip'}", "--episodes", "16",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 16
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "sb3:/nonexistent/m.zip",
                 "--episodes", "1"]) == 2


def test_a_dacs_agent_trains_on_numeric_observations(tmp_path: Path) -> None:
    config = TrainConfig(algo="ppo", env="DACSSteering-v0", env_kwargs={"n_agents": 3},
                         steps=256, n_envs=2, eval_episodes=2, joint_actions=False)
    train(config, tmp_path)
    env = gym.make("DACSSteering-v0", n_agents=3)
    records = rollout(env, SB3Policy.load(tmp_path), episodes=2, seed=0)
    assert all(0 <= r.metrics["accuracy"] <= 1 for r in records)


def test_rl_study_profiles_agents_beside_references(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rl-study", "--steps", "256", "--episodes", "4", "--out", str(tmp_path),
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 * 2 * (2 + 3)  # feedback x width x (2 algos + 3 references)
    exact = [r for r in rows if r["agent"] == "exact"]
    assert all(r["success"] == 1.0 for r in exact)
    assert (tmp_path / "rl_profile.png").stat().st_size > 0
    assert (tmp_path / "maskable-ppo_history_w8" / "model.zip").exists()


def test_one_hot_encoding_equals_the_identity_matrix_rows() -> None:
    """The fast flat-index encoding against np.eye, single observations and batches."""
    import numpy as np

    from controllers.sb3_obs import ONE_HOT_KEYS, encode, one_hot_space

    space = gym.make("StatefulWorkflow-v0", candidates=5).observation_space
    space.seed(3)
    samples = [space.sample() for _ in range(6)]
    batch = {k: np.stack([s[k] for s in samples]) for k in samples[0]}
    encoded_batch = encode(batch, space)
    hot_space = one_hot_space(space)
    for i, sample in enumerate(samples):
        encoded = encode(sample, space)
        assert hot_space.contains(encoded)
        for key in ONE_HOT_KEYS:
            sub = space.spaces[key]
            low, high = int(sub.low.min()), int(sub.high.max())
            reference = np.eye(high - low + 1, dtype=np.int8)[
                np.asarray(sample[key], dtype=int) - low].ravel()
            np.testing.assert_array_equal(encoded[key], reference)
            np.testing.assert_array_equal(encoded_batch[key][i], reference)
