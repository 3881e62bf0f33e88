"""Adaptive diagnosis: play the battery items whose next episodes are expected to tell the
leading mechanisms apart best, and stop once one mechanism holds the posterior.

The fixed battery spends its budget by shares chosen before any episode is seen, for the
weakest pair of all (analysis/diagnose/battery.py). An agent's first episodes usually rule out
most hypotheses at once; what is left is a handful of leaders, and the configuration that
separates those is rarely the one with the largest fixed share. So the design is sequential:

- The hypotheses are the model's distinct mechanisms at lapse 0, plus the mechanisms the final
  ranking profiles (likelihood.lapse_candidates: the best of a screen of every mechanism at
  every lapse rate) mixed with each lapse rate of LAPSE_GRID (likelihood.lapse_log_p,
  simulated once and cached). Without the lapse variants a lapsing agent, such as every LLM
  diagnosed so far, would give a posterior concentrated on whichever lapse-free mechanism
  fails about as often, and the design would stop on it; with other candidates than the
  final ranking's, the design could stop on a leader the ranking does not put first.
- Their posterior is proportional to the likelihood of the outcome counts so far (a uniform
  prior over the hypotheses).
- A Rule says how the next item is chosen and when to stop. PRECISION takes the
  LEADERS most probable *mechanisms*, each with all its lapse variants, and plays the
  configuration with the largest mutual information between the mechanism and one episode's
  outcome, the lapse a nuisance: sum_m w_m KL(p_m || sum_k w_k p_k), where p_m mixes m's
  variants by their posterior. Its rounds are single (configuration, seed) items once the
  leader holds SHRINK_AT of the posterior (rounds of FIRST_ROUNDS before: the first episodes
  rule out most hypotheses wherever they are played, and a decision per episode there buys
  little), and it stops at the precision target alone: the leader's posterior error
  1 - P(leader) at most 1 - STOP_POSTERIOR (MIN_EPISODES is 0: no floor; the reliability
  table of benchmarks/diagnose.py checks that the claimed posterior holds without one).
  PARSIMONY (the default) is PRECISION with the ranking's prior: a failure mode's hypotheses
  (hypotheses.FAILURE_MODES) start at odds exp(-INTERVAL_LOG_UNITS) against the others,
  the penalty likelihood.ranking_scores gives them. A failure mode is exact with one more
  parameter, and most of them differ from exact only after a failed call: on an exact agent
  the uniform prior left perseverate-0.25 near half the posterior after 128 episodes (one
  configuration separates them, by 0.015 nats per episode), and 2 of 8 exact runs ended at a
  cap of 128 with a failure mode as the design's leader (docs/RESULTS.md), where the ranking,
  the stop's other condition, penalises it. With the prior, posterior and ranking weigh a
  failure mode alike; benchmarks/diagnose.py reports
  the stops' reliability on failure-mode agents too, where the prior works against the truth.
  PRECISION and ROUNDS_OF_8 (rounds of 8 over the 6 most probable hypotheses, lapse
  variants counted apart, at least 32 episodes) are the rules before it, kept so a log they
  wrote replays as it was played and the benchmark compares them.
- The lapse variants stop short of epsilon 1: there every serial mechanism plays exactly as
  every other (each slot uniform), which is the hypothesis uniform-candidate at lapse 0; kept,
  they split the uniform play's posterior over dozens of names and a uniform guesser's design
  never stops.
- A configuration's information is weighed by the rate at which the agent's episodes there
  ended with an env outcome (an invalid reply is no evidence), estimated optimistically as
  (outcomes + 1) / (played + 1): 1 where the agent has not played or every episode ended
  with an outcome (so a reference controller's design is the unweighted one), 1/9 after 8
  episodes that all ended without; a model that cannot answer on one configuration is soon
  played elsewhere.
- Either rule stops only when the leading mechanism (its posterior summed over its lapse
  variants) is also the final ranking's first (likelihood.fit_lapse on the same counts), or
  when the budget is spent. The posterior is over the hypotheses: it says which of them the
  outcomes favour, not that the agent is one of them; the fit test
  (analysis/diagnose/fit_test.py) says that, and the output says both. There is no stop for
  leaders that play nearly alike: a rule that stopped where no configuration separates the
  two best by 0.001 nats per episode (at even odds) stopped scan-1 on cache-7+scan-1, which
  512 episodes of the fixed battery do tell apart, and lowered the rate of right stops from
  99.7% to 98.2% (benchmarks/diagnose.py); the budget is the stop there.

- CHECKED (the default) is PARSIMONY held to the fixed battery's honesty: the posterior is
  over the hypotheses, and an agent outside them still concentrates it on one (an agent that
  guesses deeper in its episodes stopped on next-use-4 at 0.99 after 15 episodes, "fits").
  So a share CHECK_SHARE of the episodes goes to checking, not separating: each check round
  plays the configuration where the leader's prediction is most at risk (`at_risk`: one the
  agent has not played yet, in battery order, else the one whose outcome counts the leader
  fits worst, by the chi-squared tail of their G-squared); and it stops on the posterior
  only with at least MIN_FIT_EPISODES episodes, the check share spent, and the absolute fit
  test (analysis/diagnose/fit_test.py) holding. When the fit test rejects the leader's fit
  (tested at every stop candidate and every FIT_EVERY episodes from MIN_FIT_EPISODES on) it
  stops "outside the family"; a budget spent under MIN_FIT_EPISODES is "too little evidence
  for a fit test", and the diagnosis then reports no fit test rather than a pass. The test
  here, and the adaptive diagnosis's reported one, is the upper tail alone: the hypothesis is
  the best of about a hundred fitted on as few as 64 episodes chosen by the data, and its
  replicates are not refitted, so it fits the agent better than it fits its own replicates;
  two-sided, 2 of 38 runs of reference controllers were rejected as too consistent (84 and
  96 episodes), where the fixed battery's 512 rejected 0 of 38.

The rule reads only the counts, so it is deterministic: a resumed diagnosis replays the same
rounds and finds their episodes in its log, whose "design" line names the rule.
benchmarks/diagnose.py measures the rules against the fixed battery on the reference
controllers, with the reliability of the stop posterior (claimed against observed top-1).
Hypotheses whose predictions coincide on every configuration are already one (the model
merges identical rows into aliases, and the lapse variants stop short of 1); among the rest,
the most probable at the stop differ from every other mechanism's by at least 0.34 in some
log-probability (docs/RESULTS.md), so a stop that merged coinciding hypotheses would stop no
sooner. What the episodes buy is the odds against a rival that plays nearly alike
(benchmarks/diagnose.py's stop bounds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2

from diagym.analysis.diagnose.fit_test import Hypothesis, fit_test, tables
from diagym.analysis.diagnose.honesty import FitTest, g_squared
from diagym.analysis.diagnose.likelihood import (
    LAPSE_GRID,
    MechanismModel,
    fit_lapse,
    lapse_candidates,
    lapse_log_p,
    log_likelihoods,
    ranking_scores,
)

ROUND = 8
LEADERS = 6
STOP_POSTERIOR = 0.99
MIN_EPISODES = 0
FIRST_ROUNDS = 4
SHRINK_AT = 0.5
CHECK_SHARE = 0.25
MIN_FIT_EPISODES = 64
FIT_EVERY = 32
TOO_LITTLE = "too little evidence for a fit test"
OUTSIDE_STOP = "outside the family"
CHECK_REASON = "check where the leader's prediction is most at risk"


@dataclass(frozen=True)
class Rule:
    """How an adaptive design chooses and stops (module docstring): rounds of `round_episodes`
    (single items once the leader holds `shrink_at`, when set), over the `leaders` most
    probable mechanisms with their lapse variants (`by_mechanism`) or hypotheses, stopping at
    `stop_posterior` after `min_episodes`; with `parsimony`, a failure mode's hypotheses
    start at the ranking's prior odds (module docstring)."""

    name: str
    round_episodes: int
    shrink_at: float | None
    leaders: int
    by_mechanism: bool
    stop_posterior: float
    min_episodes: int
    parsimony: bool = False
    check_share: float = 0.0
    min_fit_episodes: int = 0


