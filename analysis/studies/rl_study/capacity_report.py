"""The capacity study's analysis: does the fitted retention rise with the built-in capacity,
and does the lapse fall with training?

- Retention against capacity: Spearman's rho between the LSTM width and the cache-k MLE of
  the runs at one checkpoint (the last by default), with a 95% percentile interval from
  scipy.stats.bootstrap resampling the training seeds within each width (a stratified
  bootstrap: every resample keeps every width, so rho is always defined in x; a resample
  whose fitted retentions are all equal shows no ordering and counts as rho 0). With one
  seed per width there is nothing to resample and no interval. With few seeds per width
  the resamples take few distinct values, so the interval understates the seed-to-seed
  spread; the permutation test (every pairing of the points with the widths, exact for a
  handful of runs) gives the p-value of no association beside it.
- Lapse against training: Spearman's rho between steps trained and the fitted epsilon over
  every run and checkpoint, with the same bootstrap resampling the runs within each
  checkpoint; and the mean epsilon per (width, checkpoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from diagym.analysis.studies.rl_study.capacity import CapacityRow
from diagym.analysis.studies.study_tables import Block, markdown, study_table, write_study_tables

BOOTSTRAP = 2000
TABLE_NAME = "capacity.md"


@dataclass(frozen=True)
class Rho:
    """Spearman's rho of y on x over n points, with its bootstrap 95% interval (None: fewer
    than two points per group to resample, or rho undefined)."""

    rho: float  # nan when y (or x) is constant
    low: float | None
    high: float | None
    n: int
    p_value: float | None = None  # two-sided permutation test of no association


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    if np.all(y == y[0]) or np.all(x == x[0]):
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def grouped_rho(groups: Sequence[tuple[float, Sequence[float]]], seed: int = 0) -> Rho:
    """Spearman's rho of the values on their group's x, groups = [(x, values), ...], with the
    stratified bootstrap interval (module docstring)."""
    xs = np.concatenate([np.full(len(v), x, dtype=float) for x, v in groups])
    ys = np.concatenate([np.asarray(v, dtype=float) for _, v in groups])
    rho = _rho(xs, ys)
    sizes = [len(v) for _, v in groups]
    if np.isnan(rho):
        return Rho(rho, None, None, len(ys))
    x_ranks = stats.rankdata(xs)
    x_centred = x_ranks - x_ranks.mean()

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        """Spearman's rho of every resample at once: Pearson's r of the ranks, 0 where a
        resample's values are all equal."""
        ranks = stats.rankdata(np.concatenate(samples, axis=-1), axis=-1)
        centred = ranks - ranks.mean(axis=-1, keepdims=True)
        spread = np.sqrt((centred ** 2).sum(axis=-1) * (x_centred ** 2).sum())
        covariance = (centred * x_centred).sum(axis=-1)
        return np.divide(covariance, spread, out=np.zeros_like(covariance),
                         where=spread > 0)

    # one sample under "pairings": its orderings against the fixed x, exact while there
    # are at most BOOTSTRAP of them (6! = 720 for six runs), else BOOTSTRAP random ones
    p_value = float(stats.permutation_test((ys,), statistic, permutation_type="pairings",
                                           vectorized=True, n_resamples=BOOTSTRAP,
                                           rng=np.random.default_rng(seed)).pvalue)
    if min(sizes) < 2:
        return Rho(rho, None, None, len(ys), p_value)

    result = stats.bootstrap(tuple(np.asarray(v, dtype=float) for _, v in groups), statistic,
                             paired=False, vectorized=True, n_resamples=BOOTSTRAP,
                             method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return Rho(rho, float(interval.low), float(interval.high), len(ys), p_value)


def retention_rho(rows: Sequence[CapacityRow], checkpoint: int | None = None) -> Rho:
    """Rho of the fitted retention on the LSTM width at `checkpoint` (default: the last)."""
    checkpoint = max(r.checkpoint for r in rows) if checkpoint is None else checkpoint
    at = [r for r in rows if r.checkpoint == checkpoint]
    widths = sorted({r.width for r in at})
    return grouped_rho([(w, [r.retention for r in at if r.width == w]) for w in widths])


def lapse_rho(rows: Sequence[CapacityRow]) -> Rho:
    """Rho of the fitted epsilon on the checkpoint (steps trained), over every run."""
    checkpoints = sorted({r.checkpoint for r in rows})
    return grouped_rho([(c, [r.epsilon for r in rows if r.checkpoint == c])
                        for c in checkpoints])


def _interval(rho: Rho) -> str:
    if np.isnan(rho.rho):
        return "undefined (no variation)"
    p = "" if rho.p_value is None else f", permutation p = {rho.p_value:.3f}"
    if rho.low is None:
        return f"{rho.rho:+.2f} (no interval: one run per group{p})"
    return f"{rho.rho:+.2f} [{rho.low:+.2f}, {rho.high:+.2f}]{p}"


def table_blocks(rows: Sequence[CapacityRow]) -> list[Block]:
    """The per-checkpoint rows, the retention rho at every checkpoint and the lapse rho, as
    data: the Markdown and the report's JSON both come from it."""
    rows = sorted(rows, key=lambda r: (r.width, r.seed, r.checkpoint))
    per_run = [(r.width, r.seed, f"{r.steps:,}",
                f"{100 * r.success:.1f} [{100 * r.success_low:.1f}, {100 * r.success_high:.1f}]",
                f"{r.retention} [{r.retention_low}, {r.retention_high}]", r.best,
                f"{r.epsilon:g} [{r.epsilon_low:.2g}, {r.epsilon_high:.2g}]") for r in rows]
    per_checkpoint = []
    for checkpoint in sorted({r.checkpoint for r in rows}):
        at = [r for r in rows if r.checkpoint == checkpoint]
        per_checkpoint.append((f"{checkpoint:,}", len(at), _interval(retention_rho(at)),
                               f"{np.mean([r.epsilon for r in at]):.3f}",
                               f"{100 * np.mean([r.success for r in at]):.1f}"))
    return [
        study_table(("LSTM width", "seed", "steps", "held-out success (%)",
                     "cache-k MLE [interval]", "best fit", "epsilon [interval]"), per_run),
        study_table(("checkpoint", "runs", "retention on width: Spearman rho [95%], p",
                     "mean epsilon", "mean success (%)"), per_checkpoint),
        f"Lapse on training steps (every run and checkpoint): Spearman rho "
        f"{_interval(lapse_rho(rows))}.",
    ]


def format_table(rows: Sequence[CapacityRow]) -> str:
    """table_blocks as Markdown."""
    return markdown(table_blocks(rows))


def write_table(rows: Sequence[CapacityRow], out: Path) -> Path:
    """DIR/capacity.md and DIR/capacity.tables.json (the same tables as data)."""
    return write_study_tables(Path(out) / TABLE_NAME, table_blocks(rows))
