"""The whole-run estimate printed before a local model's run: its episodes, times the
decisions an episode takes, times the seconds a decision takes at the speed measured at start,
so a run of hours is seen as one before it is spent (run, diagnose and llm-study alike)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunPlan:
    """What a run will play: its episodes and their decisions in all, if none fails (every
    call a success, no focus action) and at most (the params' episode_decisions); `each`
    is the most decisions of one episode when every episode has the same bounds, else None."""

    episodes: int
    decisions: int
    most: int
    each: tuple[int, int] | None


def run_plan(groups: Iterable[tuple[int, Any]]) -> RunPlan | None:
    """The RunPlan of (episodes, env params) groups; None when a group's env has no params
    (an env of no diagym family), whose decisions are unknown."""
    episodes = decisions = most = 0
    bounds = set()
    for count, params in groups:
        if params is None:
            return None
        typical, highest = params.episode_decisions()
        episodes += count
        decisions += count * typical
        most += count * highest
        bounds.add((typical, highest))
    return RunPlan(episodes, decisions, most, bounds.pop() if len(bounds) == 1 else None)


def duration(seconds: float) -> str:
    """Seconds as a person reads a wait: s under 90 s, min under 90 min, else h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def whole_run_estimate(decision_s: float, plan: RunPlan, invalid_retries: int = 0) -> str:
    """One line: the seconds of a decision, the run's episodes and decisions, and the time
    they take, when no call fails and at most (each decision taken at `decision_s`, the cold
    figure, so the prefix cache's warm decisions make it an upper end)."""
    if plan.each is not None:
        typical, most = plan.each
        counted = f"{plan.episodes:,} episodes of up to {most:,} decisions"
        if typical != most:
            counted += f" ({typical:,} when none fails)"
    else:
        counted = f"{plan.episodes:,} episodes of up to {plan.most:,} decisions in all"
        if plan.decisions != plan.most:
            counted += f" ({plan.decisions:,} when none fails)"
    took = f"up to {duration(plan.most * decision_s)}"
    if plan.decisions != plan.most:
        took = f"about {duration(plan.decisions * decision_s)} when none fails, {took}"
    re_asks = (f"; each of up to {invalid_retries} re-asks after an invalid reply adds a call"
               if invalid_retries else "")
    return f"estimate: about {decision_s:.0f} s a decision; {counted}: {took}{re_asks}"
