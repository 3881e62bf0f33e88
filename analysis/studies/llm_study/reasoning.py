"""Seed 003's reasoning-budget test as a design (`llm-study --design reasoning`): reasoning
budget levels crossed with its structural factors, compared at matched total usage.

Seed 003 names the test it did not run: "a reasoning-budget intervention must use a supported,
explicit budget control and a total-usage-matched comparison", with retries and extra tool
calls kept as separate interventions. Here:

- the budget is the think-then-act answer's (--reasoning-tokens, docs/REASONING.md); the
  levels are REASONING_LEVELS, the first (None) seed 003's direct answer;
- the structural factors are the fractional design's cells (design.py: depth, branching,
  width and feedback on chains, the 2^(4-1) fraction), every level on the same task seeds;
- retries and tool calls are held fixed: every level plays the same harnesses with the same
  --invalid-retries, so the budget is the only thing that differs between levels;
- total usage is the cl100k tokens of an episode (prompt and completion, reasoning included);
  each level is compared with the direct answer over (cell, seed) pairs, on all pairs and on
  the pairs whose usage matches within MATCH_TOLERANCE, so a gain bought by spending more
  tokens is told apart from one at equal spend. The matched pairs are counted beside it.

The levels are played one after another, each a run of the fractional design per harness in
the study's one log (run.py's run_design, named by the level), so a resumed study plays only
what is missing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from diagym.analysis.stats import wilson_interval
from diagym.analysis.studies.llm_study.run import CellRun, run_design

REASONING_LEVELS: tuple[int | None, ...] = (None, 256, 1024)
STRUCTURE = "fractional"  # the design whose cells carry the structural factors
MATCH_TOLERANCE = 0.25  # usage matched: within 25% of the direct answer's, relatively
DECISION_COLUMNS = 8  # the reasoning-length table shows decisions 0..7


def level_name(budget: int | None) -> str:
    """"direct" for seed 003's answer, "reason R" for a budget of R tokens."""
    return "direct" if budget is None else f"reason {budget}"


def check_levels(levels: Sequence[int | None]) -> tuple[int | None, ...]:
    """The budget levels, distinct, the direct answer (None) first among them if present;
    ValueError otherwise."""
    chosen = tuple(levels)
    ok = chosen and len(set(chosen)) == len(chosen) and all(
        level is None or (isinstance(level, int) and not isinstance(level, bool) and level >= 1)
        for level in chosen)
    if not ok or None not in chosen:
        raise ValueError("levels must be distinct reasoning budgets (integers >= 1) and None, "
                         f"the direct answer they are compared with; got {chosen!r}")
    return chosen


def run_reasoning_design(first_seed: int, n_seeds: int,
                         make_policy: Callable[[str, int | None], Callable[[Any], Any]], *,
                         levels: Sequence[int | None] = REASONING_LEVELS,
                         resume: bool = False, run_name: str | None = None,
                         **design: Any) -> dict[int | None, list[CellRun]]:
    """Every level's runs of the structural cells (run_design's results), keyed by budget;
    make_policy(harness, budget) is the runner's make_policy(env). `design`: run_design's
    other arguments (harnesses, log, workers, progress, make_env, retry_failed, executor)."""
    results = {}
    for index, budget in enumerate(check_levels(levels)):
        name = " ".join(filter(None, (level_name(budget), run_name)))
        results[budget] = run_design(
            STRUCTURE, first_seed, n_seeds,
            lambda harness, budget=budget: make_policy(harness, budget),
            resume=resume or index > 0, run_name=name, **design)
    return results


def _per_episode(runs: Sequence[CellRun]) -> dict[str, np.ndarray]:
    """Success, usage (cl100k tokens of the episode) and decisions, one entry per (harness,
    cell, seed) in play order."""
    def counter(name: str) -> np.ndarray:
        return np.concatenate([np.asarray(r.episodes.counters.get(
            name, np.zeros(len(r.episodes))), dtype=float) for r in runs])

    return {
        "success": np.concatenate([np.asarray(r.episodes.columns["success"], dtype=float)
                                   for r in runs]),
        "usage": counter("cl100k_prompt_tokens") + counter("cl100k_completion_tokens"),
        "decisions": counter("decisions"),
        "reasoning": counter("cl100k_reasoning_tokens"),
    }


def reasoning_by_decision(calls: Sequence[dict[str, Any]]) -> dict[str, list[float | None]]:
    """Per level, the mean cl100k reasoning tokens of the answered calls at decision index
    0, 1, ... (DECISION_COLUMNS of them; None where no call reached it): a model that stops
    reasoning once its history is in the prompt shows as a falling row."""
    by_level: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for call in calls:
        decision = call.get("decision")
        if isinstance(decision, int) and 0 <= decision < DECISION_COLUMNS:
            tokens = call.get("cl100k_reasoning_tokens") or 0
            by_level[level_name(call.get("reasoning_budget"))][decision].append(int(tokens))
    return {level: [float(np.mean(d[i])) if d.get(i) else None
                    for i in range(DECISION_COLUMNS)] for level, d in by_level.items()}


