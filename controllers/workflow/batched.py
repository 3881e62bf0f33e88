"""Many episodes of one reference controller on one task spec, in a single numba loop.

The grids of seed 003 hold 689,152 episodes; the Gymnasium loop costs microseconds per step
in Python, so the study runs here instead: the env's own kernels (generate_into,
execute_into) and the controller's own functions (controller_begin, controller_act) on one
row each, episode after episode. Nothing is re-implemented, so a trajectory here equals the
trajectory of the same controller through `gym.make` and the Policy adapter (tested).

Two outputs: `run_controller` / `run_many`, the study's arrays (with its admission rules),
and `episode_columns`, the columns of an Episodes, which `controllers.rollout` returns when it
plays a ReferencePolicy here instead of through the env.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from diagym.controllers.workflow.mechanisms import (
    C_CHECKS,
    C_ENTRIES,
    C_LOOKUPS,
    C_OVERFLOW,
    C_PREP,
    CONTROLLER_FIELDS,
    controller_act,
    controller_begin,
    controller_params,
    value_bits,
)
from diagym.controllers.workflow.parameters import CONTROLLERS, K_RETAIN, RETAIN_PLAN
from diagym.envs._core.numba_setup import jit
from diagym.envs.workflow.generator import generate_into
from diagym.envs.workflow.kernel import allocate_rows, execute_into
from diagym.envs.workflow.layout import CALLS, DONE, ERRORS, FAILURE_NAMES, SUCCESSES
from diagym.envs.workflow.params import P_N, P_R, WorkflowParams

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


def _play(spec: WorkflowParams, controller: str, seeds: np.ndarray, records: np.ndarray,
          trace: np.ndarray) -> None:
    """run_episodes over `seeds` into `records` / `trace`; raises ControllerAbort at the call
    horizon, which a correct kernel never reaches (every episode ends within N + R calls)."""
    params = spec.to_params()
    rows = allocate_rows(params, 1)
    cstate = np.zeros((1, CONTROLLER_FIELDS), dtype=np.int64)
    bad = run_episodes(params, controller_params(controller), seeds, *rows, cstate, records,
                       trace)
    if bad >= 0:
        raise ControllerAbort(
            f"{controller} on {spec} exceeded the call horizon N + R on seed {seeds[bad]}"
        )


def run_controller(spec: WorkflowParams, controller: str, seeds: np.ndarray,
                   trace_length: int = 0) -> dict[str, np.ndarray]:
    """Per-episode arrays (keys EPISODE_KEYS) of `controller` on the tasks of `seeds`; with
    trace_length > 0 also "trace": (seeds, trace_length, 2) actions, -1 after the last.

    The study's admission rule applies: a controller that held more values than its capacity
    aborts the run (ControllerAbort)."""
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    records = np.zeros((seeds.shape[0], RECORD_FIELDS), dtype=np.int64)
    trace = np.full((seeds.shape[0], trace_length, 2), -1, dtype=np.int64)
    _play(spec, controller, seeds, records, trace)
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


# Episodes played per run_episodes call in episode_columns: the int64 record matrix of a
# chunk is reused (5 MB), so a run of millions holds only its compact columns.
CHUNK = 1 << 16
COUNTER_KEYS = EPISODE_KEYS[5:]
_FAILURE_OBJECTS = np.array(FAILURE_NAMES, dtype=object)
OnChunk = Callable[[int, dict[str, np.ndarray], dict[str, np.ndarray]], None]


def episode_columns(spec: WorkflowParams, controller: str, seeds: np.ndarray,
                    on_chunk: OnChunk | None = None
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(columns, counters) of `controller` on the tasks of `seeds`, shaped as an Episodes
    (controllers/episodes.py) without its "episode" column: what the per-step runner records
    for the same episodes through the env and ReferencePolicy, field for field.

    - task_seed is the seed itself: reset(seed=s) plays the task of seed s.
    - first_failure is the name of the first failed call's category (None if none failed).
    - episode_return is the float sum the per-step runner forms of the env's rewards, 1/N per
      success and 0.0 per failure, added in order: a table over the success count.
    - There is no capacity abort: the per-step runner records such episodes too.

    Integer columns are int32 where every value provably fits (calls <= N + R, checks <= b
    per call, preparation <= N * b): at 4M episodes the columns take about 250 MB, not 500.
    `on_chunk(start, columns, counters)` is called after each CHUNK of seeds, with views of
    that chunk's entries (seeds[start:start + chunk length])."""
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    size = seeds.shape[0]
    n, b = spec.n_ops, spec.candidates
    bound = (n + spec.error_allowance) * b + n * b
    small = np.int32 if bound <= np.iinfo(np.int32).max else np.int64
    returns, total = [], 0.0
    for _ in range(n + 1):
        returns.append(total)
        total += 1.0 / n
    returns_table = np.array(returns, dtype=np.float64)
    success = np.empty(size, dtype=np.bool_)
    ints = {key: np.empty(size, dtype=small) for key in ("completed", "calls", "errors")}
    counters = {key: np.empty(size, dtype=small) for key in COUNTER_KEYS}
    first_failure = np.empty(size, dtype=object)
    episode_return = np.empty(size, dtype=np.float64)
    columns = {"task_seed": seeds, "success": success, **ints,
               "first_failure": first_failure, "episode_return": episode_return}
    records = np.zeros((min(size, CHUNK), RECORD_FIELDS), dtype=np.int64)
    no_trace = np.zeros((min(size, CHUNK), 0, 2), dtype=np.int64)
    per_value = value_bits(controller, 1, b)
    plan_slots = n if CONTROLLERS[controller][K_RETAIN] == RETAIN_PLAN else 0
    for start in range(0, size, CHUNK):
        stop = min(start + CHUNK, size)
        part = records[:stop - start]
        _play(spec, controller, seeds[start:stop], part, no_trace[:stop - start])
        success[start:stop] = part[:, SUCCESS] != 0
        ints["completed"][start:stop] = part[:, COMPLETED]
        ints["calls"][start:stop] = part[:, CALLS_COL]
        ints["errors"][start:stop] = part[:, ERRORS_COL]
        first_failure[start:stop] = _FAILURE_OBJECTS[part[:, FIRST_FAILURE]]
        episode_return[start:stop] = returns_table[part[:, COMPLETED]]
        counters["checks"][start:stop] = part[:, CHECKS]
        counters["lookups"][start:stop] = part[:, LOOKUPS]
        counters["prep_entries"][start:stop] = part[:, PREP]
        counters["cache_entries"][start:stop] = part[:, ENTRIES]
        counters["value_bits"][start:stop] = per_value * part[:, ENTRIES]
        counters["plan_slots"][start:stop] = plan_slots
        if on_chunk is not None:
            on_chunk(start, {k: v[start:stop] for k, v in columns.items()},
                     {k: v[start:stop] for k, v in counters.items()})
    return columns, counters


def run_many(pairs: Iterable[tuple[WorkflowParams, str]], seeds: np.ndarray,
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
