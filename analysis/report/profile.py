"""The structural profile of a log's runs: the headline rate against each env factor that
varies between runs, with Wilson and Clopper-Pearson 95% intervals, as a table and a figure,
comparing like with like.

The rate is the env's headline metric as analysis/summary.py defines it: episode success on
StatefulWorkflow, accuracy over decisions on DACSSteering (whose episodes have no success
outcome). A log of one configuration has no factor: its profile is the rate of each run, and
a single run has none (its one rate is in the run summary).

Why not pool per level: a diagnosis battery (analysis/diagnose/battery.py) varies its factors
together, so a rate pooled over every configuration at one level of a factor measures the other
factors that come with that level. cache-2 on the default battery succeeds on 72% of the
hidden-resampling episodes and 5% of the others, because the battery's hidden-resampling
configurations are the ones with snapshots, which show it every register; pooled, the panel
says that resampling helps. So a factor's levels are compared only within a *matched set*: the
runs of one policy that agree in every other factor that varies in the log (one stratum). The
rule (docs/REPORT.md, "Like with like"):

* matched sets holding the same levels form one series, pooled over those sets only, so every
  point of a series comes from the same settings of the other factors, when each set's
  episodes are in the same proportion at every level (`balanced`: the pool then weighs the
  sets alike at every level); otherwise, and for sets holding other levels, each set is its own
  series (MAX_SERIES drawn per panel, all in the table);
* a run with no partner that differs from it only in the factor is left out of that factor's
  panel, and the table says how many were;
* a factor with no matched set at all is *confounded* in these runs: no rate by its levels is
  drawn or tabulated, and the panel and the table say so.

A full factorial design has one series per policy holding every run, equal to the old pooled
rate per level (tests/analysis/test_report_profile.py checks both).
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Mapping, Sequence
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
MAX_SERIES = 4   # series per panel; further ones are listed in the table only
RUN = "run"      # the factor of a log whose runs share one configuration


@dataclass(frozen=True)
class Cell:
    """One run's rate and where it was played: its family, policy label and env kwargs (each
    value as text)."""

    family: str
    policy: str
    kwargs: Mapping[str, str]
    hits: int
    trials: int
    name: str = ""


@dataclass(frozen=True)
class Point:
    family: str
    policy: str
    factor: str      # RUN when no factor varies
    level: str
    hits: int
    trials: int
    within: str = ""                 # the series: the other factors' settings held fixed
    strata: tuple[str, ...] = ()     # those settings, one text per matched set pooled

    def intervals(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(Wilson 95%, Clopper-Pearson 95%)."""
        low, high = wilson_interval(self.hits, self.trials)
        exact = binomtest(self.hits, self.trials).proportion_ci(0.95, method="exact")
        return (float(low), float(high)), (float(exact.low), float(exact.high))


@dataclass(frozen=True)
class Confounded:
    """A factor of one policy's runs with no two runs differing only in it."""

    family: str
    policy: str
    factor: str
    levels: tuple[str, ...]


@dataclass(frozen=True)
class Profile:
    points: tuple[Point, ...]
    confounded: tuple[Confounded, ...]
    left_out: Mapping[tuple[str, str, str], int]  # (family, policy, factor) -> runs left out

    def panels(self) -> list[tuple[str, str]]:
        """(family, factor) of every panel, drawn or confounded, in order."""
        return sorted({(p.family, p.factor) for p in self.points}
                      | {(c.family, c.factor) for c in self.confounded})


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


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)


def cells(runs: Sequence[LogRun]) -> list[Cell]:
    """The runs that have a rate, as cells."""
    out = []
    for run in runs:
        rate, family = _rate(run), _family(run)
        if rate is not None and rate[1] > 0 and family is not None:
            kwargs = {k: _text(v) for k, v in (run.run.get("env_kwargs") or {}).items()}
            out.append(Cell(family, policy_label(run.run.get("policy")), kwargs, *rate,
                            name=run.name or run.run_id))
    return out


