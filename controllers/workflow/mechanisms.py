"""Seed 003's reference controllers, each defined once as numba logic.

A controller is a point in a small space of mechanisms (what it retains, how it selects a
candidate, whether it eliminates failed slots, how it schedules), so the names are rows of
one parameter table and one decision function serves them all. The same two functions,
`controller_begin` and `controller_act`, run inside the batched grid runner
(controllers/workflow/batched.py) and behind the per-step Policy adapter (controllers/policy.py), so
the two paths cannot drift apart. docs/CONTROLLERS.md is the contract.

The functions read only public information: the task row (queries, updates, increments,
codes, prerequisites), the observation row (registers or -1, completed flags) and the failure
code of the previous call. Their own memory is one int64 row per episode (layout below).
"""

from __future__ import annotations

import numpy as np

from diagym.controllers.workflow.parameters import (
    CONTROLLER_NAMES,
    CONTROLLERS,
    K_CAPACITY,
    K_ELIMINATE,
    K_LAPSE,
    K_OFFSET,
    K_PERSEVERATE,
    K_RANDOM_SCHEDULE,
    K_RETAIN,
    K_SCAN,
    K_SCHEDULE_LAPSE,
    K_SELECT,
    K_UPDATE_DELAY,
    K_UPDATE_MISS,
    LAPSE_SCALE,
    RETAIN_ALL,
    RETAIN_CACHE,
    RETAIN_NEXT_USE,
    RETAIN_NONE,
    RETAIN_PLAN,
    RETAIN_RESIDUE,
    RETAIN_STALE,
    SELECT_GUESS,
    SELECT_INDEXED,
    SELECT_PLAN,
    SELECT_SERIAL,
    SELECT_SHAM,
)
from diagym.envs._core import rng
from diagym.envs._core.bits import smallest_ready
from diagym.envs._core.numba_setup import jit_inline
from diagym.envs.workflow.layout import (
    CANDIDATE,
    MOD,
    NO_FAILURE,
    OBS_REGISTERS,
    obs_offsets,
    task_offsets,
)
from diagym.envs.workflow.params import MAX_OPS, P_B, P_HIDDEN, P_N, P_WIDTH


def controller_params(name: str) -> np.ndarray:
    """The int64 parameter row of a named controller."""
    if name not in CONTROLLERS:
        raise ValueError(f"controller must be one of {' | '.join(CONTROLLER_NAMES)}; got {name!r}")
    return np.array(CONTROLLERS[name], dtype=np.int64)


# -- controller memory (one int64 row per episode) ------------------------------------------
C_KEY = 0  # controller stream key of the episode's task seed
C_COUNTER = 1  # words drawn from it
C_LAST_OP = 2  # operation of the previous call (-1 before the first)
C_LAST_SLOT = 3
C_LAST_GUESS = 4  # 1 if the previous call's slot was a guess
C_POSITION = 5  # successes so far: the position in the schedule
C_ELIM_OP = 6  # operation whose failed slots C_ELIM_MASK holds
C_ELIM_MASK = 7
C_CHECKS = 8  # predicate evaluations
C_LOOKUPS = 9  # plan or index lookups
C_PREP = 10  # preparation entries (plan or index tables)
C_ENTRIES = 11  # most values retained at once
C_OVERFLOW = 12  # 1 if an adaptive cache ever held more than its capacity
C_PENDING_REGISTER = 13  # register of an update applied one decision late (-1: none)
C_PENDING_DELTA = 14
C_BELIEF = 16  # 8 values (or residues mod b), -1 unknown
C_PREREQ = C_BELIEF + 8  # MAX_OPS prerequisite bitmasks
C_SCHEDULE = C_PREREQ + MAX_OPS  # MAX_OPS: the smallest-label schedule (operation per position)
C_TABLE = C_SCHEDULE + MAX_OPS  # MAX_OPS: plan slot, or packed code-to-slot map, per operation
CONTROLLER_FIELDS = C_TABLE + MAX_OPS


@jit_inline
def _retained_count(cstate: np.ndarray, crow: int) -> int:
    count = 0
    for r in range(8):
        if cstate[crow, C_BELIEF + r] >= 0:
            count += 1
    return count


