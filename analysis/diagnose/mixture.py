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

The search (`best_pair`) and the margin are the rule of both env families: DACSSteering
(analysis/diagnose/dacs/mixture.py) weighs pairs of its readers with it, a cell per episode
(the episode's likelihood under each reader) where the workflow has a cell per outcome.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym.analysis.diagnose.fit_test import Component, Hypothesis
from diagym.analysis.diagnose.likelihood import Fit, MechanismModel, lapse_log_p

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


def best_pair(log_p: np.ndarray, n: np.ndarray, groups: Sequence[int] | None = None
              ) -> tuple[float, int, int, float]:
    """The best two-component mixture of the candidates' rows of `log_p` (candidates x
    cells, each cell's log probability under each candidate; a cell is an outcome counted
    n[cell] times, or an episode counted once): (its log-likelihood, a, b, the weight of a)
    over every pair a < b and every weight of WEIGHTS, skipping pairs in the same `groups`
    entry. The rule of both env families (module docstring); a cell's probabilities are
    scaled by their largest before mixing, so an episode's small likelihood does not
    underflow."""
    log_p = np.asarray(log_p, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        shift = np.max(log_p, axis=0)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    p = np.exp(log_p - shift[None, :])
    base = float(shift @ n)
    w = WEIGHTS[:, None, None]
    best = (-math.inf, 0, 0, 0.0)
    for a in range(len(p) - 1):
        mixed = w * p[a][None, None, :] + (1 - w) * p[None, a + 1:, :]
        with np.errstate(divide="ignore"):
            ll = np.log(mixed) @ n + base  # (weights, later candidates)
        if groups is not None:
            ll[:, np.asarray(groups[a + 1:]) == groups[a]] = -math.inf
        at = np.unravel_index(int(np.argmax(ll)), ll.shape)
        if ll[at] > best[0]:
            best = (float(ll[at]), a, a + 1 + int(at[1]), float(WEIGHTS[at[0]]))
    return best


def pairs_searched(groups: Sequence[int]) -> int:
    """How many pairs best_pair weighs: those of candidates in different groups."""
    sizes = np.bincount(np.asarray(groups, dtype=np.int64))
    total = len(groups)
    return int((total * total - int((sizes * sizes).sum())) // 2)


def mixture_of(candidates: Sequence[tuple[int, float]], names: Sequence[str],
               log_p: np.ndarray, n: np.ndarray, single_log_likelihood: float,
               episodes: int, groups: Sequence[int] | None = None) -> Mixture | None:
    """The best mixture of `candidates` ((index, epsilon) each, named `names`), the heavier
    component first, with the margin of its search over the pairs weighed (best_pair); None
    with fewer than two candidates or no pair to weigh."""
    groups = list(range(len(candidates))) if groups is None else list(groups)
    pairs = pairs_searched(groups)
    if len(candidates) < 2 or pairs == 0:
        return None
    ll, a, b, weight = best_pair(log_p, n, groups)
    (ia, ea), (ib, eb) = candidates[a], candidates[b]
    first, second = Component(ia, ea, weight), Component(ib, eb, round(1 - weight, 2))
    pair = (names[a], names[b])
    if second.weight > first.weight:
        first, second, pair = second, first, pair[::-1]
    return Mixture((first, second), pair, ll, single_log_likelihood, margin(episodes, pairs))


def best_mixture(model: MechanismModel, agent_counts: Sequence[np.ndarray],
                 ranked: Sequence[Fit]) -> Mixture | None:
    """The best two-component mixture over the candidates (module docstring), None without
    episodes or with fewer than two candidates."""
    counts = [np.asarray(c, dtype=np.float64) for c in agent_counts]
    episodes = int(sum(c.sum() for c in counts))
    if episodes == 0 or not ranked:
        return None
    candidates = [(i, 0.0) for i in range(len(model.mechanisms))]
    cells = [np.flatnonzero(c) for c in counts]
    n = np.concatenate([c[k] for c, k in zip(counts, cells, strict=True)])
    log_p = np.stack([np.concatenate([lp[k] for lp, k in zip(
        lapse_log_p(model, i, e), cells, strict=True)]) for i, e in candidates])
    return mixture_of(candidates, [_label(model, i, e) for i, e in candidates], log_p, n,
                      ranked[0].log_likelihood, episodes)


def single_verdicts(found: dict[str, str], mixture: Mixture, single: str) -> dict[str, str]:
    """Component verdicts (about the single best) worded as what they would be if the agent
    were that one mechanism, when a reported mixture explains it better."""
    out = {}
    for component, text in found.items():
        head, _, body = text.partition(": ")
        out[component] = f"{head}: if it were one mechanism ({single}; the outcomes are a " \
                         f"{mixture.name}): {body}"
    return out
