"""The RL study's table (Markdown) and profile plot (success per width and feedback), both
naming the held-out seeds the rows were evaluated on (read from the rows, not the design's
full block: `--episodes` plays a prefix of it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagym.analysis.plotting import (
    CITATIONS,
    add_caption,
    grouped_bars,
    legend_outside,
    name_figure,
    new_figure,
    percent_axis,
    save,
    seed_text,
)
from diagym.analysis.studies.rl_study.design import ENV_ID, EVAL_SEEDS, FEEDBACK, PRESET
from diagym.analysis.studies.rl_study.run import StudyRow
from diagym.analysis.studies.study_tables import Block, markdown, study_table, write_study_tables
from diagym.controllers.provenance import write_provenance

TABLE_NAME = "rl_study.md"
PLOT_NAME = "rl_profile.png"
CITATION_003 = CITATIONS["003"]


def eval_seeds(rows: list[StudyRow]) -> list[int]:
    """The held-out seeds of the rows: train_and_evaluate plays `episodes` seeds from
    EVAL_SEEDS[0]."""
    first = int(EVAL_SEEDS[0])
    return list(range(first, first + max((r.episodes for r in rows), default=0)))


def _preset_text() -> str:
    return (f"N={PRESET['n_ops']}, depth {PRESET['depth']}, b={PRESET['candidates']}")


def table_blocks(rows: list[StudyRow]) -> list[Block]:
    """The table with its caption and the diagnoses, as data: the Markdown and the report's
    JSON both come from it."""
    caption = (f"{ENV_ID} (seed 003: {CITATION_003}) with {PRESET} ({_preset_text()}): held-out "
               f"success on {seed_text(eval_seeds(rows))} (Wilson 95%).")
    headers = ("Agent", "Feedback", "Width", "Train steps", "Success (%)", "95% interval",
               "Mean completed")
    cells = [(r.agent, r.feedback, r.width, f"{r.train_steps:,}", f"{100 * r.success:.1f}",
              f"[{100 * r.low:.1f}, {100 * r.high:.1f}]", f"{r.mean_completed:.2f}")
             for r in rows]
    blocks: list[Block] = [study_table(headers, cells, caption)]
    diagnosed = [r for r in rows if r.diagnosis]  # rl-study --diagnose
    if diagnosed:
        blocks += ["What each trained agent fails at (the diagnosis battery of its shape):",
                   "\n".join(f"- {r.agent}, {r.feedback}, width {r.width}: {r.diagnosis}"
                             for r in diagnosed)]
    return blocks


def format_rows(rows: list[StudyRow]) -> str:
    return markdown(table_blocks(rows))


def profile_figure(rows: list[StudyRow]) -> Any:
    """Success per width, one bar per agent (Wilson 95% error bars), one panel per feedback
    condition: two widths are two categories, not a scale to draw a line along."""
    feedbacks = [f for f in FEEDBACK if any(r.feedback == f for r in rows)]
    figure, axes = new_figure(len(feedbacks), 4.2)
    agents = list(dict.fromkeys(r.agent for r in rows))
    for axis, feedback in zip(axes, feedbacks, strict=True):
        widths = sorted({r.width for r in rows if r.feedback == feedback})
        series = {}
        for agent in agents:
            by_width = {r.width: r for r in rows if (r.agent, r.feedback) == (agent, feedback)}
            picked = [by_width.get(w) for w in widths]
            series[agent] = tuple(
                [float("nan") if r is None else 100 * getattr(r, field) for r in picked]
                for field in ("success", "low", "high"))
        grouped_bars(axis, [f"w = {w}" for w in widths], series)
        axis.set_title(f"{feedback} feedback", fontsize=9)
        axis.set_xlabel("active state width", fontsize=8)
        percent_axis(axis, "held-out success (%)")
    legend_outside(figure, axes[0], "agent")
    steps = sorted({r.train_steps for r in rows if r.train_steps})
    trained = f"SB3 agents trained {', '.join(f'{s:,}' for s in steps)} steps; " if steps else ""
    add_caption(figure, (
        f"{ENV_ID} (seed 003: {CITATION_003}), {_preset_text()}: {trained}every bar is one "
        f"agent evaluated on {seed_text(eval_seeds(rows))}, the same seeds for every agent; "
        "nothing is averaged; error bars are Wilson 95% intervals."), width=110)
    return name_figure(figure, "Held-out success of the RL agents beside the reference "
                               "controllers, by feedback and width")


def plot_rows(rows: list[StudyRow], out_png: Path) -> Path:
    """Write `profile_figure` to out_png."""
    return save(profile_figure(rows), out_png)


def write_report(rows: list[StudyRow], out: Path) -> tuple[Path, Path]:
    """DIR/rl_study.md, DIR/rl_study.tables.json (its tables as data), DIR/rl_profile.png and
    DIR/provenance.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = write_study_tables(out / TABLE_NAME, table_blocks(rows))
    write_provenance(out, {"command": "rl-study", "rows": len(rows),
                           "eval_seeds": [eval_seeds(rows)[0], eval_seeds(rows)[-1]]
                           if rows else []})
    return table, plot_rows(rows, out / PLOT_NAME)
