"""Every registered diagym id meets the Gymnasium contract (MiniGrid's conformance pattern).

The ids come from Gymnasium's registry (every entry point under `envs.`), so an env family or
preset added to diagym.envs.FAMILIES is covered here without editing this file: Gymnasium's
checker, determinism by seed, `gym.make_vec` (the id's vector entry point where it declares
one, and sync mode), pickling and deep-copying a live env, and every declared render mode.
"""

from __future__ import annotations

import copy
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

from diagym import envs

DIAGYM_IDS = sorted(
    env_id for env_id, spec in gym.registry.items()
    if isinstance(spec.entry_point, str) and spec.entry_point.startswith("diagym.")
)
STEPS = 40


def _play(env: gym.Env, actions: list[Any], seed: int | None) -> list[tuple[Any, ...]]:
    """Every output of reset(seed) (unless None) then of `actions`, resetting without a seed
    whenever an episode ends, so the seeded chain of later episodes is exercised too."""
    out: list[tuple[Any, ...]] = []
    if seed is not None:
        out.append(env.reset(seed=seed))
    for action in actions:
        step = env.step(action)
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


def _actions(env: gym.Env, seed: int, count: int = STEPS) -> list[Any]:
    space = copy.deepcopy(env.action_space)
    space.seed(seed)
    return [space.sample() for _ in range(count)]


def _assert_same(first: list[tuple[Any, ...]], second: list[tuple[Any, ...]]) -> None:
    assert len(first) == len(second)
    for t, (a, b) in enumerate(zip(first, second, strict=True)):
        assert data_equivalence(a, b), f"outputs differ at call {t}: {a!r} != {b!r}"


def test_the_registry_holds_exactly_the_family_presets() -> None:
    presets = {env_id for family in envs.FAMILIES.values() for env_id in family.presets}
    assert set(DIAGYM_IDS) == presets
    assert "DACSSteering-v0" in DIAGYM_IDS and "StatefulWorkflow-v0" in DIAGYM_IDS
    for env_id in DIAGYM_IDS:
        family = envs.FAMILIES[envs.family_of(env_id)]
        assert gym.spec(env_id).entry_point == family.entry_point
        assert gym.spec(env_id).vector_entry_point == family.vector_entry_point


@pytest.mark.parametrize("env_id", DIAGYM_IDS)
def test_gymnasium_checker_passes_without_warnings(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("env_id", DIAGYM_IDS)
def test_env_holds_its_preset_parameters(env_id: str) -> None:
    env = gym.make(env_id)
    family = envs.FAMILIES[envs.family_of(env)]
    assert envs.family_of(env) == envs.family_of(env_id)
    expected = family.params(**family.presets[env_id])
    assert env.unwrapped.params == expected
    assert gym.spec(env_id).kwargs == expected.as_dict()


@pytest.mark.parametrize("env_id", DIAGYM_IDS)
def test_same_seed_same_trajectory(env_id: str) -> None:
    first, second = gym.make(env_id), gym.make(env_id)
    actions = _actions(first, seed=7)
    _assert_same(_play(first, actions, seed=11), _play(second, actions, seed=11))


@pytest.mark.parametrize("env_id", DIAGYM_IDS)
def test_different_seeds_give_different_episodes(env_id: str) -> None:
    env = gym.make(env_id)
    first, _ = env.reset(seed=1)
    second, _ = env.reset(seed=2)
    assert not data_equivalence(first, second)


def _vector_modes(env_id: str) -> list[str]:
    return ["sync"] + (["vector_entry_point"] if gym.spec(env_id).vector_entry_point else [])


@pytest.mark.parametrize(("env_id", "mode"), [(i, m) for i in DIAGYM_IDS for m in _vector_modes(i)])
def test_make_vec(env_id: str, mode: str) -> None:
    vec = gym.make_vec(env_id, num_envs=3, vectorization_mode=mode)
    observations, _ = vec.reset(seed=0)
    assert observations in vec.observation_space
    vec.action_space.seed(0)
    for _ in range(5):
        observations, rewards, terminated, truncated, _ = vec.step(vec.action_space.sample())
        assert observations in vec.observation_space
        assert rewards.shape == terminated.shape == truncated.shape == (3,)
    vec.close()


@pytest.mark.parametrize("env_id", [i for i in DIAGYM_IDS if gym.spec(i).vector_entry_point])
def test_vector_entry_point_plays_like_sync_envs(env_id: str) -> None:
    """The native vector env is a faster path to the same trajectories, autoresets included."""
    native = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point")
    sync = gym.make_vec(env_id, num_envs=3, vectorization_mode="sync")
    native.action_space.seed(5)
    actions = [native.action_space.sample() for _ in range(STEPS)]
    outputs = []
    for vec in (native, sync):
        observations, _ = vec.reset(seed=21)
        played = [observations]
        for action in actions:
            observations, rewards, terminated, truncated, _ = vec.step(action)
            played.append((observations, rewards, terminated, truncated))
        outputs.append(played)
    _assert_same(*outputs)


COPIES: dict[str, Callable[[Any], Any]] = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
}


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("env_id", DIAGYM_IDS)
def test_a_copy_of_a_live_env_continues_identically(env_id: str, how: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=5)
    for action in _actions(env, seed=9, count=3):  # into the episode, while it lasts
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset(seed=5)
            break
    twin = COPIES[how](env)
    actions = _actions(env, seed=3)
    _assert_same(_play(env, actions, seed=None), _play(twin, actions, seed=None))


