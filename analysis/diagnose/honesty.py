"""What keeps a diagnosis honest, for both env families: an absolute fit test, the headline
that says when no hypothesis explains the agent, verdicts made conditional on a rejected fit,
intervals from a profile likelihood, attribution set against what guessing would give, and
words capped by the evidence.

A ranking of hypotheses says which one is least bad; it cannot say that the best is good. The
fit test does: replicate the best hypothesis (its mechanism at its lapse rate) with the
agent's own episode counts, score every replicate with the statistic the agent was scored
with, and report how far out in the replicates' distribution the agent's statistic lies, in
either tail (a two-sided parametric bootstrap, `two_sided_p_value`): an agent fitting worse
than the hypothesis's own replicates is outside it, and so is one fitting better than they do
(too consistent: a deterministic agent matched by a lapse's uniform choices can show less
spread than the lapse's random draws would). Below FIT_ALPHA the verdict is "outside the
family": the headline names the closest hypothesis and says that none explains the
outcomes, and each component verdict is worded as what it would be *if* the agent were that
hypothesis. The statistic is the family's own (G-squared of
outcome counts for StatefulWorkflow, analysis/diagnose/fit_test.py; DACS scores its answers
against the reader's choice distribution), the rule on it is this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.stats import binomtest, chi2

# Half the 95% quantile of chi2(1): parameter values this close to the best in log-likelihood
# form the likelihood-ratio interval (Wilks).
T = TypeVar("T")
INTERVAL_LOG_UNITS = float(chi2.ppf(0.95, 1) / 2)
FIT_ALPHA = 0.01
FITS, OUTSIDE = "fits", "outside the family"
# Fewer episodes with an env outcome than this, or fewer failures: a component verdict says
# there is too little evidence instead of naming a deficit.
MIN_OUTCOMES = 16
MIN_FAILURES = 8
# An attribution cause is called in excess of guessing when a one-sided binomial test of its
# count against the guessing rate is below this.
EXCESS_ALPHA = 0.01
# Points of the interpolated profile between a grid's ends.
FINE_POINTS = 4001


def g_squared(counts: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """The G-squared (deviance) of outcome counts against a distribution, along the last axis:
    2 sum n log(n / (N p)) over the outcomes with n > 0 (0 for no episodes)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(counts > 0, counts * (np.log(counts) - np.log(total) - log_p), 0.0)
    return 2.0 * terms.sum(axis=-1)


def replicate_counts(codes: np.ndarray, k: int) -> np.ndarray:
    """Per replicate (row of `codes`, replicates x episodes or answers, each a code below k)
    the count of each code (replicates x k): the table a replicate is scored with."""
    codes = np.asarray(codes, dtype=np.int64)
    replicates = codes.shape[0]
    flat = (np.arange(replicates)[:, None] * k + codes).ravel()
    return np.bincount(flat, minlength=replicates * k).reshape(replicates, k)


def bootstrap_p_value(observed: float, replicates: np.ndarray) -> float:
    """(1 + #replicates at least as extreme) / (1 + #replicates): never 0, so a p-value from R
    replicates is no smaller than 1 / (R + 1)."""
    replicates = np.asarray(replicates, dtype=np.float64)
    return float((1 + np.count_nonzero(replicates >= observed - 1e-9)) / (1 + replicates.size))


def two_sided_p_value(observed: float, replicates: np.ndarray) -> float:
    """Twice the smaller tail's bootstrap p-value (`bootstrap_p_value` of the statistic and of
    its negative), capped at 1: no smaller than 2 / (R + 1) from R replicates."""
    replicates = np.asarray(replicates, dtype=np.float64)
    upper = bootstrap_p_value(observed, replicates)
    lower = bootstrap_p_value(-observed, -replicates)
    return min(1.0, 2.0 * min(upper, lower))


