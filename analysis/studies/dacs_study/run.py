"""Seed 002's phases on DACSSteering-v0 for any policy: accuracy, contamination and tokens.

Phase "agents" varies N in {3, 5, 10} (homogeneous, D = 3), "diversity" the scenario family
at N = 5 (homogeneous, crossfire, cascade), "density" the decisions per agent at N = 5
(dense, D in {5, 10, 15}). Each arm is a policy facing one context mode (the reference arms:
dacs-reader on dacs windows, flat-reader and flat-recency on flat windows, registry-only on
registry windows, uniform on dacs windows), run through the one Policy runner on the same
scenario seeds, so arms are paired. The efficiency ratio of a cell is the flat arm's mean
window tokens over the dacs arm's, as in seed 002.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from controllers.policy import EpisodeRecord
from controllers.rollout import rollout_parallel

PHASES: dict[str, list[dict[str, Any]]] = {
    "agents": [{"n_agents": n, "family": "homogeneous", "decisions": 3} for n in (3, 5, 10)],
    "diversity": [{"n_agents": 5, "family": f, "decisions": 3}
                  for f in ("homogeneous", "crossfire", "cascade")],
    "density": [{"n_agents": 5, "family": "dense", "decisions": d} for d in (5, 10, 15)],
}
REFERENCE_ARMS = (
    ("dacs-reader", "dacs"), ("flat-reader", "flat"), ("flat-recency", "flat"),
    ("registry-only", "registry"), ("uniform", "dacs"),
)


@dataclass(frozen=True)
class ArmResult:
    phase: str
    cell: dict[str, Any]
    policy: str
    context_mode: str
    episodes: int
    accuracy: float
    contamination: float
    mean_tokens: float
    p95_tokens: float


def _summarise(phase: str, cell: dict[str, Any], policy: str, mode: str,
               records: list[EpisodeRecord]) -> ArmResult:
    tokens = np.concatenate([np.asarray(r.metrics["window_tokens"], float) for r in records])
    weights = [len(r.metrics["window_tokens"]) for r in records]
    return ArmResult(
        phase=phase, cell=dict(cell), policy=policy, context_mode=mode, episodes=len(records),
        accuracy=float(np.average([r.metrics["accuracy"] for r in records], weights=weights)),
        contamination=float(np.average([r.metrics["contamination"] for r in records],
                                       weights=weights)),
        mean_tokens=float(tokens.mean()), p95_tokens=float(np.percentile(tokens, 95)),
    )


def run_study(make_env: Callable[[dict[str, Any]], Any],
              make_policy: Callable[[str, Any], Any],
              arms: tuple[tuple[str, str], ...] = REFERENCE_ARMS, episodes: int = 10,
              window: int = 4096, phases: tuple[str, ...] = tuple(PHASES),
              progress: bool = False, log: Path | None = None,
              workers: int = 1) -> list[ArmResult]:
    """Every phase x cell x arm on scenario seeds 0 .. episodes - 1.

    With `log`, each arm is its own run in one append-only RunLog and episodes already
    finished there are not played again, so rerunning the same command resumes a study that
    was interrupted (an LLM study makes one model call per decision). `workers` episodes of
    an arm are in flight at once (for policies that wait on a server)."""
    jobs = [(phase, cell, arm) for phase in phases for cell in PHASES[phase] for arm in arms]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc="dacs-study arms", unit="arm", disable=None)
    results = []
    for phase, cell, (policy_name, mode) in jobs:
        kwargs = {**cell, "context_mode": mode, "window": window}
        records = rollout_parallel(
            lambda kwargs=kwargs: make_env(kwargs),
            lambda env, name=policy_name: make_policy(name, env),
            episodes, seed=0, workers=workers, log=log, resume=log is not None)
        results.append(_summarise(phase, cell, policy_name, mode, records))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return results


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


def cell_label(cell: dict[str, Any]) -> str:
    return f"N={cell['n_agents']} {cell['family']} D={cell['decisions']}"


def format_table(results: list[ArmResult], window: int) -> str:
    ratios = efficiency(results)
    lines = [
        f"DACSSteering-v0 at W = {window}: accuracy and wrong-agent contamination over all "
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
