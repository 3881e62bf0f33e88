"""A batch step with same-step autoreset, for vector APIs that reset finished envs at once.

Gymnasium's vector env (workflow_vector) resets a finished env on the *next* step; Stable-
Baselines3's VecEnv API resets it in the step that finished it and hands back the finished
episode's last observation separately. Doing that reset in Python would mean a Python loop over
finished envs and a second kernel call per step, and a workflow episode under random actions
lasts about two steps, so this kernel does it in the same numba loop: execute, and for an env
that ended, snapshot its rows and generate the task of rng.next_seed(seed) right away. The task
chain is the one a single env follows with reset() after each episode, so trajectories match.
"""

from __future__ import annotations

import numpy as np

from envs._core import rng
from envs._core.numba_setup import jit
from envs.workflow.generator import generate_into
from envs.workflow.kernel import allocate_rows, execute_into, first_invalid_action
from envs.workflow.layout import DONE, NO_FAILURE, SEED
from envs.workflow.params import P_N


@jit
def step_rows_reset_now(params: np.ndarray, actions: np.ndarray, task: np.ndarray,
                        state: np.ndarray, work: np.ndarray, obs: np.ndarray,
                        rewards: np.ndarray, dones: np.ndarray, failures: np.ndarray,
                        step_state: np.ndarray, final_task: np.ndarray,
                        final_obs: np.ndarray) -> int:
    """Step every env of a batch; an env whose episode ends starts its next task at once.

    actions is (E, 2) int64. Outputs: rewards, dones, failures; step_state[i] is env i's
    `state` row right after its call (the finished episode's, for an env that ended); for an
    env that ended, final_task[i] / final_obs[i] hold its last task and obs rows (other rows
    of those two are left untouched). Returns -1, or the index of the first action outside
    MultiDiscrete([N, b]), in which case nothing was stepped.
    """
    bad = first_invalid_action(params, actions)
    if bad >= 0:
        return bad
    reward_per_op = 1.0 / params[P_N]
    for i in range(actions.shape[0]):
        failure = execute_into(params, actions[i, 0], actions[i, 1], task, state, work, obs, i)
        rewards[i] = reward_per_op if failure == NO_FAILURE else 0.0
        failures[i] = failure
        for f in range(state.shape[1]):
            step_state[i, f] = state[i, f]
        done = state[i, DONE] == 1
        dones[i] = done
        if done:
            for f in range(task.shape[1]):
                final_task[i, f] = task[i, f]
            for f in range(obs.shape[1]):
                final_obs[i, f] = obs[i, f]
            generate_into(params, rng.next_seed(state[i, SEED]), task, state, work, obs, i)
    return -1


_warmed_up = False


def warm_up_rows() -> None:
    """Compile (or load from cache) the kernel once, so no env's first step pays for it."""
    global _warmed_up
    if _warmed_up:
        return
    from envs.workflow.generator import reset_batch
    from envs.workflow.params import WorkflowSpec

    params = WorkflowSpec(n_ops=2, depth=1, width=1, candidates=2).to_params()
    task, state, work, obs = allocate_rows(params, 1)
    reset_batch(params, np.zeros(1, dtype=np.int64), task, state, work, obs)
    step_rows_reset_now(params, np.zeros((1, 2), dtype=np.int64), task, state, work, obs,
                        np.zeros(1, dtype=np.float32), np.zeros(1, dtype=np.bool_),
                        np.zeros(1, dtype=np.int8), np.zeros_like(state), np.zeros_like(task),
                        np.zeros_like(obs))
    _warmed_up = True