@jit_inline
def _next_use(cstate: np.ndarray, crow: int, task: np.ndarray, trow: int, q_off: int, n: int,
              register: int, after: int) -> int:
    """First schedule position > after whose operation queries `register` (n: never)."""
    for p in range(after + 1, n):
        if task[trow, q_off + cstate[crow, C_SCHEDULE + p]] == register:
            return p
    return n


@jit_inline
def _evict_to_capacity(cstate: np.ndarray, crow: int, task: np.ndarray, trow: int, q_off: int,
                       n: int, capacity: int, after: int) -> None:
    """Drop the retained registers used furthest in the future (ties: higher index first)."""
    while _retained_count(cstate, crow) > capacity:
        worst = -1
        worst_use = -1
        for r in range(8):
            if cstate[crow, C_BELIEF + r] >= 0:
                use = _next_use(cstate, crow, task, trow, q_off, n, r, after)
                if use >= worst_use:
                    worst, worst_use = r, use
        cstate[crow, C_BELIEF + worst] = -1


@jit_inline
def controller_begin(params: np.ndarray, cparams: np.ndarray, cstate: np.ndarray, crow: int,
                     task: np.ndarray, trow: int, obs: np.ndarray, orow: int,
                     task_seed: int) -> None:
    """Start an episode: fresh memory, the public schedule and any preparation tables."""
    n = params[P_N]
    b = params[P_B]
    q_off, u_off, d_off, c_off, p_off, _ = task_offsets(n, b)
    for f in range(CONTROLLER_FIELDS):
        cstate[crow, f] = 0
    cstate[crow, C_KEY] = rng.stream_key(task_seed, rng.CONTROLLER_STREAM)
    cstate[crow, C_LAST_OP] = -1
    cstate[crow, C_ELIM_OP] = -1
    cstate[crow, C_PENDING_REGISTER] = -1
    for r in range(8):
        cstate[crow, C_BELIEF + r] = -1
    for v in range(n):
        bits = np.int64(0)
        for u in range(n):
            if task[trow, p_off + v * n + u]:
                bits |= np.int64(1) << u
        cstate[crow, C_PREREQ + v] = bits
    # The smallest-label schedule: the order of operations when every call succeeds.
    done = np.int64(0)
    for t in range(n):
        v = smallest_ready(cstate, crow, C_PREREQ, n, done)
        cstate[crow, C_SCHEDULE + t] = v
        done |= np.int64(1) << v
    retain = cparams[K_RETAIN]
    if cparams[K_SELECT] == SELECT_INDEXED:
        for v in range(n):
            packed = np.int64(0)
            for a in range(b):
                packed |= np.int64(a) << (4 * task[trow, c_off + v * b + a])
            cstate[crow, C_TABLE + v] = packed
        cstate[crow, C_PREP] = n * b
    elif retain == RETAIN_PLAN:
        # Simulate the schedule from the visible initial state with public updates; the
        # registers live in the belief slots only during preparation.
        for r in range(8):
            cstate[crow, C_BELIEF + r] = obs[orow, OBS_REGISTERS + r]
        for t in range(n):
            v = cstate[crow, C_SCHEDULE + t]
            target = MOD[b, cstate[crow, C_BELIEF + task[trow, q_off + v]]]
            for a in range(b):
                if task[trow, c_off + v * b + a] == target:
                    cstate[crow, C_TABLE + v] = a
            u = task[trow, u_off + v]
            cstate[crow, C_BELIEF + u] = (cstate[crow, C_BELIEF + u] + task[trow, d_off + v]) & 7
        for r in range(8):
            cstate[crow, C_BELIEF + r] = -1
        cstate[crow, C_PREP] = n * b


@jit_inline
def _chance(cstate: np.ndarray, crow: int, units: int) -> bool:
    """A Bernoulli draw with probability units / LAPSE_SCALE: one word, none when the
    probability is 0 or 1 (so a certain failure mode plays as a deterministic rule)."""
    if units <= 0:
        return False
    if units >= LAPSE_SCALE:
        return True
    draw, counter = rng.uniform_below(cstate[crow, C_KEY], cstate[crow, C_COUNTER], LAPSE_SCALE)
    cstate[crow, C_COUNTER] = counter
    return draw < units


