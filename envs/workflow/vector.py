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

from envs.workflow.autoreset import step_batch, warm_up
from envs.workflow.generator import reset_batch
from envs.workflow.kernel import allocate_rows
from envs.workflow.layout import (
    CALLS,
    ERRORS,
    FAILURE_NAMES,
    SEED,
    SUCCESSES,
    RowView,
    observation_space_for,
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
        self.params = WorkflowSpec.from_kwargs(**spec_kwargs)
        warm_up()
        self.num_envs = int(num_envs)
        self.render_mode = None
        spec = self.params
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
        self._view = RowView(n, b)
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
        return self._obs[:, self._view.action_mask].astype(bool)

    def _observations_and_infos(
        self, failures: np.ndarray
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Fresh data every call: one copy of each flat buffer, then per-field views of it.

        Three contiguous copies cost far less than one strided copy per field; the fields of
        one step share these fresh buffers but never the env's rows or another step's data.
        """
        n = self._n
        obs = self._obs.copy()
        scalars = self._state.copy()
        observations = self._view.observation(self._task.copy(), obs, scalars)
        completed_ops = scalars[:, SUCCESSES]
        infos: dict[str, Any] = {
            "completed_ops": completed_ops,
            "calls": scalars[:, CALLS],
            "errors": scalars[:, ERRORS],
            "success": completed_ops == n,
            "failure": failures,
            "task_seed": scalars[:, SEED],
            "action_mask": obs[:, self._view.action_mask].view(np.bool_),
        }
        infos.update(self._info_flags)
        return observations, infos
