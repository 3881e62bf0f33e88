"""The language-model designs' report: the pooled episode summary, the marginal contrasts
with seed-cluster bootstrap intervals, and Markdown in the shapes of Tables 8 and 9.

Latency is seed 003's: the median over decisions (its 9.00 s), read from the run log's call
lines, since an episode's counters keep only sums. A call counts when its episode finished
in the log and the model answered it; a decision replayed after a resume counts once (its
last line). The decoding of the run (constrained, unconstrained or negotiated) and the
structured-output modes the calls actually used are part of the output.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
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


def answered_calls(log: Path) -> list[dict[str, Any]]:
    """The answered call lines of the episodes finished in `log`, one per decision (the
    last line of a decision that was played again after a resume)."""
    episodes: dict[str, int] = {}
    calls: dict[tuple[str, int], dict[str, Any]] = {}
    for line in Path(log).read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        if entry.get("type") == "episode":
            episodes[entry["episode_key"]] = int(entry["record"]["counters"].get("decisions", 0))
        elif entry.get("type") == "call" and entry.get("status") == "ok":
            calls[(entry["episode_key"], int(entry["decision"]))] = entry
    return [call for (key, decision), call in calls.items()
            if decision < episodes.get(key, 0)]


def summarise(results: list[tuple[Cell, Sequence[EpisodeRecord]]],
              resamples: int = 2000, calls: Sequence[dict[str, Any]] = (),
              response_format: str | None = None) -> dict[str, Any]:
    """The `diagym llm-study --json` object: counts, rates of every episode
    (analysis.summary), the median decision latency and decoding of `calls` (the run log's
    `answered_calls`), and the marginal contrasts. response_format: the run's setting."""
    from llm_policies.policy import decoding

    columns = [(cell, Episodes.from_records(rs)) for cell, rs in results]
    pooled = summarise_episodes([r for _, rs in results for r in rs])
    model = pooled.model_calls
    latencies = np.array([float(c["latency_s"]) for c in calls])
    return {
        "episodes": pooled.episodes,
        "success": pooled.success,
        "mean_completed": pooled.mean_completed,
        "decisions": model.decisions if model else 0,
        "schema_valid_rate": model.schema_valid_rate if model else None,
        "first_failures": pooled.failures,
        "median_decision_latency_s": float(np.median(latencies)) if latencies.size else None,
        "mean_decision_latency_s": model.mean_decision_latency_s if model else None,
        "response_format": response_format,
        "decoding": decoding(response_format),
        "calls_by_response_format": dict(sorted(Counter(
            str(c.get("response_format")) for c in calls).items())),
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
        + ", median decision latency "
        + (f"{summary['median_decision_latency_s']:.2f} s"
           if summary["median_decision_latency_s"] is not None else "n/a"),
        f"decoding: {summary['decoding'] or 'n/a'} (response_format "
        f"{summary['response_format'] or 'n/a'}; calls by mode: "
        + (", ".join(f"{k} {v}" for k, v in summary["calls_by_response_format"].items())
           or "none") + ")",
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