@jit_inline
def _apply_update(cparams: np.ndarray, cstate: np.ndarray, crow: int, b: int, u: int,
                  delta: int) -> None:
    """A public update x[u] += delta on a retained value (mod b for residues; stale: none)."""
    retain = cparams[K_RETAIN]
    known = cstate[crow, C_BELIEF + u]
    if known >= 0 and retain != RETAIN_STALE:
        if retain == RETAIN_NEXT_USE or retain == RETAIN_RESIDUE:
            cstate[crow, C_BELIEF + u] = MOD[b, known + delta]
        else:
            cstate[crow, C_BELIEF + u] = (known + delta) & 7


@jit_inline
def _absorb_feedback(params: np.ndarray, cparams: np.ndarray, cstate: np.ndarray, crow: int,
                     task: np.ndarray, trow: int, failure: int) -> None:
    """Learn from the previous call: public update, confirmed residue, eliminated slot."""
    n = params[P_N]
    b = params[P_B]
    q_off, u_off, d_off, c_off, _, _ = task_offsets(n, b)
    v = cstate[crow, C_LAST_OP]
    slot = cstate[crow, C_LAST_SLOT]
    retain = cparams[K_RETAIN]
    if failure != NO_FAILURE:
        if failure == CANDIDATE and cparams[K_ELIMINATE]:
            if cstate[crow, C_ELIM_OP] != v:
                cstate[crow, C_ELIM_OP] = v
                cstate[crow, C_ELIM_MASK] = 0
            cstate[crow, C_ELIM_MASK] |= np.int64(1) << slot
        return
    position = cstate[crow, C_POSITION]
    cstate[crow, C_POSITION] = position + 1
    cstate[crow, C_ELIM_OP] = -1
    cstate[crow, C_ELIM_MASK] = 0
    if params[P_HIDDEN]:
        for r in range(8):
            cstate[crow, C_BELIEF + r] = -1
        cstate[crow, C_PENDING_REGISTER] = -1
        return
    if retain == RETAIN_NEXT_USE and cstate[crow, C_LAST_GUESS]:
        cstate[crow, C_BELIEF + task[trow, q_off + v]] = task[trow, c_off + v * b + slot]
    u = task[trow, u_off + v]
    if _chance(cstate, crow, cparams[K_UPDATE_MISS]):
        pass  # the update is never applied
    elif _chance(cstate, crow, cparams[K_UPDATE_DELAY]):
        cstate[crow, C_PENDING_REGISTER] = u
        cstate[crow, C_PENDING_DELTA] = task[trow, d_off + v]
    else:
        _apply_update(cparams, cstate, crow, b, u, task[trow, d_off + v])
    if retain == RETAIN_NEXT_USE:
        _evict_to_capacity(cstate, crow, task, trow, q_off, n, cparams[K_CAPACITY], position)


@jit_inline
def _absorb_snapshot(params: np.ndarray, cparams: np.ndarray, cstate: np.ndarray, crow: int,
                     task: np.ndarray, trow: int, obs: np.ndarray, orow: int) -> None:
    """A visible observation overwrites what the controller retains."""
    n = params[P_N]
    b = params[P_B]
    w = params[P_WIDTH]
    q_off = task_offsets(n, b)[0]
    retain = cparams[K_RETAIN]
    cstate[crow, C_PENDING_REGISTER] = -1  # the snapshot shows the updated value
    if retain == RETAIN_ALL or retain == RETAIN_STALE:
        for r in range(w):
            cstate[crow, C_BELIEF + r] = obs[orow, OBS_REGISTERS + r]
    elif retain == RETAIN_RESIDUE:
        for r in range(w):
            cstate[crow, C_BELIEF + r] = MOD[b, obs[orow, OBS_REGISTERS + r]]
    elif retain == RETAIN_CACHE:
        for r in range(min(w, cparams[K_CAPACITY])):
            cstate[crow, C_BELIEF + r] = obs[orow, OBS_REGISTERS + r]
    elif retain == RETAIN_NEXT_USE:
        position = cstate[crow, C_POSITION]
        for r in range(8):
            cstate[crow, C_BELIEF + r] = -1
        for _ in range(cparams[K_CAPACITY]):
            best = -1
            best_use = n
            for r in range(w):
                if cstate[crow, C_BELIEF + r] < 0:
                    use = _next_use(cstate, crow, task, trow, q_off, n, r, position)
                    if use < best_use:
                        best, best_use = r, use
            if best < 0:
                break
            cstate[crow, C_BELIEF + best] = MOD[b, obs[orow, OBS_REGISTERS + best]]


