"""The DACS study's table (printed, CSV and Markdown) and plots, cells named as seed 002
names them (s1..s8 with N and D); the efficiency ratio of a cell is the flat arm's mean window
tokens over the dacs arm's, as in seed 002 (Patel, arXiv:2604.07911).

One function (`table_rows`) computes every row; the printed table, the Markdown file, the
report's tables JSON and the CSV are renderings of it, so they cannot disagree."""

from __future__ import annotations

import csv
from collections.abc import Sequence
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
    seed_text,
)
from diagym.analysis.stats import wilson_interval
from diagym.analysis.studies.dacs_study.design import ENV_ID, cell_label
from diagym.analysis.studies.dacs_study.run import ArmResult, play_phases
from diagym.analysis.studies.study_tables import Block, markdown, study_table, write_study_tables
from diagym.controllers.provenance import write_provenance

CITATION_002 = CITATIONS["002"]
TABLE_CSV = "dacs_study.csv"
TABLE_MD = "dacs_study.md"
CSV_FIELDS = ("phase", "cell", "policy", "window", "episodes", "decisions", "accuracy",
              "contamination", "invalid", "unmeasured", "mean_tokens", "p95_tokens",
              "efficiency")
READERS = (("dacs-reader", "dacs"), ("flat-reader", "flat"))
PHASE1_CELLS = {3: "s1", 5: "s2"}  # seed 002's phase-1 cell at each N
HEADERS = ("Phase", "Cell", "Policy", "Window", "Accuracy", "Contamination", "Invalid",
           "Mean tokens", "p95 tokens", "Efficiency")


def efficiency(results: list[ArmResult]) -> dict[tuple[str, str], float]:
    """(phase, cell label) -> flat arm's mean tokens / dacs arm's mean tokens."""
    ratios = {}
    for r in results:
        if r.context_mode != "dacs" or r.policy == "uniform":
            continue
        for f in results:
            if (f.phase, f.cell) == (r.phase, r.cell) and f.context_mode == "flat":
                ratios[(r.phase, cell_label(r.cell))] = f.mean_tokens / r.mean_tokens
                break
    return ratios


def decisions(result: ArmResult) -> int:
    """The decisions an arm's rates are over: in every measured episode each of the cell's N
    agents reaches its D decision points."""
    cell = result.cell
    return (result.episodes - result.unmeasured) * int(cell["n_agents"]) * int(cell["decisions"])


def reader_rows(sizes: Sequence[int]) -> list[dict[str, Any]]:
    """The table rows of the programmed readers (dacs-reader on dacs windows, flat-reader on
    flat) on seed 002's phase-1 cells at these numbers of agents: phase 4's synthetic
    comparison (analysis/studies/dacs_live/figure.py)."""
    from diagym.controllers.registry import make_reference_policy

    names = {PHASE1_CELLS[n] for n in sizes if n in PHASE1_CELLS}
    return table_rows(play_phases(make_reference_policy, arms=READERS, phases=("agents",),
                                cells=tuple(sorted(names))))


def table_rows(results: list[ArmResult]) -> list[dict[str, Any]]:
    """One dict per arm, keys CSV_FIELDS; efficiency is None where it is not defined (a flat
    or registry arm, the uniform control)."""
    ratios = efficiency(results)
    rows = []
    for r in results:
        ratio = ratios.get((r.phase, cell_label(r.cell)))
        shown = ratio if r.context_mode == "dacs" and r.policy != "uniform" else None
        rows.append({"phase": r.phase, "cell": cell_label(r.cell), "policy": r.policy,
                     "window": r.context_mode, "episodes": r.episodes,
                     "decisions": decisions(r), "accuracy": r.accuracy,
                     "contamination": r.contamination, "invalid": r.invalid,
                     "unmeasured": r.unmeasured, "mean_tokens": r.mean_tokens,
                     "p95_tokens": r.p95_tokens, "efficiency": shown})
    return rows


def format_row(row: dict[str, Any]) -> list[str]:
    """A table row's cells as the printed table shows them (HEADERS' order)."""
    ratio = row["efficiency"]
    return [row["phase"], row["cell"], row["policy"], row["window"], f"{row['accuracy']:.3f}",
            f"{row['contamination']:.3f}", str(row["invalid"]), f"{row['mean_tokens']:.0f}",
            f"{row['p95_tokens']:.0f}", f"{ratio:.2f}x" if ratio is not None else ""]


def _seeds(results: list[ArmResult]) -> str:
    # play_phases plays every arm on scenario seeds 0 .. episodes - 1
    return seed_text(range(max((r.episodes for r in results), default=0)))


