"""The one episode summary: every per-run metric that `diagym run`, the studies, training
and the reports show is computed here, from one definition each.

Why columns: a run of a reference controller can be millions of episodes, so the summary reads
`controllers.episodes.Episodes` (numpy arrays, one entry per episode) and never builds a
Python object per episode on the workflow path; a list of EpisodeRecord is converted once.
Metrics that only some envs or policies report appear only where every episode has them:
DACSSteering's steering metrics (per-episode env metrics) and a chat model's call counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.stats import wilson_interval
from controllers.episodes import Episodes
from controllers.policy import EpisodeRecord


@dataclass(frozen=True)
class Steering:
    """DACSSteering's steering metrics over every decision of the run.

    Accuracy and contamination are episode rates weighted by the episode's decisions, i.e.
    rates over all decisions, so long episodes count as much as their decisions do; window
    tokens are pooled over decisions the same way."""

    decisions: int
    accuracy: float
    contamination: float
    mean_tokens: float
    p95_tokens: float


@dataclass(frozen=True)
class ModelCalls:
    """A chat model policy's counters (llm_policies.policy.COUNTER_KEYS) over the run.

    Rates are over decisions the model answered; None when it answered none."""

    decisions: int
    schema_valid_rate: float | None
    mean_decision_latency_s: float | None
    median_episode_latency_s: float


@dataclass(frozen=True)
class Summary:
    episodes: int
    successes: int
    success: float
    success_ci: tuple[float, float]  # Wilson 95%
    mean_completed: float
    mean_calls: float
    mean_return: float
    failures: dict[str, int]  # first failure by category, sorted by name; no "none" entry
    steering: Steering | None = None  # when every episode reports steering metrics
    model_calls: ModelCalls | None = None  # when every episode has a chat model's counters

    def to_json(self) -> dict[str, Any]:
        """The `diagym run --json` object."""
        out: dict[str, Any] = {
            "episodes": self.episodes,
            "success": self.success,
            "success_ci": list(self.success_ci),
            "mean_completed": self.mean_completed,
            "mean_calls": self.mean_calls,
            "failures": dict(self.failures),
        }
        if self.steering is not None:
            out.update(accuracy=self.steering.accuracy,
                       contamination=self.steering.contamination,
                       mean_tokens=self.steering.mean_tokens,
                       p95_tokens=self.steering.p95_tokens)
        return out


def summarise(episodes: Episodes | Sequence[EpisodeRecord]) -> Summary:
    """The summary of a run's episodes (an Episodes, or any sequence of EpisodeRecord)."""
    runs = Episodes.from_records(episodes)
    n = len(runs)
    if n == 0:
        raise ValueError("episodes: a summary needs at least one episode; got 0")
    c = runs.columns
    wins = int(np.count_nonzero(c["success"]))
    low, high = wilson_interval(wins, n)
    return Summary(
        episodes=n,
        successes=wins,
        success=wins / n,
        success_ci=(float(low), float(high)),
        mean_completed=float(np.mean(c["completed"])),
        mean_calls=float(np.mean(c["calls"])),
        mean_return=float(np.mean(c["episode_return"])),
        failures=failure_counts(c["first_failure"]),
        steering=steering(runs.metrics),
        model_calls=model_calls(runs.counters),
    )


def failure_counts(first_failure: np.ndarray) -> dict[str, int]:
    """Category -> episodes whose first failure it was, from the first_failure column
    (str or None per episode), sorted by category. Counter counts in C over the column's
    objects (about 0.1 s for 4M episodes, several times faster than np.unique on strings)."""
    counts = Counter(first_failure.tolist())
    counts.pop(None, None)
    return {str(name): int(counts[name]) for name in sorted(counts)}


def steering(metrics: Sequence[dict[str, Any]]) -> Steering | None:
    """Steering metrics when every episode has env metrics (DACSSteering), else None; the
    check stops at the first episode without them, so a workflow run costs one look."""
    if not metrics or not all(metrics):
        return None
    tokens = [np.asarray(m["window_tokens"], dtype=np.float64) for m in metrics]
    decisions = np.array([t.size for t in tokens])
    pooled = np.concatenate(tokens)
    return Steering(
        decisions=int(decisions.sum()),
        accuracy=float(np.average([m["accuracy"] for m in metrics], weights=decisions)),
        contamination=float(np.average([m["contamination"] for m in metrics],
                                       weights=decisions)),
        mean_tokens=float(pooled.mean()),
        p95_tokens=float(np.percentile(pooled, 95)),
    )


def model_calls(counters: dict[str, np.ndarray]) -> ModelCalls | None:
    """A chat model's call metrics when every episode counted its decisions, else None."""
    if "decisions" not in counters or not len(counters["decisions"]):
        return None
    decisions = int(np.sum(counters["decisions"]))
    valid = float(np.sum(counters.get("schema_valid", 0)))
    latency = counters.get("latency_s", np.zeros(len(counters["decisions"])))
    return ModelCalls(
        decisions=decisions,
        schema_valid_rate=valid / decisions if decisions else None,
        mean_decision_latency_s=float(np.sum(latency)) / decisions if decisions else None,
        median_episode_latency_s=float(np.median(latency)),
    )


def format_summary(summary: Summary) -> str:
    """The `diagym run` lines: success with its interval, work, first failures and, for
    DACSSteering, the steering metrics."""
    low, high = summary.success_ci
    failures = ", ".join(f"{k} {v}" for k, v in summary.failures.items()) or "none"
    lines = [
        f"success         {100 * summary.success:.2f}%  "
        f"(Wilson 95% [{100 * low:.2f}, {100 * high:.2f}])",
        f"mean completed  {summary.mean_completed:.2f}",
        f"mean calls      {summary.mean_calls:.2f}",
        f"first failures  {failures}",
    ]
    s = summary.steering
    if s is not None:
        lines.append(f"accuracy        {s.accuracy:.3f}   contamination {s.contamination:.3f}   "
                     f"window tokens mean {s.mean_tokens:.0f}, p95 {s.p95_tokens:.0f}")
    return "\n".join(lines)