@jit_inline
def _guess(cstate: np.ndarray, crow: int, b: int, first: int, excluded: np.int64) -> int:
    """Uniform over indices first..b-1 (slots, or operations) not in `excluded`, from the
    controller stream."""
    eligible = 0
    for a in range(first, b):
        if (excluded >> a) & 1 == 0:
            eligible += 1
    if eligible == 0:
        return first if first < b else 0
    j, counter = rng.uniform_below(cstate[crow, C_KEY], cstate[crow, C_COUNTER], eligible)
    cstate[crow, C_COUNTER] = counter
    for a in range(first, b):
        if (excluded >> a) & 1 == 0:
            if j == 0:
                return a
            j -= 1
    return first


@jit_inline
def _schedule(cparams: np.ndarray, cstate: np.ndarray, crow: int, obs: np.ndarray, orow: int,
              n: int, completed_off: int) -> int:
    """The operation to call next: the schedule's (the smallest ready one, or uniform over
    the incomplete ones), replaced at a schedule lapse by a blocked one."""
    done = np.int64(0)
    for v in range(n):
        if obs[orow, completed_off + v]:
            done |= np.int64(1) << v
    op = 0
    if cparams[K_RANDOM_SCHEDULE]:
        remaining = n
        for v in range(n):
            if (done >> v) & 1:
                remaining -= 1
        j, counter = rng.uniform_below(cstate[crow, C_KEY], cstate[crow, C_COUNTER], remaining)
        cstate[crow, C_COUNTER] = counter
        for v in range(n):
            if (done >> v) & 1 == 0:
                if j == 0:
                    op = v
                    break
                j -= 1
    else:
        op = max(smallest_ready(cstate, crow, C_PREREQ, n, done), 0)
    if cparams[K_SCHEDULE_LAPSE] > 0:
        op = _schedule_lapse(cparams, cstate, crow, n, done, op)
    return op


@jit_inline
def _schedule_lapse(cparams: np.ndarray, cstate: np.ndarray, crow: int, n: int,
                    done: np.int64, op: int) -> int:
    """A schedule lapse: an incomplete operation whose prerequisites are not all complete,
    uniform in label order, when there is one; else `op`."""
    blocked = np.int64(0)
    for v in range(n):
        if (done >> v) & 1 == 0 and cstate[crow, C_PREREQ + v] & ~done != 0:
            blocked |= np.int64(1) << v
    if blocked != 0 and _chance(cstate, crow, cparams[K_SCHEDULE_LAPSE]):
        return _guess(cstate, crow, n, 0, ~blocked)
    return op


@jit_inline
def _select(cparams: np.ndarray, cstate: np.ndarray, crow: int, task: np.ndarray, trow: int,
            b: int, c_off: int, op: int, value: int,
            excluded: np.int64) -> tuple[int, int, bool]:
    """(slot, guessed, lapsed) for operation `op`: the mechanism's selection from the value
    it holds for the queried register (-1: none), or a guess; a lapse guesses over all b."""
    select = cparams[K_SELECT]
    guess = 0
    slot = -1
    # A lapse replaces the mechanism's slot by one uniform over all b (eliminated slots
    # included; the schedule is kept, no checks or lookups are spent). At epsilon 0 nothing is
    # drawn, so every lapse-free row plays as it always has.
    lapsed = _chance(cstate, crow, cparams[K_LAPSE])
    if lapsed:
        slot = _guess(cstate, crow, b, 0, np.int64(0))
        guess = 1
    elif select == SELECT_PLAN:
        slot = cstate[crow, C_TABLE + op]
        cstate[crow, C_LOOKUPS] += 1
    elif select == SELECT_GUESS or value < 0:
        slot = _guess(cstate, crow, b, 0, excluded)
        guess = 1
    elif select == SELECT_INDEXED:
        slot = (cstate[crow, C_TABLE + op] >> (4 * MOD[b, value])) & 15
        cstate[crow, C_LOOKUPS] += 1
    else:
        target = MOD[b, value]
        limit = min(cparams[K_SCAN], b)
        if select == SELECT_SERIAL:
            for a in range(limit):
                cstate[crow, C_CHECKS] += 1
                if task[trow, c_off + op * b + a] == target:
                    slot = a
                    break
        else:
            cstate[crow, C_CHECKS] += limit
            used = 1 if select == SELECT_SHAM else limit
            for a in range(used):
                if task[trow, c_off + op * b + a] == target:
                    slot = a
                    break
            limit = used
        if slot < 0:
            slot = _guess(cstate, crow, b, limit, excluded)
            guess = 1
    return slot, guess, lapsed