PRECISION = Rule("precision", FIRST_ROUNDS, SHRINK_AT, LEADERS, True, STOP_POSTERIOR,
                 MIN_EPISODES)
PARSIMONY = Rule("parsimony", FIRST_ROUNDS, SHRINK_AT, LEADERS, True, STOP_POSTERIOR,
                 MIN_EPISODES, parsimony=True)
ROUNDS_OF_8 = Rule("rounds-of-8", ROUND, None, LEADERS, False, STOP_POSTERIOR, 32)
CHECKED = Rule("checked", FIRST_ROUNDS, SHRINK_AT, LEADERS, True, STOP_POSTERIOR,
               MIN_EPISODES, parsimony=True, check_share=CHECK_SHARE,
               min_fit_episodes=MIN_FIT_EPISODES)
RULES = {rule.name: rule for rule in (CHECKED, PARSIMONY, PRECISION, ROUNDS_OF_8)}
DEFAULT_RULE = CHECKED


@dataclass(frozen=True)
class Step:
    """One decision of the design: the configuration to play next (None: stop) and how many
    episodes of it, why, and the leading mechanism's posterior when it was taken."""

    configuration: int | None
    reason: str
    leader: str
    leader_posterior: float
    information: float
    episodes: int = 0


@dataclass(frozen=True)
class Design:
    """An adaptive diagnosis's rounds: every step taken (the last one stops) under `budget`."""

    budget: int
    steps: tuple[Step, ...]
    rule: Rule = DEFAULT_RULE

    @property
    def episodes(self) -> int:
        return sum(s.episodes for s in self.steps)

    @property
    def checked(self) -> int:
        """Episodes played to check the leader (CHECKED's share), not to separate."""
        return sum(s.episodes for s in self.steps if s.reason == CHECK_REASON)

    @property
    def too_little(self) -> bool:
        """The rule tests the fit, and the design ended before it could."""
        return self.steps[-1].reason.startswith(TOO_LITTLE)

    def to_json(self, labels: Sequence[str]) -> dict[str, Any]:
        """The design for the output contract, configurations named by `labels`."""
        rounds = [{"configuration": labels[s.configuration], "episodes": s.episodes,
                   "leader": s.leader, "leader_posterior": round(s.leader_posterior, 4),
                   "information": round(s.information, 4)}
                  for s in self.steps if s.configuration is not None]
        last = self.steps[-1]
        return {"mode": "adaptive", "rule": self.rule.name, "budget": self.budget,
                "round_episodes": self.rule.round_episodes,
                "rounds": rounds, "checked_episodes": self.checked,
                "stopped": last.reason, "leader": last.leader,
                "leader_posterior": round(last.leader_posterior, 4),
                "posterior_over": "the hypotheses (not that the agent is one of them)"}

    def posterior_note(self, test: Any) -> str:
        """The headline's clause on the stop: the posterior is over the hypotheses."""
        last = self.steps[-1]
        clause = (f"; adaptive stop ({last.reason}) at posterior {last.leader_posterior:.2f} "
                  f"for {last.leader} among the hypotheses")
        if test is not None and test.rejected:
            clause += ", which the fit test rejects"
        if self.rule.check_share:
            clause += f"; {self.checked} of {self.episodes} episodes checked the leader"
        return clause


