"""Bad parameters and out-of-space actions fail with the documented messages."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest

from diagym import envs  # noqa: F401
from diagym.envs.dacs.params import DacsParams
from diagym.envs.workflow.env import StatefulWorkflowEnv
from diagym.envs.workflow.params import WorkflowParams

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
    ({"snapshot_period": -1}, "snapshot_period must be an integer in 0..2**31; got -1"),
    ({"snapshot_period": 2**31 + 1},
     f"snapshot_period must be an integer in 0..2**31; got {2**31 + 1}"),
    ({"snapshot_period": 2**63}, f"snapshot_period must be an integer in 0..2**31; got {2**63}"),
    ({"snapshot_period": 1.0}, "snapshot_period must be an integer in 0..2**31; got 1.0"),
    ({"hidden_resampling": "yes"}, "hidden_resampling must be True | False; got 'yes'"),
    ({"error_allowance": -2}, "error_allowance must be an integer in 0..2**31; got -2"),
    ({"error_allowance": 2**63 - 2},
     f"error_allowance must be an integer in 0..2**31; got {2**63 - 2}"),
    ({"error_allowance": 2**70}, f"error_allowance must be an integer in 0..2**31; got {2**70}"),
    ({"error_allowance": np.uint64(2**63)},
     f"error_allowance must be an integer in 0..2**31; got {2**63}"),
    ({"error_allowance": True}, "error_allowance must be an integer in 0..2**31; got True"),
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
    known = sorted(WorkflowParams().as_dict())
    message = ("StatefulWorkflow got unexpected keyword arguments 'colour', 'shade'; "
               f"allowed: {known}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        WorkflowParams.from_kwargs(colour="red", shade=2)
    known = sorted(DacsParams().as_dict())
    message = f"DACSSteering got an unexpected keyword argument 'colour'; allowed: {known}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        DacsParams.from_kwargs(colour="red")
    # gym.make re-raises a creator's TypeError as its own type with the kwargs appended
    with pytest.raises(ValueError, match=f"^{re.escape(message)} was raised from the "
                       "environment creator for DACSSteering-v0"):
        gym.make("DACSSteering-v0", colour="red")


@pytest.mark.parametrize("env_id", ["StatefulWorkflow-v0", "DACSSteering-v0",
                                    "StatefulWorkflowHistory-v0"])
def test_unknown_keyword_is_the_type_error_wrappers_retry_on(env_id: str) -> None:
    """torchrl's GymEnv passes frameskip=1 and retries without it only on a TypeError saying
    "unexpected keyword argument"; the error is a ValueError too, like every bad knob."""
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'frameskip'") \
            as raised:
        gym.make(env_id, frameskip=1)
    assert isinstance(raised.value, ValueError)
    assert str(raised.value).startswith(f"{envs.params_of(env_id).TITLE} got an unexpected "
                                        "keyword argument 'frameskip'; allowed: [")
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'"):
        gym.make_vec(env_id, num_envs=2, frameskip=1)


def test_numpy_knob_values_are_normalised() -> None:
    """A knob given as a numpy scalar means the same setting as the plain value."""
    assert DacsParams(n_agents=np.int64(4), focus_cost=1) == DacsParams(n_agents=4,
                                                                           focus_cost=1.0)
    assert type(DacsParams(n_agents=np.int64(4)).n_agents) is int


NUMPY_KNOBS = {"n_ops": np.int64(8), "depth": np.int32(4), "width": np.uint8(3),
               "candidates": np.int16(4), "snapshot_period": np.int64(2),
               "error_allowance": np.uint32(1), "hidden_resampling": np.bool_(True)}


def test_numpy_workflow_knobs_are_accepted_and_normalised() -> None:
    plain = {key: value.item() for key, value in NUMPY_KNOBS.items()}
    env = gym.make("StatefulWorkflow-v0", **NUMPY_KNOBS)
    assert env.unwrapped.params == WorkflowParams(**plain)
    for key, value in plain.items():
        assert type(getattr(env.unwrapped.params, key)) is type(value), key
    assert env.action_space == gym.spaces.MultiDiscrete([8, 4])
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=np.int64(2), **NUMPY_KNOBS)
    observations, _ = vec.reset(seed=np.int64(4))
    assert observations in vec.observation_space


def test_the_largest_allowance_and_period_play() -> None:
    """2**31 is inside the kernels' int64 arithmetic: the env builds and plays at the bound."""
    kwargs = {"error_allowance": 2**31, "snapshot_period": 2**31}
    env = gym.make("StatefulWorkflow-v0", **kwargs)
    observation, _ = env.reset(seed=0)
    assert env.observation_space["errors"] == gym.spaces.Discrete(2**31 + 2)
    for _ in range(20):  # wrong slots mostly: errors count up, the episode goes on
        observation, _, terminated, _, info = env.step(np.array([0, 0]))
        assert observation in env.observation_space
        assert not terminated or info["success"]
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=2, **kwargs)
    vec.reset(seed=0)
    observations, *_ = vec.step(np.zeros((2, 2), dtype=np.int64))
    assert observations in vec.observation_space


