"""StatefulWorkflow-v0: seed 003's fixed-work stateful tool-use workflow as a Gymnasium env.

The env is a thin shell over the numba rows of envs/workflow/layout.py: generation lives in
generator.py, transitions in kernel.py, the observation's field table in layout.py and text in
text.py. The class docstring is the contract.
"""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from diagym.envs._core import rng
from diagym.envs._core.checks import check_render_mode, check_seed, is_integer
from diagym.envs.workflow.generator import generate_into
from diagym.envs.workflow.kernel import allocate_rows, execute_into, warm_up
from diagym.envs.workflow.layout import (
    CALLS,
    DONE,
    ERRORS,
    NO_FAILURE,
    SEED,
    SUCCESSES,
    VISIBLE,
    RowView,
    WorkflowTask,
    observation_space_for,
    task_from_row,
    work_offsets,
)
from diagym.envs.workflow.params import WorkflowParams
from diagym.envs.workflow.text import render_text

if TYPE_CHECKING:
    from diagym.envs.workflow.viewer import WorkflowViewer

__all__ = ["StatefulWorkflowEnv", "WorkflowTask", "observation_space_for"]


class StatefulWorkflowEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Seed 003's workflow task family; every WorkflowParams field is a constructor kwarg.

    ## Description
    An agent completes N operations with execute(v, a): v is an operation identifier, a one
    of b candidate slots. The state is 8 registers in Z_8 of which `width` are active; each
    success updates one register, so a controller must track values across calls, schedule
    around prerequisites and pick the right candidate. The public task (prerequisites, query
    and update registers, increments, candidate codes) changes every episode and is part of
    the observation; `env.unwrapped.task` has it as 2-D arrays.

    ## Action space
    MultiDiscrete([N, b]) = (operation identifier, candidate slot), given as an integer array
    of shape (2,) or a tuple or list of two integers; anything else (floats, bools, bytes,
    sets, generators, object arrays, other shapes, values outside the space) raises ValueError.
    info["action_mask"] (and action_masks()) flags the N ready operations, then the b candidate
    slots (the flat MultiDiscrete format sb3-contrib expects).

    ## Observation space
    A Dict of flat int8 vectors, one per entry of layout.OBS_FIELDS: registers (8 values, -1
    where not shown), completed (N flags), last_update ((register, increment) of the last
    success, (-1, -1) before any), failure (code of the last call, names in layout.FAILURE_NAMES),
    errors (failed calls so far), prereq (N x N, row-major), query_register, update_register,
    delta (N each) and codes (N x b, row-major).

    ## Rewards
    1/N per completed operation, so the return is the fraction completed; 0 for a failed call.

    ## Termination
    When all N operations are done, or when failed calls exceed the error allowance R (R = 0:
    the first failure ends the episode). There is no truncation. A failed call reports its
    category in info["failure"] as a code (1 dependency, 2 candidate, 3 completed; 0 for a
    success and at reset; names in envs/_core/failures.py FAILURES) and changes no state.
    info also carries success, completed_ops, calls, errors, registers_visible, resampled and
    task_seed.

    ## Rendering
    render_mode="ansi" gives the rules, the task and the observation as text (what a text
    policy is shown); "rgb_array" a picture of the same public state (envs/workflow/viewer.py):
    the operation graph coloured completed / ready / blocked, the registers shown or hidden,
    the last update and the last failure. Nothing is drawn unless render() is called.

    reset(seed=s) plays the task of seed s in 0..2**63-1 (the paper's seeds are task seeds); a
    bool is refused rather than read as 0 or 1; reset() without
    a seed moves to the next task seed (rng.next_seed), so a seeded sequence of episodes is
    reproducible and equal to the vector env's autoreset sequence.

    ## Registered configurations
    envs/workflow/presets.py: StatefulWorkflow-v0 (snapshot after every success),
    StatefulWorkflowHistory-v0 (registers shown initially only), StatefulWorkflowHidden-v0
    (history with hidden resampling), StatefulWorkflowRetry-v0 (history with R = 8). Every id
    has a numba vector entry point (diagym.envs.workflow.vector) for gym.make_vec.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 2}

    def __init__(self, render_mode: str | None = None, **spec_kwargs: Any) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.params = WorkflowParams.from_kwargs(**spec_kwargs)
        warm_up()
        self.render_mode = render_mode
        spec = self.params
        n, b = spec.n_ops, spec.candidates
        self._n, self._b = n, b
        self._params = spec.to_params()
        self._rows = allocate_rows(self._params, 1)
        self._view = RowView(n, b)
        self._mask = self._view.action_mask
        self._bind_views()
        self._reward_per_op = 1.0 / n
        self.observation_space = observation_space_for(spec)
        self.action_space = spaces.MultiDiscrete([n, b])
        self._registers_off = work_offsets(n)[0]
        self._initial_registers = np.zeros(8, dtype=np.int8)
        self._started = False
        self._task: WorkflowTask | None = None
        self._resampled = False
        self._viewer: WorkflowViewer | None = None

    _VIEWS = ("_task_row", "_state", "_work", "_obs", "_read_observation")

    def _bind_views(self) -> None:
        # The kernels take batch arrays and a row index; this env is a batch of one, and the
        # 1-D attributes are views of its row for reading from Python.
        self._task_row, self._state, self._work, self._obs = (a[0] for a in self._rows)
        self._read_observation = self._view.read_one

    def __getstate__(self) -> dict[str, Any]:
        """The rows without their views: a pickled or deep-copied view would be a detached
        array, so the copy's kernel would write rows that its Python side never reads."""
        state = self.__dict__.copy()
        for view in self._VIEWS:
            del state[view]
        state["_viewer"] = None  # a figure is drawn afresh by the copy when it renders
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_views()

    # -- episode ---------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        seed = check_seed(seed)
        super().reset(seed=seed)
        if seed is not None:
            task_seed = seed
        elif self._started:
            task_seed = int(rng.next_seed(self._state[SEED]))
        else:
            task_seed = int(self.np_random.integers(0, 2**63 - 1))
        generate_into(self._params, task_seed, *self._rows, 0)
        self._started = True
        self._task = None
        self._resampled = False
        regs = self._registers_off
        self._initial_registers = self._work[regs:regs + 8].astype(np.int8)
        return self._observation(), self._info(NO_FAILURE)

    def step(
        self, action: Any
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        op, slot = self._parse_action(action)
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._state[DONE]:
            raise RuntimeError("the episode has ended; call reset() before step()")
        failure = execute_into(self._params, op, slot, *self._rows, 0)
        self._resampled = failure == 0 and self.params.hidden_resampling
        reward = self._reward_per_op if failure == 0 else 0.0
        terminated = bool(self._state[DONE])
        return self._observation(), reward, terminated, False, self._info(int(failure))

    def _parse_action(self, action: Any) -> tuple[int, int]:
        """(operation, candidate) as ints, or one ValueError; the common case (an int array of
        shape (2,) inside the space) is tested first and costs one type test and a tolist."""
        if type(action) is np.ndarray and action.shape == (2,) and action.dtype.kind in "iu":
            op, slot = action.tolist()
            if 0 <= op < self._n and 0 <= slot < self._b:
                return op, slot
        elif isinstance(action, tuple | list) and len(action) == 2:
            op, slot = action
            if is_integer(op) and is_integer(slot) and 0 <= op < self._n and 0 <= slot < self._b:
                return int(op), int(slot)
        elif (isinstance(action, np.ndarray) and action.shape == (2,)
              and action.dtype.kind in "iu" and not np.ma.is_masked(action)):  # a subclass
            op, slot = np.asarray(action).tolist()  # a masked element is no integer: refused
            if 0 <= op < self._n and 0 <= slot < self._b:
                return op, slot
        raise ValueError(
            "action must be (operation, candidate): an integer array of shape (2,) or a tuple or "
            f"list of two integers, with operation in 0..{self._n - 1} and candidate in "
            f"0..{self._b - 1}; got {reprlib.repr(action)}"
        )

    # -- views -----------------------------------------------------------------------------
    def _observation(self) -> dict[str, np.ndarray]:
        """The current observation, fresh data every call (what reset and step return)."""
        return self._read_observation(self._task_row.copy(), self._obs.copy(), self._state)

    @property
    def task(self) -> WorkflowTask:
        """The public task of the current episode (call reset() first)."""
        if not self._started:
            raise RuntimeError("call reset() before reading the task")
        if self._task is None:
            self._task = task_from_row(self.params, self._task_row, int(self._state[SEED]),
                                       self._initial_registers)
        return self._task

    @property
    def registers(self) -> np.ndarray:
        """The true register values (simulator state, for tests and oracles, not for agents)."""
        regs = self._registers_off
        return self._work[regs:regs + 8].copy()

    def correct_slot(self, op: int) -> int:
        """The candidate slot that is right for `op` now (simulator state: for tests, oracles
        and benchmarks, not an agent input)."""
        b = self._b
        target = self.registers[self.task.query[op]] % b
        return int(np.flatnonzero(self.task.codes[op] == target)[0])

    def action_masks(self) -> np.ndarray:
        """N ready-operation flags then b candidate flags (sb3-contrib's MultiDiscrete format)."""
        return self._obs[self._mask].astype(bool)

    def render(self) -> str | np.ndarray | None:
        """The current state as text ("ansi") or an (H, W, 3) uint8 picture ("rgb_array")."""
        if self.render_mode == "ansi":
            return render_text(self.params, self.task, self._observation())
        if self.render_mode == "rgb_array":
            if self._viewer is None:
                from diagym.envs.workflow.viewer import WorkflowViewer  # matplotlib, on first use

                self._viewer = WorkflowViewer()
            return self._viewer.render(self.params, self.task, self._observation())
        return None

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        super().close()

    def _info(self, failure: int) -> dict[str, Any]:
        state = self._state.tolist()
        return {
            "failure": failure,
            "success": state[SUCCESSES] == self._n,
            "completed_ops": state[SUCCESSES],
            "calls": state[CALLS],
            "errors": state[ERRORS],
            "registers_visible": state[VISIBLE] == 1,
            "resampled": self._resampled,
            "action_mask": self.action_masks(),
            "task_seed": state[SEED],
        }
