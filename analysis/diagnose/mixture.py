"""Two-component per-episode mixtures: an agent that plays one mechanism on some episodes and
another on the rest (exact on half, cache-1 on the other half) is no single hypothesis, and
the single best fit names a mechanism in between.

Each episode is drawn from component a with probability w and from b otherwise, so the
outcome distribution on a configuration is w p_a + (1 - w) p_b of the two components'
simulated tables (likelihood.lapse_log_p), and the agent's log-likelihood is
sum over configurations and outcomes of n log(w p_a + (1 - w) p_b). The search is a grid:
every pair of distinct mechanisms at epsilon 0 (neither component need fit alone: exact
explains none of an exact/cache-1 agent's failures, cache-1 few of its successes, so both rank
low on their own), at every weight of WEIGHTS; the likelihood is concave in w, so the grid's
best is within half a step of the pair's maximum.
Components have no lapse: a lapse on a component trades against the weight (exact at 0.1
absorbs some of cache-1's failures), so the weights would stop saying how often each plays.

Penalised margin (BIC-like): the mixture adds two parameters to the single best hypothesis,
its weight and the choice of the second component, and the second component is picked among
`pairs` candidates. It is reported only when

    log L(mixture) - log L(single best) > log(n) + log(pairs),

n the episodes with an env outcome: the BIC penalty (k / 2) log n with k = 2 extra
parameters, plus the log of the number of pairs searched (the cost of taking the best of
them, a Bonferroni bound on the search). Otherwise the single best stands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.diagnose.fit_test import Component, Hypothesis
from analysis.diagnose.likelihood import Fit, MechanismModel, lapse_log_p

WEIGHTS = np.round(np.arange(0.01, 1.0, 0.01), 2)


@dataclass(frozen=True)
class Mixture:
    """The best two-component mixture, its gain over the single best and the margin it had
    to clear (module docstring)."""

    components: tuple[Component, Component]
    names: tuple[str, str]
    log_likelihood: float
    single_log_likelihood: float
    margin: float

    @property
    def gain(self) -> float:
        return self.log_likelihood - self.single_log_likelihood

    @property
    def reported(self) -> bool:
        return self.gain > self.margin

    @property
    def name(self) -> str:
        (a, b), (wa, wb) = self.names, (c.weight for c in self.components)
        return f"mixture of {a} ({wa:.0%}) and {b} ({wb:.0%}) per episode"

    def hypothesis(self) -> Hypothesis:
        return Hypothesis(self.name, self.components)

    def to_json(self) -> dict[str, Any]:
        return {"components": list(self.names),
                "weights": [round(c.weight, 4) for c in self.components],
                "log_likelihood": round(self.log_likelihood, 3),
                "gain_over_single": round(self.gain, 3), "margin": round(self.margin, 3)}


def margin(episodes: int, pairs: int) -> float:
    """The log-likelihood gain a mixture must exceed: log(n) + log(pairs)."""
    return math.log(max(episodes, 1)) + math.log(max(pairs, 1))


def _label(model: MechanismModel, index: int, epsilon: float) -> str:
    name = model.mechanisms[index].name
    return f"{name}@{epsilon:g}" if epsilon else name


def best_mixture(model: MechanismModel, agent_counts: Sequence[np.ndarray],
                 ranked: Sequence[Fit]) -> Mixture | None:
    """The best two-component mixture over the candidates (module docstring), None without
    episodes or with fewer than two candidates."""
    counts = [np.asarray(c, dtype=np.float64) for c in agent_counts]
    episodes = int(sum(c.sum() for c in counts))
    if episodes == 0 or not ranked:
        return None
    candidates = [(i, 0.0) for i in range(len(model.mechanisms))]
    if len(candidates) < 2:
        return None
    cells = [np.flatnonzero(c) for c in counts]
    n = np.concatenate([c[k] for c, k in zip(counts, cells, strict=True)])
    p = np.stack([np.exp(np.concatenate([lp[k] for lp, k in zip(
        lapse_log_p(model, i, e), cells, strict=True)])) for i, e in candidates])
    w = WEIGHTS[:, None, None]
    best = (-math.inf, 0, 0, 0.0)
    for a in range(len(candidates) - 1):
        mixed = w * p[a][None, None, :] + (1 - w) * p[None, a + 1:, :]
        ll = np.log(mixed) @ n  # (weights, later candidates)
        at = np.unravel_index(int(np.argmax(ll)), ll.shape)
        if ll[at] > best[0]:
            best = (float(ll[at]), a, a + 1 + int(at[1]), float(WEIGHTS[at[0]]))
    ll, a, b, weight = best
    pairs = len(candidates) * (len(candidates) - 1) // 2
    (ia, ea), (ib, eb) = candidates[a], candidates[b]
    first, second = (Component(ia, ea, weight), Component(ib, eb, round(1 - weight, 2)))
    names = (_label(model, ia, ea), _label(model, ib, eb))
    if second.weight > first.weight:
        first, second, names = second, first, names[::-1]
    return Mixture((first, second), names, ll, ranked[0].log_likelihood,
                   margin(episodes, pairs))


def single_verdicts(found: dict[str, str], mixture: Mixture, single: str) -> dict[str, str]:
    """Component verdicts (about the single best) worded as what they would be if the agent
    were that one mechanism, when a reported mixture explains it better."""
    out = {}
    for component, text in found.items():
        head, _, body = text.partition(": ")
        out[component] = f"{head}: if it were one mechanism ({single}; the outcomes are a " \
                         f"{mixture.name}): {body}"
    return out
