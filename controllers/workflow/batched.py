"""Many episodes of one reference controller on one task spec, in a single numba loop.

The grids of seed 003 hold 689,152 episodes; the Gymnasium loop costs microseconds per step
in Python, so the study runs here instead: the env's own kernels (generate_into,
execute_into) and the controller's own functions (controller_begin, controller_act) on one
row each, episode after episode. Nothing is re-implemented, so a trajectory here equals the
trajectory of the same controller through `gym.make` and the Policy adapter (tested).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from controllers.workflow.mechanisms import (
    C_CHECKS,
    C_ENTRIES,
    C_LOOKUPS,
    C_OVERFLOW,
    C_PREP,
    CONTROLLER_FIELDS,
    CONTROLLERS,
    K_RETAIN,
    RETAIN_PLAN,
    controller_act,
    controller_begin,
    controller_params,
    value_bits,
)
from envs._core.numba_setup import jit
from envs.workflow.generator import generate_into
from envs.workflow.kernel import allocate_rows, execute_into
from envs.workflow.layout import CALLS, DONE, ERRORS, SUCCESSES
from envs.workflow.params import P_N, P_R, WorkflowSpec

# Columns of the per-episode record matrix.
SUCCESS, COMPLETED, CALLS_COL, ERRORS_COL, FIRST_FAILURE, CHECKS, LOOKUPS, PREP, ENTRIES, \
    OVERFLOW = range(10)
RECORD_FIELDS = 10

EPISODE_KEYS = (
    "success", "completed", "calls", "errors", "first_failure", "checks", "lookups",
    "prep_entries", "cache_entries", "value_bits", "plan_slots",
)


class ControllerAbort(RuntimeError):
    """A run broke one of the study's admission rules (horizon, cache size, positive control)."""


@jit
def run_episodes(params: np.ndarray, cparams: np.ndarray, seeds: np.ndarray, task: np.ndarray,
                 state: np.ndarray, work: np.ndarray, obs: np.ndarray, cstate: np.ndarray,
                 records: np.ndarray, trace: np.ndarray) -> int:
    """One episode per seed; records[i] gets seed i's outcome, and trace[i, t] its t-th
    action while t < trace.shape[1] (pass a zero-length trace to skip). Returns -1, or the
    index of an episode that exceeded the call horizon N + R (the run must then abort)."""
    horizon = params[P_N] + params[P_R]
    for i in range(seeds.shape[0]):
        generate_into(params, seeds[i], task, state, work, obs, 0)
        controller_begin(params, cparams, cstate, 0, task, 0, obs, 0, seeds[i])
        failure = 0
        first_failure = 0
        while state[0, DONE] == 0:
            if state[0, CALLS] >= horizon:
                return i
            op, slot = controller_act(params, cparams, cstate, 0, task, 0, obs, 0, failure)
            if state[0, CALLS] < trace.shape[1]:
                trace[i, state[0, CALLS], 0] = op
                trace[i, state[0, CALLS], 1] = slot
            failure = execute_into(params, op, slot, task, state, work, obs, 0)
            if failure != 0 and first_failure == 0:
                first_failure = failure
        records[i, SUCCESS] = state[0, SUCCESSES] == params[P_N]
        records[i, COMPLETED] = state[0, SUCCESSES]
        records[i, CALLS_COL] = state[0, CALLS]
        records[i, ERRORS_COL] = state[0, ERRORS]
        records[i, FIRST_FAILURE] = first_failure
        records[i, CHECKS] = cstate[0, C_CHECKS]
        records[i, LOOKUPS] = cstate[0, C_LOOKUPS]
        records[i, PREP] = cstate[0, C_PREP]
        records[i, ENTRIES] = cstate[0, C_ENTRIES]
        records[i, OVERFLOW] = cstate[0, C_OVERFLOW]
    return -1


def run_controller(spec: WorkflowSpec, controller: str, seeds: np.ndarray,
                   trace_length: int = 0) -> dict[str, np.ndarray]:
    """Per-episode arrays (keys EPISODE_KEYS) of `controller` on the tasks of `seeds`; with
    trace_length > 0 also "trace": (seeds, trace_length, 2) actions, -1 after the last."""
    params = spec.to_params()
    cparams = controller_params(controller)
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    rows = allocate_rows(params, 1)
    cstate = np.zeros((1, CONTROLLER_FIELDS), dtype=np.int64)
    records = np.zeros((seeds.shape[0], RECORD_FIELDS), dtype=np.int64)
    trace = np.full((seeds.shape[0], trace_length, 2), -1, dtype=np.int64)
    bad = run_episodes(params, cparams, seeds, *rows, cstate, records, trace)
    if bad >= 0:
        raise ControllerAbort(
            f"{controller} on {spec} exceeded the call horizon N + R on seed {seeds[bad]}"
        )
    if records[:, OVERFLOW].any():
        raise ControllerAbort(f"{controller} on {spec} held more values than its capacity")
    entries = records[:, ENTRIES]
    plan = CONTROLLERS[controller][K_RETAIN] == RETAIN_PLAN
    result = {
        "success": records[:, SUCCESS].astype(bool),
        "completed": records[:, COMPLETED],
        "calls": records[:, CALLS_COL],
        "errors": records[:, ERRORS_COL],
        "first_failure": records[:, FIRST_FAILURE].astype(np.int8),
        "checks": records[:, CHECKS],
        "lookups": records[:, LOOKUPS],
        "prep_entries": records[:, PREP],
        "cache_entries": entries,
        "value_bits": value_bits(controller, 1, spec.candidates) * entries,
        "plan_slots": np.full(seeds.shape[0], spec.n_ops if plan else 0, dtype=np.int64),
    }
    if trace_length:
        result["trace"] = trace
    return result


def run_many(pairs: Iterable[tuple[WorkflowSpec, str]], seeds: np.ndarray,
             progress: bool = False) -> dict[str, np.ndarray]:
    """Stack run_controller over (spec, controller) pairs: arrays of shape (pairs, seeds)."""
    pairs = list(pairs)
    if progress:
        from tqdm import tqdm

        pairs_iter = tqdm(pairs, desc="configurations", unit="cfg", leave=False)
    else:
        pairs_iter = pairs
    columns: dict[str, list[np.ndarray]] = {key: [] for key in EPISODE_KEYS}
    for spec, controller in pairs_iter:
        result = run_controller(spec, controller, seeds)
        for key in EPISODE_KEYS:
            columns[key].append(result[key])
    if not pairs:
        return {key: np.zeros((0, len(seeds))) for key in EPISODE_KEYS}
    return {key: np.stack(values) for key, values in columns.items()}
