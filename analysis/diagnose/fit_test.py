"""The absolute fit test and the forecasts of a StatefulWorkflow diagnosis: the fitted
hypothesis replayed on fresh task seeds.

A hypothesis here is what the diagnosis settled on: one distinct mechanism at its fitted lapse
rate, or a mixture of such components per episode (each episode drawn from component i with
probability weights[i]). Its outcome distribution on a battery configuration is the model's
simulated table (likelihood.lapse_log_p; a mixture mixes the probabilities).

Fit test (honesty.py for the rule): the statistic is the G-squared of the agent's outcome
counts against the hypothesis's tables, summed over configurations. Each of REPLICATES
replicates plays the hypothesis on the agent's own per-configuration episode counts, on task
seeds from FIT_SEED on (disjoint from the agent's, below likelihood.SIMULATION_SEED, and from
the tables' own simulation seeds, so a replicate differs from the table by sampling exactly as
the agent's episodes do), and is scored with the same tables. The test is two-sided (an agent
whose counts match the tables better than sampling allows is too consistent for the
hypothesis); a configuration is "outside" when the agent's G-squared there is beyond its
replicates' 95% band on the side the total lies (honesty.FitTest.of_replicates).

Forecast: the agent's success on a configuration it never played, as the hypothesis's success
there (simulated on FORECAST_SIMULATIONS seeds from FORECAST_SEED), with an interval spanning
every hypothesis the data do not reject (the fits within INTERVAL_LOG_UNITS of the best, and
the best at both ends of its lapse interval), widened by their simulation error.

Support: a forecast is only as good as the configurations it generalises from. Every knob of
WorkflowParams has a support, the values the played configurations took: for an integer knob
(N, depth, width, b, snapshot period, R) the range from their least to their greatest value,
for the others (graph family, hidden resampling, locality, updates, labels) the values
themselves. A forecast whose kwargs take a knob outside its support names each such knob,
its value and the battery's values, and is marked extrapolated (`Forecast.extrapolated`, in
its JSON and its words): the hypotheses' rules say what they do there, but nothing the agent
did there was seen, so an agent whose way changes with that knob is not caught (an agent
right on every chain can fail on barriers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from diagym.analysis.diagnose.honesty import (
    INTERVAL_LOG_UNITS,
    FitTest,
    g_squared,
    replicate_counts,
)
from diagym.analysis.diagnose.likelihood import (
    Fit,
    MechanismModel,
    lapse_log_p,
    outcome_count,
    simulate_codes,
    with_lapse,
)
from diagym.envs.workflow.params import WorkflowParams

REPLICATES = 400
FIT_SEED = 5 * 10**9
FORECAST_SEED = 6 * 10**9
FORECAST_SIMULATIONS = 4096
# Task seeds of one configuration's replicates start this far apart.
SEED_STRIDE = 10**8


@dataclass(frozen=True)
class Component:
    """A distinct mechanism of the model (by index) at a lapse rate, with its weight."""

    index: int
    epsilon: float
    weight: float = 1.0


@dataclass(frozen=True)
class Hypothesis:
    """What the diagnosis settled on: one component, or a per-episode mixture."""

    name: str
    components: tuple[Component, ...]

    @classmethod
    def of_fit(cls, model: MechanismModel, fitted: Fit) -> Hypothesis:
        index = model.index[fitted.mechanism.name]
        name = fitted.mechanism.name + (f"@{fitted.epsilon:g}" if fitted.epsilon else "")
        return cls(name, (Component(index, fitted.epsilon),))


def tables(model: MechanismModel, hypothesis: Hypothesis) -> tuple[np.ndarray, ...]:
    """The hypothesis's log outcome distribution per battery configuration."""
    parts = [(c.weight, lapse_log_p(model, c.index, c.epsilon)) for c in hypothesis.components]
    if len(parts) == 1:
        return parts[0][1]
    return tuple(np.log(sum(w * np.exp(log_p[c]) for w, log_p in parts))
                 for c in range(len(model.battery)))