@dataclass(frozen=True)
class FitTest:
    """The absolute fit of the best hypothesis: the agent's statistic, its two-sided bootstrap
    p-value over `replicates` replicates of that hypothesis, the replicates' median statistic
    (what a fitting agent shows), and the parts (configurations) outside their replicate band
    on the side the total lies (`of_replicates`)."""

    hypothesis: str
    statistic: float
    p_value: float
    replicates: int
    expected: float
    outside: tuple[str, ...] = ()
    two_sided: bool = True

    @property
    def verdict(self) -> str:
        return FITS if self.p_value >= FIT_ALPHA else OUTSIDE

    @property
    def rejected(self) -> bool:
        return self.verdict == OUTSIDE

    @property
    def too_consistent(self) -> bool:
        """The statistic is below the replicates' median: the agent varies less than the
        hypothesis would (a rejection on this side says it is too consistent for it)."""
        return self.statistic < self.expected

    def p_text(self) -> str:
        """'p = 0.43', or 'p < 0.005' at the resolution of the replicates (two-sided: 2 / (R +
        1)); a p-value read back from the JSON, rounded to 5 places, included."""
        floor = (2.0 if self.two_sided else 1.0) / (self.replicates + 1)
        if self.p_value <= floor + 5e-6:
            return f"p < {_round_up(floor * 1.0001)}"
        return f"p = {self.p_value:.2g}"

    @classmethod
    def of_replicates(cls, hypothesis: str, observed: np.ndarray, replicated: np.ndarray,
                      labels: Sequence[str], two_sided: bool = True) -> FitTest:
        """The test from the agent's statistic per part (`observed`, one per label) and each
        replicate's (`replicated`, replicates x parts): the total's two-sided bootstrap
        p-value, the replicates' median total, and the parts outside their own replicates on
        the side the total lies (above their 95% quantile, or below their 5% quantile when the
        total is below the median). With two_sided False, the upper tail alone (the adaptive
        design's stop: analysis/diagnose/adaptive.py says why)."""
        observed = np.asarray(observed, dtype=np.float64)
        replicated = np.asarray(replicated, dtype=np.float64)
        total = replicated.sum(axis=1)
        expected = float(np.median(total))
        if two_sided and float(observed.sum()) < expected:
            outside = tuple(label for c, label in enumerate(labels)
                            if observed[c] < np.quantile(replicated[:, c], 0.05))
        else:
            outside = tuple(label for c, label in enumerate(labels)
                            if observed[c] > np.quantile(replicated[:, c], 0.95))
        p_value = two_sided_p_value(float(observed.sum()), total) if two_sided else \
            bootstrap_p_value(float(observed.sum()), total)
        return cls(hypothesis, float(observed.sum()), p_value, int(replicated.shape[0]),
                   expected, outside, two_sided)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FitTest:
        """The test of a contract's `fit` entry (to_json), for a report written from JSON."""
        return cls(str(data["hypothesis"]), float(data["statistic"]), float(data["p_value"]),
                   int(data["replicates"]), float(data["expected_statistic"]),
                   tuple(data["outside"]), data.get("tails", "both") == "both")

    def to_json(self) -> dict[str, Any]:
        return {"hypothesis": self.hypothesis, "statistic": round(self.statistic, 3),
                "p_value": round(self.p_value, 5), "replicates": self.replicates,
                "expected_statistic": round(self.expected, 3), "outside": list(self.outside),
                "tails": "both" if self.two_sided else "upper", "verdict": self.verdict}


def _round_up(value: float) -> str:
    for digits in range(1, 6):
        text = f"{value:.{digits}f}"
        if float(text) >= value:
            return text.rstrip("0").rstrip(".")
    return f"{value:.2g}"


@dataclass(frozen=True)
class Evidence:
    """What the episodes can say: how many there were, how many the env ended (a success or
    the error budget spent: the only outcomes any hypothesis predicts), the invalid replies by
    category, and the failed calls the traces hold."""

    episodes: int
    with_outcome: int
    invalid: Mapping[str, int] = field(default_factory=dict)
    failures: int = 0

    @property
    def without_outcome(self) -> int:
        return self.episodes - self.with_outcome

    @property
    def nothing_to_fit(self) -> bool:
        return self.with_outcome == 0

    @property
    def too_little(self) -> bool:
        return self.with_outcome < MIN_OUTCOMES or self.failures < MIN_FAILURES

    def to_json(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "with_env_outcome": self.with_outcome,
                "without_env_outcome": self.without_outcome,
                "invalid_replies": dict(sorted(self.invalid.items())),
                "failed_calls": self.failures}