def summarise_reasoning(results: dict[int | None, list[CellRun]],
                        calls: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The design's figures per level: success with its Wilson interval, usage per episode,
    reasoning per decision, first failures, and the contrast with the direct answer on all
    (cell, seed) pairs and on the usage-matched ones; `calls` (the log's answered calls)
    give the reasoning by decision index."""
    base = _per_episode(results[None])
    levels = []
    for budget, runs in results.items():
        mine = _per_episode(runs)
        k, n = int(mine["success"].sum()), len(mine["success"])
        low, high = wilson_interval(k, n)
        failures: dict[str, int] = defaultdict(int)
        for run in runs:
            for reason in run.episodes.columns["first_failure"]:
                if reason not in (None, "", "none"):
                    failures[str(reason)] += 1
        row: dict[str, Any] = {
            "level": level_name(budget), "reasoning_tokens": budget, "episodes": n,
            "successes": k, "success": k / n if n else None,
            "success_ci": [float(low), float(high)],
            "usage_per_episode": float(mine["usage"].mean()) if n else None,
            "reasoning_per_decision": (float(mine["reasoning"].sum() / mine["decisions"].sum())
                                       if mine["decisions"].sum() else None),
            "first_failures": dict(sorted(failures.items())),
        }
        if budget is not None and len(mine["success"]) == len(base["success"]):
            matched = np.abs(mine["usage"] - base["usage"]) <= MATCH_TOLERANCE * np.maximum(
                base["usage"], 1.0)
            difference = mine["success"] - base["success"]
            row["versus_direct"] = {
                "pairs": n, "success_difference": float(difference.mean()),
                "usage_ratio": (float(mine["usage"].sum() / base["usage"].sum())
                                if base["usage"].sum() else None),
                "matched_pairs": int(matched.sum()),
                "matched_success_difference": (float(difference[matched].mean())
                                               if matched.any() else None),
            }
        levels.append(row)
    return {"design": "reasoning", "structure": STRUCTURE, "match_tolerance": MATCH_TOLERANCE,
            "levels": levels, "reasoning_by_decision": reasoning_by_decision(calls)}


def _pp(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f} pp"


def format_reasoning_summary(summary: dict[str, Any]) -> str:
    """Markdown: the levels (success, usage, reasoning, the contrast with the direct answer
    on all and on usage-matched pairs), then reasoning tokens by decision index."""
    lines = [f"Reasoning budgets over seed 003's {summary['structure']} cells; usage is cl100k "
             "tokens per episode (prompt and completion, reasoning included); matched: "
             f"usage within {100 * summary['match_tolerance']:.0f}% of the direct answer's "
             "on the same cell and seed.", "",
             "| Level | Episodes | Success (95% CI) | Usage / episode | Reasoning / decision | "
             "First failures | vs direct: all pairs | usage ratio | matched pairs | "
             "vs direct: matched |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in summary["levels"]:
        low, high = row["success_ci"]
        versus = row.get("versus_direct")
        usage = row["usage_per_episode"]
        reasoning = row["reasoning_per_decision"]
        failures = ", ".join(f"{k} {v}" for k, v in row["first_failures"].items()) or "none"
        compared = "| | | |"
        if versus is not None:
            ratio = versus["usage_ratio"]
            compared = (f"| {_pp(versus['success_difference'])} | "
                        f"{'n/a' if ratio is None else f'{ratio:.2f}x'} | "
                        f"{versus['matched_pairs']} of {versus['pairs']} | "
                        f"{_pp(versus['matched_success_difference'])} |")
        lines.append(
            f"| {row['level']} | {row['episodes']} | {row['successes']}/{row['episodes']} "
            f"({100 * low:.0f}-{100 * high:.0f}%) | "
            f"{'n/a' if usage is None else f'{usage:,.0f}'} | "
            f"{'n/a' if reasoning is None else f'{reasoning:.0f}'} | {failures} {compared}")
    by_decision = summary["reasoning_by_decision"]
    if by_decision:
        lines += ["", "Reasoning tokens by decision index (mean over answered calls):", "",
                  "| Level | " + " | ".join(str(i) for i in range(DECISION_COLUMNS)) + " |",
                  "| --- |" + " --- |" * DECISION_COLUMNS]
        for level, row in by_decision.items():
            lines.append(f"| {level} | " + " | ".join(
                "" if v is None else f"{v:.0f}" for v in row) + " |")
    return "\n".join(lines)
