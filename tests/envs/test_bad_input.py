"""Bad parameters and out-of-space actions fail with the documented messages."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from envs.dacs.params import DacsParams
from envs.workflow.params import WorkflowSpec

BAD_PARAMETERS = [
    ({"family": "tree"}, "family must be one of 'chains' | 'barriers'; got 'tree'"),
    ({"n_ops": 0}, "n_ops must be in 1..32; got 0"),
    ({"n_ops": 33}, "n_ops must be in 1..32; got 33"),
    ({"n_ops": 2.5}, "n_ops must be an integer (in 1..32); got 2.5"),
    ({"depth": 3}, "depth must be a divisor of n_ops=8: [1, 2, 4, 8]; got 3"),
    ({"depth": 0}, "depth must be a divisor of n_ops=8: [1, 2, 4, 8]; got 0"),
    ({"depth": 16}, "depth must be a divisor of n_ops=8: [1, 2, 4, 8]; got 16"),
    ({"width": 0}, "width must be in 1..8; got 0"),
    ({"width": 9}, "width must be in 1..8; got 9"),
    ({"candidates": 1}, "candidates must be in 2..8; got 1"),
    ({"candidates": 9}, "candidates must be in 2..8; got 9"),
    ({"candidates": True}, "candidates must be an integer (in 2..8); got True"),
    ({"snapshot_period": -1}, "snapshot_period must be an integer >= 0; got -1"),
    ({"hidden_resampling": "yes"}, "hidden_resampling must be True | False; got 'yes'"),
    ({"error_allowance": -2}, "error_allowance must be an integer >= 0; got -2"),
    ({"locality": "local"},
     "locality must be one of 'balanced' | 'clustered' | 'concentrated'; got 'local'"),
    ({"updates": "mult"}, "updates must be one of 'additive' | 'static'; got 'mult'"),
    ({"labels": "sorted"}, "labels must be one of 'random' | 'reversed'; got 'sorted'"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_PARAMETERS)
def test_bad_parameter_names_parameter_and_allowed_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        gym.make("StatefulWorkflow-v0", **kwargs)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        gym.make_vec("StatefulWorkflow-v0", num_envs=2, **kwargs)


def test_unknown_parameter_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"^unknown StatefulWorkflow parameter\(s\) \['colour'\]"):
        WorkflowSpec.from_kwargs(colour="red")
    known = sorted(DacsParams().as_dict())
    message = f"unknown DACSSteering parameter(s) ['colour']; allowed: {known}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        gym.make("DACSSteering-v0", colour="red")


def test_numpy_knob_values_are_normalised() -> None:
    """A knob given as a numpy scalar means the same setting as the plain value."""
    assert DacsParams(n_agents=np.int64(4), focus_cost=1) == DacsParams(n_agents=4,
                                                                           focus_cost=1.0)
    assert type(DacsParams(n_agents=np.int64(4)).n_agents) is int


BAD_ACTIONS = [(8, 0), (-1, 0), (0, 4), (0, -1), (1.0, 2), (1, 2, 3), "ab", None, (True, 0)]


@pytest.mark.parametrize("action", BAD_ACTIONS)
def test_action_outside_the_space_raises(action: object) -> None:
    env = gym.make("StatefulWorkflow-v0")
    env.reset(seed=0)
    message = ("action must be (operation, candidate) with operation in 0..7 and candidate in "
               f"0..3; got {action!r}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.unwrapped.step(action)


def test_numpy_actions_are_accepted() -> None:
    env = gym.make("StatefulWorkflow-v0")
    _, info = env.reset(seed=0)
    v = int(np.flatnonzero(info["action_mask"][:8])[0])
    for action in (np.array([v, 0]), np.array([v, 0], dtype=np.int8), [np.int64(v), 0]):
        env.reset(seed=0)
        env.step(action)


def test_step_before_reset_and_after_the_end() -> None:
    env = gym.make("StatefulWorkflow-v0").unwrapped
    with pytest.raises(RuntimeError, match=r"^call reset\(\) before step\(\)$"):
        env.step((0, 0))
    _, info = env.reset(seed=0)
    blocked = int(np.flatnonzero(~info["action_mask"][:8])[0])
    env.step((blocked, 0))
    ended = r"^the episode has ended; call reset\(\) before step\(\)$"
    with pytest.raises(RuntimeError, match=ended):
        env.step((0, 0))


def test_vector_env_rejects_bad_actions() -> None:
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=3)
    vec.reset(seed=0)
    actions = np.zeros((3, 2), dtype=np.int64)
    actions[1] = (0, 9)
    with pytest.raises(ValueError, match=re.escape(
            "actions[1] must be (operation, candidate) with operation in 0..7 and candidate in "
            "0..3; got [0, 9]")):
        vec.step(actions)
    with pytest.raises(ValueError, match=re.escape(
            "actions must be an integer array of shape (3, 2); got dtype int64 and shape (2, 2)")):
        vec.step(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match=r"^num_envs must be an integer >= 1; got 0$"):
        gym.make_vec("StatefulWorkflow-v0", num_envs=0)


def test_bad_render_mode() -> None:
    with pytest.raises(ValueError, match=r"^render_mode must be one of None \| 'ansi'; got 'x'$"):
        envs.workflow.env.StatefulWorkflowEnv(render_mode="x")


def test_seeds_outside_int63_are_rejected() -> None:
    env = gym.make("StatefulWorkflow-v0")
    message = f"seed must be an integer in 0..2**63-1; got {2**63}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.unwrapped.reset(seed=2**63)
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=2)
    with pytest.raises(ValueError, match=r"^seed must be an integer or list of integers"):
        vec.reset(seed=[0, 2**63])
    env.reset(seed=2**63 - 1)  # the largest seed works
