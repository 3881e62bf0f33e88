"""Analytic success predictions for seed 003's reference controllers (sections 4, 7; app. B).

Written against the contract in docs/CONTROLLERS.md: a controller's traits are read from their
one table (controllers/workflow/parameters.py CONTROLLERS), each by its meaning in the contract
(`profile`), so a controller added there is predicted when its traits are derivable and
reported not_derived when they are not; nothing here runs the controllers' logic
(mechanisms.py) or simulates their draws. For each task (a seed of a spec) the prediction is the
*instance-conditional* probability that the controller completes the task, given the public
task and the initial registers; `predict` averages it over seeds per configuration.

Mechanism (deterministic protocols). Every controller except `random-schedule` runs the
smallest-label ready schedule; failures change no state, so the order of operations and the
register values at decision t (t = successes so far) are those of the all-success run. Along
it the true registers are simulated from the initial state with public updates (B.2), and
pos_t is the slot whose code equals x[q_v] mod b. Decision t is *visible* iff t == 0 or
(h > 0 and t % h == 0). Per decision, one attempt succeeds with probability
- value known, unlimited scan / lookup / plan: 1;
- value known, scan limit s < b: 1 if pos_t < s, else 1/(b - s) (uniform among unexamined);
- value unknown (guess): 1/b;
- `stale-8`: 1 if the value shown at the last visible decision has the true residue mod b,
  else 0 (it retries the same wrong slot forever).
Known: retaining controllers (exact, scan-s, residue-8, indexed, precomputed-plan, sham/fixed
check, scan-1+eliminate) always; `cache-c` and `cache-2+...` iff q_v < c or the decision is
visible; `uniform-candidate` and `eliminate` never (they do not use snapshots).
`sham-check-4` is scan-1, `fixed-check-4` is scan-4.

With R = 0 success is the product over the N decisions. With R > 0 each operation has a
failure-count distribution: 0 (certain), geometric(p) for guesses with replacement, uniform on
{0, ..., m - 1} with elimination (m = b when unknown, m = b - s after an unsuccessful scan of
s slots: scan-1+eliminate gives {0, ..., b - 2}); success = P(total failures <= R), by exact
convolution truncated at R (B.4: negative binomial for replacement, the uniform convolution
for elimination).

Hidden resampling (R = 0 only). After every success the active registers are fresh uniform
and every retained value is forgotten, so an *invisible* decision t > 0 is a guess (1/b) for
every controller. A *visible* decision t > 0 is answered by the snapshot: probability 1 for
unlimited scans (exact, cache-c, residue-8, indexed, stale-8), while for scan-limited
controllers (scan-s, sham/fixed-check, cache-2+scan-4, scan-1+eliminate) it is the ENSEMBLE
value p_s = min(1, (s + 1)/b), averaged over the fresh draw (B.3) rather than conditioned on
the instance's hidden stream. Decision 0 is conditioned on the instance as usual. Exact-like
controllers therefore attain `hidden_ceiling` = b^-(N - v).

Closed forms used directly: `random_schedule_success` (valid orders / N!, B.1),
`uniform-candidate` = b^-N at R = 0 and `replacement_retry_success(N, 1/b, R)` at R > 0,
`eliminate` = `elimination_retry_success([b] * N, R)`.

not_derived (NaN), see `not_derived_reason`:
- `next-use-2`, in every condition (its adaptive cache has no exact derivation here);
- every hidden-resampling configuration with R > 0 (failed trials leak information);
- `random-schedule` with R > 0 or hidden resampling;
- `precomputed-plan` under hidden resampling (the contract does not say whether the plan is
  ever revised).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from diagym.analysis.studies.reproduce.design import GridConfiguration, grid_seeds
from diagym.controllers.workflow import parameters as traits
from diagym.envs._core.bits import smallest_ready
from diagym.envs._core.numba_setup import jit
from diagym.envs.workflow.generator import reset_batch
from diagym.envs.workflow.kernel import allocate_rows
from diagym.envs.workflow.layout import task_offsets, work_offsets
from diagym.envs.workflow.params import P_B, P_HIDDEN, P_N, P_PERIOD, P_R, WorkflowParams

# Retention kinds of the prediction kernel's profile.
RETAIN_ALL, RETAIN_CACHE, RETAIN_NONE, RETAIN_STALE = 0, 1, 2, 3
UNLIMITED = 0  # scan limit meaning "every slot"
# A trait row's retention -> the profile's (the residue and the plan know every value they
# use); a retention absent here (next-use's adaptive cache) has no exact derivation.
_RETENTION = {traits.RETAIN_ALL: RETAIN_ALL, traits.RETAIN_CACHE: RETAIN_CACHE,
              traits.RETAIN_NONE: RETAIN_NONE, traits.RETAIN_STALE: RETAIN_STALE,
              traits.RETAIN_RESIDUE: RETAIN_ALL, traits.RETAIN_PLAN: RETAIN_ALL}
_FAILURE_MODES = (traits.K_LAPSE, traits.K_PERSEVERATE, traits.K_SCHEDULE_LAPSE,
                  traits.K_UPDATE_DELAY, traits.K_UPDATE_MISS, traits.K_OFFSET)


def check_controller(controller: str) -> str:
    """Return `controller` if it names a row of the reference controllers' trait table
    (controllers/workflow/parameters.py CONTROLLERS), else ValueError."""
    if controller not in traits.CONTROLLERS:
        allowed = " | ".join(repr(c) for c in traits.CONTROLLERS)
        raise ValueError(f"controller must be one of {allowed}; got {controller!r}")
    return controller


def profile(controller: str) -> tuple[int, int, int, int] | None:
    """(retention, cache size, scan limit, elimination) of the prediction kernel for a
    controller's trait row, read by the contract's meaning of each trait
    (docs/CONTROLLERS.md): a sham check examines one slot whatever its limit, an indexed or
    planned selection finds the slot at once, a guess needs no scan. None when the row has
    a trait with no exact derivation here (an adaptive cache, any failure mode)."""
    row = traits.CONTROLLERS[check_controller(controller)]
    retention = _RETENTION.get(row[traits.K_RETAIN])
    if retention is None or any(row[k] for k in _FAILURE_MODES):
        return None
    select, limit = row[traits.K_SELECT], row[traits.K_SCAN]
    if select == traits.SELECT_SHAM:
        limit = 1
    elif select in (traits.SELECT_INDEXED, traits.SELECT_PLAN, traits.SELECT_GUESS) \
            or limit >= traits.UNLIMITED:
        limit = UNLIMITED
    cache = row[traits.K_CAPACITY] if retention == RETAIN_CACHE else 0
    return retention, cache, limit, int(row[traits.K_ELIMINATE] != 0)


def _random_schedule(controller: str) -> bool:
    return traits.CONTROLLERS[controller][traits.K_RANDOM_SCHEDULE] != 0


# --- closed forms -------------------------------------------------------------------------

def scan_success_per_decision(s: int, b: int) -> float:
    """Ensemble success of one serial-scan decision with limit s: p_s = min(1, (s + 1)/b).

    Averaged over a uniform position of the right slot (a uniform code permutation): it is
    right among the first s with probability s/b, else a guess among b - s slots."""
    if s < 1:
        raise ValueError(f"s must be an integer >= 1; got {s}")
    if b < 1:
        raise ValueError(f"b must be an integer >= 1; got {b}")
    return min(1.0, (s + 1) / b)


def scan_ensemble_success(n: int, s: int, b: int) -> float:
    """Ensemble success of a scan-s controller over N known decisions at R = 0: p_s^N."""
    return scan_success_per_decision(s, b) ** n


def random_schedule_success(family: str, n: int, depth: int) -> float:
    """P(a uniformly random operation order is valid) (B.1): chains (d!)^-k, barriers
    (k!)^d / N!, k = N / d. The random scheduler retains every value, so this is its R = 0
    success without hidden resampling."""
    spec = WorkflowParams(family=family, n_ops=n, depth=depth)  # validates, naming parameters
    k, d = spec.layer_size, spec.depth
    if spec.family == "chains":
        value = Fraction(1, math.factorial(d) ** k)
    else:
        value = Fraction(math.factorial(k) ** d, math.factorial(n))
    return float(value)


def visible_decisions(n: int, period: int) -> int:
    """v: decisions on a successful path that see a snapshot, ceil(N/h) (h > 0) or 1 (h = 0)."""
    return -(-n // period) if period > 0 else 1


def hidden_ceiling(n: int, b: int, period: int) -> float:
    """B.3's ceiling b^-(N - v) under hidden resampling at R = 0, attained by exact."""
    return float(b) ** -(n - visible_decisions(n, period))


