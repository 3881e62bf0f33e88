"""torchrl's GymEnv wraps every diagym family as it is: it passes frameskip=1 and retries
without it only on a TypeError saying "unexpected keyword argument" (envs/_core/checks.py
UnknownParameterError), then its specs must hold for the env's spaces."""

from __future__ import annotations

import pytest

import diagym  # noqa: F401  (registers the ids)

pytest.importorskip("torchrl", reason="torchrl is not installed (the Makefile's dev install "
                    "adds it: pip install torchrl)")

from torchrl.envs import GymEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402


@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("StatefulWorkflow-v0", {}),
    ("StatefulWorkflowHistory-v0", {"width": 4}),
    ("DACSSteering-v0", {"observation_mode": "numeric"}),
])
def test_gym_env_wraps_and_its_specs_hold(env_id: str, kwargs: dict) -> None:
    env = GymEnv(env_id, **kwargs)
    check_env_specs(env, seed=0)
    rollout = env.rollout(6)  # random actions, up to the first episode end
    steps = rollout.batch_size[0]
    assert 1 <= steps <= 6
    assert rollout["next", "reward"].shape == (steps, 1)
    assert bool(rollout["next", "done"][-1]) or steps == 6
    env.close()
