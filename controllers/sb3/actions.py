"""The joint action encoding Discrete(N*b) of the workflow env, for single envs and batches.

The env's action is MultiDiscrete([N, b]) = (operation, candidate slot). sb3-contrib masks a
MultiDiscrete action per component, so its masks can say "operation v is ready" but never "slot
a of operation v": joint action k = (k // b, k % b) gives a policy one categorical over pairs,
and its mask (ready operation v) x (every slot a) is exact. This module is the one definition of
that encoding: the single-env `JointActionWrapper` and controllers.sb3.vec_env.WorkflowVecEnv both
use `decode_joint` and `joint_masks`, so the two paths mean the same thing by action k.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def encode_joint(op: np.ndarray | int, slot: np.ndarray | int, b: int) -> np.ndarray | int:
    """Joint action(s) k = op * b + slot."""
    return op * b + slot


def decode_joint(k: np.ndarray, b: int, out: np.ndarray | None = None) -> np.ndarray:
    """(..., 2) int64 array of (operation, slot) = (k // b, k % b) for joint actions k.

    `out`, if given, is filled and returned (the vector env reuses one buffer per step).
    """
    k = np.asarray(k)
    if out is None:
        out = np.empty((*k.shape, 2), dtype=np.int64)
    np.floor_divide(k, b, out=out[..., 0])
    np.remainder(k, b, out=out[..., 1])
    return out


def joint_masks(masks: np.ndarray, n: int, b: int) -> np.ndarray:
    """Joint masks from MultiDiscrete ones: (..., N + b) -> (..., N * b) bool.

    Joint action v * b + a is allowed iff operation v is ready and slot a is allowed (the env
    allows every slot of every operation, so this is "v is ready" repeated b times).
    """
    masks = np.asarray(masks, dtype=bool)
    ops = masks[..., :n]
    slots = masks[..., n:n + b]
    return (ops[..., :, None] & slots[..., None, :]).reshape(*masks.shape[:-1], n * b)


def _is_index(value: Any) -> bool:
    """An int, numpy integer or 0-d integer array (what SB3's predict returns), not a bool."""
    if isinstance(value, bool | np.bool_):
        return False
    if isinstance(value, int | np.integer):
        return True
    return isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu"


class JointActionWrapper(gym.ActionWrapper):
    """A workflow env with the joint action space Discrete(N * b).

    `action_masks()` and info["action_mask"] are the joint masks (`joint_masks`), the format
    sb3-contrib's MaskablePPO reads for a Discrete action space.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        inner = env.action_space
        if not isinstance(inner, spaces.MultiDiscrete) or inner.shape != (2,):
            raise ValueError(f"JointActionWrapper needs a MultiDiscrete([N, b]) action space; "
                             f"got {inner!r}")
        self._n, self._b = (int(x) for x in inner.nvec)
        self.action_space = spaces.Discrete(self._n * self._b)

    def action(self, action: Any) -> np.ndarray:
        if not _is_index(action):
            raise ValueError(f"action must be an integer in 0..{self._n * self._b - 1}; "
                             f"got {action!r}")
        k = int(action)
        if not 0 <= k < self._n * self._b:
            raise ValueError(f"action must be an integer in 0..{self._n * self._b - 1}; got {k}")
        return decode_joint(np.int64(k), self._b)

    def action_masks(self) -> np.ndarray:
        """(N * b,) flags: joint action v * b + a is allowed iff operation v is ready."""
        return joint_masks(self.env.get_wrapper_attr("action_masks")(), self._n, self._b)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return observation, self._joint_info(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(self.action(action))
        return observation, reward, terminated, truncated, self._joint_info(info)

    def _joint_info(self, info: dict[str, Any]) -> dict[str, Any]:
        if "action_mask" in info:
            info = dict(info)
            info["action_mask"] = joint_masks(info["action_mask"], self._n, self._b)
        return info