def _declared(env_id: str, vector: bool = False) -> list[str]:
    """The render modes an id's env class (or vector class) declares in its metadata: the
    suite checks exactly those, so a family without a mode is exempt by its own declaration."""
    family = envs.FAMILIES[envs.family_of(env_id)]
    cls = family.vector_class() if vector else family.env_class()
    return list(cls.metadata.get("render_modes", [])) if cls is not None else []


def _check_frame(frame: Any, mode: str) -> None:
    if mode == "ansi":
        assert isinstance(frame, str) and frame.strip()
    elif mode == "rgb_array":
        assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
        assert frame.ndim == 3 and frame.shape[2] == 3 and min(frame.shape[:2]) >= 64
        assert frame.min() < frame.max(), "a blank frame is not a picture of the state"
    else:
        pytest.fail(f"no conformance check for render mode {mode!r}: add one here")


def _differs(first: Any, second: Any) -> bool:
    if isinstance(first, np.ndarray):
        return first.shape != second.shape or bool((first != second).any())
    return first != second


@pytest.mark.parametrize(("env_id", "mode"), [(i, m) for i in DIAGYM_IDS for m in _declared(i)])
def test_declared_render_modes_render(env_id: str, mode: str) -> None:
    """Every declared mode gives a frame of the current state: two different states (two task
    seeds) render differently, and frames of one mode keep one size (as video needs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(env_id, render_mode=mode).unwrapped, skip_render_check=False)
    env = gym.make(env_id, render_mode=mode)
    env.reset(seed=0)
    first = env.render()
    _check_frame(first, mode)
    env.reset(seed=1)
    other = env.render()
    _check_frame(other, mode)
    assert _differs(first, other), "two different tasks rendered identically"
    env.action_space.seed(0)
    for _ in range(3):
        _, _, terminated, _, _ = env.step(env.action_space.sample())
        frame = env.render()
        _check_frame(frame, mode)
        if mode == "rgb_array":
            assert frame.shape == first.shape
        if terminated:
            env.reset()
    frame = env.render()
    for how, make_copy in COPIES.items():  # a copy of a rendering env renders the same state
        assert not _differs(make_copy(env).render(), frame), how
    env.close()


@pytest.mark.parametrize(("env_id", "mode"),
                         [(i, m) for i in DIAGYM_IDS for m in _declared(i, vector=True)])
def test_declared_vector_render_modes_render_one_frame_per_env(env_id: str, mode: str) -> None:
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point",
                       render_mode=mode)
    vec.reset(seed=0)
    frames = vec.render()
    assert isinstance(frames, tuple) and len(frames) == 2
    for frame in frames:
        _check_frame(frame, mode)
    assert _differs(*frames), "envs on different task seeds rendered identically"
    single = gym.make(env_id, render_mode=mode)
    single.reset(seed=1)
    assert not _differs(frames[1], single.render()), "env 1 of the batch is task seed 1"
    assert not _differs(pickle.loads(pickle.dumps(vec)).render()[0], frames[0])
    vec.close()


@pytest.mark.parametrize("env_id", DIAGYM_IDS)
@pytest.mark.parametrize("seed", [True, -1, 2**63, 1.0, "1"])
def test_a_seed_that_is_not_a_task_seed_is_refused(env_id: str, seed: object) -> None:
    env = gym.make(env_id).unwrapped
    with pytest.raises(ValueError, match=r"^seed must be an integer in 0\.\.2\*\*63-1; got "):
        env.reset(seed=seed)
