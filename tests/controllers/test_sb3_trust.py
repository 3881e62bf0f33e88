"""Model files are pickles: SB3Policy.load plays only runs this user's `diagym train` wrote
(model.zip and config.json recorded in the user's store, a config naming a diagym env),
unless trusted, and refuses before unpickling anything; reading is bounded either way."""

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
from diagym.controllers.sb3.trust import TRUST_STORE_ENV

SMALL = {"n_ops": 4, "depth": 2, "width": 1, "candidates": 2, "snapshot_period": 1}
NOT_OURS = r"are not a run this user's `diagym train` wrote.*is a pickle.*--trust-model"


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
    with pytest.raises(ValueError, match=NOT_OURS):
        SB3Policy.load(run / "model.zip")


@pytest.mark.usefixtures("no_unpickling")
def test_a_model_trained_elsewhere_is_refused(run: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's store (here an empty one) holds no record of the run."""
    monkeypatch.setenv(TRUST_STORE_ENV, str(tmp_path / "another-users-store"))
    with pytest.raises(ValueError, match=NOT_OURS):
        SB3Policy.load(run)


@pytest.mark.usefixtures("no_unpickling")
def test_a_rehashed_payload_does_not_certify_itself(run: Path) -> None:
    """The hash file beside the model certified it: a changed model.zip with its hash file
    rewritten to match loaded without --trust-model."""
    with (run / "model.zip").open("ab") as handle:
        handle.write(b"\0")
    digest = hashlib.sha256((run / "model.zip").read_bytes()).hexdigest()
    (run / MODEL_HASH_NAME).write_text(f"{digest}  model.zip\n")
    with pytest.raises(ValueError, match=NOT_OURS):
        SB3Policy.load(run)


@pytest.mark.usefixtures("no_unpickling")
def test_a_changed_config_is_refused(run: Path) -> None:
    """config.json names the env gymnasium builds: it is part of what training recorded."""
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "seed": 99}))
    with pytest.raises(ValueError, match=NOT_OURS):
        SB3Policy.load(run)


@pytest.mark.usefixtures("no_unpickling")
@pytest.mark.timeout(60)
def test_a_fifo_beside_the_model_is_not_waited_on(run: Path) -> None:
    import os

    (run / MODEL_HASH_NAME).unlink()
    os.mkfifo(run / MODEL_HASH_NAME)  # read by nothing now: the store decides
    assert verify_model(run)["env"] == "StatefulWorkflow-v0"
    (run / "config.json").unlink()
    os.mkfifo(run / "config.json")
    with pytest.raises(ValueError, match="config.json is not a regular file"):
        SB3Policy.load(run, trust=True)


def test_a_zip_inflating_past_the_bound_is_refused_even_trusted(run: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """SB3 inflates every entry into memory: a model.zip inflating to 3 GiB was a
    MemoryError traceback."""
    from diagym.controllers.sb3 import trust

    monkeypatch.setattr(trust, "MAX_UNZIPPED_BYTES", 1000)  # the real bound is 1 GiB
    with pytest.raises(ValueError, match=r"inflating to [\d,]+ bytes; a model is at most"):
        SB3Policy.load(run, trust=True)


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


def test_trust_loads_an_unrecognised_model_and_training_records_it(
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUST_STORE_ENV, str(tmp_path / "empty-store"))
    assert SB3Policy.load(run, trust=True).algo == "ppo"
    write_model_hash(run)  # what training does at each checkpoint
    assert SB3Policy.load(run).algo == "ppo"


def test_run_refuses_an_unrecognised_model_in_one_line_unless_trusted(
        run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from diagym.analysis.cli import main

    monkeypatch.setenv(TRUST_STORE_ENV, str(run.parent / "empty-store"))
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
    with pytest.raises(ValueError, match=NOT_OURS):
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