def replacement_retry_success(n: int, p: float, r: int) -> float:
    """P(F <= R) for F failures before the N-th success of independent p-trials (B.4):
    sum_{j<=R} C(N+j-1, j) p^N (1-p)^j, the negative binomial CDF."""
    if n < 0:
        raise ValueError(f"n must be an integer >= 0; got {n}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1]; got {p}")
    if r < 0:
        raise ValueError(f"r must be an integer >= 0; got {r}")
    if n == 0:
        return 1.0
    total, term = 0.0, p**n  # term_j = C(n+j-1, j) p^n q^j
    q = 1.0 - p
    for j in range(r + 1):
        total += term
        term *= q * (n + j) / (j + 1)
    return min(1.0, total)


def elimination_retry_success(per_op_counts: Sequence[int], r: int) -> float:
    """P(total failures <= R) when operation i fails uniformly 0..m_i - 1 times (B.4).

    per_op_counts[i] = m_i, the number of equally likely failure counts of operation i
    (m = b for a guess with elimination, m = 1 for a certain decision)."""
    if r < 0:
        raise ValueError(f"r must be an integer >= 0; got {r}")
    dist = np.ones(1)
    for m in per_op_counts:
        if m < 1:
            raise ValueError(f"per_op_counts must hold integers >= 1; got {m}")
        dist = np.convolve(dist, np.full(int(m), 1.0 / m))[: r + 1]
    return float(min(1.0, dist[: r + 1].sum()))


