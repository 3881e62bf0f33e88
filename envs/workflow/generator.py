"""Seeded generation of StatefulWorkflow tasks (seed 003, section 3 and "Pairing and randomness").

The draws come from the task stream of the seed, always in the same order, whatever the
level of b, w, observation, locality, updates or labels: the initial 8-slot array in Z_8; a
permutation of identifiers over the graph's nodes; a permutation of 0..N-1 taken mod w as
queries (balanced); update registers in 0..7 taken mod w; increments in 1..7; one
permutation of the 8 codes per node, of which level b keeps the codes < b in order
(rng.codes_below). Levels are projections
of one draw, so tasks at different levels of a factor are paired by seed.

Per-operation attributes belong to graph nodes (chains: node c*d + j, barriers: node
layer*k + j); identifiers are labels on nodes, and the public task is indexed by identifier.
"""

from __future__ import annotations

import numpy as np

from diagym.envs._core import rng
from diagym.envs._core.bits import smallest_ready
from diagym.envs._core.numba_setup import jit, jit_inline
from diagym.envs.workflow.layout import (
    CALLS,
    COMPLETED,
    DONE,
    ERRORS,
    FAILURE,
    HIDDEN_COUNTER,
    HIDDEN_KEY,
    MOD,
    NEXT_SNAPSHOT,
    OBS_LAST_UPDATE,
    OBS_REGISTERS,
    READY,
    SEED,
    SUCCESSES,
    VISIBLE,
    obs_offsets,
    task_offsets,
    work_offsets,
)
from diagym.envs.workflow.params import (
    CHAINS,
    CLUSTERED,
    CONCENTRATED,
    P_B,
    P_DEPTH,
    P_FAMILY,
    P_LABELS,
    P_LOCALITY,
    P_N,
    P_PERIOD,
    P_UPDATES,
    P_WIDTH,
    REVERSED,
    STATIC,
)


@jit_inline
def generate_into(params: np.ndarray, seed: int, task: np.ndarray, state: np.ndarray,
                  work: np.ndarray, obs: np.ndarray, row: int) -> None:
    """Draw the task of `seed` into row `row` of the batch arrays and start its episode.

    Kernels take batch arrays and a row index, so one kernel serves the batch loops and the
    single env (a batch of one).
    """
    n = params[P_N]
    depth = params[P_DEPTH]
    k = n // depth
    w = params[P_WIDTH]
    b = params[P_B]
    q_off, u_off, d_off, c_off, p_off, _ = task_offsets(n, b)
    regs, pre_bits, dep_bits, labels, tmp_a, tmp_b, _ = work_offsets(n)
    completed_off, mask_off, _ = obs_offsets(n, b)

    key = rng.stream_key(seed, rng.TASK_STREAM)
    counter = np.int64(0)
    counter = rng.fill_uniform(key, counter, work, row, regs, 8, 8)
    counter = rng.permutation(key, counter, work, row, labels, n)
    if params[P_LABELS] == REVERSED:
        for node in range(n):
            work[row, labels + node] = n - 1 - work[row, labels + node]

    counter = rng.permutation(key, counter, work, row, tmp_a, n)
    for node in range(n):
        task[row, q_off + work[row, labels + node]] = MOD[w, work[row, tmp_a + node]]
    counter = rng.fill_uniform(key, counter, work, row, tmp_a, n, 8)
    for node in range(n):
        task[row, u_off + work[row, labels + node]] = MOD[w, work[row, tmp_a + node]]
    counter = rng.fill_uniform(key, counter, work, row, tmp_a, n, 7)
    static = params[P_UPDATES] == STATIC
    for node in range(n):
        task[row, d_off + work[row, labels + node]] = 0 if static else work[row, tmp_a + node] + 1
    for node in range(n):
        packed, counter = rng.codes_below(key, counter, b)
        slot = c_off + work[row, labels + node] * b
        for a in range(b):
            task[row, slot + a] = (packed >> (4 * a)) & 15

    # Prerequisites, by identifier. Chains: node c*d + j follows c*d + j - 1. Barriers: node
    # layer*k + j follows every node of the previous layer. (Loops, not divisions.)
    task[row, p_off:p_off + n * n] = 0
    for v in range(n):
        work[row, pre_bits + v] = 0
        work[row, dep_bits + v] = 0
    if params[P_FAMILY] == CHAINS:
        node = 0
        for _ in range(k):
            for j in range(1, depth):
                v = work[row, labels + node + j]
                u = work[row, labels + node + j - 1]
                work[row, pre_bits + v] |= np.int64(1) << u
                work[row, dep_bits + u] |= np.int64(1) << v
                task[row, p_off + v * n + u] = 1
            node += depth
    else:
        for layer_start in range(k, n, k):
            for j in range(k):
                v = work[row, labels + layer_start + j]
                for m in range(layer_start - k, layer_start):
                    u = work[row, labels + m]
                    work[row, pre_bits + v] |= np.int64(1) << u
                    work[row, dep_bits + u] |= np.int64(1) << v
                    task[row, p_off + v * n + u] = 1

    if params[P_LOCALITY] == CONCENTRATED:
        for v in range(n):
            task[row, q_off + v] = 0
    elif params[P_LOCALITY] == CLUSTERED:
        # Same multiplicities as balanced, in blocks along the smallest-label ready schedule.
        done = np.int64(0)
        for t in range(n):
            v = smallest_ready(work, row, pre_bits, n, done)
            work[row, tmp_a + t] = v
            done |= np.int64(1) << v
        for r in range(8):
            work[row, tmp_b + r] = 0
        for v in range(n):
            work[row, tmp_b + task[row, q_off + v]] += 1
        t = 0
        for r in range(8):
            for _ in range(work[row, tmp_b + r]):
                task[row, q_off + work[row, tmp_a + t]] = r
                t += 1

    state[row, SEED] = seed
    state[row, SUCCESSES] = 0
    state[row, CALLS] = 0
    state[row, ERRORS] = 0
    state[row, FAILURE] = 0
    state[row, DONE] = 0
    state[row, VISIBLE] = 1
    state[row, COMPLETED] = 0
    state[row, HIDDEN_KEY] = rng.stream_key(seed, rng.HIDDEN_STREAM)
    state[row, HIDDEN_COUNTER] = 0
    state[row, NEXT_SNAPSHOT] = params[P_PERIOD]
    for r in range(8):
        obs[row, OBS_REGISTERS + r] = work[row, regs + r]
    obs[row, OBS_LAST_UPDATE] = -1
    obs[row, OBS_LAST_UPDATE + 1] = -1
    ready = np.int64(0)
    for v in range(n):
        free = work[row, pre_bits + v] == 0
        obs[row, completed_off + v] = 0
        obs[row, mask_off + v] = free
        ready |= np.int64(free) << v
    state[row, READY] = ready
    for a in range(b):
        obs[row, mask_off + n + a] = 1


@jit
def reset_batch(params: np.ndarray, seeds: np.ndarray, task: np.ndarray, state: np.ndarray,
                work: np.ndarray, obs: np.ndarray) -> None:
    """Start a new episode in every env of a batch."""
    for i in range(seeds.shape[0]):
        generate_into(params, seeds[i], task, state, work, obs, i)
