"""`diagym train` refuses a rollout buffer larger than memory with one line (exit 2) before
anything is allocated, instead of numpy's allocation traceback or an out-of-memory kill."""

from __future__ import annotations

import json

import pytest

from diagym.analysis.cli.main import main
from diagym.analysis.cli.train import available_bytes, rollout_bytes
from diagym.analysis.training import TrainConfig


def _config(n_envs: int, n_steps: int) -> TrainConfig:
    import diagym  # noqa: F401  (registers the ids)

    return TrainConfig(algo="ppo", arch="mlp", env="StatefulWorkflow-v0", env_kwargs={},
                       steps=100, n_envs=n_envs, seed=0, joint_actions=True, one_hot=True,
                       eval_episodes=1, eval_every=0, hyperparameters={"n_steps": n_steps})


def test_rollout_bytes_grow_with_n_envs_times_n_steps() -> None:
    one = rollout_bytes(_config(1, 1))
    assert one > 0
    assert rollout_bytes(_config(8, 128)) == 8 * 128 * one
    assert rollout_bytes(_config(3, 10**6)) == 3 * 10**6 * one


def test_the_default_run_fits() -> None:
    assert 0 < rollout_bytes(_config(8, 128)) < available_bytes()


@pytest.mark.parametrize("n_envs, n_steps", [(8, 10**11), (1024, 10**7)])
def test_a_buffer_larger_than_memory_is_one_line_exit_2(tmp_path, capsys, n_envs: int,
                                                        n_steps: int) -> None:
    out = tmp_path / "run"
    status = main(["train", "--algo", "ppo", "--env", "StatefulWorkflow-v0", "--steps", "100",
                   "--n-envs", str(n_envs), "--hyperparameters",
                   json.dumps({"n_steps": n_steps}), "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1
    assert err.startswith(f"diagym train: error: --n-envs {n_envs} x n_steps {n_steps}: the "
                          "rollout buffer needs ")
    assert "GiB of memory available; lower n_steps (--hyperparameters) or --n-envs" in err
    assert not (out / "model.zip").exists()
