"""A batch of StatefulWorkflow envs stepped by one numba loop (the id's vector_entry_point).

`gym.make_vec("StatefulWorkflow-v0", num_envs=K)` builds this instead of K Python envs. Each
env runs exactly the single env's kernel on its own rows, with next-step autoreset: env i
seeded s plays the tasks s, next_seed(s), next_seed(next_seed(s)), ... just as a single env
reset with seed s and then reset() without a seed, so the two paths give equal trajectories.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs.workflow.env import observation_space_for
from envs.workflow.generator import reset_batch
from envs.workflow.kernel import allocate_rows, step_batch, warm_up
from envs.workflow.layout import (
    CALLS,
    ERRORS,
    FAILURE,
    FAILURE_NAMES,
    OBS_LAST_UPDATE,
    OBS_REGISTERS,
    SEED,
    SUCCESSES,
    obs_offsets,
    task_offsets,
)
from envs.workflow.params import WorkflowSpec


class StatefulWorkflowVectorEnv(VectorEnv[dict[str, np.ndarray], np.ndarray, np.ndarray]):
    """`num_envs` workflow envs sharing one WorkflowSpec, stepped in numba.

    Actions: an int array of shape (num_envs, 2). Infos: completed_ops, calls, errors, success,
    failure (codes; names in FAILURE_NAMES), task_seed and action_mask, each with its `_key`
    flag array as Gymnasium's vector infos have.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}
    FAILURE_NAMES = FAILURE_NAMES

    def __init__(self, num_envs: int = 1, render_mode: str | None = None,
                 **spec_kwargs: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise ValueError(f"num_envs must be an integer >= 1; got {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1; got {num_envs}")
        if render_mode is not None:
            raise ValueError(f"render_mode must be None for the vector env; got {render_mode!r}")
        self.spec_params = WorkflowSpec.from_kwargs(**spec_kwargs)
        warm_up()
        self.num_envs = int(num_envs)
        self.render_mode = None
        spec = self.spec_params
        n, b = spec.n_ops, spec.candidates
        self._n, self._b = n, b
        self._params = spec.to_params()
        e = self.num_envs
        self._task, self._state, self._work, self._obs = allocate_rows(self._params, e)
        everyone = np.ones(e, dtype=np.bool_)
        everyone.flags.writeable = False
        self._info_flags = {
            f"_{key}": everyone for key in
            ("completed_ops", "calls", "errors", "success", "failure", "task_seed", "action_mask")
        }
        q, u, d, c, p, _ = task_offsets(n, b)
        completed, mask, _ = obs_offsets(n, b)
        self._slices = {
            "registers": slice(OBS_REGISTERS, OBS_REGISTERS + 8),
            "completed": slice(completed, completed + n),
            "last_update": slice(OBS_LAST_UPDATE, OBS_LAST_UPDATE + 2),
            "prereq": slice(p, p + n * n),
            "query_register": slice(q, q + n),
            "update_register": slice(u, u + n),
            "delta": slice(d, d + n),
            "codes": slice(c, c + n * b),
            "action_mask": slice(mask, mask + n + b),
        }
        self._started = False
        self.single_observation_space = observation_space_for(spec)
        self.single_action_space = gym.spaces.MultiDiscrete([n, b])
        self.observation_space = batch_space(self.single_observation_space, e)
        self.action_space = batch_space(self.single_action_space, e)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """seed=s gives env i the task seed s + i (Gymnasium's convention); a list seeds each."""
        e = self.num_envs
        if seed is None:
            candidates = []
        elif isinstance(seed, int | np.integer):
            candidates = [int(seed), int(seed) + e - 1]  # env i gets seed + i
        else:
            candidates = list(seed)
        if any(not 0 <= int(s) < 2**63 for s in candidates):
            raise ValueError(f"seed must be an integer or list of integers in 0..2**63-1; got "
                             f"{seed!r}")
        super().reset(seed=seed if isinstance(seed, int | np.integer) else None)
        if seed is None:
            seeds = self.np_random.integers(0, 2**63 - 1, size=e, dtype=np.int64)
        elif isinstance(seed, int | np.integer):
            seeds = np.arange(int(seed), int(seed) + e, dtype=np.int64)
        else:
            if len(seed) != e:
                raise ValueError(f"seed must be an int, None or a list of {e} ints; got {seed!r}")
            seeds = np.asarray(seed, dtype=np.int64)
        reset_batch(self._params, seeds, self._task, self._state, self._work, self._obs)
        self._started = True
        return self._observations_and_infos(np.zeros(e, dtype=np.int8))

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs, 2) or acts.dtype.kind not in "iu":
            raise ValueError(
                f"actions must be an integer array of shape ({self.num_envs}, 2); got "
                f"dtype {acts.dtype} and shape {acts.shape}"
            )
        acts = acts.astype(np.int64, copy=False)
        e = self.num_envs
        rewards = np.empty(e, dtype=np.float64)
        terminated = np.empty(e, dtype=np.bool_)
        failures = np.empty(e, dtype=np.int8)
        bad = step_batch(self._params, acts, self._task, self._state, self._work, self._obs,
                         rewards, terminated, failures)
        if bad >= 0:
            raise ValueError(
                f"actions[{bad}] must be (operation, candidate) with operation in "
                f"0..{self._n - 1} and candidate in 0..{self._b - 1}; got {acts[bad].tolist()}"
            )
        observations, infos = self._observations_and_infos(failures)
        return observations, rewards, terminated, np.zeros(e, dtype=np.bool_), infos

    def action_masks(self) -> np.ndarray:
        """(num_envs, N + b) flags: ready operations, then candidate slots."""
        mask = obs_offsets(self._n, self._b)[1]
        return self._obs[:, mask:mask + self._n + self._b].astype(bool)

    def _observations_and_infos(
        self, failures: np.ndarray
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Fresh data every call: one copy of each flat buffer, then per-field views of it.

        Three contiguous copies cost far less than one strided copy per field; the fields of
        one step share these fresh buffers but never the env's rows or another step's data.
        """
        n = self._n
        s = self._slices
        task = self._task.copy()
        obs = self._obs.copy()
        scalars = self._state.copy()
        observations = {
            "registers": obs[:, s["registers"]],
            "completed": obs[:, s["completed"]],
            "last_update": obs[:, s["last_update"]],
            "failure": scalars[:, FAILURE],
            "errors": scalars[:, ERRORS],
            "prereq": task[:, s["prereq"]],
            "query_register": task[:, s["query_register"]],
            "update_register": task[:, s["update_register"]],
            "delta": task[:, s["delta"]],
            "codes": task[:, s["codes"]],
        }
        completed_ops = scalars[:, SUCCESSES]
        infos: dict[str, Any] = {
            "completed_ops": completed_ops,
            "calls": scalars[:, CALLS],
            "errors": scalars[:, ERRORS],
            "success": completed_ops == n,
            "failure": failures,
            "task_seed": scalars[:, SEED],
            "action_mask": obs[:, s["action_mask"]].view(np.bool_),
        }
        infos.update(self._info_flags)
        return observations, infos
