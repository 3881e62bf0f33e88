"""The structural profile of a log's runs: the headline rate against each env factor that
varies between runs, with Wilson and Clopper-Pearson 95% intervals, as a table and a figure.

The rate is the env's headline metric as analysis/summary.py defines it: episode success on
StatefulWorkflow, accuracy over decisions on DACSSteering (whose episodes have no success
outcome). Runs are pooled per factor value and policy, so a factor's curve is each policy's
rate at each level, averaged over the other factors' levels the log holds. A log of one
configuration has no factor: its profile is the rate of each run.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest

from diagym import envs
from diagym.analysis.policy_label import policy_label
from diagym.analysis.report.logs import LogRun
from diagym.analysis.report.model import Figure, Table
from diagym.analysis.stats import wilson_interval

MAX_FACTORS = 6  # panels per figure; further varying factors are listed in the table only


@dataclass(frozen=True)
class Point:
    family: str
    policy: str
    factor: str      # "run" when no factor varies
    level: str
    hits: int
    trials: int

    def intervals(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(Wilson 95%, Clopper-Pearson 95%)."""
        low, high = wilson_interval(self.hits, self.trials)
        exact = binomtest(self.hits, self.trials).proportion_ci(0.95, method="exact")
        return (float(low), float(high)), (float(exact.low), float(exact.high))


def _rate(run: LogRun) -> tuple[int, int] | None:
    """(hits, trials) of the run's headline metric, None without episodes or decisions."""
    s = run.summary
    if s is None:
        return None
    if s.steering is not None:
        correct = int(round(s.steering.accuracy * s.steering.decisions))
        return correct, s.steering.decisions
    return s.successes, s.episodes


def _family(run: LogRun) -> str | None:
    try:
        return envs.family_of(str(run.run.get("env")))
    except (KeyError, ValueError, TypeError):
        return None


def _policy(run: LogRun) -> str:
    return policy_label(run.run.get("policy"))


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)


def points(runs: Sequence[LogRun]) -> list[Point]:
    """Pooled (hits, trials) per family, policy, varying factor and level."""
    out: list[Point] = []
    by_family: dict[str, list[tuple[LogRun, tuple[int, int]]]] = {}
    for run in runs:
        rate, family = _rate(run), _family(run)
        if rate is not None and rate[1] > 0 and family is not None:
            by_family.setdefault(family, []).append((run, rate))
    for family, rated in by_family.items():
        kwargs = [run.run.get("env_kwargs") or {} for run, _ in rated]
        keys = sorted({k for kw in kwargs for k in kw})
        varying = [k for k in keys if len({_text(kw.get(k)) for kw in kwargs}) > 1]
        factors = varying or ["run"]
        for factor in factors:
            pooled: dict[tuple[str, str], list[int]] = {}
            for (run, (hits, trials)), kw in zip(rated, kwargs, strict=True):
                level = (run.name or run.run_id) if factor == "run" else _text(kw.get(factor))
                cell = pooled.setdefault((_policy(run), level), [0, 0])
                cell[0] += hits
                cell[1] += trials
            out += [Point(family, policy, factor, level, hits, trials)
                    for (policy, level), (hits, trials) in pooled.items()]
    return out


def _sort_key(level: str) -> tuple[int, float, str]:
    try:
        return 0, float(level), level
    except ValueError:
        return 1, 0.0, level


METRIC = {envs.WORKFLOW: "success", "dacs": "accuracy over decisions"}


def profile_table(found: Sequence[Point]) -> Table:
    rows = []
    for p in sorted(found, key=lambda p: (p.family, p.factor, p.policy, _sort_key(p.level))):
        (wl, wh), (cl, ch) = p.intervals()
        rows.append((p.family, METRIC.get(p.family, "rate"), p.factor, p.level, p.policy,
                     f"{p.hits}/{p.trials}", f"{p.hits / p.trials:.3f}",
                     f"[{wl:.3f}, {wh:.3f}]", f"[{cl:.3f}, {ch:.3f}]"))
    return Table("Rate per factor level", ("family", "metric", "factor", "level", "policy",
                                           "hits/trials", "rate", "Wilson 95%",
                                           "Clopper-Pearson 95%"), tuple(rows),
                 note="Runs pooled per policy and level of the factor; a factor is drawn "
                      "where the log's runs differ in it.")


def profile_png(found: Sequence[Point]) -> bytes | None:
    """One panel per (family, factor): each policy's rate per level with Wilson 95% bars, in
    the policy's colour and marker of every diagym figure (analysis/plotting.py), the legend
    outside the data."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    from diagym.analysis.plotting import colour, legend_outside, percent_axis, style

    panels = sorted({(p.family, p.factor) for p in found})[:MAX_FACTORS]
    if not panels:
        return None
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    figure = MplFigure(figsize=(3.8 * columns, 3.0 * rows), dpi=100)
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(rows, columns, k + 1) for k in range(len(panels))]
    for ax, (family, factor) in zip(axes, panels, strict=True):
        here = [p for p in found if (p.family, p.factor) == (family, factor)]
        levels = sorted({p.level for p in here}, key=_sort_key)
        policies = sorted({p.policy for p in here})
        width = 0.6 / max(1, len(policies))
        for i, policy in enumerate(policies):
            mine = [p for p in here if p.policy == policy]
            x = np.array([levels.index(p.level) for p in mine]) + (
                i - (len(policies) - 1) / 2) * width
            rate = 100 * np.array([p.hits / p.trials for p in mine])
            bands = 100 * np.array([p.intervals()[0] for p in mine])
            yerr = np.clip([rate - bands[:, 0], bands[:, 1] - rate], 0.0, None)
            label = policy if len(policy) <= 40 else policy[:37] + "..."
            ax.errorbar(x, rate, yerr=yerr, fmt=style(policy)["marker"], color=colour(policy),
                        capsize=3, markersize=5, linewidth=1, label=label)
        rotate = factor == "run" or len(levels) > 4
        ax.set_xticks(range(len(levels)),
                      [level if len(level) <= 18 else level[:15] + "..." for level in levels],
                      rotation=30 if rotate else 0, ha="right" if rotate else "center",
                      fontsize=7)
        ax.set_xlim(-0.6, len(levels) - 0.4)
        percent_axis(ax, f"{METRIC.get(family, 'rate')} (%)")
        ax.set_xlabel(factor, fontsize=8)
        ax.set_title(f"{family}: by {factor}", fontsize=8)
    figure.tight_layout()
    # the panel with the most policies carries the legend (two families have two sets)
    legend_outside(figure, max(axes, key=lambda a: len(a.get_legend_handles_labels()[1])),
                   title="policy")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", pad_inches=0.1)
    return buffer.getvalue()


def profile(runs: Sequence[LogRun]) -> tuple[Table, Figure] | None:
    """The profile's table and figure, None when no run has a rate."""
    found = points(runs)
    png = profile_png(found) if found else None
    if png is None:
        return None
    return profile_table(found), Figure(
        "Headline rate per factor level", png,
        note="Points: pooled rate; bars: Wilson 95% intervals (Clopper-Pearson in the table).")
