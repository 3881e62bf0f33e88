"""The language-model designs' report: the pooled episode summary, the marginal contrasts
with seed-cluster bootstrap intervals, and Markdown in the shapes of Tables 8 and 9."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.stats import bootstrap_weights, paired_bootstrap
from analysis.studies.llm_study.design import FACTORS, Cell
from analysis.summary import summarise as summarise_episodes
from controllers.episodes import Episodes
from controllers.policy import EpisodeRecord


def contrasts(results: list[tuple[Cell, Episodes]], resamples: int = 2000
              ) -> list[dict[str, Any]]:
    """Per factor of the design: high-minus-low success (paired over task seeds, bootstrap
    interval) and completed operations."""
    success = np.array([rs.columns["success"] for _, rs in results], dtype=float)  # cells x seeds
    completed = np.array([rs.columns["completed"] for _, rs in results], dtype=float)
    n_seeds = success.shape[1]
    weights = bootstrap_weights(n_seeds, resamples=resamples)
    out = []
    for name, *_ in FACTORS:
        if name not in results[0][0].levels:
            continue
        high = np.array([cell.levels[name] == 1 for cell, _ in results])
        per_seed_success = success[high].mean(axis=0) - success[~high].mean(axis=0)
        per_seed_ops = completed[high].mean(axis=0) - completed[~high].mean(axis=0)
        estimate, low, high_band = paired_bootstrap(per_seed_success[None, :], weights)
        out.append({
            "factor": name,
            "low_success": [int(success[~high].sum()), int(success[~high].size)],
            "high_success": [int(success[high].sum()), int(success[high].size)],
            "success_difference": float(estimate[0]),
            "interval": [float(low[0]), float(high_band[0])],
            "operation_difference": float(per_seed_ops.mean()),
            "n_per_level": int(high.sum()) * n_seeds,
        })
    return out


def summarise(results: list[tuple[Cell, Sequence[EpisodeRecord]]],
              resamples: int = 2000) -> dict[str, Any]:
    """The `diagym llm-study --json` object: counts, rates and latency of every episode
    (analysis.summary) and the marginal contrasts."""
    columns = [(cell, Episodes.from_records(rs)) for cell, rs in results]
    pooled = summarise_episodes([r for _, rs in results for r in rs])
    calls = pooled.model_calls
    return {
        "episodes": pooled.episodes,
        "success": pooled.success,
        "mean_completed": pooled.mean_completed,
        "decisions": calls.decisions if calls else 0,
        "schema_valid_rate": calls.schema_valid_rate if calls else None,
        "first_failures": pooled.failures,
        "mean_decision_latency_s": calls.mean_decision_latency_s if calls else None,
        "median_episode_latency_s": calls.median_episode_latency_s if calls else None,
        "contrasts": contrasts(columns, resamples=resamples),
    }


def format_summary(design: str, summary: dict[str, Any]) -> str:
    """Markdown in the shapes of Table 9 (local) or Table 8 (fractional)."""
    lines = [
        f"{summary['episodes']} episodes: success {100 * summary['success']:.1f}%, "
        f"mean completed {summary['mean_completed']:.2f} of 8, {summary['decisions']} "
        f"decisions, schema-valid "
        + (f"{100 * summary['schema_valid_rate']:.1f}%" if summary["schema_valid_rate"]
           is not None else "n/a")
        + ", mean decision latency "
        + (f"{summary['mean_decision_latency_s']:.2f} s" if summary["mean_decision_latency_s"]
           is not None else "n/a"),
        "first failures: " + (", ".join(f"{k} {v}" for k, v in summary["first_failures"].items())
                              or "none"),
        "",
    ]
    if design == "local":
        lines += ["| Contrast | Low success | High success | Difference (95% interval) |",
                  "| --- | --- | --- | --- |"]
        for c in summary["contrasts"]:
            lo_k, lo_n = c["low_success"]
            hi_k, hi_n = c["high_success"]
            a, b = c["interval"]
            lines.append(
                f"| {c['factor']} (high - low) | {lo_k}/{lo_n} ({lo_k / lo_n:.3f}) | "
                f"{hi_k}/{hi_n} ({hi_k / hi_n:.3f}) | {100 * c['success_difference']:+.1f} pp "
                f"({100 * a:+.1f}, {100 * b:+.1f}) |")
    else:
        lines += ["| Factor | Success difference | Operation difference | n per level |",
                  "| --- | --- | --- | --- |"]
        for c in summary["contrasts"]:
            lines.append(f"| {c['factor']} (high - low) | {100 * c['success_difference']:+.1f} pp"
                         f" | {c['operation_difference']:+.2f} | {c['n_per_level']} |")
    return "\n".join(lines)
