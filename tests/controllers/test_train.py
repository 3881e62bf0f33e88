"""SB3 agents: train briefly, save, reload, and evaluate through the shared runner."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from diagym import envs  # noqa: F401
from diagym.analysis.cli import main
from diagym.analysis.training import TrainConfig, read_curve, train
from diagym.controllers.rollout import rollout
from diagym.controllers.runlog import ResumeNeeded
from diagym.controllers.sb3.policy import SB3Policy

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
    # The entity preset (maskable-ppo alone, 1.3 s an arm) rather than the default one, whose
    # recurrent arms take 5 s each at any --steps; docs/RL.md's block plays the default.
    argv = ["rl-study", "--arch", "entity", "--steps", "256", "--episodes", "4",
            "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 * 2 * (1 + 3)  # feedback x width x (1 algo + 3 references)
    exact = [r for r in rows if r["agent"] == "exact"]
    assert all(r["success"] == 1.0 for r in exact)
    assert (tmp_path / "rl_profile.png").stat().st_size > 0
    assert (tmp_path / "maskable-ppo_history_w8_entity" / "model.zip").exists()
    # A rerun into the same DIR resumes every finished run: no training, the same table.
    curves = {c: c.read_text() for c in tmp_path.glob("*/curve.csv")}
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == rows
    assert {c: c.read_text() for c in tmp_path.glob("*/curve.csv")} == curves


def test_one_hot_encoding_equals_the_identity_matrix_rows() -> None:
    """The fast flat-index encoding against np.eye, single observations and batches."""
    import numpy as np

    from diagym.controllers.sb3.observation import ONE_HOT_KEYS, encode, one_hot_space

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


def test_the_layout_cache_is_bounded_and_keyed_by_the_space_object() -> None:
    """Spaces made without end (an env per trial) keep at most LAYOUT_CACHE_SIZE layouts, a
    space in use gets its own layout back, and a new space never gets another's."""
    import numpy as np

    from diagym.controllers.sb3 import observation

    observation._cached_layout.cache_clear()
    first = gym.make("StatefulWorkflow-v0", candidates=5).observation_space
    layout = observation._layout(first)
    assert observation._layout(first) is layout
    for candidates in [2, 3, 4] * observation.LAYOUT_CACHE_SIZE:
        space = gym.make("StatefulWorkflow-v0", candidates=candidates).observation_space
        assert observation._layout(space).total == observation._build_layout(space).total
    info = observation._cached_layout.cache_info()
    assert info.currsize == observation.LAYOUT_CACHE_SIZE
    again = observation._layout(first)
    assert again is not layout and again.total == layout.total
    np.testing.assert_array_equal(again.offsets, layout.offsets)


# -- hyperparameter validation and resumable runs ------------------------------------------
TINY = {"n_steps": 64, "batch_size": 64, "n_epochs": 2}  # 2 envs: one rollout = 128 steps


def _tiny(steps: int, algo: str = "maskable-ppo", **overrides: object) -> TrainConfig:
    settings: dict = {"algo": algo, "env": "StatefulWorkflow-v0", "env_kwargs": dict(SMALL),
                      "steps": steps, "n_envs": 2, "eval_episodes": 2, "eval_every": 192,
                      "hyperparameters": dict(TINY), **overrides}
    return TrainConfig(**settings)


def _steps(out: Path) -> list[int]:
    return [int(row["steps"]) for row in read_curve(out / "curve.csv")]


def _num_timesteps(out: Path, algo: str = "maskable-ppo") -> int:
    from diagym.controllers.sb3.policy import algo_class

    return int(algo_class(algo).load(out / "model.zip", device="cpu").num_timesteps)


def test_unknown_or_reserved_hyperparameters_are_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from diagym.analysis.training import allowed_hyperparameters

    allowed = allowed_hyperparameters("recurrent-ppo")
    assert allowed == sorted(allowed) and {"n_epochs", "batch_size", "policy_kwargs"} <= set(
        allowed)
    assert not {"policy", "env", "seed", "device", "verbose", "_init_setup_model"} & set(allowed)
    out = tmp_path / "run"
    with pytest.raises(ValueError) as error:
        train(_tiny(128, "recurrent-ppo", hyperparameters={"n_epoch": 4}), out)
    assert str(error.value).startswith(
        "hyperparameters: unknown key 'n_epoch' for recurrent-ppo; allowed: batch_size, "
        "clip_range, ")
    assert str(error.value).endswith(", ".join(allowed))
    with pytest.raises(ValueError, match=r"^hyperparameters: reserved key 'seed' .*for ppo; "):
        train(_tiny(128, "ppo", hyperparameters={"seed": 3}), out)
    assert not out.exists()
    tmp_path.joinpath("cli").mkdir()
    assert main(["train", "--algo", "ppo", "--env", "StatefulWorkflow-v0", "--steps", "64",
                 "--hyperparameters", '{"n_epoch": 4}', "--out", str(tmp_path / "cli")]) == 2
    assert capsys.readouterr().err.startswith(
        "diagym train: error: hyperparameters: unknown key 'n_epoch' for ppo; allowed: ")
    assert list(tmp_path.joinpath("cli").iterdir()) == []


