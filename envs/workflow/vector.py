"""A batch of StatefulWorkflow envs stepped by one numba loop (the id's vector_entry_point).

`gym.make_vec("StatefulWorkflow-v0", num_envs=K)` builds this instead of K Python envs. Each
env runs exactly the single env's kernel on its own rows, with next-step autoreset: env i
seeded s plays the tasks s, next_seed(s), next_seed(next_seed(s)), ... just as a single env
reset with seed s and then reset() without a seed, so the two paths give equal trajectories.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from diagym.envs._core.checks import MAX_SEED, check_int, check_render_mode, is_integer
from diagym.envs.workflow.autoreset import step_batch, warm_up
from diagym.envs.workflow.generator import reset_batch
from diagym.envs.workflow.kernel import allocate_rows
from diagym.envs.workflow.layout import (
    CALLS,
    ERRORS,
    FAILURE_NAMES,
    SEED,
    SUCCESSES,
    RowView,
    observation_space_for,
    task_from_row,
)
from diagym.envs.workflow.params import WorkflowParams
from diagym.envs.workflow.text import render_text

if TYPE_CHECKING:
    from diagym.envs.workflow.viewer import WorkflowViewer


class StatefulWorkflowVectorEnv(VectorEnv[dict[str, np.ndarray], np.ndarray, np.ndarray]):
    """`num_envs` workflow envs sharing one WorkflowParams, stepped in numba.

    Actions: an int array of shape (num_envs, 2). Infos: completed_ops, calls, errors, success,
    failure (int8 codes, as the single env's info; names in FAILURE_NAMES), task_seed and
    action_mask, each with its `_key` flag array as Gymnasium's vector infos have. render()
    gives one frame per env, as Gymnasium's SyncVectorEnv does: the single env's text
    ("ansi") or picture ("rgb_array").
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 2,
                "autoreset_mode": AutoresetMode.NEXT_STEP}
    FAILURE_NAMES = FAILURE_NAMES

    def __init__(self, num_envs: int = 1, render_mode: str | None = None,
                 **spec_kwargs: Any) -> None:
        num_envs = check_int("num_envs", num_envs, 1)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.params = WorkflowParams.from_kwargs(**spec_kwargs)
        warm_up()
        self.num_envs = num_envs
        self._viewer: WorkflowViewer | None = None
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
            seeds = None
        elif is_integer(seed):
            seeds = [int(seed) + i for i in range(e)]  # env i gets seed + i
        elif isinstance(seed, list | tuple | np.ndarray) and all(is_integer(s) for s in seed):
            seeds = [int(s) for s in seed]
        else:
            seeds = [-1]
        if seeds is not None and not all(0 <= s <= MAX_SEED for s in seeds):
            raise ValueError(f"seed must be an integer or list of integers in 0..2**63-1; got "
                             f"{seed!r}")
        if seeds is not None and len(seeds) != e:
            raise ValueError(f"seed must be an int, None or a list of {e} ints; got {seed!r}")
        super().reset(seed=int(seed) if is_integer(seed) else None)
        if seeds is None:
            seeds = self.np_random.integers(0, 2**63 - 1, size=e, dtype=np.int64)
        else:
            seeds = np.asarray(seeds, dtype=np.int64)
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

    def render(self) -> tuple[str, ...] | tuple[np.ndarray, ...] | None:
        """One frame per env of its current state (nothing is drawn when render_mode is None)."""
        if self.render_mode is None:
            return None
        if not self._started:
            raise RuntimeError("call reset() before render()")
        frames = []
        for i in range(self.num_envs):
            task = task_from_row(self.params, self._task[i], int(self._state[i, SEED]))
            observation = self._view.observation(self._task[i], self._obs[i], self._state[i])
            if self.render_mode == "ansi":
                frames.append(render_text(self.params, task, observation))
                continue
            if self._viewer is None:
                from diagym.envs.workflow.viewer import WorkflowViewer  # matplotlib, on first use

                self._viewer = WorkflowViewer()
            frames.append(self._viewer.render(self.params, task, observation))
        return tuple(frames)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_viewer"] = None  # a figure is drawn afresh by the copy when it renders
        return state

    def close_extras(self, **kwargs: Any) -> None:
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None

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
