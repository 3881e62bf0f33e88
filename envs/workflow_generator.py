"""Seeded generation of StatefulWorkflow tasks (seed 003, section 3 and "Pairing and randomness").

The draws come from the task stream of the seed, always in the same order, whatever the
level of b, w, observation, locality, updates or labels: the initial 8-slot array in Z_8; a
permutation of identifiers over the graph's nodes; a permutation of 0..N-1 taken mod w as
queries (balanced); update registers in 0..7 taken mod w; increments in 1..7; one permutation
of the 8 codes per node, of which level b keeps the codes < b in order. Levels are projections
of one draw, so tasks at different levels of a factor are paired by seed.

Per-operation attributes belong to graph nodes (chains: node c*d + j, barriers: node
layer*k + j); identifiers are labels on nodes, and the public task is indexed by identifier.
"""

from __future__ import annotations

import numpy as np

from envs import rng
from envs._numba import jit
from envs.workflow_layout import (
    COMPLETED,
    HIDDEN_COUNTER,
    HIDDEN_KEY,
    OBS_LAST_UPDATE,
    OBS_REGISTERS,
    SEED,
    VISIBLE,
    dyn_offsets,
    obs_offsets,
    task_offsets,
)
from envs.workflow_spec import (
    P_B,
    P_DEPTH,
    P_FAMILY,
    P_LABELS,
    P_LOCALITY,
    P_N,
    P_UPDATES,
    P_WIDTH,
)

CHAINS = 0
CLUSTERED, CONCENTRATED = 1, 2
STATIC = 1
REVERSED = 1


@jit
def generate_into(params: np.ndarray, seed: int, task: np.ndarray, dyn: np.ndarray,
                  obs: np.ndarray) -> None:
    """Draw the task of `seed` into one env's rows and start its episode."""
    n = params[P_N]
    depth = params[P_DEPTH]
    k = n // depth
    w = params[P_WIDTH]
    b = params[P_B]
    q_off, u_off, d_off, c_off, p_off, _ = task_offsets(n, b)
    regs, pre_bits, labels, tmp_a, tmp_b, _ = dyn_offsets(n)
    completed_off, mask_off, _ = obs_offsets(n, b)

    dyn[:] = 0
    dyn[SEED] = seed
    key = rng.stream_key(seed, rng.TASK_STREAM)
    counter = np.int64(0)

    counter = rng.fill_uniform(key, counter, dyn, regs, 8, 8)
    counter = rng.permutation(key, counter, dyn, labels, n)
    if params[P_LABELS] == REVERSED:
        for node in range(n):
            dyn[labels + node] = n - 1 - dyn[labels + node]

    counter = rng.permutation(key, counter, dyn, tmp_a, n)
    for node in range(n):
        task[q_off + dyn[labels + node]] = dyn[tmp_a + node] % w
    counter = rng.fill_uniform(key, counter, dyn, tmp_a, n, 8)
    for node in range(n):
        task[u_off + dyn[labels + node]] = dyn[tmp_a + node] % w
    counter = rng.fill_uniform(key, counter, dyn, tmp_a, n, 7)
    static = params[P_UPDATES] == STATIC
    for node in range(n):
        task[d_off + dyn[labels + node]] = 0 if static else dyn[tmp_a + node] + 1
    for node in range(n):
        counter = rng.permutation(key, counter, dyn, tmp_a, 8)
        # Keep the codes < b in order, without a data-dependent branch.
        kept = 0
        for j in range(8):
            code = dyn[tmp_a + j]
            dyn[tmp_b + kept] = code
            kept += code < b
        slot = c_off + dyn[labels + node] * b
        for a in range(b):
            task[slot + a] = dyn[tmp_b + a]

    # Prerequisites, by identifier.
    task[p_off:p_off + n * n] = 0
    for node in range(n):
        if params[P_FAMILY] == CHAINS:
            first = node - 1 if node % depth else node
        else:
            first = (node // k - 1) * k if node >= k else node
        last = node - 1 if params[P_FAMILY] == CHAINS else (node // k) * k - 1
        v = dyn[labels + node]
        for m in range(first, last + 1):
            u = dyn[labels + m]
            dyn[pre_bits + v] |= np.int64(1) << u
            task[p_off + v * n + u] = 1

    if params[P_LOCALITY] == CONCENTRATED:
        task[q_off:q_off + n] = 0
    elif params[P_LOCALITY] == CLUSTERED:
        # Same multiplicities as balanced, in blocks along the smallest-label ready schedule.
        done = np.int64(0)
        for t in range(n):
            for v in range(n):
                if (done >> v) & 1 == 0 and dyn[pre_bits + v] & ~done == 0:
                    dyn[tmp_a + t] = v
                    done |= np.int64(1) << v
                    break
        for r in range(8):
            dyn[tmp_b + r] = 0
        for v in range(n):
            dyn[tmp_b + task[q_off + v]] += 1
        t = 0
        for r in range(8):
            for _ in range(dyn[tmp_b + r]):
                task[q_off + dyn[tmp_a + t]] = r
                t += 1

    dyn[HIDDEN_KEY] = rng.stream_key(seed, rng.HIDDEN_STREAM)
    dyn[HIDDEN_COUNTER] = 0
    dyn[COMPLETED] = 0
    dyn[VISIBLE] = 1
    obs[:] = 0
    for r in range(8):
        obs[OBS_REGISTERS + r] = dyn[regs + r]
    obs[OBS_LAST_UPDATE] = -1
    obs[OBS_LAST_UPDATE + 1] = -1
    for v in range(n):
        obs[completed_off + v] = 0
        obs[mask_off + v] = 1 if dyn[pre_bits + v] == 0 else 0
    for a in range(b):
        obs[mask_off + n + a] = 1


@jit
def reset_batch(params: np.ndarray, seeds: np.ndarray, task: np.ndarray, dyn: np.ndarray,
                obs: np.ndarray) -> None:
    """Start a new episode in every env of a batch."""
    for i in range(seeds.shape[0]):
        generate_into(params, seeds[i], task[i], dyn[i], obs[i])