def _play_codes(model: MechanismModel, hypothesis: Hypothesis, spec: WorkflowParams,
                seeds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Outcome codes of the hypothesis on `seeds` of `spec`: each episode from one component,
    drawn by weight (every component plays every seed, common random numbers)."""
    codes = [simulate_codes(spec, with_lapse(model.mechanisms[c.index].row, c.epsilon), seeds)
             for c in hypothesis.components]
    if len(codes) == 1:
        return codes[0]
    weights = np.array([c.weight for c in hypothesis.components])
    pick = rng.choice(len(codes), size=seeds.shape[0], p=weights / weights.sum())
    return np.choose(pick, codes)


def fit_test(model: MechanismModel, agent_counts: Sequence[np.ndarray], hypothesis: Hypothesis,
             labels: Sequence[str], replicates: int = REPLICATES,
             two_sided: bool = True) -> FitTest | None:
    """The parametric-bootstrap fit test (module docstring; two_sided False: the upper tail
    alone); None without any episode."""
    counts = [np.asarray(c, dtype=np.int64) for c in agent_counts]
    if sum(int(c.sum()) for c in counts) == 0:
        return None
    log_p = tables(model, hypothesis)
    rng = np.random.default_rng(FIT_SEED)
    observed = np.zeros(len(counts))
    replicated = np.zeros((replicates, len(counts)))
    for c, (spec, n) in enumerate(zip(model.battery, counts, strict=True)):
        episodes = int(n.sum())
        if episodes == 0:
            continue
        observed[c] = float(g_squared(n, log_p[c]))
        seeds = FIT_SEED + c * SEED_STRIDE + np.arange(episodes * replicates, dtype=np.int64)
        codes = _play_codes(model, hypothesis, spec, seeds, rng).reshape(replicates, episodes)
        replicated[:, c] = g_squared(replicate_counts(codes, outcome_count(spec)), log_p[c])
    played = [c for c in range(len(counts)) if counts[c].sum()]
    return FitTest.of_replicates(hypothesis.name, observed[played], replicated[:, played],
                                 [labels[c] for c in played], two_sided)


def support(played: Sequence[WorkflowParams]) -> dict[str, tuple[Any, ...]]:
    """Per knob, the values the played configurations took (sorted; module docstring)."""
    values: dict[str, set[Any]] = {}
    for spec in played:
        for knob, value in spec.as_dict().items():
            values.setdefault(knob, set()).add(value)
    return {knob: tuple(sorted(found, key=repr if not _ranged(found) else None))
            for knob, found in values.items()}


def _ranged(values: Any) -> bool:
    """Whether a knob's values are integers (not booleans): a knob supported on a range."""
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def outside_support(spec: WorkflowParams, played: Sequence[WorkflowParams]
                    ) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """The knobs of `spec` outside the support of `played`: knob -> (its value, the values
    played)."""
    out = {}
    wanted = spec.as_dict()
    for knob, values in support(played).items():
        value = wanted[knob]
        inside = (values[0] <= value <= values[-1]) if _ranged((value, *values)) \
            else value in values
        if not inside:
            out[knob] = (value, values)
    return out


@dataclass(frozen=True)
class Forecast:
    """Predicted success on `kwargs`, with the interval over the unrejected hypotheses, and
    the knobs it takes outside the battery's support (knob -> (value, values played))."""

    kwargs: dict[str, Any]
    success: float
    interval: tuple[float, float]
    conditional: bool = False
    extrapolated: dict[str, tuple[Any, tuple[Any, ...]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kwargs": self.kwargs, "success": round(self.success, 4),
                "interval": [round(self.interval[0], 4), round(self.interval[1], 4)],
                "conditional": self.conditional, "in_support": not self.extrapolated,
                "extrapolated": {knob: {"value": value, "battery": list(values)}
                                 for knob, (value, values) in self.extrapolated.items()}}

    def note(self) -> str:
        """What the forecast is conditional on, in words: '' for an in-support forecast of a
        fitting hypothesis, else ' (if the closest hypothesis held; extrapolated: family
        barriers where the battery played chains)'."""
        parts = ["if the closest hypothesis held"] if self.conditional else []
        if self.extrapolated:
            parts.append("extrapolated: " + ", ".join(
                f"{knob} {value} where the battery played {_values_words(values)}"
                for knob, (value, values) in self.extrapolated.items()))
        return f" ({'; '.join(parts)})" if parts else ""


def _values_words(values: tuple[Any, ...]) -> str:
    if _ranged(values) and len(values) > 1:
        return f"{values[0]}..{values[-1]}"
    return " or ".join(str(v) for v in values)


def success_rate(model: MechanismModel, hypothesis: Hypothesis, spec: WorkflowParams,
                 simulations: int = FORECAST_SIMULATIONS) -> float:
    seeds = FORECAST_SEED + np.arange(simulations, dtype=np.int64)
    codes = _play_codes(model, hypothesis, spec, seeds, np.random.default_rng(FORECAST_SEED))
    completed = (codes // (spec.error_allowance + 2)) % (spec.n_ops + 1)
    return float(np.mean(completed == spec.n_ops))


def plausible(model: MechanismModel, ranked: Sequence[Fit]) -> list[Hypothesis]:
    """The hypotheses the data do not reject: fits within INTERVAL_LOG_UNITS of the best, and
    the best at the ends of its lapse interval."""
    best = ranked[0]
    out = [Hypothesis.of_fit(model, f) for f in ranked
           if f.log_lr_to_best >= -INTERVAL_LOG_UNITS]
    if best.epsilon_interval is not None:
        index = model.index[best.mechanism.name]
        for end in best.epsilon_interval:
            epsilon = round(float(end), 4)
            out.append(Hypothesis(f"{best.mechanism.name}@{epsilon:g}",
                                  (Component(index, epsilon),)))
    return out


def forecast(model: MechanismModel, best: Hypothesis, alternatives: Sequence[Hypothesis],
             kwargs: dict[str, Any], conditional: bool = False,
             played: Sequence[WorkflowParams] | None = None) -> Forecast:
    """The forecast on gym.make kwargs `kwargs` (ValueError naming a bad parameter), marked
    extrapolated on the knobs outside the support of `played` (default: the model's
    battery)."""
    spec = WorkflowParams.from_kwargs(**kwargs)
    point = success_rate(model, best, spec)
    rates = [point, *(success_rate(model, h, spec) for h in alternatives)]
    noise = [1.96 * np.sqrt(max(r * (1 - r), 0.25 / FORECAST_SIMULATIONS) / FORECAST_SIMULATIONS)
             for r in rates]
    low = max(0.0, min(r - e for r, e in zip(rates, noise, strict=True)))
    high = min(1.0, max(r + e for r, e in zip(rates, noise, strict=True)))
    return Forecast(spec.as_dict(), point, (low, high), conditional,
                    outside_support(spec, model.battery if played is None else played))