def _hypothesis_tables(model: MechanismModel, counts: Sequence[np.ndarray]
                       ) -> tuple[list[int], list[tuple[np.ndarray, ...]], np.ndarray]:
    """(mechanism index, per-configuration log_p, log-likelihood) of every hypothesis: the
    distinct mechanisms at lapse 0, then the lapse variants of the final ranking's lapse
    candidates."""
    at_zero = log_likelihoods(model, counts)
    owners = list(range(len(at_zero)))
    tables = [tuple(log_p[i] for log_p in model.log_p) for i in owners]
    ll = list(at_zero)
    for i in lapse_candidates(model, counts):
        for epsilon in LAPSE_GRID:
            if epsilon in (0.0, 1.0):  # at 1 every serial mechanism is uniform-candidate
                continue
            table = lapse_log_p(model, i, epsilon)
            owners.append(i)
            tables.append(table)
            ll.append(sum(float(t @ c) for t, c in zip(table, counts, strict=True)))
    return owners, tables, np.array(ll)


def information(tables: Sequence[tuple[np.ndarray, ...]], weights: np.ndarray,
                configuration: int, groups: np.ndarray | None = None) -> float:
    """Mutual information (nats per episode) between the weighted hypotheses and one episode's
    outcome on `configuration`; with `groups` (a label per hypothesis), between the label and
    the outcome, each label's hypotheses mixed by their weights."""
    p = np.exp(np.stack([t[configuration] for t in tables]))
    if groups is not None:
        labels, inverse = np.unique(groups, return_inverse=True)
        mass = np.bincount(inverse, weights=weights, minlength=len(labels))
        mixed = np.zeros((len(labels), p.shape[1]))
        np.add.at(mixed, inverse, weights[:, None] * p)
        p, weights = mixed / mass[:, None], mass
    mix = weights @ p
    kl = (p * (np.log(p) - np.log(mix))).sum(axis=1)
    return float(weights @ kl)


