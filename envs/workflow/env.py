"""StatefulWorkflow-v0: seed 003's fixed-work stateful tool-use workflow as a Gymnasium env.

An agent completes N operations with execute(v, a): v is an operation identifier, a one of
b candidate slots. The state is 8 registers in Z_8 of which `width` are active; each success
updates one register, so a controller must track values across calls, schedule around
prerequisites and pick the right candidate. The public task (prerequisites, query and update
registers, increments, candidate codes) changes every episode and is part of the observation.

The env is a thin shell over the numba rows of workflow_layout: generation lives in
workflow_generator, transitions in workflow_kernel, text in workflow_text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs._core import rng
from envs.workflow.generator import generate_into
from envs.workflow.kernel import allocate_rows, execute_into, warm_up
from envs.workflow.layout import (
    CALLS,
    DONE,
    ERRORS,
    FAILURE,
    FAILURE_NAMES,
    OBS_LAST_UPDATE,
    OBS_REGISTERS,
    SEED,
    SUCCESSES,
    VISIBLE,
    obs_offsets,
    task_offsets,
    work_offsets,
)
from envs.workflow.params import WorkflowSpec


def _is_integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


@dataclass(frozen=True)
class WorkflowTask:
    """The public task of one episode, indexed by operation identifier.

    prereq[v, u] is True when u must be completed before v; query[v] / update[v] are the
    registers v reads and writes; delta[v] is its increment (0 under static updates);
    codes[v, a] is the code of candidate slot a, and slot a is right iff
    codes[v, a] == x[query[v]] mod b.
    """

    seed: int
    spec: WorkflowSpec
    initial_registers: np.ndarray
    prereq: np.ndarray
    query: np.ndarray
    update: np.ndarray
    delta: np.ndarray
    codes: np.ndarray


def observation_space_for(spec: WorkflowSpec) -> spaces.Dict:
    """The observation space of one env: fixed shapes that SB3's MultiInputPolicy takes as is.

    Every field is a flat vector (SB3's checker warns on other shapes): `prereq` is the N x N
    prerequisite matrix and `codes` the N x b code table, both row-major
    (prereq[v * N + u], codes[v * b + a]); `env.unwrapped.task` has them as 2-D arrays. The
    register fields are `query_register` / `update_register`, since SB3 keys a torch
    ModuleDict by observation key and `update` is one of its methods.
    """
    n, b = spec.n_ops, spec.candidates
    i8 = np.int8
    return spaces.Dict(
        {
            "registers": spaces.Box(-1, 7, shape=(8,), dtype=i8),
            "completed": spaces.MultiBinary(n),
            "last_update": spaces.Box(-1, 7, shape=(2,), dtype=i8),
            "failure": spaces.Discrete(len(FAILURE_NAMES)),
            "errors": spaces.Discrete(spec.error_allowance + 2),
            "prereq": spaces.MultiBinary(n * n),
            "query_register": spaces.Box(0, 7, shape=(n,), dtype=i8),
            "update_register": spaces.Box(0, 7, shape=(n,), dtype=i8),
            "delta": spaces.Box(0, 7, shape=(n,), dtype=i8),
            "codes": spaces.Box(0, 7, shape=(n * b,), dtype=i8),
        }
    )


class StatefulWorkflowEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Seed 003's workflow task family; every WorkflowSpec field is a constructor kwarg.

    Action: MultiDiscrete([N, b]) = (operation identifier, candidate slot); anything outside
    it raises ValueError. Reward: 1/N per completed operation, so the return is the fraction
    completed. `info` carries failure (category or None), success, completed_ops, calls,
    errors, resampled, action_mask (N ready-operation flags, then b candidate flags, the flat
    MultiDiscrete format sb3-contrib expects) and task_seed.

    reset(seed=s) plays the task of seed s (the paper's seeds are task seeds); reset() without
    a seed moves to the next task seed (rng.next_seed), so a seeded sequence of episodes is
    reproducible and equal to the vector env's autoreset sequence.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, render_mode: str | None = None, **spec_kwargs: Any) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be one of None | 'ansi'; got {render_mode!r}")
        self.spec_params = WorkflowSpec.from_kwargs(**spec_kwargs)
        warm_up()
        self.render_mode = render_mode
        spec = self.spec_params
        n, b = spec.n_ops, spec.candidates
        self._n, self._b = n, b
        self._params = spec.to_params()
        # The kernels take batch arrays and a row index; this env is a batch of one, and the
        # 1-D attributes are views of its row for reading from Python.
        self._rows = allocate_rows(self._params, 1)
        self._task_row, self._state, self._work, self._obs = (a[0] for a in self._rows)
        self._completed_off, self._mask_off, _ = obs_offsets(n, b)
        self._reward_per_op = 1.0 / n
        self.observation_space = observation_space_for(spec)
        self.action_space = spaces.MultiDiscrete([n, b])
        self._task_fields = task_offsets(n, b)[:5]
        self._registers_off = work_offsets(n)[0]
        self._initial_registers = np.zeros(8, dtype=np.int8)
        self._started = False
        self._task: WorkflowTask | None = None
        self._resampled = False

    # -- episode ---------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None and not 0 <= seed < 2**63:
            raise ValueError(f"seed must be an integer in 0..2**63-1; got {seed!r}")
        super().reset(seed=seed)
        if seed is not None:
            task_seed = int(seed)
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
        return self._observation(), self._info(None)

    def step(
        self, action: Any
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        op, slot = self._parse_action(action)
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._state[DONE]:
            raise RuntimeError("the episode has ended; call reset() before step()")
        failure = execute_into(self._params, op, slot, *self._rows, 0)
        self._resampled = failure == 0 and self.spec_params.hidden_resampling
        reward = self._reward_per_op if failure == 0 else 0.0
        terminated = bool(self._state[DONE])
        return self._observation(), reward, terminated, False, self._info(FAILURE_NAMES[failure])

    def _parse_action(self, action: Any) -> tuple[int, int]:
        if type(action) is np.ndarray and action.shape == (2,) and action.dtype.kind in "iu":
            op, slot = action.tolist()  # the common case, without per-element checks
            if 0 <= op < self._n and 0 <= slot < self._b:
                return op, slot
        try:
            op, slot = action
            if not (_is_integer(op) and _is_integer(slot)):
                raise TypeError
            op, slot = int(op), int(slot)
        except (TypeError, ValueError):
            op = slot = -1
        if not (0 <= op < self._n and 0 <= slot < self._b):
            raise ValueError(
                f"action must be (operation, candidate) with operation in 0..{self._n - 1} "
                f"and candidate in 0..{self._b - 1}; got {action!r}"
            )
        return op, slot

    # -- views -----------------------------------------------------------------------------
    @property
    def task(self) -> WorkflowTask:
        """The public task of the current episode (call reset() first)."""
        if not self._started:
            raise RuntimeError("call reset() before reading the task")
        if self._task is None:
            self._task = self._build_task()
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
        return self._obs[self._mask_off:self._mask_off + self._n + self._b].astype(bool)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        from envs.workflow.text import render_episode

        return render_episode(self)

    def _build_task(self) -> WorkflowTask:
        n, b = self._n, self._b
        q, u, d, c, p, _ = task_offsets(n, b)
        row = self._task_row.copy()
        row.flags.writeable = False
        initial = self._initial_registers.copy()
        initial.flags.writeable = False
        return WorkflowTask(
            seed=int(self._state[SEED]),
            spec=self.spec_params,
            initial_registers=initial,
            prereq=row[p:p + n * n].reshape(n, n).astype(bool),
            query=row[q:q + n],
            update=row[u:u + n],
            delta=row[d:d + n],
            codes=row[c:c + n * b].reshape(n, b),
        )

    def _observation(self) -> dict[str, np.ndarray]:
        """Fresh data every call: one copy of each flat row, then per-field views of it."""
        n, b = self._n, self._b
        q, u, d, c, p = self._task_fields
        completed = self._completed_off
        task = self._task_row.copy()
        obs = self._obs.copy()
        return {
            "registers": obs[OBS_REGISTERS:OBS_REGISTERS + 8],
            "completed": obs[completed:completed + n],
            "last_update": obs[OBS_LAST_UPDATE:OBS_LAST_UPDATE + 2],
            "failure": self._state[FAILURE],  # numpy scalars: fresh objects, not views
            "errors": self._state[ERRORS],
            "prereq": task[p:p + n * n],
            "query_register": task[q:q + n],
            "update_register": task[u:u + n],
            "delta": task[d:d + n],
            "codes": task[c:c + n * b],
        }

    def _info(self, failure: str | None) -> dict[str, Any]:
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
