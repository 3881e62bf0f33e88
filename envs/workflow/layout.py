"""Where each piece of a workflow env's state lives in its flat per-env buffers.

The single env, the vector env and the batched runner keep an episode in four rows:
`task` (int8: the public task, fixed for the episode), `state` (int64: the scalars an
observer reads, kept contiguous so a batch copies them in one memcpy), `work` (int64: true
registers, prerequisite bits, node labels, scratch) and `obs` (int8: the observation the
kernel keeps current). Flat rows keep a numba call to four arrays whatever the batch size;
these offsets are the one definition of that layout, callable from Python and from numba.
"""

from __future__ import annotations

import numpy as np

from envs._core.numba_setup import jit

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

# Failure codes (index into FAILURE_NAMES).
NO_FAILURE, DEPENDENCY, CANDIDATE, ALREADY_COMPLETED = 0, 1, 2, 3
FAILURE_NAMES = (None, "dependency", "candidate", "completed")

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
