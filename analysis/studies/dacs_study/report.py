"""The DACS study's table and plots; the efficiency ratio of a cell is the flat arm's mean
window tokens over the dacs arm's, as in seed 002."""

from __future__ import annotations

from pathlib import Path

from analysis.studies.dacs_study.design import ENV_ID, cell_label
from analysis.studies.dacs_study.run import ArmResult


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


def format_table(results: list[ArmResult], window: int) -> str:
    ratios = efficiency(results)
    lines = [
        f"{ENV_ID} at W = {window}: accuracy and wrong-agent contamination over all "
        "decisions; window tokens at steering time; efficiency = flat / dacs mean tokens.",
        "",
        "| Phase | Cell | Policy | Window | Accuracy | Contamination | Mean tokens | "
        "p95 tokens | Efficiency |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        ratio = ratios.get((r.phase, cell_label(r.cell)))
        shown = f"{ratio:.2f}x" if ratio is not None and r.context_mode == "dacs" \
            and r.policy != "uniform" else ""
        lines.append(
            f"| {r.phase} | {cell_label(r.cell)} | {r.policy} | {r.context_mode} | "
            f"{r.accuracy:.3f} | {r.contamination:.3f} | {r.mean_tokens:.0f} | "
            f"{r.p95_tokens:.0f} | {shown} |")
    return "\n".join(lines)


def plot_study(results: list[ArmResult], out: Path) -> list[Path]:
    """Accuracy, contamination and tokens against N (phase agents) and D (phase density)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for phase, axis_key, axis_name in (("agents", "n_agents", "N agents"),
                                       ("density", "decisions", "decisions per agent D")):
        rows = [r for r in results if r.phase == phase]
        if not rows:
            continue
        figure = Figure(figsize=(13, 3.8), dpi=100)
        FigureCanvasAgg(figure)
        for k, (metric, title) in enumerate((("accuracy", "steering accuracy"),
                                             ("contamination", "wrong-agent contamination"),
                                             ("mean_tokens", "window tokens"))):
            axis = figure.add_subplot(1, 3, k + 1)
            for policy, mode in sorted({(r.policy, r.context_mode) for r in rows}):
                arm = [r for r in rows if (r.policy, r.context_mode) == (policy, mode)]
                axis.plot([r.cell[axis_key] for r in arm], [getattr(r, metric) for r in arm],
                          marker="o", label=f"{policy} ({mode})")
            axis.set_xlabel(axis_name)
            axis.set_title(title)
        figure.axes[0].legend(fontsize=7)
        figure.tight_layout()
        path = out / f"dacs_{phase}.png"
        figure.savefig(path)
        paths.append(path)
    return paths
