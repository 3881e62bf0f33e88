"""The DACS study's table and plots, cells named as seed 002 names them (s1..s8 with N and D);
the efficiency ratio of a cell is the flat arm's mean window tokens over the dacs arm's, as
in seed 002."""

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


def format_table(results: list[ArmResult], window: int | None) -> str:
    ratios = efficiency(results)
    budget = "no budget (nothing cut)" if window is None else f"W = {window}"
    lines = [
        f"{ENV_ID}, {budget}: accuracy and wrong-agent contamination over all decisions; "
        "window tokens at steering time; efficiency = flat / dacs mean tokens; invalid = "
        "replies that were no answer (counted as wrong decisions).",
        "",
        "| Phase | Cell | Policy | Window | Accuracy | Contamination | Invalid | Mean tokens | "
        "p95 tokens | Efficiency |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        ratio = ratios.get((r.phase, cell_label(r.cell)))
        shown = f"{ratio:.2f}x" if ratio is not None and r.context_mode == "dacs" \
            and r.policy != "uniform" else ""
        lines.append(
            f"| {r.phase} | {cell_label(r.cell)} | {r.policy} | {r.context_mode} | "
            f"{r.accuracy:.3f} | {r.contamination:.3f} | {r.invalid} | {r.mean_tokens:.0f} | "
            f"{r.p95_tokens:.0f} | {shown} |")
    return "\n".join(lines)


def plot_study(results: list[ArmResult], out: Path) -> list[Path]:
    """Per phase: accuracy, contamination and tokens per cell (x axis: seed 002's cell names),
    one line per arm."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for phase in dict.fromkeys(r.phase for r in results):
        rows = [r for r in results if r.phase == phase]
        cells = list(dict.fromkeys(cell_label(r.cell) for r in rows))
        figure = Figure(figsize=(13, 3.8), dpi=100)
        FigureCanvasAgg(figure)
        for k, (metric, title) in enumerate((("accuracy", "steering accuracy"),
                                             ("contamination", "wrong-agent contamination"),
                                             ("mean_tokens", "window tokens"))):
            axis = figure.add_subplot(1, 3, k + 1)
            for policy, mode in dict.fromkeys((r.policy, r.context_mode) for r in rows):
                arm = [r for r in rows if (r.policy, r.context_mode) == (policy, mode)]
                axis.plot([cells.index(cell_label(r.cell)) for r in arm],
                          [getattr(r, metric) for r in arm], marker="o",
                          label=f"{policy} ({mode})")
            axis.set_xticks(range(len(cells)))
            axis.set_xticklabels([c.rsplit(" ", 1)[0] for c in cells], fontsize=7)
            axis.set_title(title)
        figure.axes[0].legend(fontsize=7)
        figure.suptitle(f"{ENV_ID}, phase {phase}", fontsize=9)
        figure.tight_layout()
        path = out / f"dacs_{phase}.png"
        figure.savefig(path)
        paths.append(path)
    return paths