def table_blocks(results: list[ArmResult], window: int | None) -> list[Block]:
    """The table with its caption, as data: the Markdown and the report's JSON both come
    from it."""
    budget = "no budget (nothing cut)" if window is None else f"W = {window}"
    caption = (
        f"{ENV_ID} (seed 002: {CITATION_002}), {budget}: accuracy and wrong-agent "
        f"contamination over all decisions of scenario {_seeds(results)} per arm; window "
        "tokens at steering time; efficiency = flat / dacs mean tokens; invalid = replies "
        "that were no answer (counted as wrong decisions).")
    return [study_table(HEADERS, [format_row(row) for row in table_rows(results)], caption)]


def format_table(results: list[ArmResult], window: int | None) -> str:
    return markdown(table_blocks(results, window))


def write_table(results: list[ArmResult], window: int | None, out: Path,
                run: dict[str, Any]) -> tuple[Path, Path]:
    """DIR/dacs_study.csv (table_rows, full precision), DIR/dacs_study.md (the printed
    table), DIR/dacs_study.tables.json (the same table as data) and DIR/provenance.json
    (`run`: the command's settings)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / TABLE_CSV
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(CSV_FIELDS))
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()}
                         for row in table_rows(results))
    md_path = write_study_tables(out / TABLE_MD, table_blocks(results, window))
    write_provenance(out, {"command": "dacs-study", **run, "window": window,
                           "arms": len(results)})
    return csv_path, md_path


METRICS = (("accuracy", "steering accuracy (%)"),
           ("contamination", "wrong-agent contamination (%)"),
           ("mean_tokens", "mean window tokens at steering"))


def _arm_key(r: ArmResult) -> str:
    return f"{r.policy} ({r.context_mode})"


def phase_figure(results: list[ArmResult], phase: str, window: int | None = None) -> Any:
    """One phase: accuracy, contamination (Wilson 95% over decisions) and mean window tokens
    per cell, one bar per arm (cells are scenarios, not a scale: no lines between them)."""
    rows = [r for r in results if r.phase == phase]
    cells = list(dict.fromkeys(cell_label(r.cell) for r in rows))
    arms = list(dict.fromkeys(_arm_key(r) for r in rows))
    policies = [a.rsplit(" (", 1)[0] for a in arms]
    looks = {}
    for arm, policy in zip(arms, policies, strict=True):
        repeated = policies.count(policy) > 1 and policies.index(policy) != arms.index(arm)
        looks[arm] = {"color": colour(policy), **({"hatch": "///"} if repeated else {})}
    figure, axes = new_figure(3, 4.3, height=3.7)
    for axis, (metric, label) in zip(axes, METRICS, strict=True):
        series = {}
        for arm in arms:
            by_cell = {cell_label(r.cell): r for r in rows if _arm_key(r) == arm}
            picked = [by_cell.get(c) for c in cells]
            values = [float("nan") if r is None else getattr(r, metric) for r in picked]
            if metric == "mean_tokens":
                series[arm] = (values, None, None)
                continue
            n = [decisions(r) if r is not None else 1 for r in picked]
            k = [min(max(round(v * m), 0), m) if v == v else 0 for v, m in zip(values, n,
                                                                             strict=True)]
            low, high = wilson_interval(k, n)
            series[arm] = ([100 * v for v in values], 100 * low, 100 * high)
        # "s4 N=3 D=4 homogeneous" on three lines: name, sizes, family
        grouped_bars(axis, ["{}\n{} {}\n{}".format(*c.split(" ", 3)) for c in cells], series,
                     looks=looks)
        axis.set_xlabel(f"scenario (phase {phase})", fontsize=8)
        if metric == "mean_tokens":
            axis.set_ylabel(label, fontsize=8)
            axis.tick_params(labelsize=7)
            axis.grid(axis="y", linewidth=0.4, alpha=0.5)
        else:
            percent_axis(axis, label)
    legend_outside(figure, axes[0], "policy (window)")
    budget = "no budget (nothing cut)" if window is None else f"budget W = {window}"
    counts = sorted({decisions(r) for r in rows})
    add_caption(figure, (
        f"{ENV_ID}, phase {phase} (seed 002: {CITATION_002}), {budget}: each bar pools every "
        f"decision of scenario {_seeds(rows)} in its cell ({', '.join(map(str, counts))} "
        "decisions per bar); error bars are Wilson 95% intervals over decisions; tokens are "
        "the mean window at steering time (p95 in the table)."
        + (" Hatched bars: the same policy on its second window kind."
           if any("hatch" in look for look in looks.values()) else "")), width=150)
    return name_figure(figure, f"Phase {phase}: steering accuracy, contamination and window "
                               "tokens per scenario")


def plot_study(results: list[ArmResult], out: Path, window: int | None = None) -> list[Path]:
    """DIR/dacs_<phase>.png per phase (`phase_figure`)."""
    out.mkdir(parents=True, exist_ok=True)
    return [save(phase_figure(results, phase, window), out / f"dacs_{phase}.png")
            for phase in dict.fromkeys(r.phase for r in results)]
