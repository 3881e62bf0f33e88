"""DACS minus flat in phase 4, paired by decision, with a bootstrap interval.

Why paired by decision and not by condition means: both conditions of a trial share seeds and
agents, so the same (trial, agent, request index) is asked in each; the difference of the two
answers' scores is what the orchestrator's window changed. A decision counts for a rater only
where both conditions have a score from it (the judge's unparseable verdicts and requests
past an agent's rubrics drop out), and the interval resamples those pairs
(diagym.analysis.stats.bootstrap_weights), which is honest about small n.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.stats import bootstrap_weights, paired_bootstrap
from diagym.analysis.studies.study_tables import study_table, write_study_tables

RATERS = ("judge", "keyword")
FIELDS = ("scenario", "rater", "pairs", "dacs", "flat", "difference", "low", "high")


def paired_rows(scenario: str, entries: Sequence[dict[str, Any]],
                confidence: float = 0.95) -> list[dict[str, Any]]:
    """One row per rater: pairs, each condition's accuracy over them, dacs - flat and its
    percentile interval (nan without pairs)."""
    rows = []
    for rater in RATERS:
        scores = {condition: {(e["trial"], d["agent_id"], d["index"]): d[rater]
                              for e in entries if e["condition"] == condition
                              for d in e["decisions"] if d["topic"] is not None}
                  for condition in ("dacs", "flat")}
        keys = sorted(k for k, v in scores["dacs"].items()
                      if v is not None and scores["flat"].get(k) is not None)
        row: dict[str, Any] = {"scenario": scenario, "rater": rater, "pairs": len(keys)}
        row.update(dict.fromkeys(FIELDS[3:], float("nan")))
        if keys:
            dacs = np.array([scores["dacs"][k] for k in keys], dtype=float)
            flat = np.array([scores["flat"][k] for k in keys], dtype=float)
            estimate, low, high = paired_bootstrap(dacs - flat, bootstrap_weights(len(keys)),
                                                   confidence)
            row.update(dacs=float(dacs.mean()), flat=float(flat.mean()),
                       difference=float(estimate[0]), low=float(low[0]), high=float(high[0]))
        rows.append(row)
    return rows


def write_paired(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """phase4_paired.csv, .md and .tables.json (the Markdown's table as data) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "phase4_paired.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    cells = [[f"{row[f]:+.3f}" if f in ("difference", "low", "high")
              else f"{row[f]:.3f}" if isinstance(row[f], float) else row[f] for f in FIELDS]
             for row in rows]
    return [out / "phase4_paired.csv",
            write_study_tables(out / "phase4_paired.md", [study_table(FIELDS, cells)])]
