"""Where each piece of a workflow env's state lives in its flat per-env buffers.

The single env, the vector env and the batched runner keep an episode in four rows:
`task` (int8: the public task, fixed for the episode), `state` (int64: the scalars an
observer reads, kept contiguous so a batch copies them in one memcpy), `work` (int64: true
registers, prerequisite bits, node labels, scratch) and `obs` (int8: the observation the
kernel keeps current). Flat rows keep a numba call to four arrays whatever the batch size;
these offsets are the one definition of that layout, callable from Python and from numba.

OBS_FIELDS is the one table of the observation: each key's row, offset, length and values.
The observation space, the envs' row-to-dict views (RowView.observation) and the controllers'
and prompts' dict-to-row inverse (RowView.write_row, task_from_row) are all derived from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from diagym.envs._core.failures import FAILURES
from diagym.envs._core.numba_setup import jit
from diagym.envs.workflow.params import WorkflowParams

# Fields of a `state` row.
SEED = 0  # task seed of the current episode
SUCCESSES = 1  # successful executions
CALLS = 2  # execute calls
ERRORS = 3  # failed executions
FAILURE = 4  # failure code of the last call (0 = none)
DONE = 5  # 1 once the episode has ended
VISIBLE = 6  # 1 while the registers are shown
COMPLETED = 7  # bitmask of completed operation identifiers
HIDDEN_KEY = 8  # key of the hidden-resampling stream
HIDDEN_COUNTER = 9  # words drawn from it (advanced by successes only)
NEXT_SNAPSHOT = 10  # success count at which registers are next shown (0: never)
READY = 11  # bitmask of operations whose prerequisites are done and which are not done
STATE_FIELDS = 12

# MOD[m, x] = x mod m for m in 1..8 and 0 <= x < 64: kernels take small residues by lookup,
# since a 64-bit division costs more than the rest of a step.
MOD = np.array([[x % m if m else 0 for x in range(64)] for m in range(9)], dtype=np.int64)

# Failure codes (index into FAILURE_NAMES): the first entries of every env's table
# (envs/_core/failures.py), so info["failure"] and observation["failure"] share the codes.
NO_FAILURE, DEPENDENCY, CANDIDATE, ALREADY_COMPLETED = 0, 1, 2, 3
FAILURE_NAMES = FAILURES[:ALREADY_COMPLETED + 1]

# Offsets inside an `obs` row that do not depend on N.
OBS_REGISTERS = 0  # 8 register values, -1 where not shown
OBS_LAST_UPDATE = 8  # (register, increment) of the last success, (-1, -1) before any
OBS_COMPLETED = 10  # N completion flags, then the N + b action mask


@jit
def task_offsets(n: int, b: int) -> tuple[int, int, int, int, int, int]:
    """(query, update, delta, codes, prereq, row length) offsets of a `task` row."""
    query = 0
    update = n
    delta = 2 * n
    codes = 3 * n
    prereq = codes + n * b
    return query, update, delta, codes, prereq, prereq + n * n


@jit
def work_offsets(n: int) -> tuple[int, int, int, int, int, int, int]:
    """(registers, prereq bits, dependent bits, node labels, scratch A, scratch B, row length)
    offsets of a `work` row. Prereq bits of v: the operations v waits for; dependent bits of
    u: the operations that wait for u."""
    scratch = max(n, 8)
    registers = 0
    prereq_bits = registers + 8
    dependent_bits = prereq_bits + n
    labels = dependent_bits + n
    scratch_a = labels + n
    scratch_b = scratch_a + scratch
    return registers, prereq_bits, dependent_bits, labels, scratch_a, scratch_b, scratch_b + scratch


@jit
def obs_offsets(n: int, b: int) -> tuple[int, int, int]:
    """(completed, action mask, row length) offsets of an `obs` row."""
    completed = OBS_COMPLETED
    mask = completed + n
    return completed, mask, mask + n + b


# -- the observation: one table, from which the space and both row <-> dict directions follow --

TASK_ROW, OBS_ROW, STATE_ROW = "task", "obs", "state"
_ROW_INDEX = {TASK_ROW: 0, OBS_ROW: 1}


@dataclass(frozen=True)
class ObsField:
    """One observation key: the row it is read from, where, and the values it takes.

    offset(n, b) is its start in that row (a `state` field is one scalar at that index);
    length(n, b) its flat length (None for a scalar); space is "box" (int8 values in
    low..high), "binary" (MultiBinary) or "discrete" (Discrete(high + 1)); high may depend on
    the spec (the error count runs to R + 1).
    """

    name: str
    row: str
    offset: Callable[[int, int], int]
    length: Callable[[int, int], int] | None
    space: str
    low: int = 0
    high: int | Callable[[WorkflowParams], int] = 1

    def space_for(self, spec: WorkflowParams) -> spaces.Space:
        n, b = spec.n_ops, spec.candidates
        high = self.high(spec) if callable(self.high) else self.high
        if self.space == "discrete":
            return spaces.Discrete(high + 1)
        length = self.length(n, b)
        if self.space == "binary":
            return spaces.MultiBinary(length)
        return spaces.Box(self.low, high, shape=(length,), dtype=np.int8)


# SB3 keys a torch ModuleDict by observation key and `update` is one of its methods, hence
# query_register / update_register. Matrices are flat and row-major (prereq[v * N + u],
# codes[v * b + a]), since SB3's checker warns on other shapes.
OBS_FIELDS: tuple[ObsField, ...] = (
    ObsField("registers", OBS_ROW, lambda n, b: OBS_REGISTERS, lambda n, b: 8, "box", -1, 7),
    ObsField("completed", OBS_ROW, lambda n, b: OBS_COMPLETED, lambda n, b: n, "binary"),
    ObsField("last_update", OBS_ROW, lambda n, b: OBS_LAST_UPDATE, lambda n, b: 2, "box", -1, 7),
    ObsField("failure", STATE_ROW, lambda n, b: FAILURE, None, "discrete", 0,
             len(FAILURE_NAMES) - 1),
    ObsField("errors", STATE_ROW, lambda n, b: ERRORS, None, "discrete", 0,
             lambda spec: spec.error_allowance + 1),
    ObsField("prereq", TASK_ROW, lambda n, b: task_offsets(n, b)[4], lambda n, b: n * n,
             "binary"),
    ObsField("query_register", TASK_ROW, lambda n, b: task_offsets(n, b)[0], lambda n, b: n,
             "box", 0, 7),
    ObsField("update_register", TASK_ROW, lambda n, b: task_offsets(n, b)[1], lambda n, b: n,
             "box", 0, 7),
    ObsField("delta", TASK_ROW, lambda n, b: task_offsets(n, b)[2], lambda n, b: n, "box", 0, 7),
    ObsField("codes", TASK_ROW, lambda n, b: task_offsets(n, b)[3], lambda n, b: n * b,
             "box", 0, 7),
)


def observation_space_for(spec: WorkflowParams) -> spaces.Dict:
    """The observation space of one env: fixed shapes that SB3's MultiInputPolicy takes as is."""
    return spaces.Dict({f.name: f.space_for(spec) for f in OBS_FIELDS})