def _setting(keys: Sequence[str], cell: Cell) -> str:
    return ", ".join(f"{k}={cell.kwargs.get(k, '-')}" for k in keys)


def balanced(trials: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether pooling the sets (set -> level -> trials) weighs each set alike at every level:
    every set's trials are in the same proportion across the levels (n_sl * N == n_s * n_l),
    so the pooled rate at each level is the same weighted mean of the sets' rates."""
    total = sum(n for row in trials.values() for n in row.values())
    by_level: dict[str, int] = {}
    for row in trials.values():
        for level, n in row.items():
            by_level[level] = by_level.get(level, 0) + n
    return all(n * total == sum(row.values()) * by_level[level]
               for row in trials.values() for level, n in row.items())


def _series(family: str, policy: str, factor: str, others: Sequence[str],
            mine: Sequence[Cell]) -> tuple[list[Point], Confounded | None, int]:
    """One policy's series for `factor` (module docstring), its confounding, the runs left
    out."""
    strata: dict[str, dict[str, list[int]]] = {}
    for cell in mine:
        level = strata.setdefault(_setting(others, cell), {}).setdefault(
            cell.kwargs.get(factor, "-"), [0, 0])
        level[0] += cell.hits
        level[1] += cell.trials
    matched = {s: levels for s, levels in strata.items() if len(levels) > 1}
    if not matched:
        levels = tuple(sorted({c.kwargs.get(factor, "-") for c in mine}, key=_sort_key))
        return [], Confounded(family, policy, factor, levels), len(mine)
    groups: dict[tuple[str, ...], list[str]] = {}
    for setting, levels in matched.items():
        groups.setdefault(tuple(sorted(levels, key=_sort_key)), []).append(setting)
    series: list[tuple[tuple[str, ...], list[str]]] = []
    for levels, settings in groups.items():
        if balanced({s: {lv: matched[s][lv][1] for lv in levels} for s in settings}):
            series.append((levels, settings))
        else:  # pooled, the sets would weigh differently at each level: each its own series
            series += [(levels, [s]) for s in settings]
    points = []
    for levels, settings in sorted(series, key=lambda g: (-len(g[1]), g[0], g[1])):
        settings = sorted(settings)
        within = (settings[0] if len(settings) == 1 else
                  f"the same {len(settings)} settings of {', '.join(others)}")
        for level in levels:
            hits = sum(matched[s][level][0] for s in settings)
            trials = sum(matched[s][level][1] for s in settings)
            points.append(Point(family, policy, factor, level, hits, trials,
                                within or "every run", tuple(settings)))
    left = sum(1 for cell in mine if _setting(others, cell) not in matched)
    return points, None, left


def profile_of(found: Sequence[Cell]) -> Profile:
    """The like-with-like profile of the cells (module docstring)."""
    points: list[Point] = []
    confounded: list[Confounded] = []
    left_out: dict[tuple[str, str, str], int] = {}
    for family in sorted({c.family for c in found}):
        here = [c for c in found if c.family == family]
        keys = sorted({k for c in here for k in c.kwargs})
        varying = [k for k in keys if len({c.kwargs.get(k, "-") for c in here}) > 1]
        policies = sorted({c.policy for c in here})
        if not varying:
            for policy in policies:
                for cell in (c for c in here if c.policy == policy):
                    points.append(Point(family, policy, RUN, cell.name, cell.hits,
                                        cell.trials))
            continue
        for factor in varying:
            others = [k for k in varying if k != factor]
            for policy in policies:
                drawn, mixed, left = _series(family, policy, factor, others,
                                             [c for c in here if c.policy == policy])
                points += drawn
                if mixed is not None:
                    confounded.append(mixed)
                if left:
                    left_out[(family, policy, factor)] = left
    return Profile(tuple(_merge_runs(points)), tuple(confounded), left_out)


def _merge_runs(points: Sequence[Point]) -> list[Point]:
    """Runs of one configuration and name (RUN) pooled into one point."""
    out: dict[tuple[str, ...], Point] = {}
    for p in points:
        key = (p.family, p.policy, p.factor, p.level, p.within)
        if key in out and p.factor == RUN:
            q = out[key]
            out[key] = Point(q.family, q.policy, q.factor, q.level, q.hits + p.hits,
                             q.trials + p.trials, q.within, q.strata)
        else:
            out[key] = p
    return list(out.values())


def points(runs: Sequence[LogRun]) -> list[Point]:
    """The drawn points of the runs' profile."""
    return list(profile_of(cells(runs)).points)


def _sort_key(level: str) -> tuple[int, float, str]:
    try:
        return 0, float(level), level
    except ValueError:
        return 1, 0.0, level


METRIC = {envs.WORKFLOW: "success", "dacs": "accuracy over decisions"}


def confounded_words(c: Confounded) -> str:
    return (f"confounded: no two runs differ only in {c.factor} (its levels "
            f"{', '.join(c.levels)} each come with other factors changed), so no rate by "
            f"{c.factor} is shown")


def profile_table(found: Profile) -> Table:
    rows: list[tuple[Any, ...]] = []
    for p in sorted(found.points, key=lambda p: (p.family, p.factor, p.policy, p.within,
                                                 _sort_key(p.level))):
        (wl, wh), (cl, ch) = p.intervals()
        within = " | ".join(p.strata) if 1 < len(p.strata) <= 3 else p.within or "-"
        rows.append((p.family, METRIC.get(p.family, "rate"), p.factor, p.policy, p.level,
                     f"{p.hits}/{p.trials}", f"{p.hits / p.trials:.3f}",
                     f"[{wl:.3f}, {wh:.3f}]", f"[{cl:.3f}, {ch:.3f}]", within))
    for c in found.confounded:
        rows.append((c.family, METRIC.get(c.family, "rate"), c.factor, c.policy, "-", "-",
                     "-", "-", "-", confounded_words(c)))
    rows.sort(key=lambda r: (r[0], r[2], r[3]))
    left = "".join(f" {n} run(s) of {policy} with no partner differing only in {factor} are "
                   f"left out of its rows." for (_, policy, factor), n
                   in sorted(found.left_out.items()) if (factor, policy) not in
                   {(c.factor, c.policy) for c in found.confounded})
    return Table("Rate per factor level, like with like",
                 ("family", "metric", "factor", "policy", "level", "hits/trials", "rate",
                  "Wilson 95%", "Clopper-Pearson 95%", "compared within"), tuple(rows),
                 note="A factor's levels are compared only between runs that agree in every "
                      "other factor the log varies ('compared within'); a factor with no such "
                      "pair is confounded and has no rates (docs/REPORT.md, Like with like)."
                      + left)


def _panel_series(found: Profile, family: str, factor: str) -> list[tuple[str, str]]:
    """The (policy, within) series a panel draws: per policy the largest first, MAX_SERIES in
    all."""
    here = [p for p in found.points if (p.family, p.factor) == (family, factor)]
    series = sorted({(p.policy, p.within) for p in here},
                    key=lambda s: (s[0], -sum(p.trials for p in here
                                              if (p.policy, p.within) == s), s[1]))
    return series[:MAX_SERIES]


def profile_png(found: Profile) -> bytes | None:
    """One panel per (family, factor): each series' rate per level with Wilson 95% bars, in
    the policy's colour and marker of every diagym figure (analysis/plotting.py), the points
    of one series joined; a confounded factor's panel says so and draws no rate."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    from diagym.analysis.plotting import colour, legend_outside, percent_axis, style

    panels = found.panels()[:MAX_FACTORS]
    if not panels:
        return None
    drawn = {panel: _panel_series(found, *panel) for panel in panels}
    # a panel whose series are not one per policy over every run names them under its axes
    named = {panel: any(within not in ("", "every run") for _, within in series)
             for panel, series in drawn.items()}
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    extra = [max((1.1 if named[panel] else 0.0) for panel in panels[r * columns:][:columns])
             for r in range(rows)]
    figure = MplFigure(figsize=(3.8 * columns, 3.0 * rows + sum(extra)), dpi=100)
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(rows, columns, k + 1) for k in range(len(panels))]
    dashes = ("-", "--", ":", "-.")
    for ax, (family, factor) in zip(axes, panels, strict=True):
        here = [p for p in found.points if (p.family, p.factor) == (family, factor)]
        percent_axis(ax, f"{METRIC.get(family, 'rate')} (%)")
        ax.set_xlabel(factor, fontsize=8)
        ax.set_title(f"{family}: by {factor}", fontsize=8)
        if not here:
            ax.set_xticks([])
            ax.text(0.5, 0.5, f"confounded:\nno two runs differ\nonly in {factor};\n"
                    "no rate drawn", transform=ax.transAxes, ha="center", va="center",
                    fontsize=8, color="#8a4b00")
            continue
        levels = sorted({p.level for p in here}, key=_sort_key)
        series = drawn[(family, factor)]
        width = 0.6 / max(1, len(series))
        for i, (policy, within) in enumerate(series):
            mine = sorted((p for p in here if (p.policy, p.within) == (policy, within)),
                          key=lambda p: _sort_key(p.level))
            x = np.array([levels.index(p.level) for p in mine]) + (
                i - (len(series) - 1) / 2) * width
            rate = 100 * np.array([p.hits / p.trials for p in mine])
            bands = 100 * np.array([p.intervals()[0] for p in mine])
            yerr = np.clip([rate - bands[:, 0], bands[:, 1] - rate], 0.0, None)
            label = policy if len(policy) <= 40 else policy[:37] + "..."
            if named[(family, factor)]:
                label = textwrap.fill(f"{label} at {within}", 58)
            ax.errorbar(x, rate, yerr=yerr, fmt=style(policy)["marker"], color=colour(policy),
                        capsize=3, markersize=5, linewidth=1, label=label,
                        linestyle="none" if factor == RUN else dashes[i % len(dashes)])
        rotate = factor == RUN or len(levels) > 4
        ax.set_xticks(range(len(levels)),
                      [level if len(level) <= 18 else level[:15] + "..." for level in levels],
                      rotation=30 if rotate else 0, ha="right" if rotate else "center",
                      fontsize=7)
        ax.set_xlim(-0.6, len(levels) - 0.4)
        if named[(family, factor)]:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=6,
                      frameon=False, handlelength=2.5)
    figure.tight_layout()
    plain = [ax for ax, panel in zip(axes, panels, strict=True)
             if not named[panel] and ax.get_legend_handles_labels()[1]]
    if plain:
        # the panel with the most policies carries the legend (two families have two sets)
        legend_outside(figure, max(plain, key=lambda a: len(a.get_legend_handles_labels()[1])),
                       title="policy")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", pad_inches=0.1)
    return buffer.getvalue()


def profile(runs: Sequence[LogRun]) -> tuple[Table, Figure] | None:
    """The profile's table and figure, None when no run has a rate or only one does: a single
    run's rate is one dot, which the run summary already gives with its interval."""
    found = profile_of(cells(runs))
    if len(found.points) <= 1 and not found.confounded:
        return None
    png = profile_png(found)
    if png is None:
        return None
    return profile_table(found), Figure(
        "Headline rate per factor level, like with like", png,
        note="Points: the rate of runs that differ only in the panel's factor (joined per "
             "series); bars: Wilson 95% intervals (Clopper-Pearson in the table). A "
             "confounded factor's panel draws no rate.")
