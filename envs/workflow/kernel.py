"""The StatefulWorkflow transition: execute(v, a), in numba, for one row of a batch.

One definition serves the single env, the batch steps of autoreset.py and the batched
controller runner.
Semantics (seed 003 section 3.1 and 7, ARCHITECTURE.md):
- a call fails with `completed` if v is already done, `dependency` if a prerequisite of v is
  missing, `candidate` if codes[v, a] != x[q_v] mod b (x read before v's own update);
- a success marks v done and applies x[u_v] = (x[u_v] + delta_v) mod 8 (delta is 0 for static
  updates); with hidden resampling the active slots are then replaced by 8 fresh values from
  the hidden stream, which only successes advance;
- a failure changes no state; the episode ends when errors exceed the allowance R, or when all
  N operations are done;
- registers are shown initially and after every h-th success (h = snapshot period > 0);
  visibility depends only on the number of successes.
"""

from __future__ import annotations

import numpy as np

from diagym.envs._core import rng
from diagym.envs._core.bits import lowest_bit
from diagym.envs._core.numba_setup import compiling, jit, jit_inline
from diagym.envs.workflow.generator import generate_into
from diagym.envs.workflow.layout import (
    ALREADY_COMPLETED,
    CALLS,
    CANDIDATE,
    COMPLETED,
    DEPENDENCY,
    DONE,
    ERRORS,
    FAILURE,
    HIDDEN_COUNTER,
    HIDDEN_KEY,
    MOD,
    NEXT_SNAPSHOT,
    NO_FAILURE,
    OBS_LAST_UPDATE,
    OBS_REGISTERS,
    READY,
    STATE_FIELDS,
    SUCCESSES,
    VISIBLE,
    obs_offsets,
    task_offsets,
    work_offsets,
)
from diagym.envs.workflow.params import P_B, P_HIDDEN, P_N, P_PERIOD, P_R, P_WIDTH


@jit_inline
def execute_into(params: np.ndarray, op: int, slot: int, task: np.ndarray, state: np.ndarray,
                 work: np.ndarray, obs: np.ndarray, row: int) -> int:
    """Apply execute(op, slot) to row `row` of the batch arrays; returns the failure code."""
    n = params[P_N]
    b = params[P_B]
    q_off, u_off, d_off, c_off, _, _ = task_offsets(n, b)
    regs, pre_bits, dep_bits, _, tmp_a, _, _ = work_offsets(n)
    completed_off, mask_off, _ = obs_offsets(n, b)

    state[row, CALLS] += 1
    done_mask = state[row, COMPLETED]
    bit = np.int64(1) << op
    if done_mask & bit:
        failure = ALREADY_COMPLETED
    elif work[row, pre_bits + op] & ~done_mask:
        failure = DEPENDENCY
    elif task[row, c_off + op * b + slot] != MOD[b, work[row, regs + task[row, q_off + op]]]:
        failure = CANDIDATE
    else:
        failure = NO_FAILURE
    state[row, FAILURE] = failure
    if failure != NO_FAILURE:
        state[row, ERRORS] += 1
        if state[row, ERRORS] > params[P_R]:
            state[row, DONE] = 1
        return failure

    done_mask |= bit
    state[row, COMPLETED] = done_mask
    u = task[row, u_off + op]
    delta = task[row, d_off + op]
    work[row, regs + u] = (work[row, regs + u] + delta) & 7
    successes = state[row, SUCCESSES] + 1
    state[row, SUCCESSES] = successes
    hidden = params[P_HIDDEN] != 0
    if hidden:
        state[row, HIDDEN_COUNTER] = rng.fill_uniform(
            state[row, HIDDEN_KEY], state[row, HIDDEN_COUNTER], work, row, tmp_a, 8, 8
        )
        for r in range(params[P_WIDTH]):
            work[row, regs + r] = work[row, tmp_a + r]
    visible = successes == state[row, NEXT_SNAPSHOT]
    if visible:
        state[row, NEXT_SNAPSHOT] += params[P_PERIOD]
        if state[row, VISIBLE] and not hidden:  # shown before and after: only x[u] changed
            obs[row, OBS_REGISTERS + u] = work[row, regs + u]
        else:
            for r in range(8):
                obs[row, OBS_REGISTERS + r] = work[row, regs + r]
    elif state[row, VISIBLE]:
        for r in range(8):
            obs[row, OBS_REGISTERS + r] = -1
    state[row, VISIBLE] = 1 if visible else 0
    obs[row, OBS_LAST_UPDATE] = u
    obs[row, OBS_LAST_UPDATE + 1] = delta
    obs[row, completed_off + op] = 1
    # Only op and the operations waiting for it can change readiness.
    ready = state[row, READY] & ~bit
    waiting = work[row, dep_bits + op]
    while waiting:
        v = lowest_bit(waiting)
        waiting &= waiting - 1
        if work[row, pre_bits + v] & ~done_mask == 0:
            ready |= np.int64(1) << v
    changed = ready ^ state[row, READY]
    state[row, READY] = ready
    while changed:
        v = lowest_bit(changed)
        changed &= changed - 1
        obs[row, mask_off + v] = (ready >> v) & 1
    if successes == n:
        state[row, DONE] = 1
    return NO_FAILURE


@jit
def first_invalid_action(params: np.ndarray, actions: np.ndarray) -> int:
    """Index of the first action outside MultiDiscrete([N, b]), or -1."""
    n = params[P_N]
    b = params[P_B]
    for i in range(actions.shape[0]):
        if actions[i, 0] < 0 or actions[i, 0] >= n or actions[i, 1] < 0 or actions[i, 1] >= b:
            return i
    return -1


_warmed_up = False


def allocate_rows(params: np.ndarray, num_envs: int) -> tuple[np.ndarray, ...]:
    """Zeroed (task, state, work, obs) buffers for `num_envs` envs of one spec."""
    n, b = int(params[P_N]), int(params[P_B])
    return (
        np.zeros((num_envs, task_offsets(n, b)[-1]), dtype=np.int8),
        np.zeros((num_envs, STATE_FIELDS), dtype=np.int64),
        np.zeros((num_envs, work_offsets(n)[-1]), dtype=np.int64),
        np.zeros((num_envs, obs_offsets(n, b)[-1]), dtype=np.int8),
    )


def warm_up() -> None:
    """Compile (or load from cache) the single-env kernels once, so no env's first step pays
    for it (autoreset.warm_up does the batch steps)."""
    global _warmed_up
    if _warmed_up:
        return
    from diagym.envs.workflow.generator import reset_batch
    from diagym.envs.workflow.params import WorkflowParams

    with compiling("StatefulWorkflow", (reset_batch, execute_into, generate_into)):
        params = WorkflowParams(n_ops=2, depth=1, width=1, candidates=2).to_params()
        task, state, work, obs = allocate_rows(params, 1)
        reset_batch(params, np.zeros(1, dtype=np.int64), task, state, work, obs)
        execute_into(params, 0, 0, task, state, work, obs, 0)
        generate_into(params, 1, task, state, work, obs, 0)
    _warmed_up = True
