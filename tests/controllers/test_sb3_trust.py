"""Model files are pickles: SB3Policy.load plays only runs `diagym train` wrote (their hash
and a config naming a diagym env), unless trusted, and refuses before unpickling anything."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

from diagym import envs  # noqa: F401
from diagym.analysis.training import TrainConfig, train
from diagym.controllers.rollout import rollout
from diagym.controllers.sb3 import policy as sb3_policy
from diagym.controllers.sb3.policy import (
    MODEL_HASH_NAME,
    SB3Policy,
    verify_model,
    write_model_hash,
)

SMALL = {"n_ops": 4, "depth": 2, "width": 1, "candidates": 2, "snapshot_period": 1}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(algo="ppo", env="StatefulWorkflow-v0", env_kwargs=SMALL, steps=256,
                      n_envs=2, eval_episodes=2, joint_actions=False), out)
    return out


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A private copy of the trained run, free to be tampered with."""
    return Path(shutil.copytree(trained, tmp_path / "copy"))


@pytest.fixture
def no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to load model.zip fails the test: a refusal must come first."""
    def refuse(_algo: str) -> None:
        raise AssertionError("model.zip was loaded")

    monkeypatch.setattr(sb3_policy, "algo_class", refuse)


def test_training_writes_the_sha256_of_the_saved_model(run: Path) -> None:
    digest = hashlib.sha256((run / "model.zip").read_bytes()).hexdigest()
    assert (run / MODEL_HASH_NAME).read_text() == f"{digest}  model.zip\n"
    assert verify_model(run)["env"] == "StatefulWorkflow-v0"
    records = rollout(gym.make("StatefulWorkflow-v0", **SMALL), SB3Policy.load(run), 2, seed=0)
    assert len(records) == 2


@pytest.mark.usefixtures("no_unpickling")
def test_a_changed_model_is_refused_before_it_is_unpickled(run: Path) -> None:
    with (run / "model.zip").open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ValueError, match=r"does not match the sha256.*is a pickle.*--trust-model"):
        SB3Policy.load(run / "model.zip")


@pytest.mark.usefixtures("no_unpickling")
def test_a_model_without_a_hash_is_refused(run: Path) -> None:
    (run / MODEL_HASH_NAME).unlink()
    with pytest.raises(ValueError, match="not written by `diagym train`.*--trust-model"):
        SB3Policy.load(run)


@pytest.mark.usefixtures("no_unpickling")
@pytest.mark.parametrize("env_id", ["os:system", "CartPole-v1", None])
def test_a_config_naming_no_diagym_env_is_refused(run: Path, env_id: str | None) -> None:
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "env": env_id}))
    with pytest.raises(ValueError, match="not a registered diagym id.*is a pickle"):
        SB3Policy.load(run)


@pytest.mark.usefixtures("no_unpickling")
@pytest.mark.parametrize("text", ["[1, 2]", "{not json", '{"env": "StatefulWorkflow-v0"}'])
def test_a_malformed_config_is_refused(run: Path, text: str) -> None:
    (run / "config.json").write_text(text)
    with pytest.raises(ValueError, match="model: .*--trust-model"):
        SB3Policy.load(run)


def test_trust_loads_an_unrecognised_model_and_a_rewritten_hash_is_accepted(run: Path) -> None:
    (run / MODEL_HASH_NAME).unlink()
    assert SB3Policy.load(run, trust=True).algo == "ppo"
    write_model_hash(run)
    assert SB3Policy.load(run).algo == "ppo"


def test_run_refuses_an_unrecognised_model_in_one_line_unless_trusted(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from diagym.analysis.cli import main

    (run / MODEL_HASH_NAME).unlink()
    argv = ["run", "--env", "StatefulWorkflow-v0", "--env-kwargs", json.dumps(SMALL),
            "--policy", f"sb3:{run / 'model.zip'}", "--episodes", "2", "--json"]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--trust-model" in error and "pickle" in error
    assert main([*argv, "--trust-model"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2


def test_train_resume_refuses_a_changed_model_before_loading_it(
        run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`train --resume` unpickles model.zip too: it checks the hash first, unless trusted."""
    from stable_baselines3 import PPO

    config = TrainConfig(algo="ppo", env="StatefulWorkflow-v0", env_kwargs=SMALL, steps=512,
                         n_envs=2, eval_episodes=2, joint_actions=False)
    with (run / "model.zip").open("ab") as handle:
        handle.write(b"\0")
    loaded: list[object] = []
    monkeypatch.setattr(PPO, "load", classmethod(lambda cls, *args, **kwargs: loaded.append(args)))
    with pytest.raises(ValueError, match="does not match the sha256"):
        train(config, run, resume=True)
    assert loaded == []


@pytest.mark.parametrize("policy", ["exact", "text-oracle"])
def test_trust_model_without_a_model_is_refused(policy: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from diagym.analysis.cli import main

    status = main(["run", "--env", "StatefulWorkflow-v0", "--policy", policy, "--episodes", "1",
                   "--trust-model"])
    err = capsys.readouterr().err.splitlines()
    assert status == 2
    assert err == [f"diagym run: error: --trust-model loads sb3:PATH models; --policy {policy} "
                   "has none"]


def test_the_cli_plays_a_model_on_one_torch_thread_unless_told(
        run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--policy sb3:DIR` sets one torch thread (small networks run slower on many); with
    OMP_NUM_THREADS set, the user's choice stands."""
    import argparse

    import torch

    from diagym.analysis.cli.policies import build_policy

    before = torch.get_num_threads()
    args = argparse.Namespace(policy=f"sb3:{run}", trust_model=False)
    env = gym.make("StatefulWorkflow-v0", **SMALL)
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        torch.set_num_threads(2)
        with build_policy(args, "StatefulWorkflow-v0", SMALL) as built:
            built.factory(env)
        assert torch.get_num_threads() == 2
        monkeypatch.delenv("OMP_NUM_THREADS")
        with build_policy(args, "StatefulWorkflow-v0", SMALL) as built:
            built.factory(env)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_training_leaves_nothing_in_the_temp_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3's default logger made an empty SB3-<date> directory in the temp folder at every
    learn(); train writes its curve itself and leaves none."""
    import tempfile

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    train(TrainConfig(algo="ppo", env="StatefulWorkflow-v0", env_kwargs=SMALL, steps=128,
                      n_envs=2, eval_episodes=2, joint_actions=False), tmp_path / "out")
    assert not [p.name for p in temp.iterdir() if p.name.startswith("SB3-")]