def not_derived_reason(spec: WorkflowParams, controller: str) -> str | None:
    """Why (spec, controller) has no exact prediction, or None when it has one."""
    row = traits.CONTROLLERS[check_controller(controller)]
    if row[traits.K_RETAIN] == traits.RETAIN_NEXT_USE:
        return f"{controller}: adaptive cache, no exact derivation"
    if profile(controller) is None:
        return f"{controller}: a failure mode in its traits, no exact derivation"
    if spec.hidden_resampling and spec.error_allowance > 0:
        return "hidden resampling with R > 0: failed trials carry information"
    if _random_schedule(controller) and (spec.hidden_resampling or spec.error_allowance > 0):
        return (f"{controller}: closed form holds only for R = 0 without hidden "
                "resampling")
    if row[traits.K_RETAIN] == traits.RETAIN_PLAN and spec.hidden_resampling:
        return f"{controller} under hidden resampling: plan revision is unspecified"
    return None


def _closed_form(spec: WorkflowParams, controller: str) -> float | None:
    """The instance-independent prediction, when the controller has one: a random schedule
    (B.1), or a controller that keeps nothing and guesses (with replacement, or
    eliminating failed slots)."""
    n, b, r = spec.n_ops, spec.candidates, spec.error_allowance
    if _random_schedule(controller):
        return random_schedule_success(spec.family, n, spec.depth)
    retention, _, _, eliminate = profile(controller) or (None, 0, 0, 0)
    if retention != RETAIN_NONE:
        return None
    if r == 0:
        return float(b) ** -n
    return (elimination_retry_success([b] * n, r) if eliminate
            else replacement_retry_success(n, 1.0 / b, r))


# --- instance-conditional kernel ----------------------------------------------------------

