"""Two-component per-episode mixtures of DACS readers: an orchestrator that reads as one
reader on some episodes and as another on the rest is no single (reader, copy rate, lapse),
and the single best names a copy rate in between (a per-episode mixture of dacs-reader and
flat-recency looks like copying in a configuration's totals).

The rule is the workflow diagnosis's (analysis/diagnose/mixture.py `mixture_of`): each
episode is drawn from component a with probability w and from b otherwise, so the agent's
log-likelihood is sum over episodes of log(w L_a(e) + (1 - w) L_b(e)), L_r(e) the episode's
likelihood under the component (the product over its answers of the reader's lapse-mixed
choice probability, fit.lapse_log_likelihood's terms); the same grid of weights, the
same penalised margin log(n) + log(pairs), n the episodes with an answer. The candidates are
every distinct reader (fit.fit_readers' fits, aliases merged) at each lapse of
MIXTURE_EPSILONS, paired only with another reader. Unlike the workflow's components, a DACS
component carries a lapse: a deterministic reader gives an answer off its rule probability 0,
so at lapse 0 one slip would shut a component out of an episode, and a lapse here is per
answer, so it cannot stand in for the other reader's whole episode (the trade that keeps the
workflow's components at lapse 0). The pairs weighed count every lapse tried, so the margin
pays for them. Components copy nothing: copying is per answer, the single best's own trait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym.analysis.diagnose.dacs.fit import (
    DacsHypothesis,
    ReaderFit,
    choice_probabilities,
    chosen_log_likelihood,
    episode_ids,
    option_counts,
)
from diagym.analysis.diagnose.dacs.replay import DacsDecision
from diagym.analysis.diagnose.mixture import Mixture, mixture_of

MIXTURE_EPSILONS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)


@dataclass(frozen=True)
class DacsMixture:
    """A reported mixture as the fit test plays it: each component a DacsHypothesis with its
    weight."""

    name: str
    components: tuple[tuple[float, DacsHypothesis], ...]

    def parts(self) -> tuple[tuple[float, DacsHypothesis], ...]:
        return self.components

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name,
                "components": [{**h.to_json(), "weight": w} for w, h in self.components]}


def best_mixture(decisions: Sequence[DacsDecision], fits: Sequence[ReaderFit],
                 single: DacsHypothesis, episodes: int) -> Mixture | None:
    """The best two-reader mixture against the single best hypothesis `single` (module
    docstring); None with fewer than two distinct readers or no answer."""
    if len(fits) < 2 or not decisions:
        return None
    episode = episode_ids(decisions)
    options = option_counts(decisions)
    candidates, names, groups, rows = [], [], [], []
    for g, fitted in enumerate(fits):
        p = choice_probabilities(decisions, fitted.name)
        for epsilon in MIXTURE_EPSILONS:
            with np.errstate(divide="ignore"):
                terms = np.log((1.0 - epsilon) * p + epsilon / options)
            candidates.append((g, epsilon))
            names.append(DacsHypothesis(fitted.name, 0.0, epsilon).name)
            groups.append(g)
            rows.append(np.bincount(episode, weights=terms))
    return mixture_of(candidates, names, np.stack(rows), np.ones(len(rows[0])),
                      chosen_log_likelihood(decisions, single), episodes, groups)


def as_hypothesis(mixture: Mixture, fits: Sequence[ReaderFit]) -> DacsMixture:
    """The mixture's components as the readers they name."""
    return DacsMixture(mixture.name, tuple(
        (c.weight, DacsHypothesis(fits[c.index].name, 0.0, c.epsilon))
        for c in mixture.components))
