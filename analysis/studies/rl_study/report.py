"""The RL study's table (Markdown) and profile plot (success against width per feedback)."""

from __future__ import annotations

from pathlib import Path

from analysis.studies.rl_study.design import ENV_ID, EVAL_SEEDS, FEEDBACK, PRESET
from analysis.studies.rl_study.run import StudyRow
from controllers.provenance import write_provenance

TABLE_NAME = "rl_study.md"
PLOT_NAME = "rl_profile.png"


def format_rows(rows: list[StudyRow]) -> str:
    lines = [
        f"{ENV_ID} with {PRESET} (N=4, depth 2, b=2): held-out success on seeds "
        f"{int(EVAL_SEEDS[0])}..{int(EVAL_SEEDS[-1])} (Wilson 95%).",
        "",
        "| Agent | Feedback | Width | Train steps | Success (%) | 95% interval | "
        "Mean completed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r.agent} | {r.feedback} | {r.width} | {r.train_steps:,} | "
                     f"{100 * r.success:.1f} | [{100 * r.low:.1f}, {100 * r.high:.1f}] | "
                     f"{r.mean_completed:.2f} |")
    return "\n".join(lines)


def plot_rows(rows: list[StudyRow], out_png: Path) -> Path:
    """Success against width, one line per agent, one panel per feedback condition."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    for k, feedback in enumerate(FEEDBACK):
        axis = figure.add_subplot(1, 2, k + 1)
        for agent in dict.fromkeys(r.agent for r in rows):
            points = [r for r in rows if r.agent == agent and r.feedback == feedback]
            axis.plot([r.width for r in points], [100 * r.success for r in points],
                      marker="o", label=agent)
        axis.set_title(f"{feedback} feedback")
        axis.set_xlabel("width")
        axis.set_ylabel("success (%)")
        axis.set_ylim(-2, 102)
    figure.axes[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out_png)
    return out_png


def write_report(rows: list[StudyRow], out: Path) -> tuple[Path, Path]:
    """DIR/rl_study.md, DIR/rl_profile.png and DIR/provenance.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = out / TABLE_NAME
    table.write_text(format_rows(rows) + "\n")
    write_provenance(out, {"command": "rl-study", "rows": len(rows)})
    return table, plot_rows(rows, out / PLOT_NAME)
