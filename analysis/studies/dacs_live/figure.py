"""Seed 002's figure 4 for diagym: phase 4 (live agents) beside phase 1 (synthetic) at
matched N, DACS vs flat, with the study's provenance and its report page.

Why a figure of both: the paper's claim outside synthetic scenarios is that the DACS
advantage seen in phase 1 survives free-form questions from autonomous agents; the figure
puts the two at the same N side by side. The synthetic bars are seed 002's phase-1 cells at
that N (s1 N = 3, s2 N = 5) from a `diagym dacs-study` table (`--synthetic FILE.csv`, e.g.
of `--policy llm` with the same model), else the programmed readers' rows, which the command
has dacs-study play (analysis/studies/dacs_study/report.py `reader_rows`: no study imports
another). Live
accuracy is the judge's (parseable verdicts only) and, beside it, the keywords'.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from diagym.analysis.plotting import (
    CITATIONS,
    add_caption,
    colour,
    grouped_bars,
    legend_outside,
    name_figure,
    new_figure,
    percent_axis,
    save,
)
from diagym.analysis.stats import wilson_interval
from diagym.controllers.provenance import write_provenance

FIGURE = "phase4_vs_synthetic.png"


def read_synthetic(path: Path) -> list[dict[str, Any]]:
    """The rows of a dacs-study CSV (dacs_study.csv), numbers as numbers."""
    rows = []
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            for key in ("accuracy", "contamination", "mean_tokens", "decisions"):
                row[key] = float(row[key]) if row.get(key) not in (None, "") else float("nan")
            rows.append(row)
    return rows


def _synthetic_at(rows: list[dict[str, Any]], n: int, window: str) -> dict[str, Any] | None:
    """The phase-1 row at N = n on `window` (the first such, as the table orders them)."""
    for row in rows:
        cell = str(row["cell"])
        if row.get("phase") == "agents" and f"N={n} " in cell + " " and row["window"] == window:
            return row
    return None


def figure4(live: list[dict[str, Any]], synthetic: list[dict[str, Any]],
            source: str) -> Any:
    """Accuracy (Wilson 95%) and mean context tokens, grouped by N and kind (synthetic
    phase 1, live phase 4 by judge, live by keywords), one bar per window (dacs, flat)."""
    sizes = sorted({int(r["n_agents"]) for r in live})
    groups, series = [], {"dacs": ([], [], []), "flat": ([], [], [])}
    token_groups, tokens = [], {"dacs": ([], None, None), "flat": ([], None, None)}
    for n in sizes:
        for kind in ("synthetic", "judge", "keywords"):
            groups.append(f"N={n}\n{'phase 1' if kind == 'synthetic' else 'phase 4'}\n"
                          f"{'synthetic' if kind == 'synthetic' else 'by ' + kind}")
            for window in ("dacs", "flat"):
                if kind == "synthetic":
                    row = _synthetic_at(synthetic, n, window)
                    value = row["accuracy"] if row else float("nan")
                    count = int(row["decisions"]) if row else 0
                else:
                    row = next((r for r in live if int(r["n_agents"]) == n
                                and r["condition"] == window), None)
                    key = "judge_accuracy" if kind == "judge" else "keyword_accuracy"
                    value = float(row[key]) if row else float("nan")
                    count = int(row["decisions"]) - (int(row["unparseable"])
                                                     if kind == "judge" else 0) if row else 0
                k = round(value * count) if value == value and count else 0
                low, high = wilson_interval(k, max(count, 1))
                values, lows, highs = series[window]
                values.append(100 * value)
                lows.append(100 * float(low) if count else float("nan"))
                highs.append(100 * float(high) if count else float("nan"))
        for kind in ("synthetic", "live"):
            token_groups.append(f"N={n}\n{'phase 1' if kind == 'synthetic' else 'phase 4'}")
            for window in ("dacs", "flat"):
                if kind == "synthetic":
                    row = _synthetic_at(synthetic, n, window)
                    tokens[window][0].append(float(row["mean_tokens"]) if row else float("nan"))
                else:
                    row = next((r for r in live if int(r["n_agents"]) == n
                                and r["condition"] == window), None)
                    tokens[window][0].append(float(row["context_tokens"]) if row
                                             else float("nan"))
    figure, axes = new_figure(2, 6.0, height=3.8)
    names = {"dacs": "DACS (focus)", "flat": "flat"}
    looks = {"dacs": {"color": colour("dacs-reader")}, "flat": {"color": colour("flat-reader")}}
    grouped_bars(axes[0], groups, series, labels=names, looks=looks)
    percent_axis(axes[0], "steering accuracy (%)")
    grouped_bars(axes[1], token_groups, tokens, labels=names, looks=looks)
    axes[1].set_ylabel("mean context tokens at steering", fontsize=8)
    axes[1].tick_params(labelsize=7)
    axes[1].grid(axis="y", linewidth=0.4, alpha=0.5)
    legend_outside(figure, axes[0], "orchestrator window")
    trials = sorted({int(r["trials"]) for r in live})
    add_caption(figure, (
        f"Seed 002's figure 4 ({CITATIONS['002']}): phase 4 (live chat-model "
        f"agents; paired trials per condition: {', '.join(map(str, trials))}) beside phase 1 "
        f"(synthetic, {source}) at matched N. Live accuracy is over the decisions each rater "
        "scored (judge: parseable verdicts only); error bars are Wilson 95% intervals over "
        "decisions; a missing bar has no decision to score."), width=150)
    return name_figure(figure, "Live agents (phase 4) beside synthetic ones (phase 1): steering "
                               "accuracy and context tokens")


def write_outputs(live: list[dict[str, Any]], synthetic: list[dict[str, Any]], source: str,
                  out: Path, run: dict[str, Any]) -> list[Path]:
    """DIR/phase4_vs_synthetic.png and DIR/provenance.json (`run`: the command's settings)."""
    out.mkdir(parents=True, exist_ok=True)
    path = save(figure4(live, synthetic, source), out / FIGURE)
    write_provenance(out, {"command": "dacs-live", **run, "synthetic": source})
    return [path]