@jit
def _instances_kernel(params: np.ndarray, task: np.ndarray, work: np.ndarray,
                      profiles: np.ndarray, out: np.ndarray, x: np.ndarray, stale: np.ndarray,
                      dec_q: np.ndarray, dec_pos: np.ndarray, dec_vis: np.ndarray,
                      dec_stale_ok: np.ndarray, f: np.ndarray, g: np.ndarray) -> None:
    """out[c, i] = success probability of profile c on task row i (see module docstring).

    Scratch: x, stale (8), dec_* (N), f, g (R + 1). No allocation (diagym kernels run
    without numba's refcounting runtime)."""
    n = params[P_N]
    b = params[P_B]
    period = params[P_PERIOD]
    hidden = params[P_HIDDEN] != 0
    r_max = params[P_R]
    q_off, u_off, d_off, c_off, _, _ = task_offsets(n, b)
    regs, pre_bits, _, _, _, _, _ = work_offsets(n)
    for i in range(task.shape[0]):
        # The all-success smallest-label schedule and its true registers.
        for r in range(8):
            x[r] = work[i, regs + r]
        done = np.int64(0)
        for t in range(n):
            v = smallest_ready(work, i, pre_bits, n, done)
            visible = t == 0 or (period > 0 and t % period == 0)
            if visible:
                for r in range(8):
                    stale[r] = x[r]
            q = np.int64(task[i, q_off + v])
            value = x[q] % b
            pos = b
            for a in range(b):
                if task[i, c_off + v * b + a] == value:
                    pos = a
                    break
            dec_q[t] = q
            dec_pos[t] = pos
            dec_vis[t] = visible
            dec_stale_ok[t] = stale[q] % b == value
            u = np.int64(task[i, u_off + v])
            x[u] = (x[u] + task[i, d_off + v]) & 7
            done |= np.int64(1) << v

        for c in range(profiles.shape[0]):
            retain = profiles[c, 0]
            cache = profiles[c, 1]
            s = profiles[c, 2]
            if s == 0 or s > b:
                s = b
            elim = profiles[c, 3] != 0
            prob = 1.0
            if r_max > 0:
                f[0] = 1.0
                for r in range(1, r_max + 1):
                    f[r] = 0.0
            for t in range(n):
                # kind 0: certain; 1: replacement with per-attempt p; 2: elimination over m.
                kind = 0
                p = 1.0
                m = 1
                if hidden and t > 0:
                    if dec_vis[t] and retain != RETAIN_NONE:
                        if retain != RETAIN_STALE and s < b:
                            kind = 1
                            p = (s + 1) / b
                    else:
                        kind = 1
                        p = 1.0 / b
                elif retain == RETAIN_STALE:
                    if not dec_stale_ok[t]:
                        kind = 1
                        p = 0.0
                else:
                    if retain == RETAIN_ALL:
                        known = True
                    elif retain == RETAIN_CACHE:
                        known = dec_q[t] < cache or dec_vis[t]
                    else:
                        known = False
                    if known:
                        if dec_pos[t] >= s:
                            if elim:
                                kind = 2
                                m = b - s
                            else:
                                kind = 1
                                p = 1.0 / (b - s)
                    elif elim:
                        kind = 2
                        m = b
                    else:
                        kind = 1
                        p = 1.0 / b
                if r_max == 0:
                    if kind == 1:
                        prob *= p
                    elif kind == 2:
                        prob /= m
                elif kind == 1:
                    prev = 0.0
                    for r in range(r_max + 1):
                        prev = p * f[r] + (1.0 - p) * prev
                        f[r] = prev
                elif kind == 2 and m > 1:
                    window = 0.0
                    for r in range(r_max + 1):
                        window += f[r]
                        if r >= m:
                            window -= f[r - m]
                        g[r] = window / m
                    for r in range(r_max + 1):
                        f[r] = g[r]
            if r_max > 0:
                prob = 0.0
                for r in range(r_max + 1):
                    prob += f[r]
            out[c, i] = min(prob, 1.0)


def _task_key(spec: WorkflowParams) -> WorkflowParams:
    """The spec fields the generator reads: tasks do not depend on h, hidden or R."""
    return spec.replace(snapshot_period=1, hidden_resampling=False, error_allowance=0)


