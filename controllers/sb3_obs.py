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
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

ONE_HOT_KEYS = ("registers", "last_update", "query_register", "update_register", "delta",
                "codes")


def _levels(space: spaces.Box) -> tuple[int, int]:
    return int(np.min(space.low)), int(np.max(space.high))


@functools.lru_cache(maxsize=64)
def _bases(rows: int, flat_len: int, width: int, low: int) -> np.ndarray:
    """(rows, flat_len) offsets of each field's block in the flattened one-hot batch."""
    base = (np.arange(rows)[:, None] * (flat_len * width)
            + np.arange(flat_len)[None, :] * width - low)
    base.flags.writeable = False
    return base


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
    """One-hot encode a single observation, or a batch (leading axis = envs)."""
    out = dict(observation)
    for key in ONE_HOT_KEYS:
        sub = space.spaces.get(key)
        if not isinstance(sub, spaces.Box):
            continue
        low, high = _levels(sub)
        values = np.asarray(observation[key])
        width = high - low + 1
        flat_len = int(np.prod(sub.shape))
        batch = values.reshape(-1, flat_len)
        hot = np.zeros((batch.shape[0], flat_len * width), dtype=np.int8)
        # flat index of each hot bit: row * (flat_len * width) + column * width + value - low
        index = batch + _bases(batch.shape[0], flat_len, width, low)
        hot.ravel()[index.ravel()] = 1
        out[key] = hot if values.ndim > len(sub.shape) else hot[0]
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
        return self.env.unwrapped.action_masks() if not hasattr(self.env, "action_masks") \
            else self.env.action_masks()
