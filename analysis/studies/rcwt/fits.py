"""Descriptive curve fits and the residual task budget theta for seed 000 (RCWT).

Why this module exists and why it looks like this:

* Seed 000 (section 3.2) scores effective recall R against the realised coordination share
  p = c/W under a fixed window W and fits five descriptive families; it summarises the cliff
  by the logistic midpoint p0 and the residual task budget theta = W (1 - p0), and predicts
  other windows with p0(W') = 1 - theta / W'. The paper writes out only the logistic; the
  other four forms, their parameter counts and the AIC are those of the authors' artifact
  (`src/rcwt_curve_fitting.py` of the RCWT repository), so a comparison of families here is
  the comparison the authors made.
* AIC is the Gaussian one of the artifact: 2k + n ln(2 pi RSS/n) + n, with k the curve's own
  parameter count (the error variance, profiled out, is not counted). The families differ in
  k (power law and exponential have two parameters), so AIC does not rank them as RSS does.
* A least-squares optimum exists for any data, but it describes the curve only when the data
  pin it down. `identify` states the rule: a fit is *not identified* when (1) it has no
  finite optimum (fewer than three points, non-finite values), (2) its fitted curve is flat,
  changing by less than MIN_DROP across the observed p (a curve at its floor or ceiling has no
  cliff to place), (3) the R^2 of the cells' mean scores (`cell_r2`; the ordinary R^2 when
  each row is a cell, as in Table A1) is undefined or below R2_MIN, or (4) a parameter sits
  on a bound of its search box (the optimum lies outside what the family can express, e.g. a
  logistic midpoint pushed to p0 = 0 by scores at the floor, or a steepness at K_MAX for a
  step the sampled shares cannot resolve), or (5) there are no more distinct shares than parameters
  (the curve interpolates and has nothing left to test). Tables then report no parameters
  and no theta, only R^2, RMSE, AIC and the reasons.
* The cliff makes naive curve_fit starts fragile (a logistic started at the wrong midpoint
  sits on a plateau with zero gradient). Each iterative family is therefore "variable
  projection" first: its nonlinear parameters are searched on a grid while R0, which enters
  linearly, is solved in closed form; then `scipy.optimize.curve_fit` polishes inside the
  bounds, and the better of grid point and polish is kept.
* Degenerate inputs must not stop a report, so fitting never raises: it returns a
  `FitResult` with `converged=False` and/or NaN statistics, which `identify` rejects.
* The paper's intervals are a call-level bootstrap stratified over the two prompt orders
  (section 6), so `bootstrap_theta` resamples rows with replacement within each `order`
  stratum, keeping each stratum's size.

The families (p in [0, 1], scores on the paper's [0, 1] effective-accuracy scale); the boxes
are wide enough that a describable curve never touches them:

* logistic          R0 / (1 + exp(k (p - p0))); R0 in [1e-6, 1.2], k in [0, K_MAX], p0 in
  [0, 1]. K_MAX is a transition width of about 4/k = 0.4 % of the window.
* power_law         R0 (1 - p)^alpha (0 for p >= 1); R0 in [0, 1.2], alpha in [0, 1000].
* exponential       R0 exp(-lambda p); R0 in [0, 1.2], lambda in [0, 1000].
* quadratic         R0 - a p - b p^2, ordinary least squares (exact, unbounded).
* piecewise_linear  R0 for p <= p_star, else R0 max(0, 1 - beta (p - p_star)/(1 - p_star)):
  a plateau, a linear fall, clamped at 0; R0 in [0, 1.2], p_star in [0, 0.999], beta in
  [0, BETA_MAX].

Input data: docs/rcwt/table_a1.csv is transcribed from the paper's Appendix Table A1 (seed
000, W = 4096): realised share p (as a fraction) and the effective scores of Gemini 2.0 Flash,
Claude Haiku 4.5 and GPT-4.1-mini, each cell pooled over both prompt orders (40 calls).
Fitting against realised p rather than the target q gives the same logistic midpoint once
mapped to p, since p = q (W - u) / W (up to flooring) is affine in q and the logistic family
is closed under affine maps of its argument; the other families are not, which is why the
share is always the realised one here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit
from scipy.special import expit

CURVE_FAMILIES = ("logistic", "power_law", "exponential", "quadratic", "piecewise_linear")
PARAM_NAMES: dict[str, tuple[str, ...]] = {
    "logistic": ("R0", "k", "p0"),
    "power_law": ("R0", "alpha"),
    "exponential": ("R0", "lambda"),
    "quadratic": ("R0", "a", "b"),
    "piecewise_linear": ("R0", "p_star", "beta"),
}
K_MAX = 1000.0
R0_MAX = 1.2
EXPONENT_MAX = 1000.0
BETA_MAX = 1000.0
P_STAR_MAX = 0.999
# The search box of every iterative family, in PARAM_NAMES order (lower, upper).
BOUNDS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "logistic": ((1e-6, 0.0, 0.0), (R0_MAX, K_MAX, 1.0)),
    "power_law": ((0.0, 0.0), (R0_MAX, EXPONENT_MAX)),
    "exponential": ((0.0, 0.0), (R0_MAX, EXPONENT_MAX)),
    "quadratic": ((-math.inf,) * 3, (math.inf,) * 3),
    "piecewise_linear": ((0.0, 0.0, 0.0), (R0_MAX, P_STAR_MAX, BETA_MAX)),
}
# The identification rule (module docstring): thresholds on the [0, 1] score scale.
R2_MIN = 0.5
MIN_DROP = 0.1
BOUND_TOL = 1e-6  # a parameter within this fraction of its box's width of a bound is on it
MIN_POINTS = 3  # below this no family is fitted, so every family sees the same data
DEFAULT_RESAMPLES = 2000
# A perfect fit (RSS = 0, e.g. constant scores) would make ln(RSS/n) = -inf; the floor keeps
# AIC finite. It is far below any real residual on a [0, 1] score scale.
_RSS_FLOOR = 1e-24


# --------------------------------------------------------------------------- curve functions


def logistic(p: Any, r0: float, k: float, p0: float) -> np.ndarray:
    """R0 / (1 + exp(k (p - p0))), computed with expit so that large k cannot overflow."""
    return r0 * expit(-k * (np.asarray(p, dtype=float) - p0))


def power_law(p: Any, r0: float, alpha: float) -> np.ndarray:
    """R0 (1 - p)^alpha, with 1 - p clipped at 0 as the artifact does."""
    return r0 * np.power(np.maximum(0.0, 1.0 - np.asarray(p, dtype=float)), alpha)


def exponential(p: Any, r0: float, lam: float) -> np.ndarray:
    """R0 exp(-lambda p)."""
    return r0 * np.exp(-lam * np.asarray(p, dtype=float))


def quadratic(p: Any, r0: float, a: float, b: float) -> np.ndarray:
    """R0 - a p - b p^2."""
    p = np.asarray(p, dtype=float)
    return r0 - a * p - b * p * p


def piecewise_linear(p: Any, r0: float, p_star: float, beta: float) -> np.ndarray:
    """R0 up to p_star, then a linear fall that reaches 0 at p_star + (1 - p_star)/beta and
    stays there (the clamp keeps a steep fall from predicting negative recall)."""
    p = np.asarray(p, dtype=float)
    fall = beta * np.maximum(0.0, p - p_star) / np.maximum(1.0 - p_star, 1e-9)
    return r0 * np.maximum(0.0, 1.0 - fall)


CURVES: dict[str, Callable[..., np.ndarray]] = {
    "logistic": logistic,
    "power_law": power_law,
    "exponential": exponential,
    "quadratic": quadratic,
    "piecewise_linear": piecewise_linear,
}


def gaussian_aic(rss: float, n: int, k: int) -> float:
    """2k + n ln(2 pi RSS/n) + n: -2 log-likelihood of Gaussian errors at the variance's
    maximum-likelihood value RSS/n, plus 2 per curve parameter (seed 000's artifact)."""
    return 2 * k + n * math.log(2 * math.pi * max(rss, _RSS_FLOOR) / n) + n


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class FitResult:
    """One family fitted to one data set.

    params are the least-squares values inside the family's box (NaN without an optimum);
    they describe the curve only when `identified` (see `identify`; `reasons` says why not).
    r2 is over the rows given; r2_cells over the cells' mean scores (`cell_r2`), which is
    what the identification rule reads. Statistics are NaN when undefined (R^2 of constant
    scores, or everything with fewer than MIN_POINTS points)."""

    family: str
    params: dict[str, float] = field(hash=False)
    r2: float
    rmse: float
    aic: float
    n: int
    converged: bool
    reasons: tuple[str, ...] = ()
    r2_cells: float = math.nan

    @property
    def identified(self) -> bool:
        return not self.reasons

    @property
    def k(self) -> int:
        return len(PARAM_NAMES[self.family])

    def predict(self, p: Any) -> np.ndarray:
        """The fitted curve at p (NaN everywhere if the fit has no parameters)."""
        values = [self.params[name] for name in PARAM_NAMES[self.family]]
        return CURVES[self.family](p, *values)


def identify(family: str, values: Sequence[float], p: np.ndarray, r2: float,
             converged: bool) -> tuple[str, ...]:
    """Why a fit is not identified (empty when it is): the rule of the module docstring."""
    if not converged or not np.all(np.isfinite(values)):
        return ("no finite least-squares optimum",)
    reasons = []
    observed = np.unique(p)
    k = len(PARAM_NAMES[family])
    if observed.size <= k:
        reasons.append(f"{observed.size} distinct shares for {k} parameters")
    fitted = CURVES[family](observed, *values)
    drop = float(np.max(fitted) - np.min(fitted))
    if drop < MIN_DROP:
        reasons.append(f"flat: the fitted curve changes by {drop:.3g} < {MIN_DROP} across "
                       "the observed p")
    if not math.isfinite(r2):
        reasons.append("R^2 undefined (constant scores)")
    elif r2 < R2_MIN:
        reasons.append(f"R^2 {r2:.3f} < {R2_MIN}")
    lows, highs = BOUNDS[family]
    for name, value, lo, hi in zip(PARAM_NAMES[family], values, lows, highs, strict=True):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        tol = BOUND_TOL * (hi - lo)
        if value <= lo + tol:
            reasons.append(f"{name} at its lower bound {lo:g}")
        elif value >= hi - tol:
            reasons.append(f"{name} at its upper bound {hi:g}")
    return tuple(reasons)


def cell_r2(score: np.ndarray, fitted: np.ndarray, cells: np.ndarray) -> float:
    """R^2 of the curve against each cell's mean score, cells weighted by their row counts:
    1 - sum_c n_c (mean score_c - mean fit_c)^2 / sum_c n_c (mean score_c - mean score)^2.

    With one row per cell (Table A1's cell means) this is the ordinary R^2. With 0/1 calls it
    leaves out the binomial noise within cells, which no curve of the share can explain: a
    sharp, well-described cliff over calls that are right 90 % of the time on its plateau
    still has a row-level R^2 far below 1. NaN when the cell means are all equal."""
    _, inverse, counts = np.unique(cells, return_inverse=True, return_counts=True)
    mean_score = np.bincount(inverse, weights=score) / counts
    mean_fit = np.bincount(inverse, weights=fitted) / counts
    between = float(np.sum(counts * (mean_score - score.mean()) ** 2))
    if not between > 1e-300:
        return math.nan
    return 1.0 - float(np.sum(counts * (mean_score - mean_fit) ** 2)) / between


def _nan_result(family: str, n: int) -> FitResult:
    params = {name: math.nan for name in PARAM_NAMES[family]}
    return FitResult(family, params, math.nan, math.nan, math.nan, n, False,
                     ("no finite least-squares optimum",))


def _result(family: str, values: Sequence[float], p: np.ndarray, score: np.ndarray,
            converged: bool, cells: np.ndarray) -> FitResult:
    n = len(p)
    fitted = CURVES[family](p, *values)
    rss = float(np.sum((score - fitted) ** 2))
    tss = float(np.sum((score - score.mean()) ** 2))
    if not math.isfinite(rss):
        return _nan_result(family, n)
    r2 = 1.0 - rss / tss if tss > 0 else math.nan
    rmse = math.sqrt(rss / n)
    aic = gaussian_aic(rss, n, len(PARAM_NAMES[family]))
    params = {name: float(v) for name, v in zip(PARAM_NAMES[family], values, strict=True)}
    r2_cells = cell_r2(score, fitted, cells)
    reasons = identify(family, values, p, r2_cells, converged)
    return FitResult(family, params, r2, rmse, aic, n, bool(converged), reasons, r2_cells)


def _clean(p: Any, score: Any, cells: Any | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=float).ravel()
    score = np.asarray(score, dtype=float).ravel()
    if p.shape != score.shape:
        raise ValueError(f"p and score differ in length: {p.size} != {score.size}")
    labels = p if cells is None else np.asarray(cells).ravel()
    if labels.shape != p.shape:
        raise ValueError(f"cells and p differ in length: {labels.size} != {p.size}")
    keep = np.isfinite(p) & np.isfinite(score)
    return p[keep], score[keep], labels[keep]


# --------------------------------------------------------------------------- fitting


def _rss(family: str, values: Sequence[float], p: np.ndarray, score: np.ndarray) -> float:
    value = float(np.sum((score - CURVES[family](p, *values)) ** 2))
    return value if math.isfinite(value) else math.inf


def _polish(family: str, start: np.ndarray, p: np.ndarray,
            score: np.ndarray) -> tuple[np.ndarray, bool]:
    """curve_fit from `start` inside the family's box; returns the better of start and
    polish (and whether curve_fit ran)."""
    lo, hi = (np.asarray(b, float) for b in BOUNDS[family])
    start = np.clip(start, lo, hi)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            popt, _ = curve_fit(CURVES[family], p, score, p0=start, bounds=(lo, hi),
                                maxfev=10000)
    except (RuntimeError, ValueError, np.linalg.LinAlgError):
        return start, False
    if _rss(family, popt, p, score) <= _rss(family, start, p, score):
        return np.asarray(popt, float), True
    return start, True


def _collapse(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct p, mean score, count): least squares on rows equals weighted least squares
    on these up to a constant, so grid searches cost the distinct shares, not the rows."""
    shares, inverse, counts = np.unique(p, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=score) / counts
    return shares, means, counts.astype(float)


def _scale_grid(basis: np.ndarray, means: np.ndarray, weights: np.ndarray,
                r0_bounds: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """For each grid row g (shape (G, m)): the best R0 for score ~ R0 g (clipped to its
    bounds) and the weighted RSS (up to the within-share constant)."""
    gg = basis * basis @ weights
    gs = basis @ (weights * means)
    with np.errstate(divide="ignore", invalid="ignore"):
        r0 = np.where(gg > 1e-300, gs / gg, 0.0)
    r0 = np.clip(r0, *r0_bounds)
    rss = ((means[None, :] - r0[:, None] * basis) ** 2) @ weights
    return r0, rss


def _fit_logistic(p: np.ndarray, score: np.ndarray, start: Sequence[float] | None = None,
                  coarse: bool = False) -> tuple[np.ndarray, bool]:
    """Grid over (k, p0) with closed-form R0, then curve_fit; `start` adds a warm start and
    `coarse` shrinks the grid (used by the bootstrap, where the warm start does most work)."""
    shares, means, weights = _collapse(p, score)
    midpoints = np.clip((shares[:-1] + shares[1:]) / 2, 0.0, 1.0)
    p0_grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, 26 if coarse else 101),
                                        midpoints]))
    k_grid = np.geomspace(0.5, K_MAX, 10 if coarse else 28)
    kk, pp = np.meshgrid(k_grid, p0_grid, indexing="ij")
    kk, pp = kk.ravel(), pp.ravel()
    g = expit(-kk[:, None] * (shares[None, :] - pp[:, None]))
    r0, rss = _scale_grid(g, means, weights, (1e-6, R0_MAX))
    best = int(np.argmin(rss))
    values, ok = _polish("logistic", np.array([r0[best], kk[best], pp[best]]), p, score)
    if start is not None and np.all(np.isfinite(start)):
        warm, warm_ok = _polish("logistic", np.asarray(start, float), p, score)
        if _rss("logistic", warm, p, score) < _rss("logistic", values, p, score):
            values, ok = warm, warm_ok
    return values, ok


def _fit_scaled(family: str, p: np.ndarray, score: np.ndarray,
                grids: Sequence[np.ndarray]) -> tuple[np.ndarray, bool]:
    """Families R0 * g(p; theta): a grid over theta (the outer product of `grids`),
    closed-form R0, then curve_fit from the best grid point."""
    shares, means, weights = _collapse(p, score)
    mesh = [m.ravel() for m in np.meshgrid(*grids, indexing="ij")]
    basis = CURVES[family](shares[None, :], 1.0, *(m[:, None] for m in mesh))
    lows, highs = BOUNDS[family]
    r0, rss = _scale_grid(basis, means, weights, (lows[0], highs[0]))
    best = int(np.argmin(rss))
    start = np.array([r0[best], *(m[best] for m in mesh)])
    return _polish(family, start, p, score)


def _fit_power_law(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    grid = np.concatenate([[0.0], np.geomspace(0.01, EXPONENT_MAX, 90)])
    return _fit_scaled("power_law", p, score, [grid])


def _fit_exponential(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    grid = np.concatenate([[0.0], np.geomspace(0.01, EXPONENT_MAX, 90)])
    return _fit_scaled("exponential", p, score, [grid])


def _fit_quadratic(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    design = np.column_stack([np.ones_like(p), -p, -p * p])
    coef, _, rank, _ = np.linalg.lstsq(design, score, rcond=None)
    return coef, bool(rank == 3)


def _fit_piecewise(p: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, bool]:
    shares = np.unique(p)
    midpoints = (shares[:-1] + shares[1:]) / 2
    p_star = np.unique(np.clip(np.concatenate([np.linspace(0.0, P_STAR_MAX, 101), shares,
                                               midpoints]), 0.0, P_STAR_MAX))
    beta = np.concatenate([[0.0], np.geomspace(0.05, BETA_MAX, 60)])
    return _fit_scaled("piecewise_linear", p, score, [p_star, beta])


_FITTERS: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, bool]]] = {
    "logistic": _fit_logistic,
    "power_law": _fit_power_law,
    "exponential": _fit_exponential,
    "quadratic": _fit_quadratic,
    "piecewise_linear": _fit_piecewise,
}


def fit_family(family: str, p: Any, score: Any, cells: Any | None = None) -> FitResult:
    """Least-squares fit of one family; never raises on degenerate data (see module doc).

    cells: a label per row naming its design cell (e.g. the target q), for the cell-mean R^2
    the identification rule reads; by default each distinct p is a cell."""
    if family not in _FITTERS:
        raise ValueError(f"family must be one of {', '.join(CURVE_FAMILIES)}; got {family!r}")
    p, score, labels = _clean(p, score, cells)
    if p.size < MIN_POINTS:
        return _nan_result(family, int(p.size))
    try:
        values, converged = _FITTERS[family](p, score)
    except (ValueError, RuntimeError, FloatingPointError, np.linalg.LinAlgError):
        return _nan_result(family, int(p.size))
    if not np.all(np.isfinite(values)):
        return _nan_result(family, int(p.size))
    return _result(family, values, p, score, converged, labels)


def fit_all(p: Any, score: Any, window: int | None = None,
            cells: Any | None = None) -> dict[str, FitResult]:
    """All five families fitted to scores against realised share p, keyed by family
    (`cells` as in `fit_family`).

    `window` does not change the fits (they are in p); it is accepted so that callers pass the
    same arguments here as to `bootstrap_theta`, and is validated when given."""
    if window is not None and window <= 0:
        raise ValueError(f"window must be positive, got {window}")
    return {family: fit_family(family, p, score, cells) for family in CURVE_FAMILIES}


def best_family(fits: Mapping[str, FitResult]) -> str | None:
    """The family with the lowest finite AIC (identified or not), or None."""
    finite = {name: fit.aic for name, fit in fits.items() if math.isfinite(fit.aic)}
    return min(finite, key=finite.__getitem__) if finite else None


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
    """Point estimates and percentile intervals; unpacks as a 4-tuple. All NaN when the
    full-data logistic is not identified."""

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
                    confidence: float = 0.95, cells: Any | None = None) -> ThetaBootstrap:
    """Stratified bootstrap of the logistic midpoint p0 and theta = W (1 - p0).

    Rows (calls, or cells when given one row per cell) are resampled with replacement within
    each `order` stratum (all rows form one stratum when `order` is None), the logistic is
    refitted (warm-started from the full-data fit), and percentile intervals are taken over
    the resamples whose fit is finite. Nothing is estimated when the full-data fit is not
    identified (`cells` as in `fit_family`): an interval around an unidentified midpoint
    would look like a result."""
    p_arr = np.asarray(p, dtype=float).ravel()
    s_arr = np.asarray(score, dtype=float).ravel()
    labels = np.zeros(p_arr.size, dtype=int) if order is None else np.asarray(order).ravel()
    if not (p_arr.size == s_arr.size == labels.size):
        raise ValueError("p, score and order must have the same length")
    cell_arr = p_arr if cells is None else np.asarray(cells).ravel()
    if cell_arr.size != p_arr.size:
        raise ValueError("p and cells must have the same length")
    keep = np.isfinite(p_arr) & np.isfinite(s_arr)
    p_arr, s_arr, labels, cell_arr = p_arr[keep], s_arr[keep], labels[keep], cell_arr[keep]

    point = fit_family("logistic", p_arr, s_arr, cell_arr)
    nan_pair = (math.nan, math.nan)
    if not point.identified:
        return ThetaBootstrap(math.nan, nan_pair, math.nan, nan_pair)
    p0_hat = point.params["p0"]
    start = [point.params[name] for name in PARAM_NAMES["logistic"]]

    rng = np.random.default_rng(seed)
    draws = np.full(resamples, np.nan)
    for i in range(resamples):
        idx = stratified_indices(labels, rng)
        try:
            values, _ = _fit_logistic(p_arr[idx], s_arr[idx], start=start, coarse=True)
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
