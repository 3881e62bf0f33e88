"""Seed 003's language-model designs (sections 9.1 and 10) for any chat model, with their tables.

- `local`: the complete 2^5 factorial of section 10: family (chains, barriers), depth (2, 8),
  candidates (2, 8), width (1, 8) and feedback (history, snapshot), N = 8, every cell on the
  same task seeds (8 by default: 256 episodes).
- `fractional`: the 2^(4-1) resolution-IV half fraction of section 9.1 on chains: depth (2, 8),
  candidates (2, 8), width (1, 8), feedback = depth x candidates x width (defining relation
  I = ABCD), two seeds by default (16 episodes).
Episodes run through the one Policy runner (controllers.policy.rollout_parallel) with the LLM
policy, so records and the run log are those of every other run; the report gives completed
operations, the schema-valid rate, first failures, latency, and the marginal high-minus-low
contrasts with seed-cluster bootstrap intervals (the shapes of Tables 8 and 9).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.stats import bootstrap_weights, paired_bootstrap
from controllers.policy import EpisodeRecord
from controllers.rollout import rollout_parallel
from envs.workflow.params import WorkflowSpec

# (name, spec field, low, high); feedback is "high" for snapshot, as the paper's contrast is
# snapshot minus history.
FACTORS = (
    ("family", "family", "chains", "barriers"),
    ("depth", "depth", 2, 8),
    ("branching", "candidates", 2, 8),
    ("width", "width", 1, 8),
    ("observation", "snapshot_period", 0, 1),
)
DESIGNS = ("local", "fractional")


@dataclass(frozen=True)
class Cell:
    """One condition of a design: its factor levels (0 low, 1 high) and task spec."""

    levels: dict[str, int]
    spec: WorkflowSpec


def design_cells(design: str) -> list[Cell]:
    """The conditions of a design, in standard order."""
    if design == "local":
        factors = FACTORS
        rows = list(itertools.product((0, 1), repeat=5))
    elif design == "fractional":
        factors = FACTORS[1:]
        rows = [(a, b, c, a ^ b ^ c) for a, b, c in itertools.product((0, 1), repeat=3)]
    else:
        raise ValueError(f"design must be one of {' | '.join(DESIGNS)}; got {design!r}")
    cells = []
    for row in rows:
        kwargs: dict[str, Any] = {"n_ops": 8, "family": "chains"}
        levels = {}
        for (name, field, low, high), level in zip(factors, row, strict=True):
            kwargs[field] = high if level else low
            levels[name] = level
        cells.append(Cell(levels, WorkflowSpec(**kwargs)))
    return cells


def run_design(design: str, first_seed: int, n_seeds: int,
               make_env: Callable[[WorkflowSpec], Any], make_policy: Callable[[Any], Any],
               log: Path | None = None, workers: int = 1, progress: bool = False
               ) -> list[tuple[Cell, list[EpisodeRecord]]]:
    """Every cell on seeds first_seed .. first_seed + n_seeds - 1, in one shared run log.

    With a log, episodes already finished in it are not played again (each cell is its own
    run in the log), so rerunning the same command resumes the study.
    """
    cells = design_cells(design)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cells) * n_seeds, desc=f"{design} design", unit="episode")
    results = []
    try:
        for cell in cells:
            records = rollout_parallel(
                lambda cell=cell: make_env(cell.spec), make_policy, n_seeds, seed=first_seed,
                workers=workers, log=log, resume=log is not None,
                on_record=(lambda _r: bar.update(1)) if bar is not None else None)
            results.append((cell, records))
    finally:
        if bar is not None:
            bar.close()
    return results


def summarise(results: list[tuple[Cell, list[EpisodeRecord]]],
              resamples: int = 2000) -> dict[str, Any]:
    """Counts, rates, latency and the marginal contrasts with seed-cluster bootstrap bands."""
    records = [r for _, rs in results for r in rs]
    decisions = sum(r.counters.get("decisions", 0) for r in records)
    valid = sum(r.counters.get("schema_valid", 0) for r in records)
    latency = sum(r.counters.get("latency_s", 0.0) for r in records)
    failures: dict[str, int] = {}
    for r in records:
        if r.first_failure is not None:
            failures[r.first_failure] = failures.get(r.first_failure, 0) + 1
    success = np.array([[float(r.success) for r in rs] for _, rs in results])  # cells x seeds
    completed = np.array([[float(r.completed) for r in rs] for _, rs in results])
    n_seeds = success.shape[1]
    weights = bootstrap_weights(n_seeds, resamples=resamples)
    contrasts = []
    for name, *_ in FACTORS:
        if name not in results[0][0].levels:
            continue
        high = np.array([cell.levels[name] == 1 for cell, _ in results])
        per_seed_success = success[high].mean(axis=0) - success[~high].mean(axis=0)
        per_seed_ops = completed[high].mean(axis=0) - completed[~high].mean(axis=0)
        estimate, low, high_band = paired_bootstrap(per_seed_success[None, :], weights)
        contrasts.append({
            "factor": name,
            "low_success": [int(success[~high].sum()), int(success[~high].size)],
            "high_success": [int(success[high].sum()), int(success[high].size)],
            "success_difference": float(estimate[0]),
            "interval": [float(low[0]), float(high_band[0])],
            "operation_difference": float(per_seed_ops.mean()),
            "n_per_level": int(high.sum()) * n_seeds,
        })
    return {
        "episodes": len(records),
        "success": float(success.mean()),
        "mean_completed": float(completed.mean()),
        "decisions": int(decisions),
        "schema_valid_rate": valid / decisions if decisions else None,
        "first_failures": dict(sorted(failures.items())),
        "mean_decision_latency_s": latency / decisions if decisions else None,
        "median_episode_latency_s": statistics.median(
            [r.counters.get("latency_s", 0.0) for r in records]) if records else None,
        "contrasts": contrasts,
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