def _generate(spec: WorkflowParams, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(task, work) rows of every seed, straight after reset."""
    params = spec.to_params()
    task, state, work, obs = allocate_rows(params, len(seeds))
    reset_batch(params, seeds, task, state, work, obs)
    return task, work


def _run_kernel(spec: WorkflowParams, controllers: Sequence[str], task: np.ndarray,
                work: np.ndarray) -> np.ndarray:
    """(len(controllers), rows) instance predictions from the kernel (no closed forms)."""
    params = spec.to_params()
    n, r = spec.n_ops, spec.error_allowance
    profiles = np.array([profile(c) for c in controllers], dtype=np.int64).reshape(-1, 4)
    out = np.empty((len(controllers), task.shape[0]), dtype=np.float64)
    _instances_kernel(
        params, task, work, profiles, out, np.zeros(8, np.int64), np.zeros(8, np.int64),
        np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.bool_),
        np.zeros(n, np.bool_), np.zeros(r + 1), np.zeros(r + 1),
    )
    return out


def _as_seeds(seeds: Sequence[int] | np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(np.asarray(seeds, dtype=np.int64).reshape(-1))
    return arr


def _predict_group(spec: WorkflowParams, controllers: Sequence[str], rows: int,
                   tasks: Callable[[], tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """(len(controllers), rows): NaN, closed form or kernel, per controller; `tasks()` is
    called only when some controller needs the generated tasks."""
    out = np.full((len(controllers), rows), np.nan)
    kernel_rows = []
    for j, controller in enumerate(controllers):
        if not_derived_reason(spec, controller) is not None:
            continue
        closed = _closed_form(spec, controller)
        if closed is not None:
            out[j] = closed
        else:
            kernel_rows.append(j)
    if kernel_rows:
        task, work = tasks()
        out[kernel_rows] = _run_kernel(spec, [controllers[j] for j in kernel_rows], task, work)
    return out


def predict_instances(spec: WorkflowParams, controller: str,
                      seeds: Sequence[int] | np.ndarray) -> np.ndarray:
    """Instance-conditional success probability of `controller` on the task of each seed
    (shape (len(seeds),)), NaN where not derived (`not_derived_reason`)."""
    check_controller(controller)
    seeds = _as_seeds(seeds)
    if not_derived_reason(spec, controller) is not None:
        return np.full(len(seeds), np.nan)
    closed = _closed_form(spec, controller)
    if closed is not None:
        return np.full(len(seeds), closed)
    return _predict_group(spec, [controller], len(seeds),
                          lambda: _generate(_task_key(spec), seeds))[0]


def predict(configs: Sequence[GridConfiguration],
            seeds: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Mean instance prediction over `seeds` for each configuration (NaN if not derived).

    seeds=None uses each configuration's grid seeds (`grids.grid_seeds`). Each distinct task
    spec is generated once per seed block and every controller on it shares the tasks."""
    for config in configs:
        check_controller(config.controller)
    blocks: dict[str, np.ndarray] = {}
    fixed = None if seeds is None else _as_seeds(seeds)
    groups: dict[tuple[WorkflowParams, str], dict[WorkflowParams, list[int]]] = {}
    for index, config in enumerate(configs):
        block = "given" if fixed is not None else config.grid
        if block not in blocks:
            blocks[block] = fixed if fixed is not None else grid_seeds(config.grid)
        by_spec = groups.setdefault((_task_key(config.spec), block), {})
        by_spec.setdefault(config.spec, []).append(index)

    result = np.full(len(configs), np.nan)
    for (task_spec, block), by_spec in groups.items():
        seed_block = blocks[block]
        cache: list[tuple[np.ndarray, np.ndarray]] = []

        def tasks(task_spec: WorkflowParams = task_spec, seed_block: np.ndarray = seed_block,
                  cache: list = cache) -> tuple[np.ndarray, np.ndarray]:
            if not cache:
                cache.append(_generate(task_spec, seed_block))
            return cache[0]

        for spec, indices in by_spec.items():
            controllers = [configs[i].controller for i in indices]
            values = _predict_group(spec, controllers, len(seed_block), tasks)
            result[indices] = values.mean(axis=1) if len(seed_block) else np.nan
    return result
