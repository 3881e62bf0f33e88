"""Phase-4 figures per condition, and the study's table: accuracy by judge (primary) and by
keywords, Cohen's kappa between them with a bootstrap interval, unparseable verdicts,
contamination, context tokens, and steering coverage (rubrics that received an answer, over
all rubrics of all trials). The table is written as phase4.csv and, through the studies'
one table writer (analysis/studies/study_tables.py), phase4.md with phase4.tables.json beside
it, which `diagym report` shows."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.studies.dacs_live.design import LiveScenario
from diagym.analysis.studies.dacs_live.judge import Decision
from diagym.analysis.studies.study_tables import study_table, write_study_tables

TABLE = "phase4"


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two binary raters; nan when chance agreement is 1 (one label only)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.size == 0:
        return float("nan")
    observed = float(np.mean(a == b))
    pa, pb = float(np.mean(a)), float(np.mean(b))
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1.0:
        return float("nan")
    return (observed - chance) / (1.0 - chance)


def kappa_interval(a: np.ndarray, b: np.ndarray, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap over decisions; resamples where kappa is undefined are dropped
    (nan, nan when none is defined)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, a.size, size=(n_boot, a.size))
    values = np.array([cohen_kappa(a[d], b[d]) for d in draws])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def condition_row(decisions: Sequence[Decision], condition: str, trials: int,
                  n_rubrics: int) -> dict[str, Any]:
    """The figures of one condition's decisions."""
    rows = [d for d in decisions if d.condition == condition]
    scored = [d for d in rows if d.topic is not None]
    judged = [d for d in scored if d.judge is not None]
    judge = np.array([d.judge for d in judged], dtype=bool)
    keyword_judged = np.array([d.keyword for d in judged], dtype=bool)
    keyword = np.array([d.keyword for d in scored], dtype=bool)
    low, high = kappa_interval(judge, keyword_judged)

    def mean(values: Any) -> float:
        return float(np.mean(values)) if len(values) else float("nan")

    return {
        "condition": condition, "trials": trials, "requests": len(rows),
        "decisions": len(scored), "extra_requests": len(rows) - len(scored),
        "unparseable": len(scored) - len(judged),
        "judge_accuracy": mean(judge), "keyword_accuracy": mean(keyword),
        "kappa": cohen_kappa(judge, keyword_judged), "kappa_low": low, "kappa_high": high,
        "contamination": mean([d.contaminated for d in rows]),
        "context_tokens": mean([d.context_tokens for d in rows]),
        "coverage": len(scored) / (trials * n_rubrics) if trials and n_rubrics else float("nan"),
    }


def condition_rows(scenario: LiveScenario,
                   entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per condition of a scenario's trial lines (dacs_live/run.py)."""
    decisions = [Decision(**d) for e in entries for d in e["decisions"]]
    rows = []
    for condition in sorted({e["condition"] for e in entries}):
        mine = [e for e in entries if e["condition"] == condition]
        row = condition_row(decisions, condition, len(mine), scenario.n_rubrics)
        row["scenario"] = scenario.scenario_id
        row["n_agents"] = scenario.n_agents
        row["agents_done"] = sum(e["done"] for e in mine) / sum(e["agents"] for e in mine)
        row["turns"] = sum(e["turns"] for e in mine)
        rows.append(row)
    return rows


def write_tables(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """phase4.csv, and phase4.md with its tables as data beside it, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0])
    with (out / f"{TABLE}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    cells = [[f"{v:.3f}" if isinstance(v, float) else v for v in row.values()] for row in rows]
    return [out / f"{TABLE}.csv",
            write_study_tables(out / f"{TABLE}.md", [study_table(fields, cells)])]
