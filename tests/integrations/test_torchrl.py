"""torchrl's GymEnv wraps every diagym family as it is: it passes frameskip=1 and retries
without it only on a TypeError saying "unexpected keyword argument" (envs/_core/checks.py
UnknownParameterError), then its specs must hold for the env's spaces; with num_envs its
vector path stacks the infos, which holds because info["failure"] is an integer code in every
step (envs/_core/failures.py)."""

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


def test_gym_env_wraps_a_vector_of_envs() -> None:
    """torchrl's vector path (gymnasium's AsyncVectorEnv of single envs) stacks each info key
    into a tensor: info["failure"] must be a number in every step, never None or a name. Its
    worker processes import nothing, so the id names its module ("diagym:..."). DACSSteering
    is not here: its info["key"] is a name, which torchrl's vector path cannot stack either
    (docs/INTEGRATIONS.md)."""
    env = GymEnv("diagym:StatefulWorkflow-v0", num_envs=2)
    try:
        check_env_specs(env, seed=0)
        rollout = env.rollout(4, break_when_any_done=False)
        assert rollout["next", "failure"].dtype.is_floating_point is False
        assert rollout["next", "failure"].shape[:2] == (2, 4)
    finally:
        env.close()