def headline(best: str | None, test: FitTest | None, evidence: Evidence,
             posterior_note: str = "", failures: Any = None) -> str:
    """One line: nothing to fit, the best hypothesis and that it fits, or that none does.
    `failures` (failure_check.FailureCheck, or None) is the check of the failed calls: an
    outcome fit it rejects reads "fits the outcomes, but not the failures" with the share
    that differs most."""
    if evidence.nothing_to_fit:
        return (f"{evidence.without_outcome} of {evidence.episodes} episodes ended on an invalid "
                "reply or without an env outcome; nothing to fit")
    partial = ("" if not evidence.without_outcome else
               f" ({evidence.without_outcome} of {evidence.episodes} episodes without an env "
               "outcome are no evidence)")
    if test is None:
        return f"best hypothesis: {best} (no fit test){partial}{posterior_note}"
    if test.rejected:
        return (f"outside the family: no reference mechanism explains the outcomes (fit "
                f"{test.p_text()}: statistic {test.statistic:.0f} where about "
                f"{test.expected:.0f} is expected); closest: {best}{partial}{posterior_note}")
    if failures is not None and failures.rejected:
        return (f"best mechanism: {best}, which fits the outcomes (fit {test.p_text()}), but "
                f"not the failures ({failures.p_text()}: {failures.words()}){partial}"
                f"{posterior_note}")
    return f"best mechanism: {best}, which fits the outcomes (fit {test.p_text()}){partial}" \
           f"{posterior_note}"


def conditional(verdicts: Mapping[str, str], test: FitTest | None, closest: str,
                evidence: Evidence | None = None, failures: Any = None) -> dict[str, str]:
    """The component verdicts as they may be claimed: unchanged when the fit holds, worded
    'if it were <closest>: ...' when it is rejected or its failed calls do not fit the
    agent's (`failures`, a failure_check.FailureCheck), and withheld when the episodes hold
    too little evidence (`Evidence.too_little`)."""
    out = {}
    for component, text in verdicts.items():
        head, _, body = text.partition(": ")
        if evidence is not None and evidence.nothing_to_fit:
            out[component] = f"{head}: withheld: no episode ended with an env outcome"
        elif evidence is not None and evidence.too_little:
            out[component] = (f"{head}: too little evidence for a claim ({evidence.with_outcome} "
                              f"episodes with an env outcome, {evidence.failures} failed "
                              f"calls); the best fit reads: {body}")
        elif test is not None and test.rejected:
            out[component] = f"{head}: if it were {closest} (it fits badly): {body}"
        elif failures is not None and failures.rejected:
            out[component] = (f"{head}: if it were {closest} (its failures differ from the "
                              f"agent's): {body}")
        else:
            out[component] = text
    return out


def profile_interval(grid: Sequence[float], profile: Sequence[float],
                     cut: float = INTERVAL_LOG_UNITS) -> tuple[float, float]:
    """The likelihood-ratio interval of a parameter profiled on a grid: the span around the
    maximum where the profile, interpolated between grid points by a shape-preserving cubic
    (scipy's PchipInterpolator: no overshoot, flat at a local maximum), is within `cut` of
    its maximum. Its ends fall between grid points, so a coarse grid never makes a
    single-valued interval; at an edge of the grid where the profile is still inside, the
    edge. Points at -inf (an impossible value) bound the interval where they start."""
    grid = np.asarray(grid, dtype=np.float64)
    profile = np.asarray(profile, dtype=np.float64)
    if grid.size == 1:
        return float(grid[0]), float(grid[0])
    finite = np.isfinite(profile)
    floor = profile[finite].min() - 10 * cut if finite.any() else 0.0
    fine = np.linspace(grid[0], grid[-1], FINE_POINTS)
    curve = PchipInterpolator(grid, np.where(finite, profile, floor))(fine)
    top = int(np.argmax(curve))
    inside = curve >= curve[top] - cut
    low = top
    while low > 0 and inside[low - 1]:
        low -= 1
    high = top
    while high < len(fine) - 1 and inside[high + 1]:
        high += 1
    return float(fine[low]), float(fine[high])


def join_clauses(finding: str, *evidence: str) -> str:
    """A verdict's finding and its non-empty evidence clauses, "; "-separated (both
    families' verdicts; analysis/report/verdict.py splits them there)."""
    return "; ".join([finding, *(e for e in evidence if e)])


def log_lr(best: float, other: float) -> float:
    """The data's log-LR of one fit over another from their log-likelihoods, with no "-0.0"
    for a tie."""
    return float(best) - float(other) + 0.0


def first_differing(ranked: Sequence[T], trait: Callable[[T], Any]) -> T | None:
    """The best-ranked fit after the first whose `trait` differs from the first's (None when
    none does): the rival a component verdict weighs the best against."""
    best = trait(ranked[0])
    return next((f for f in ranked[1:] if trait(f) != best), None)