def action_mask_slice(n: int, b: int) -> slice:
    """N ready-operation flags then b candidate flags, in an `obs` row (sb3-contrib's format)."""
    mask = obs_offsets(n, b)[1]
    return slice(mask, mask + n + b)


class RowView:
    """OBS_FIELDS resolved for one (N, b): the observation dict from rows, and rows from it.

    Built once per env, so a step pays only for the slicing. The reading side takes fresh
    copies of the rows and returns views of them (one contiguous copy per row costs far less
    than a copy per field); it serves one env's 1-D rows and a batch's 2-D rows alike.
    """

    def __init__(self, n: int, b: int) -> None:
        self.n, self.b = n, b
        # (name, source, slice) with source 0 = task row, 1 = obs row.
        self.arrays: tuple[tuple[str, int, slice], ...] = tuple(
            (f.name, _ROW_INDEX[f.row], slice(f.offset(n, b), f.offset(n, b) + f.length(n, b)))
            for f in OBS_FIELDS if f.length is not None
        )
        self.scalars: tuple[tuple[str, int], ...] = tuple(
            (f.name, f.offset(n, b)) for f in OBS_FIELDS if f.length is None
        )
        self.action_mask = action_mask_slice(n, b)
        # read_one(task, obs, state) on one env's 1-D rows: observation()'s fast path, for a
        # caller that reads every step.
        self.read_one = self._compile_one_env_reader()

    def __reduce__(self) -> tuple[type, tuple[int, int]]:
        return RowView, (self.n, self.b)  # rebuilt, since the compiled reader cannot pickle

    def _compile_one_env_reader(self) -> Callable[..., dict[str, Any]]:
        """A function returning one dict display of every field, with constant slices.

        The single env reads an observation every step (benchmarks/env_step.py), and a loop
        over the table costs a third more than a hand-written dict; this writes that dict
        from the table once per (N, b), so neither the speed nor the one table is given up.
        """
        rows = ("task", "obs")
        items = [f"{name!r}: {rows[src]}[{cut.start}:{cut.stop}]"
                 for name, src, cut in self.arrays]
        items += [f"{name!r}: state[{index}]" for name, index in self.scalars]
        namespace: dict[str, Any] = {}
        exec(f"def read(task, obs, state):\n    return {{{', '.join(items)}}}\n", namespace)
        return namespace["read"]

    def observation(self, task: np.ndarray, obs: np.ndarray,
                    state: np.ndarray) -> dict[str, np.ndarray]:
        """Field views of (task, obs, state) rows, one env (1-D rows: scalars are numpy
        scalars, fresh objects) or a batch (2-D rows: one array per field)."""
        if state.ndim == 1:
            return self.read_one(task, obs, state)
        sources = (task, obs)
        out = {name: sources[src][:, cut] for name, src, cut in self.arrays}
        for name, index in self.scalars:
            out[name] = state[:, index]
        return out

    def write_row(self, observation: Mapping[str, Any], row: str, out: np.ndarray) -> np.ndarray:
        """Fill one env's `row` ("task" or "obs") from the observation fields it holds."""
        wanted = _ROW_INDEX[row]
        for name, src, cut in self.arrays:
            if src == wanted:
                out[cut] = observation[name]
        return out


