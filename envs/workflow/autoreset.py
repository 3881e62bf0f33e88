"""The batch steps, one per autoreset convention: the one home of "what a finished env does".

Gymnasium's vector env (envs/workflow/vector.py) resets a finished env on the *next* step
(`step_batch`); Stable-Baselines3's VecEnv API (controllers/sb3/vec_env.py) resets it in the
step that finished it and hands back the finished episode's last observation separately
(`step_batch_reset_now`). Doing that reset in Python would mean a Python loop over finished
envs and a second kernel call per step, and a workflow episode under random actions lasts
about two steps, so both do it in the same numba loop as the step. Either way a finished env
goes on to the task of rng.next_seed(seed), the chain a single env follows with reset() after
each episode, so all paths give the same trajectories.
"""

from __future__ import annotations

import numpy as np

from diagym.envs._core import rng
from diagym.envs._core.numba_setup import compiling, jit
from diagym.envs.workflow.generator import generate_into, reset_batch
from diagym.envs.workflow.kernel import allocate_rows, execute_into, first_invalid_action
from diagym.envs.workflow.kernel import warm_up as kernel_warm_up
from diagym.envs.workflow.layout import DONE, NO_FAILURE, SEED
from diagym.envs.workflow.params import P_N, WorkflowParams


@jit
def step_batch(params: np.ndarray, actions: np.ndarray, task: np.ndarray, state: np.ndarray,
               work: np.ndarray, obs: np.ndarray, rewards: np.ndarray, terminated: np.ndarray,
               failures: np.ndarray) -> int:
    """Step every env of a batch, with Gymnasium's next-step autoreset.

    Returns -1, or the index of the first action outside MultiDiscrete([N, b]), in which case
    nothing was stepped. An env whose episode ended on the previous call starts the episode
    of its next seed (rng.next_seed) instead of acting: reward 0, not terminated, failure 0.
    """
    bad = first_invalid_action(params, actions)
    if bad >= 0:
        return bad
    reward_per_op = 1.0 / params[P_N]
    for i in range(actions.shape[0]):
        if state[i, DONE]:
            generate_into(params, rng.next_seed(state[i, SEED]), task, state, work, obs, i)
            rewards[i] = 0.0
            terminated[i] = False
            failures[i] = NO_FAILURE
            continue
        failure = execute_into(params, actions[i, 0], actions[i, 1], task, state, work, obs, i)
        rewards[i] = reward_per_op if failure == NO_FAILURE else 0.0
        terminated[i] = state[i, DONE] == 1
        failures[i] = failure
    return -1


@jit
def step_batch_reset_now(params: np.ndarray, actions: np.ndarray, task: np.ndarray,
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


def warm_up() -> None:
    """Compile (or load from cache) both batch steps once, so no env's first step pays."""
    global _warmed_up
    if _warmed_up:
        return
    kernel_warm_up()
    with compiling("StatefulWorkflow vector", (step_batch, step_batch_reset_now)):
        params = WorkflowParams(n_ops=2, depth=1, width=1, candidates=2).to_params()
        task, state, work, obs = allocate_rows(params, 1)
        reset_batch(params, np.zeros(1, dtype=np.int64), task, state, work, obs)
        step_batch(params, np.zeros((1, 2), dtype=np.int64), task, state, work, obs,
                   np.zeros(1), np.zeros(1, dtype=np.bool_), np.zeros(1, dtype=np.int8))
        step_batch_reset_now(params, np.zeros((1, 2), dtype=np.int64), task, state, work, obs,
                             np.zeros(1, dtype=np.float32), np.zeros(1, dtype=np.bool_),
                             np.zeros(1, dtype=np.int8), np.zeros_like(state),
                             np.zeros_like(task), np.zeros_like(obs))
    _warmed_up = True