def beats_words(best: str, other: str, log_lr: float) -> str:
    """'cache-3 beats cache-2 by log-LR 12.4', marked weak below INTERVAL_LOG_UNITS (inside
    the 95% interval of a one-parameter choice): the verdicts' clause in both families."""
    weak = ", weak evidence" if log_lr < INTERVAL_LOG_UNITS else ""
    return f"{best} beats {other} by log-LR {log_lr:.1f}{weak}"


def lapse_words(epsilon: float, interval: tuple[float, float], grid_step: float,
                choice: str, unit: str, number: str = ".2g") -> str:
    """The lapse clause of both families' selection verdict: 'no lapse' when the interval
    ends below the lapse grid's first step, 'no lapse found' when it reaches past it or when
    the best epsilon is above 0 but the interval holds 0 (a lapse the data do not
    distinguish from none is not claimed), else 'lapses to a uniform <choice> on about N% of
    <unit> (epsilon e, interval a..b)', the interval's ends formatted with `number`."""
    low, high = interval
    if epsilon == 0.0:
        found = "no lapse" if high < grid_step else "no lapse found"
        return f"{found} (epsilon 0, interval {low:{number}}..{high:{number}})"
    if low <= 0.0:
        return (f"no lapse found (best epsilon {epsilon:g}, but its interval "
                f"{low:{number}}..{high:{number}} holds 0)")
    return (f"lapses to a uniform {choice} on about {epsilon:.0%} of {unit} (epsilon "
            f"{epsilon:g}, interval {low:{number}}..{high:{number}})")


def integer_interval(values: Sequence[int], profile: Sequence[float],
                     cut: float = INTERVAL_LOG_UNITS) -> tuple[int, int]:
    """The likelihood-ratio set of an integer parameter as (lowest, highest) value inside."""
    profile = np.asarray(profile, dtype=np.float64)
    inside = [v for v, ll in zip(values, profile, strict=True) if ll >= profile.max() - cut]
    return min(inside), max(inside)


@dataclass(frozen=True)
class ChanceCount:
    """A cause's observed count among `decisions` failed decisions, the count a uniform
    guesser would show on the same decisions, and its likelihood share."""

    observed: int
    expected_if_guessing: float
    share: float
    decisions: int

    @property
    def excess_p(self) -> float:
        """One-sided binomial p-value of the observed count against the guessing rate."""
        if self.decisions == 0:
            return 1.0
        rate = min(max(self.expected_if_guessing / self.decisions, 1e-12), 1 - 1e-12)
        return float(binomtest(self.observed, self.decisions, rate,
                               alternative="greater").pvalue)

    @property
    def in_excess(self) -> bool:
        return self.decisions > 0 and self.excess_p < EXCESS_ALPHA

    def to_json(self) -> dict[str, Any]:
        return {"observed": self.observed,
                "expected_if_guessing": round(self.expected_if_guessing, 2),
                "share": round(self.share, 2), "decisions": self.decisions,
                "excess_p": round(self.excess_p, 5)}

    def words(self, name: str) -> str:
        """'binding: 97% against 84% by chance'; an excess the binomial test does not carry
        says so with its n ('62% against 49% by chance, not significant at n = 21'), since
        'no excess' beside a larger share reads as a contradiction; 'no excess over
        guessing (...)' only when the share is not above chance."""
        if self.decisions == 0:
            return f"{name}: no decisions to weigh"
        seen = self.observed / self.decisions
        chance = self.expected_if_guessing / self.decisions
        if self.in_excess:
            return f"{name}: {seen:.0%} against {chance:.0%} by chance"
        if self.observed > self.expected_if_guessing:
            return (f"{name}: {seen:.0%} against {chance:.0%} by chance, not significant at "
                    f"n = {self.decisions} (p = {self.excess_p:.2g})")
        return f"{name}: no excess over guessing ({seen:.0%} against {chance:.0%} by chance)"


def against_chance(observed: Mapping[str, int], expected: Mapping[str, float],
                   shares: Mapping[str, float], decisions: int) -> dict[str, ChanceCount]:
    """ChanceCount per cause of `expected` (the causes a guesser can be counted under)."""
    return {cause: ChanceCount(int(observed.get(cause, 0)), float(expected[cause]),
                               float(shares.get(cause, 0.0)), decisions) for cause in expected}