@jit_inline
def controller_act(params: np.ndarray, cparams: np.ndarray, cstate: np.ndarray, crow: int,
                   task: np.ndarray, trow: int, obs: np.ndarray, orow: int,
                   failure: int) -> tuple[int, int]:
    """Digest the previous call's feedback and the current observation; choose (op, slot)."""
    n = params[P_N]
    b = params[P_B]
    q_off, _, _, c_off, _, _ = task_offsets(n, b)
    completed_off = obs_offsets(n, b)[0]
    retain = cparams[K_RETAIN]
    if cstate[crow, C_LAST_OP] >= 0:
        pending = cstate[crow, C_PENDING_REGISTER]
        if pending >= 0:  # the update delayed at the previous decision
            cstate[crow, C_PENDING_REGISTER] = -1
            _apply_update(cparams, cstate, crow, b, pending, cstate[crow, C_PENDING_DELTA])
        _absorb_feedback(params, cparams, cstate, crow, task, trow, failure)
    visible = obs[orow, OBS_REGISTERS] >= 0
    if visible:
        _absorb_snapshot(params, cparams, cstate, crow, task, trow, obs, orow)
    entries = _retained_count(cstate, crow)
    if entries > cstate[crow, C_ENTRIES]:
        cstate[crow, C_ENTRIES] = entries
    if retain == RETAIN_NEXT_USE and entries > cparams[K_CAPACITY]:
        cstate[crow, C_OVERFLOW] = 1
    # Perseveration: the call after a failed one repeats it (feedback is still absorbed).
    if failure != NO_FAILURE and cstate[crow, C_LAST_OP] >= 0 \
            and _chance(cstate, crow, cparams[K_PERSEVERATE]):
        return cstate[crow, C_LAST_OP], cstate[crow, C_LAST_SLOT]

    op = _schedule(cparams, cstate, crow, obs, orow, n, completed_off)

    # The value of the queried register, if the controller has it.
    q = task[trow, q_off + op]
    value = -1
    if retain != RETAIN_NONE and retain != RETAIN_PLAN:
        if visible:
            value = obs[orow, OBS_REGISTERS + q]
        else:
            value = cstate[crow, C_BELIEF + q]
    excluded = np.int64(0)
    if cparams[K_ELIMINATE] and cstate[crow, C_ELIM_OP] == op:
        excluded = cstate[crow, C_ELIM_MASK]

    slot, guess, lapsed = _select(cparams, cstate, crow, task, trow, b, c_off, op, value,
                                  excluded)
    if cparams[K_OFFSET] != 0 and not lapsed:
        # A systematic encoding offset: the slot whose code is K_OFFSET above the chosen one's.
        shifted = ((task[trow, c_off + op * b + slot] + cparams[K_OFFSET]) % b + b) % b
        for a in range(b):
            if task[trow, c_off + op * b + a] == shifted:
                slot = a
                break
    cstate[crow, C_LAST_OP] = op
    cstate[crow, C_LAST_SLOT] = slot
    cstate[crow, C_LAST_GUESS] = guess
    return op, slot


def value_bits(name: str, entries: int, b: int) -> int:
    """Bits of retained values: 3 per raw value, log2(b) per residue (rounded up)."""
    retain = CONTROLLERS[name][K_RETAIN]
    per_value = int(np.ceil(np.log2(b))) if retain in (RETAIN_NEXT_USE, RETAIN_RESIDUE) else 3
    return entries * per_value