@dataclass(frozen=True)
class WorkflowTask:
    """The public task of one episode, indexed by operation identifier.

    prereq[v, u] is True when u must be completed before v; query[v] / update[v] are the
    registers v reads and writes; delta[v] is its increment (0 under static updates);
    codes[v, a] is the code of candidate slot a, and slot a is right iff
    codes[v, a] == x[query[v]] mod b.
    """

    seed: int
    spec: WorkflowParams
    initial_registers: np.ndarray
    prereq: np.ndarray
    query: np.ndarray
    update: np.ndarray
    delta: np.ndarray
    codes: np.ndarray


def task_from_row(spec: WorkflowParams, row: np.ndarray, seed: int = -1,
                  initial_registers: np.ndarray | None = None) -> WorkflowTask:
    """The 2-D task of a `task` row (read-only views of a private copy)."""
    n, b = spec.n_ops, spec.candidates
    q, u, d, c, p, _ = task_offsets(n, b)
    row = np.array(row, dtype=np.int8)
    row.flags.writeable = False
    if initial_registers is None:
        initial_registers = np.full(8, -1, dtype=np.int8)
    initial = np.array(initial_registers, dtype=np.int8)
    initial.flags.writeable = False
    return WorkflowTask(
        seed=int(seed),
        spec=spec,
        initial_registers=initial,
        prereq=row[p:p + n * n].reshape(n, n).astype(bool),
        query=row[q:q + n],
        update=row[u:u + n],
        delta=row[d:d + n],
        codes=row[c:c + n * b].reshape(n, b),
    )