def _generator() -> object:
    return (x for x in (0, 0))


BAD_ACTIONS: list[Callable[[], object]] = [
    lambda: (8, 0), lambda: (-1, 0), lambda: (0, 4), lambda: (0, -1), lambda: (1.0, 2),
    lambda: (1, 2, 3), lambda: "ab", lambda: None, lambda: (True, 0), lambda: 3,
    lambda: b"\x00\x00", lambda: {0, 1}, _generator, lambda: {0: 0, 1: 0},
    lambda: np.array([0, 0], dtype=object), lambda: np.array([0.0, 0.0]),
    lambda: np.array([[0, 0]]), lambda: np.array([0, 0, 0]), lambda: np.array(5),
    lambda: np.array([True, False]), lambda: np.bool_(True), lambda: np.float64(1.0),
    lambda: [np.float32(0), 0], lambda: (np.bool_(False), 0), lambda: np.array([0, 2**40]),
    lambda: np.array(["0", "0"]), lambda: range(2),
]


@pytest.mark.parametrize("make_action", BAD_ACTIONS)
def test_action_outside_the_space_raises(make_action: Callable[[], object]) -> None:
    env = gym.make("StatefulWorkflow-v0")
    env.reset(seed=0)
    action = make_action()
    message = ("action must be (operation, candidate): an integer array of shape (2,) or a "
               "tuple or list of two integers, with operation in 0..7 and candidate in 0..3; "
               f"got {reprlib.repr(action)}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.unwrapped.step(action)
    assert env.unwrapped._state[2] == 0, "a refused action must not count as a call"


def test_integer_actions_of_every_accepted_form_step() -> None:
    env = gym.make("StatefulWorkflow-v0")
    _, info = env.reset(seed=0)
    v = int(np.flatnonzero(info["action_mask"][:8])[0])
    slot = env.unwrapped.correct_slot(v)
    forms = (np.array([v, slot]), np.array([v, slot], dtype=np.int8),
             np.array([v, slot], dtype=np.uint64), [np.int64(v), slot], (v, np.uint8(slot)),
             [v, slot])
    for action in forms:
        env.reset(seed=0)
        _, reward, _, _, info = env.step(action)
        assert info["failure"] == 0 and reward == 1 / 8, action


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


@pytest.mark.parametrize("mode", ["x", "human", 1])
def test_bad_render_mode(mode: object) -> None:
    """(gym.make itself turns "human" into rgb_array under its HumanRendering wrapper.)"""
    message = f"render_mode must be one of None | 'ansi' | 'rgb_array'; got {mode!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        StatefulWorkflowEnv(render_mode=mode)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        gym.make_vec("StatefulWorkflow-v0", num_envs=2, render_mode=mode)


def test_seeds_outside_int63_are_rejected() -> None:
    env = gym.make("StatefulWorkflow-v0")
    message = f"seed must be an integer in 0..2**63-1; got {2**63}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.unwrapped.reset(seed=2**63)
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=2)
    with pytest.raises(ValueError, match=r"^seed must be an integer or list of integers"):
        vec.reset(seed=[0, 2**63])
    env.reset(seed=2**63 - 1)  # the largest seed works


@pytest.mark.parametrize("seed", [True, False, np.bool_(True), 1.0, "1", -1])
def test_seeds_that_are_not_integers_are_rejected(seed: object) -> None:
    """A bool would otherwise play seed 1 (or 0) as if a number had been given."""
    env = gym.make("StatefulWorkflow-v0")
    message = f"seed must be an integer in 0..2**63-1; got {seed!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.reset(seed=seed)
    vec = gym.make_vec("StatefulWorkflow-v0", num_envs=2)
    for bad in (seed, [0, seed]):
        with pytest.raises(ValueError, match=r"^seed must be an integer or list of integers"):
            vec.reset(seed=bad)


def test_numpy_seeds_play_the_same_task() -> None:
    env = gym.make("StatefulWorkflow-v0")
    _, by_int = env.reset(seed=5)
    _, by_numpy = env.reset(seed=np.uint64(5))
    assert by_int["task_seed"] == by_numpy["task_seed"] == 5