@pytest.mark.parametrize("algo", ["maskable-ppo", "recurrent-ppo"])
def test_a_resumed_run_continues_the_curve_like_an_uninterrupted_one(algo: str,
                                                                     tmp_path: Path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(_tiny(768, algo), whole)
    train(_tiny(256, algo), split)
    assert _steps(split) == [0, 256]
    first_wall = read_curve(split / "curve.csv")[-1]["wall_s"]
    train(_tiny(768, algo), split, resume=True)
    steps = _steps(split)
    assert steps[0] == 0 and steps[-1] >= 768
    assert all(a < b for a, b in zip(steps, steps[1:], strict=False))  # no duplicate row
    assert steps == _steps(whole) == [0, 256, 384, 640, 768]  # same checkpoint cadence
    walls = [row["wall_s"] for row in read_curve(split / "curve.csv")]
    assert walls == sorted(walls) and walls[2] >= first_wall  # cumulative time axis
    assert _num_timesteps(split, algo) >= 768
    assert json.loads((split / "config.json").read_text())["steps"] == 768
    assert not list(split.glob("*.tmp"))
    train(_tiny(768, algo), split, resume=True)  # already there: nothing more to learn
    assert _steps(split) == steps


def test_a_kill_between_saving_the_model_and_appending_its_row_is_repaired_on_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import diagym.analysis.training as train_module

    evaluate, calls = train_module.evaluate, []

    def killed_on_third_evaluation(*args: object) -> tuple[float, float]:
        calls.append(1)
        if len(calls) == 3:  # model.zip already saved at this checkpoint
            raise KeyboardInterrupt
        return evaluate(*args)

    monkeypatch.setattr(train_module, "evaluate", killed_on_third_evaluation)
    with pytest.raises(KeyboardInterrupt):
        train(_tiny(1024), tmp_path)
    monkeypatch.setattr(train_module, "evaluate", evaluate)
    assert _steps(tmp_path) == [0, 256] and _num_timesteps(tmp_path) == 384
    model_bytes = (tmp_path / "model.zip").read_bytes()
    train(_tiny(384), tmp_path, resume=True)  # nothing to learn: only the lost row
    assert _steps(tmp_path) == [0, 256, 384]
    assert (tmp_path / "model.zip").read_bytes() == model_bytes
    lines = (tmp_path / "curve.csv").read_text().splitlines()  # a kill after the last save
    (tmp_path / "curve.csv").write_text("\n".join(lines[:-1]) + "\n")
    train(_tiny(768), tmp_path, resume=True)
    assert _steps(tmp_path) == [0, 256, 384, 640, 768]
    assert _num_timesteps(tmp_path) == 768


def test_resume_refuses_other_settings_and_a_used_dir_needs_resume(tmp_path: Path) -> None:
    train(_tiny(128), tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError) as error:
        train(_tiny(256, n_envs=4, seed=1), tmp_path, resume=True)
    assert str(error.value) == (
        f"out: {tmp_path} was trained with other settings; --resume changes only --steps: "
        "n_envs (stored 2, requested 4); seed (stored 0, requested 1)")
    with pytest.raises(ValueError, match=r"hyperparameters \(stored .*\"n_epochs\": 2.*"
                                         r"requested .*\"n_epochs\": 3"):
        train(_tiny(256, hyperparameters={**TINY, "n_epochs": 3}), tmp_path, resume=True)
    with pytest.raises(ResumeNeeded) as error:
        train(_tiny(256), tmp_path)
    assert str(error.value) == (f"out {tmp_path} holds a training run: pass --resume to "
                                "continue it (in Python: pass resume=True), or choose another "
                                "--out")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_cli_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "maskable-ppo", "--env", "StatefulWorkflow-v0", "--env-kwargs",
            json.dumps(SMALL), "--n-envs", "2", "--eval-episodes", "2", "--eval-every", "128",
            "--hyperparameters", json.dumps(TINY), "--out", str(out)]
    assert main([*argv, "--steps", "128", "--resume"]) == 0  # nothing to resume: fresh run
    assert _steps(out) == [0, 128]
    capsys.readouterr()
    assert main([*argv, "--steps", "256"]) == 2
    assert capsys.readouterr().err.startswith(
        f"diagym train: error: out {out} holds a training run: pass --resume")
    assert main([*argv, "--steps", "256", "--resume"]) == 0
    assert "256 steps" in capsys.readouterr().out
    assert _steps(out) == [0, 128, 256]
    assert main([*argv, "--steps", "384", "--seed", "1", "--resume"]) == 2
    assert "seed (stored 0, requested 1)" in capsys.readouterr().err
    assert _steps(out) == [0, 128, 256]