def at_risk(model: MechanismModel, counts: Sequence[np.ndarray], played: Sequence[int],
            leader: Hypothesis) -> int:
    """The configuration where `leader`'s prediction is most at risk: the first the agent has
    not played, else the one whose counts it fits worst (the smallest chi-squared tail of their
    G-squared, on the outcomes it gives at least one expected episode, less one)."""
    unplayed = [c for c, n in enumerate(played) if n == 0]
    if unplayed:
        return unplayed[0]
    tails = []
    for c, log_p in enumerate(tables(model, leader)):
        n = float(np.sum(counts[c]))
        if n == 0:
            tails.append(1.0)
            continue
        df = max(1, int(np.count_nonzero(np.exp(log_p) * n >= 1.0)) - 1)
        tails.append(float(chi2.sf(float(g_squared(counts[c], log_p)), df)))
    return int(np.argmin(tails))


def leader_test(model: MechanismModel, counts: Sequence[np.ndarray]
                ) -> tuple[Hypothesis, FitTest | None]:
    """The final ranking's best fit as a hypothesis, and the absolute fit test of it, upper
    tail alone (module docstring)."""
    best = Hypothesis.of_fit(model, fit_lapse(model, counts)[0])
    return best, fit_test(model, counts, best, [str(c) for c in range(len(model.battery))],
                          two_sided=False)


