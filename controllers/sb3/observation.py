"""One-hot observations for neural agents: the same information, in a form an MLP can compare.

SB3's MultiInputPolicy feeds integer Box fields to the network as raw numbers, so deciding
whether codes[v, a] == x[q_v] mod b means learning a sawtooth of a register value: PPO stays
at the random-guess floor even on a 4-operation task. One-hot registers, codes, queries,
updates and increments turn that test into a conjunction of input bits. The encoding is
lossless and defined once here: a VecEnv wrapper applies it in training and SB3Policy applies
the same function to single observations when the trained model plays.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

ONE_HOT_KEYS = ("registers", "last_update", "query_register", "update_register", "delta",
                "codes")


def _levels(space: spaces.Box) -> tuple[int, int]:
    return int(np.min(space.low)), int(np.max(space.high))


@dataclass(frozen=True)
class _Layout:
    """Where each one-hot field sits in one flat row: its keys, input lengths, output widths
    and the per-input-element offset of its bit block (value - low added at encode time)."""

    keys: tuple[str, ...]
    lengths: tuple[int, ...]
    out_lengths: tuple[int, ...]
    offsets: np.ndarray  # (sum(lengths),) bit offset of each input element, minus its low
    total: int


# Layouts kept at once: one per observation space in use (a process trains or plays a few).
LAYOUT_CACHE_SIZE = 32


class _SameSpace:
    """A space as a cache key by identity: spaces are not hashable, and the key holds the
    space, so its id cannot be reused by another space while the layout is cached."""

    __slots__ = ("space",)

    def __init__(self, space: spaces.Dict) -> None:
        self.space = space

    def __hash__(self) -> int:
        return id(self.space)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SameSpace) and other.space is self.space


def _layout(space: spaces.Dict) -> _Layout:
    """The layout of `space`, built once per space object while it stays in the cache."""
    return _cached_layout(_SameSpace(space))


@functools.lru_cache(maxsize=LAYOUT_CACHE_SIZE)
def _cached_layout(key: _SameSpace) -> _Layout:
    return _build_layout(key.space)


def _build_layout(space: spaces.Dict) -> _Layout:
    keys, lengths, out_lengths, offsets = [], [], [], []
    start = 0
    for key in ONE_HOT_KEYS:
        sub = space.spaces.get(key)
        if not isinstance(sub, spaces.Box):
            continue
        low, high = _levels(sub)
        width = high - low + 1
        n = int(np.prod(sub.shape))
        keys.append(key)
        lengths.append(n)
        out_lengths.append(n * width)
        offsets.append(start + np.arange(n) * width - low)
        start += n * width
    return _Layout(tuple(keys), tuple(lengths), tuple(out_lengths),
                   np.concatenate(offsets), start)


def one_hot_space(space: spaces.Dict) -> spaces.Dict:
    """The observation space with every integer Box in ONE_HOT_KEYS one-hot encoded."""
    fields = {}
    for key, sub in space.spaces.items():
        if key in ONE_HOT_KEYS and isinstance(sub, spaces.Box):
            low, high = _levels(sub)
            fields[key] = spaces.MultiBinary(int(np.prod(sub.shape)) * (high - low + 1))
        else:
            fields[key] = sub
    return spaces.Dict(fields)


def encode(observation: dict[str, Any], space: spaces.Dict) -> dict[str, Any]:
    """One-hot encode a single observation, or a batch (leading axis = envs).

    All one-hot fields of a row share one int8 buffer and one scatter of flat bit indices;
    the returned fields are views of it, so a batch costs a handful of numpy calls.
    """
    layout = _layout(space)
    out = dict(observation)
    first = np.asarray(observation[layout.keys[0]])
    single = first.ndim == len(space.spaces[layout.keys[0]].shape)
    rows = 1 if single else first.shape[0]
    values = np.concatenate(
        [np.asarray(observation[k]).reshape(rows, n) for k, n in
         zip(layout.keys, layout.lengths, strict=True)], axis=1)
    hot = np.zeros((rows, layout.total), dtype=np.int8)
    index = values + layout.offsets + (np.arange(rows) * layout.total)[:, None]
    hot.ravel()[index.ravel()] = 1
    start = 0
    for key, width in zip(layout.keys, layout.out_lengths, strict=True):
        field = hot[:, start:start + width]
        out[key] = field[0] if single else field
        start += width
    return out


class VecOneHot(VecEnvWrapper):
    """Training side: one-hot observations from any VecEnv of a Dict-observation env."""

    def __init__(self, venv: VecEnv) -> None:
        self._raw = venv.observation_space
        super().__init__(venv, observation_space=one_hot_space(self._raw))

    def reset(self) -> Any:
        return encode(self.venv.reset(), self._raw)

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        finished = [i for i, info in enumerate(infos) if "terminal_observation" in info]
        if finished:  # one batched encoding for every finished env (most, early in training)
            last = [infos[i]["terminal_observation"] for i in finished]
            batch = encode({k: np.stack([o[k] for o in last]) for k in last[0]}, self._raw)
            for row, i in enumerate(finished):
                infos[i]["terminal_observation"] = {k: v[row] for k, v in batch.items()}
        return encode(observations, self._raw), rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        return self.venv.action_masks()


class OneHotObservation(gym.ObservationWrapper):
    """Single-env side (DummyVecEnv training), the same encoding."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._raw = env.observation_space
        self.observation_space = one_hot_space(self._raw)

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return encode(observation, self._raw)

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()
