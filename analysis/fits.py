"""Descriptive curve fits and the residual task budget theta for seed 000 (RCWT).

Why this module exists and why it looks like this:

* Seed 000 (section 3.2) scores effective recall R against the realised coordination share
  p = c/W under a fixed window W and fits five descriptive families: logistic, power law,
  exponential, quadratic and piecewise-linear. It summarises the cliff by the logistic midpoint
  p0 and the residual task budget theta = W (1 - p0), and predicts other windows with
  p0(W') = 1 - theta / W'. This module reproduces those fits so the paper's theta can be
  checked from its own input table and so new sweeps can be summarised the same way.
* Every family has exactly three parameters, so the Gaussian least-squares AIC
  (n ln(RSS/n) + 2k, the error variance profiled out; the common +2 for it is dropped because
  it cancels in every comparison) ranks the families exactly as their residual sums of squares.
  AIC is still reported because it is the paper's vocabulary and it stays comparable if a
  family with a different parameter count is added.
* The cliff makes naive curve_fit starts fragile (a logistic started at the wrong midpoint
  sits on a flat plateau with zero gradient). Each family is therefore "variable projection"
  first: its nonlinear parameters are searched on a grid while the parameters that enter
  linearly are solved in closed form, and only then polished by `scipy.optimize.curve_fit`
  inside bounds. The polish cannot make things worse: the better of grid and polish is kept.
* Degenerate inputs (constant scores, fewer points than parameters, non-finite values) must
  not stop a report, so fitting never raises: it returns a `FitResult` with `converged=False`
  and/or NaN statistics.
* The paper's intervals are a call-level bootstrap stratified over the two prompt orders
  (section 6), so `bootstrap_theta` resamples rows with replacement within each `order`
  stratum, keeping each stratum's size. The same code resamples cells when given one row per
  cell.

Parameterisations (p in [0, 1], scores on the paper's [0, 1] effective-accuracy scale):

* logistic          R = R0 / (1 + exp(k (p - p0))),     R0 in (0, 1.2], k in [0, 1000],
  p0 in [0, 1]. The k cap is a transition width of about 4/k = 0.4 % of the window: steeper
  than any cliff the sampled grid can resolve, and it keeps a step-like fit finite.
* power law         R = a - b p^c,  a in [0, 2], b in [0, 10], c in [0.05, 200]. Chosen over
  a (1 - p)^b because with large c it is flat at small p and falls steeply near p = 1, i.e. it
  can describe a flat start and a cliff (but not a floor after the cliff).
* exponential       R = a - b exp(c (p - 1)),  a in [0, 2], b in [0, 50], c in [0, 200]. This is
  a - b' exp(c p) with b' = b exp(-c); anchoring at p = 1 makes b the drop below a at p = 1,
  which keeps b of order one instead of exp(-c)-small and the fit well conditioned.
* quadratic         R = a + b p + c p^2, ordinary least squares (exact; no iteration).
* piecewise-linear  R = level + slope * max(0, p - p_b): flat at `level` up to the breakpoint
  p_b, then linear with `slope` (negative for a decline). p_b is profiled: grid search over
  the observed p range, least squares for (level, slope) at each p_b, then a bounded 1-D
  refinement of p_b.

Input data: docs/rcwt/table_a1.csv is transcribed from the paper's Appendix Table A1 (seed
000, W = 4096): realised share p (as a fraction) and the effective scores of Gemini 2.0 Flash,
Claude Haiku 4.5 and GPT-4.1-mini, each cell pooled over both prompt orders (40 calls).

How the paper's Table 1 theta is reproduced (checked against that CSV, not hard-coded): an
unweighted least-squares fit of the logistic above to the nine cell means of each model, with
R0 free (not fixed at the baseline score), over the whole p range (not only the cliff), against
realised p. Fitting against the target q instead gives the same midpoint once mapped to p,
because p = q (W - u) / W up to integer flooring is an affine map of q and the logistic family
is closed under affine maps of its argument (only k rescales).
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit, minimize_scalar
from scipy.special import expit

FAMILIES = ("logistic", "power_law", "exponential", "quadratic", "piecewise_linear")
PARAM_NAMES: dict[str, tuple[str, str, str]] = {
    "logistic": ("R0", "k", "p0"),
    "power_law": ("a", "b", "c"),
    "exponential": ("a", "b", "c"),
    "quadratic": ("a", "b", "c"),
    "piecewise_linear": ("level", "slope", "p_b"),
}
N_PARAMS = 3
K_MAX = 1000.0
R0_MAX = 1.2
DEFAULT_RESAMPLES = 2000
# A perfect fit (RSS = 0, e.g. constant scores) would make ln(RSS/n) = -inf; the floor keeps
# AIC finite. It is far below any real residual on a [0, 1] score scale.
_RSS_FLOOR = 1e-24


# --------------------------------------------------------------------------- curve functions


def logistic(p: Any, r0: float, k: float, p0: float) -> np.ndarray:
    """R0 / (1 + exp(k (p - p0))), computed with expit so that large k cannot overflow."""
    return r0 * expit(-k * (np.asarray(p, dtype=float) - p0))


def power_law(p: Any, a: float, b: float, c: float) -> np.ndarray:
    """a - b p^c (p >= 0)."""
    return a - b * np.power(np.clip(np.asarray(p, dtype=float), 0.0, None), c)


def exponential(p: Any, a: float, b: float, c: float) -> np.ndarray:
    """a - b exp(c (p - 1)): b is the drop below a at p = 1."""
    return a - b * np.exp(c * (np.asarray(p, dtype=float) - 1.0))


def quadratic(p: Any, a: float, b: float, c: float) -> np.ndarray:
    """a + b p + c p^2."""
    p = np.asarray(p, dtype=float)
    return a + b * p + c * p * p


def piecewise_linear(p: Any, level: float, slope: float, p_b: float) -> np.ndarray:
    """level up to p_b, then level + slope (p - p_b)."""
    return level + slope * np.maximum(0.0, np.asarray(p, dtype=float) - p_b)


CURVES: dict[str, Callable[..., np.ndarray]] = {
    "logistic": logistic,
    "power_law": power_law,
    "exponential": exponential,
    "quadratic": quadratic,
    "piecewise_linear": piecewise_linear,
}


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class FitResult:
    """One family fitted to one data set. Statistics are NaN when undefined (e.g. R^2 of
    constant scores, or every statistic when there are fewer points than parameters)."""

    family: str
    params: dict[str, float] = field(hash=False)
    r2: float
    rmse: float
    aic: float
    n: int
    converged: bool

    def predict(self, p: Any) -> np.ndarray:
        """The fitted curve at p (NaN everywhere if the fit has no parameters)."""
        values = [self.params[name] for name in PARAM_NAMES[self.family]]
        return CURVES[self.family](p, *values)


def _nan_result(family: str, n: int) -> FitResult:
    params = {name: math.nan for name in PARAM_NAMES[family]}
    return FitResult(family, params, math.nan, math.nan, math.nan, n, False)


def _result(family: str, values: Sequence[float], p: np.ndarray, score: np.ndarray,
            converged: bool) -> FitResult:
    n = len(p)
    fitted = CURVES[family](p, *values)
    rss = float(np.sum((score - fitted) ** 2))
    tss = float(np.sum((score - score.mean()) ** 2))
    if not math.isfinite(rss):
        return _nan_result(family, n)
    r2 = 1.0 - rss / tss if tss > 0 else math.nan
    rmse = math.sqrt(rss / n)
    aic = n * math.log(max(rss, _RSS_FLOOR) / n) + 2 * N_PARAMS
    params = {name: float(v) for name, v in zip(PARAM_NAMES[family], values, strict=True)}
    return FitResult(family, params, r2, rmse, aic, n, bool(converged))


def _clean(p: Any, score: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=float).ravel()
    score = np.asarray(score, dtype=float).ravel()
    if p.shape != score.shape:
        raise ValueError(f"p and score differ in length: {p.size} != {score.size}")
    keep = np.isfinite(p) & np.isfinite(score)
    return p[keep], score[keep]


# --------------------------------------------------------------------------- fitting


def _rss(family: str, values: Sequence[float], p: np.ndarray, score: np.ndarray) -> float:
    value = float(np.sum((score - CURVES[family](p, *values)) ** 2))
    return value if math.isfinite(value) else math.inf


def _polish(family: str, start: np.ndarray, bounds: tuple[list[float], list[float]],
            p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    """curve_fit from `start` inside `bounds`; returns the better of start and polish."""
    lo, hi = np.asarray(bounds[0], float), np.asarray(bounds[1], float)
    start = np.clip(start, lo, hi)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            popt, _ = curve_fit(CURVES[family], p, score, p0=start, bounds=(lo, hi),
                                maxfev=5000)
    except (RuntimeError, ValueError, np.linalg.LinAlgError):
        return start, False
    if _rss(family, popt, p, score) <= _rss(family, start, p, score):
        return np.asarray(popt, float), True
    return start, True


def _two_term_lstsq(basis: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """For each grid row g (shape (G, n)), least squares of score ~ alpha + beta g.
    Returns (alpha, beta, rss), each of shape (G,)."""
    gm = basis.mean(axis=1, keepdims=True)
    sm = score.mean()
    gc = basis - gm
    sxx = np.sum(gc * gc, axis=1)
    sxy = gc @ (score - sm)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(sxx > 1e-300, sxy / sxx, 0.0)
    alpha = sm - beta * gm[:, 0]
    rss = np.sum((score[None, :] - alpha[:, None] - beta[:, None] * basis) ** 2, axis=1)
    return alpha, beta, rss


def _fit_logistic(p: np.ndarray, score: np.ndarray, start: Sequence[float] | None = None,
                  coarse: bool = False) -> tuple[np.ndarray, bool]:
    """Grid over (k, p0) with closed-form R0, then curve_fit; `start` adds a warm start and
    `coarse` shrinks the grid (used by the bootstrap, where the warm start does most work)."""
    shares = np.unique(p)
    midpoints = np.clip((shares[:-1] + shares[1:]) / 2, 0.0, 1.0)
    p0_grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, 26 if coarse else 101),
                                        midpoints]))
    k_grid = np.geomspace(0.5, K_MAX, 10 if coarse else 28)
    kk, pp = np.meshgrid(k_grid, p0_grid, indexing="ij")
    kk, pp = kk.ravel(), pp.ravel()
    g = expit(-kk[:, None] * (p[None, :] - pp[:, None]))
    gg = np.sum(g * g, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r0 = np.where(gg > 1e-300, (g @ score) / gg, 0.0)
    r0 = np.clip(r0, 1e-6, R0_MAX)
    rss = np.sum((score[None, :] - r0[:, None] * g) ** 2, axis=1)
    best = int(np.argmin(rss))
    grid_start = np.array([r0[best], kk[best], pp[best]])
    bounds = ([1e-6, 0.0, 0.0], [R0_MAX, K_MAX, 1.0])
    values, ok = _polish("logistic", grid_start, bounds, p, score)
    if start is not None and np.all(np.isfinite(start)):
        warm, warm_ok = _polish("logistic", np.asarray(start, float), bounds, p, score)
        if _rss("logistic", warm, p, score) < _rss("logistic", values, p, score):
            values, ok = warm, warm_ok
    return values, ok


def _fit_projected(family: str, p: np.ndarray, score: np.ndarray, c_grid: np.ndarray,
                   basis: Callable[[np.ndarray], np.ndarray],
                   bounds: tuple[list[float], list[float]]) -> tuple[np.ndarray, bool]:
    """Families of the form a - b * basis_c(p): grid over c, closed-form (a, b)."""
    alpha, beta, rss = _two_term_lstsq(basis(c_grid), score)
    a, b = alpha, -beta  # score = a - b * basis
    lo, hi = bounds
    feasible = (a >= lo[0]) & (a <= hi[0]) & (b >= lo[1]) & (b <= hi[1])
    rss = np.where(feasible, rss, np.inf)
    if not np.any(np.isfinite(rss)):
        best = int(np.argmin(np.abs(b - np.clip(b, lo[1], hi[1]))))
    else:
        best = int(np.argmin(rss))
    start = np.array([a[best], b[best], c_grid[best]])
    return _polish(family, start, bounds, p, score)


def _fit_power_law(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    c_grid = np.geomspace(0.05, 200.0, 60)
    pc = np.clip(p, 0.0, None)
    return _fit_projected("power_law", p, score, c_grid,
                          lambda c: np.power(pc[None, :], c[:, None]),
                          ([0.0, 0.0, 0.05], [2.0, 10.0, 200.0]))


def _fit_exponential(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    c_grid = np.concatenate([[0.0], np.geomspace(0.1, 200.0, 60)])
    return _fit_projected("exponential", p, score, c_grid,
                          lambda c: np.exp(c[:, None] * (p[None, :] - 1.0)),
                          ([0.0, 0.0, 0.0], [2.0, 50.0, 200.0]))


def _fit_quadratic(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    design = np.column_stack([np.ones_like(p), p, p * p])
    coef, _, rank, _ = np.linalg.lstsq(design, score, rcond=None)
    return coef, bool(rank == N_PARAMS)


def _fit_piecewise(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    lo, hi = float(p.min()), float(p.max())
    grid = np.unique(np.concatenate([np.linspace(lo, hi, 201), p]))
    hinge = np.maximum(0.0, p[None, :] - grid[:, None])
    level, slope, rss = _two_term_lstsq(hinge, score)
    best = int(np.argmin(rss))
    values = np.array([level[best], slope[best], grid[best]])
    if grid.size < 3:
        return values, True

    def profile(pb: float) -> float:
        alpha, beta, r = _two_term_lstsq(np.maximum(0.0, p - pb)[None, :], score)
        return float(r[0])

    left = grid[max(best - 1, 0)]
    right = grid[min(best + 1, grid.size - 1)]
    if right <= left:
        return values, True
    res = minimize_scalar(profile, bounds=(left, right), method="bounded")
    if res.success and res.fun < rss[best]:
        alpha, beta, _ = _two_term_lstsq(np.maximum(0.0, p - res.x)[None, :], score)
        values = np.array([alpha[0], beta[0], float(res.x)])
    return values, bool(res.success)


_FITTERS: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, bool]]] = {
    "logistic": _fit_logistic,
    "power_law": _fit_power_law,
    "exponential": _fit_exponential,
    "quadratic": _fit_quadratic,
    "piecewise_linear": _fit_piecewise,
}


def fit_family(family: str, p: Any, score: Any) -> FitResult:
    """Least-squares fit of one family; never raises on degenerate data (see module doc)."""
    if family not in _FITTERS:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    p, score = _clean(p, score)
    if p.size < N_PARAMS:
        return _nan_result(family, int(p.size))
    try:
        values, converged = _FITTERS[family](p, score)
    except (ValueError, RuntimeError, FloatingPointError, np.linalg.LinAlgError):
        return _nan_result(family, int(p.size))
    if not np.all(np.isfinite(values)):
        return _nan_result(family, int(p.size))
    return _result(family, values, p, score, converged)


def fit_all(p: Any, score: Any, window: int | None = None) -> dict[str, FitResult]:
    """All five families fitted to scores against realised share p, keyed by family.

    `window` does not change the fits (they are in p); it is accepted so that callers pass the
    same arguments here as to `bootstrap_theta`, and is validated when given."""
    if window is not None and window <= 0:
        raise ValueError(f"window must be positive, got {window}")
    return {family: fit_family(family, p, score) for family in FAMILIES}


# --------------------------------------------------------------------------- theta


def theta(p0: Any, window: float) -> Any:
    """Residual task budget (tokens) implied by a logistic midpoint: W (1 - p0).
    A float for a scalar p0, an array for an array."""
    value = window * (1.0 - np.asarray(p0, dtype=float))
    return float(value) if value.ndim == 0 else value


def predict_p0(theta_tokens: Any, window: float) -> Any:
    """Midpoint predicted at another window from a residual budget: 1 - theta / W.
    The inverse of `theta` at a fixed window."""
    value = 1.0 - np.asarray(theta_tokens, dtype=float) / window
    return float(value) if value.ndim == 0 else value


# --------------------------------------------------------------------------- bootstrap


class ThetaBootstrap(NamedTuple):
    """Point estimates and percentile intervals; unpacks as a 4-tuple."""

    p0: float
    p0_interval: tuple[float, float]
    theta: float
    theta_interval: tuple[float, float]


def stratified_indices(order: Any, rng: np.random.Generator) -> np.ndarray:
    """One resample of row indices: rows drawn with replacement within each stratum of
    `order`, so every stratum keeps its size. Returned sorted by stratum, then draw."""
    labels = np.asarray(order)
    chunks = []
    for label in dict.fromkeys(labels.tolist()):
        members = np.flatnonzero(labels == label)
        chunks.append(rng.choice(members, size=members.size, replace=True))
    return np.concatenate(chunks) if chunks else np.empty(0, dtype=int)


def bootstrap_theta(p: Any, score: Any, order: Any | None, window: float,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                    confidence: float = 0.95) -> ThetaBootstrap:
    """Stratified bootstrap of the logistic midpoint p0 and theta = W (1 - p0).

    Rows (calls, or cells when given one row per cell) are resampled with replacement within
    each `order` stratum (all rows form one stratum when `order` is None), the logistic is
    refitted (warm-started from the full-data fit), and percentile intervals are taken over
    the resamples whose fit is finite. Intervals are NaN if no resample gives one."""
    p_arr = np.asarray(p, dtype=float).ravel()
    s_arr = np.asarray(score, dtype=float).ravel()
    labels = np.zeros(p_arr.size, dtype=int) if order is None else np.asarray(order).ravel()
    if not (p_arr.size == s_arr.size == labels.size):
        raise ValueError("p, score and order must have the same length")
    keep = np.isfinite(p_arr) & np.isfinite(s_arr)
    p_arr, s_arr, labels = p_arr[keep], s_arr[keep], labels[keep]

    point = fit_family("logistic", p_arr, s_arr)
    p0_hat = point.params["p0"]
    start = [point.params[name] for name in PARAM_NAMES["logistic"]]
    nan_pair = (math.nan, math.nan)
    if not math.isfinite(p0_hat):
        return ThetaBootstrap(math.nan, nan_pair, math.nan, nan_pair)

    rng = np.random.default_rng(seed)
    draws = np.full(resamples, np.nan)
    for i in range(resamples):
        idx = stratified_indices(labels, rng)
        p_i, s_i = p_arr[idx], s_arr[idx]
        try:
            values, _ = _fit_logistic(p_i, s_i, start=start, coarse=True)
        except (ValueError, RuntimeError, np.linalg.LinAlgError):
            continue
        draws[i] = values[2]
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return ThetaBootstrap(p0_hat, nan_pair, float(theta(p0_hat, window)), nan_pair)
    tail = 50.0 * (1.0 - confidence)
    lo, hi = (float(v) for v in np.percentile(draws, [tail, 100.0 - tail]))
    return ThetaBootstrap(p0_hat, (lo, hi), float(theta(p0_hat, window)),
                          (float(theta(hi, window)), float(theta(lo, window))))


# --------------------------------------------------------------------------- tables


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a CSV with header model,p,score[,order]; p and score as floats."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"model", "p", "score"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing column(s) {sorted(missing)}")
        rows = []
        for line, raw in enumerate(reader, start=2):
            try:
                row: dict[str, Any] = {"model": raw["model"], "p": float(raw["p"]),
                                       "score": float(raw["score"])}
            except (TypeError, ValueError) as error:
                raise ValueError(f"{path}:{line}: bad p/score value") from error
            if raw.get("order"):
                row["order"] = raw["order"]
            rows.append(row)
    return rows


def _json_float(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _group(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        ps, ss = groups.setdefault(str(row["model"]), ([], []))
        ps.append(float(row["p"]))
        ss.append(float(row["score"]))
    return groups


def fit_table(rows: Iterable[Mapping[str, Any]], window: float) -> dict[str, dict[str, Any]]:
    """Per model (in order of first appearance): logistic p0, k, R0, theta and R^2, plus every
    family's params/R^2/RMSE/AIC. Non-finite numbers become None so the result is strict
    JSON. An `order` column, if present, does not affect the point fits."""
    table: dict[str, dict[str, Any]] = {}
    for model, (ps, ss) in _group(rows).items():
        fits = fit_all(ps, ss, int(window))
        lg = fits["logistic"]
        table[model] = {
            "p0": _json_float(lg.params["p0"]),
            "k": _json_float(lg.params["k"]),
            "R0": _json_float(lg.params["R0"]),
            "theta": _json_float(theta(lg.params["p0"], window)),
            "r2": _json_float(lg.r2),
            "n": lg.n,
            "families": {
                name: {
                    "params": {k: _json_float(v) for k, v in fit.params.items()},
                    "r2": _json_float(fit.r2),
                    "rmse": _json_float(fit.rmse),
                    "aic": _json_float(fit.aic),
                    "converged": fit.converged,
                }
                for name, fit in fits.items()
            },
        }
    return table


# --------------------------------------------------------------------------- plot


def plot_fits(rows: Iterable[Mapping[str, Any]], window: float, out_png: str | Path) -> Path:
    """One panel per model: scores against p, every family's fitted curve, and a vertical
    line at the logistic p0 annotated with theta. Uses the Agg canvas directly (no pyplot
    state), so it is safe in headless and threaded runs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = _group(rows)
    n_models = max(len(groups), 1)
    fig = Figure(figsize=(4.2 * n_models, 3.6), constrained_layout=True)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n_models, squeeze=False)[0]
    styles = {"logistic": "-", "power_law": "--", "exponential": "-.", "quadratic": ":",
              "piecewise_linear": (0, (5, 1, 1, 1))}
    for ax, (model, (ps, ss)) in zip(axes, groups.items(), strict=False):
        p_arr, s_arr = np.asarray(ps), np.asarray(ss)
        ax.scatter(p_arr, s_arr, color="black", s=18, zorder=3, label="data")
        fits = fit_all(p_arr, s_arr, int(window))
        finite = p_arr[np.isfinite(p_arr)]
        lo = float(finite.min()) if finite.size else 0.0
        hi = float(finite.max()) if finite.size else 1.0
        grid = np.linspace(lo, hi if hi > lo else lo + 1.0, 400)
        for name, fit in fits.items():
            if math.isfinite(fit.params[PARAM_NAMES[name][0]]):
                r2 = f"{fit.r2:.3f}" if math.isfinite(fit.r2) else "nan"
                ax.plot(grid, fit.predict(grid), linestyle=styles[name], linewidth=1.2,
                        label=f"{name} (R²={r2})")
        p0 = fits["logistic"].params["p0"]
        if math.isfinite(p0):
            ax.axvline(p0, color="grey", linewidth=0.8)
            ax.annotate(f"p0 = {p0:.3f}\nθ = {theta(p0, window):.0f} tokens",
                        xy=(p0, 0.5), xytext=(-6, 0), textcoords="offset points",
                        ha="right", fontsize=8)
        ax.set_title(model, fontsize=10)
        ax.set_xlabel(f"realised coordination share p = c/W (W = {window:g})")
        ax.set_ylabel("effective score R")
        ax.legend(fontsize=6, loc="lower left")
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out
