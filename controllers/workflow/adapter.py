"""A seed 003 reference controller as a per-step Policy.

`ReferencePolicy` adapts the numba controllers of controllers/workflow/mechanisms.py to the
Policy interface by rebuilding the env's flat rows from the observation: the very functions
the batched grid runner calls, step by step.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from diagym import envs
from diagym.controllers.workflow.mechanisms import (
    C_CHECKS,
    C_ENTRIES,
    C_LOOKUPS,
    C_PREP,
    CONTROLLER_FIELDS,
    controller_act,
    controller_begin,
    controller_params,
    value_bits,
)
from diagym.controllers.workflow.parameters import CONTROLLERS, K_RETAIN, RETAIN_PLAN
from diagym.envs.workflow.layout import OBS_ROW, TASK_ROW, RowView, obs_offsets, task_offsets
from diagym.envs.workflow.params import WorkflowParams


class ReferencePolicy:
    """A seed 003 reference controller (docs/CONTROLLERS.md) as a per-step Policy.

    It knows the public rules (the WorkflowParams), reads the public task and the registers
    from the observation, and draws its random choices from the controller stream of the
    episode's task seed (info["task_seed"]), so it plays exactly as the batched runner does.
    """

    def __init__(self, name: str, spec: WorkflowParams) -> None:
        self.name = name
        self.spec = spec
        self._cparams = controller_params(name)
        self._params = spec.to_params()
        n, b = spec.n_ops, spec.candidates
        self._task = np.zeros((1, task_offsets(n, b)[-1]), dtype=np.int8)
        self._obs = np.zeros((1, obs_offsets(n, b)[-1]), dtype=np.int8)
        self._view = RowView(n, b)
        self._cstate = np.zeros((1, CONTROLLER_FIELDS), dtype=np.int64)
        self._fresh = True

    @classmethod
    def for_env(cls, name: str, env: gym.Env) -> ReferencePolicy:
        """The controller for a StatefulWorkflow env (wrapped or not)."""
        if envs.family_of(env, strict=False) != envs.WORKFLOW:
            raise ValueError(
                f"reference controllers play StatefulWorkflow envs; got {envs.env_name(env)}"
            )
        return cls(name, env.unwrapped.params)

    def reset(self, *, seed: int | None = None) -> None:
        self._fresh = True

    def describe(self) -> dict[str, Any]:
        return {"controller": self.name}

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        self._view.write_row(observation, OBS_ROW, self._obs[0])
        if self._fresh or info["calls"] == 0:
            self._view.write_row(observation, TASK_ROW, self._task[0])
            controller_begin(self._params, self._cparams, self._cstate, 0, self._task, 0,
                             self._obs, 0, int(info["task_seed"]))
            self._fresh = False
        op, slot = controller_act(self._params, self._cparams, self._cstate, 0, self._task, 0,
                                  self._obs, 0, int(observation["failure"]))
        return np.array([op, slot], dtype=np.int64)

    def episode_counters(self) -> dict[str, int]:
        """The controller's resource counters for the episode so far (paper section 4, 7.6)."""
        state = self._cstate[0]
        entries = int(state[C_ENTRIES])
        plan = CONTROLLERS[self.name][K_RETAIN] == RETAIN_PLAN
        return {
            "checks": int(state[C_CHECKS]),
            "lookups": int(state[C_LOOKUPS]),
            "prep_entries": int(state[C_PREP]),
            "cache_entries": entries,
            "value_bits": value_bits(self.name, entries, self.spec.candidates),
            "plan_slots": self.spec.n_ops if plan else 0,
        }