def next_step(model: MechanismModel, counts: Sequence[np.ndarray], played: Sequence[int],
              budget: int, rule: Rule = DEFAULT_RULE, checked: int = 0) -> Step:
    """What to play next, given per battery configuration the outcome counts so far and the
    episodes played (which include any that ended without an env outcome, outside the
    counts), and the episodes of check rounds among them (CHECKED, module docstring)."""
    counts = [np.asarray(c, dtype=np.float64) for c in counts]
    evidence = [(c.sum() + 1) / (n + 1) for c, n in zip(counts, played, strict=True)]
    total = int(sum(played))
    owners, tables, ll = _hypothesis_tables(model, counts)
    if rule.parsimony:
        ll = ranking_scores(model, np.zeros(len(model.mechanisms)))[owners] + ll
    posterior = np.exp(ll - ll.max())
    posterior /= posterior.sum()
    by_mechanism = np.bincount(owners, weights=posterior, minlength=len(model.mechanisms))
    lead = int(np.argmax(by_mechanism))
    leader, share = model.mechanisms[lead].name, float(by_mechanism[lead])
    if total >= budget:
        if total < rule.min_fit_episodes:
            return Step(None, f"{TOO_LITTLE} ({total} episodes; the fit is tested from "
                              f"{rule.min_fit_episodes})", leader, share, 0.0)
        return Step(None, "budget spent", leader, share, 0.0)
    candidate = total >= rule.min_episodes and share >= rule.stop_posterior \
        and fit_lapse(model, counts)[0].mechanism.name == leader
    if not rule.min_fit_episodes:
        if candidate:
            return Step(None, f"posterior of {leader} reached {rule.stop_posterior}", leader,
                        share, 0.0)
    elif total >= rule.min_fit_episodes and checked >= rule.check_share * total \
            and (candidate or total % FIT_EVERY == 0):
        best, test = leader_test(model, counts)
        if test is not None and test.rejected:
            return Step(None, f"{OUTSIDE_STOP}: the fit test rejects {best.name} "
                              f"({test.p_text()}) after {total} episodes", leader, share, 0.0)
        if candidate:
            return Step(None, f"posterior of {leader} reached {rule.stop_posterior} and the "
                              f"fit test holds ({'no test' if test is None else test.p_text()})",
                        leader, share, 0.0)
    episodes = round_size(total, budget, rule, share)
    if rule.check_share and checked < rule.check_share * (total + episodes):
        best = Hypothesis.of_fit(model, fit_lapse(model, counts)[0])
        return Step(at_risk(model, counts, played, best), CHECK_REASON, leader, share, 0.0,
                    episodes)
    owners_array = np.asarray(owners)
    if rule.by_mechanism:
        # The rule.leaders most probable mechanisms (and every one tied with the last of
        # them), each with all its hypotheses.
        cut = np.sort(by_mechanism)[::-1][min(rule.leaders, len(by_mechanism)) - 1]
        leading = np.flatnonzero(by_mechanism >= cut * (1 - 1e-9))
        leaders = np.flatnonzero(np.isin(owners_array, leading))
    else:
        # The rule.leaders most probable hypotheses, and every one tied with the last of them
        # (before any episode, all are tied, and the first round is the most informative one
        # over all).
        cut = np.sort(posterior)[::-1][min(rule.leaders, len(posterior)) - 1]
        leaders = np.flatnonzero(posterior >= cut * (1 - 1e-9))
    weights = posterior[leaders] / posterior[leaders].sum()
    chosen = [tables[i] for i in leaders]
    groups = owners_array[leaders] if rule.by_mechanism else None
    gains = [information(chosen, weights, c, groups) * evidence[c]
             for c in range(len(model.battery))]
    best = int(np.argmax(gains))
    return Step(best, "most informative between the leaders", leader, share, gains[best],
                episodes)


def round_size(played: int, budget: int, rule: Rule = DEFAULT_RULE,
               leader_posterior: float = 0.0) -> int:
    """Episodes of the next round: the rule's round (one item once the leader holds its
    shrink_at), or what is left of the budget."""
    size = rule.round_episodes
    if rule.shrink_at is not None and leader_posterior >= rule.shrink_at:
        size = 1
    return max(0, min(size, budget - played))


def logged_rule(line: dict[str, Any]) -> Rule:
    """The rule of a log's "design" line: its "rule", or ROUNDS_OF_8 for a line written before
    rules were named (it was the only one); ValueError, one line, for a name not in RULES."""
    name = line.get("rule", ROUNDS_OF_8.name)
    if name not in RULES:
        raise ValueError(f"the log's adaptive design rule {name!r} is not one of "
                         f"{', '.join(RULES)}")
    return RULES[name]


def run_design(model: MechanismModel, budget: int,
               play_round: Callable[[int, int], np.ndarray | None],
               rule: Rule = DEFAULT_RULE) -> Design:
    """Play rounds until next_step stops: play_round(c, episodes) plays that many more
    episodes of battery[c] and returns the configuration's outcome counts so far, or None
    when it cannot (a log read back that ends before the round), which stops the design."""
    counts = [np.zeros(len(log_p[0])) for log_p in model.log_p]
    played = [0] * len(model.battery)
    steps: list[Step] = []
    while True:
        checked = sum(s.episodes for s in steps if s.reason == CHECK_REASON)
        step = next_step(model, counts, played, budget, rule, checked)
        if step.configuration is None:
            steps.append(step)
            return Design(budget, tuple(steps), rule)
        found = play_round(step.configuration, step.episodes)
        if found is None:
            steps.append(Step(None, "the log ends before the next round", step.leader,
                              step.leader_posterior, 0.0))
            return Design(budget, tuple(steps), rule)
        steps.append(step)
        counts[step.configuration] = np.asarray(found)
        played[step.configuration] += step.episodes
