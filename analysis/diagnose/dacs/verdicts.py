"""Per-component verdicts in words for a DACSSteering orchestrator: what the fits and the
attribution say it does wrong, each with the numbers it rests on.

The components are where the reference readers (controllers/dacs/readers.py) differ, which is
what seed 002 varies: what an answer is read from (reading: the full-context facts, the
registry alone, or nothing), whose block it is read from (scoping: the requester's own, or any
agent's nearest mention, the paper's wrong-agent contamination), whether the answer was in the
window at all (visibility: the token budget cut it, truncation), and how often the agent
leaves its rule for a uniform option (selection: the lapse). A "ranking" verdict names the
best reader and the margin to each other.

Each verdict reads the best fit's traits for its component and weighs them by the log
likelihood ratio against the best-ranked fit whose trait differs there (dacs-reader against
flat-recency for scoping, against registry-only or uniform for reading), so the ratio
measures that component where the readers allow it. A fit whose aliases differ in a trait
(readers that chose alike on every answer) leaves that trait unsettled: "no evidence". A
ratio below INTERVAL_LOG_UNITS is marked weak.

Scoping is also weighed without a reader: the best reader and its lapse are mixed with
copying, taking one of the other agents' values that the window shows for the requested
attribute (each equally likely) with probability `rate` at the answers that show one, the rate
fitted with the lapse profiled out (analysis/diagnose/dacs/fit.py `fit_copying`).
A copy rate past COPY_LOG_UNITS over none names contamination even when no reader's rule
explains it (an agent that copies the first lure plays like no reader); the agents copied,
and where the nearest such block sat, come from the attribution.

This module only words the evidence it is given (plain numbers and the contract's mechanism
entries), so it depends on no diagnosis code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median_low
from typing import Any

from diagym.analysis.diagnose.honesty import (
    INTERVAL_LOG_UNITS,
    ChanceCount,
    beats_words,
    first_differing,
    lapse_words,
    log_lr,
)
from diagym.analysis.diagnose.honesty import join_clauses as _join

COMPONENTS = ("ranking", "reading", "scoping", "visibility", "selection")
FACTS, REGISTRY, NOTHING = "facts", "registry", "nothing"
REQUESTER, NEAREST, TOP, OWN = "requester", "nearest", "top", "own"
# Copying is named contamination past this log-LR over none: the rate sits on the boundary
# (0), where a guesser's copy log-LR passes INTERVAL_LOG_UNITS by chance on 2 of 20 battery
# seeds (the battery's configurations share scenario seeds, so their guesses correlate) and
# stayed below 2.9 on all 20; twice the interval (3.84) is half chi-square(1)'s 99.4% point.
COPY_LOG_UNITS = 2 * INTERVAL_LOG_UNITS
# What each reader reads and whose block it reads it from (None: it reads no block).
# TOP: the topmost block's value for the attribute (a position bias); OWN: the requester's
# own fact even where a cascade request binds another agent's decision (a rule violation).
READING: dict[str, str] = {"dacs-reader": FACTS, "flat-reader": FACTS, "flat-recency": FACTS,
                           "registry-only": REGISTRY, "first-agent": FACTS, "own-fact": FACTS,
                           "uniform": NOTHING}
SCOPING: dict[str, str | None] = {"dacs-reader": REQUESTER, "flat-reader": REQUESTER,
                                  "flat-recency": NEAREST, "registry-only": REQUESTER,
                                  "first-agent": TOP, "own-fact": OWN, "uniform": None}
TRAITS = {"reading": READING, "scoping": SCOPING}
# The first step of the reader fits' lapse grid (fit.EPSILON_GRID): a lapse interval
# ending below it says "no lapse".
LAPSE_STEP = 0.01
READING_WORDS = {
    FACTS: "answers from the agents' full-context facts (and a cascade request's recorded "
           "decision)",
    REGISTRY: "reads registry entries only: it follows a cascade request's recorded decision, "
              "never a private fact",
    NOTHING: "reads nothing: its answers fit a uniform guess among the options",
}


@dataclass(frozen=True)
class Copying:
    """The copy rate fitted over the best reader fit: its maximum-likelihood rate, the
    likelihood-ratio interval, the log-LR of the rate over no copying, the answers whose
    window showed another agent's value among the options (where the rate applies), and the
    lapse epsilon at the joint maximum."""

    rate: float
    interval: tuple[float, float]
    log_lr: float
    shown: int
    epsilon: float = 0.0  # the lapse at the joint maximum


@dataclass(frozen=True)
class Position:
    """Where the nearest other-agent block that held a contaminated answer's value sat: its
    rank from the top (0 first) out of `blocks`, and its header's character offset."""

    rank: int
    blocks: int
    offset: int


@dataclass(frozen=True)
class Visibility:
    """A battery configuration's answers and how many had no evidence in the window."""

    label: str
    answers: int
    without_evidence: int


@dataclass(frozen=True)
class Evidence:
    """What the verdicts read: the mechanism entries best first (the contract's), the
    attribution counts, the contamination sources per agent, the positions of the nearest
    source per contaminated answer, the visibility per configuration, the wrong answers whose
    evidence was missing, the right answers and answers where it was present, the options per
    answer, the copying fit, and per attribution cause its count against guessing."""

    mechanisms: Sequence[Mapping[str, Any]]
    counts: Mapping[str, int]
    sources: Mapping[str, int]
    positions: Sequence[Position]
    visibility: Sequence[Visibility]
    wrong_without_evidence: int
    right_with_evidence: int
    with_evidence: int
    options: int
    copying: Copying
    chance: Mapping[str, ChanceCount] = field(default_factory=dict)

    @property
    def answers(self) -> int:
        return sum(self.counts.values())

    @property
    def wrong(self) -> int:
        return self.answers - self.counts.get("correct", 0)


def _names(fit: Mapping[str, Any]) -> list[str]:
    return [fit["name"], *fit["aliases"]]


def _trait(fit: Mapping[str, Any], component: str) -> set[str | None]:
    table = TRAITS[component]
    return {table[name] for name in _names(fit)}


def rival(mechanisms: Sequence[Mapping[str, Any]], component: str
          ) -> Mapping[str, Any] | None:
    """The best-ranked fit whose trait in `component` differs from the best's (None if none)."""
    return first_differing(mechanisms, lambda f: _trait(f, component))


def _lr(best: Mapping[str, Any], other: Mapping[str, Any]) -> float:
    return log_lr(best["log_likelihood"], other["log_likelihood"])


def _ratio(best: Mapping[str, Any], other: Mapping[str, Any] | None) -> str:
    """'dacs-reader beats flat-recency by log-LR 438.2' (weak below the interval)."""
    if other is None:
        return ""
    lr = _lr(best, other)
    if lr < 0.0:  # uniform ranked first: no reader beats guessing by the interval
        return (f"{other['name']} fits better by log-LR {-lr:.1f}, within the interval "
                f"({INTERVAL_LOG_UNITS:g}), so guessing is not rejected")
    if lr == 0.0:
        return f"{best['name']} and {other['name']} fit equally (log-LR 0.0)"
    return beats_words(best["name"], other["name"], lr)


def _unsettled(best: Mapping[str, Any], component: str) -> str | None:
    """The 'no evidence' finding when the best fit's aliases differ in `component`."""
    if len(_trait(best, component)) == 1:
        return None
    return (f"no evidence: {' and '.join(_names(best))} choose alike on every answer here, "
            f"and they differ in {component}")


def _ranking(evidence: Evidence) -> str:
    best, *rest = evidence.mechanisms
    alias = f" (plays as {', '.join(best['aliases'])})" if best["aliases"] else ""
    low, high = best["params"]["epsilon_interval"]
    lrs = [(f["name"], _lr(best, f)) for f in rest]
    beaten = ", ".join(f"{name} by log-LR {lr:.1f}" for name, lr in lrs if lr > 0.0)
    tied = ", ".join(name for name, lr in lrs if lr == 0.0)
    better = ", ".join(f"{name} by log-LR {-lr:.1f}" for name, lr in lrs if lr < 0.0)
    return _join(f"{best['name']}{alias} fits best, lapse epsilon {best['epsilon']:g} "
                 f"(interval {low:g}..{high:g})",
                 f"it beats {beaten}" if beaten else "",
                 f"it ties {tied} (each at lapse near 1, log-LR 0.0)" if tied else "",
                 f"ranked first as guessing though {better} fits better, within the interval "
                 f"({INTERVAL_LOG_UNITS:g})" if better else "",
                 "" if rest else "no other reader to weigh it against")


def _accuracy(evidence: Evidence) -> str:
    if not evidence.with_evidence:
        return "no answer had its evidence in the window"
    return (f"right on {evidence.right_with_evidence} of {evidence.with_evidence} answers whose "
            "evidence was in the window")


def _reading(evidence: Evidence) -> str:
    best = evidence.mechanisms[0]
    empty = _unsettled(best, "reading")
    if empty is not None:
        return _join(empty, _accuracy(evidence))
    (trait,) = _trait(best, "reading")
    return _join(READING_WORDS[str(trait)], _accuracy(evidence),
                 _ratio(best, rival(evidence.mechanisms, "reading")))


def _contaminated(evidence: Evidence) -> str:
    """'12 of 40 wrong answers took another agent's value shown beside the requester's own
    evidence (contamination), 5 more where the evidence was missing (ambiguous with
    truncation); copied from agent-4 8, agent-3 9; the nearest such block at rank 3 of 5
    from the top (median; header at character 412)'."""
    if not evidence.wrong:
        return "no wrong answers"
    alone = evidence.counts.get("contamination", 0)
    ambiguous = evidence.counts.get("ambiguous", 0)
    if not alone + ambiguous:
        return f"none of {evidence.wrong} wrong answers took another agent's value shown in " \
               "the window"
    agents = ", ".join(f"{agent} {n}" for agent, n in
                       sorted(evidence.sources.items(), key=lambda item: (-item[1], item[0])))
    rank = median_low([p.rank for p in evidence.positions])
    blocks = median_low([p.blocks for p in evidence.positions])
    offset = median_low([p.offset for p in evidence.positions])
    chance = evidence.chance.get("contamination")
    against = "" if chance is None else f"; against guessing, {chance.words('contamination')}"
    return (f"{alone} of {evidence.wrong} wrong answers took another agent's value shown "
            f"beside the requester's own evidence (contamination), {ambiguous} more where the "
            f"evidence was missing (ambiguous with truncation); copied from {agents}; the "
            f"nearest such block at rank {rank} of {blocks} from the top (median, 0 the top; "
            f"header at character {offset}){against}")


def _copy_clause(copying: Copying) -> str:
    low, high = copying.interval
    if not copying.shown:
        return "no window showed another agent's value among the options"
    weak = "" if copying.log_lr < INTERVAL_LOG_UNITS or copying.log_lr >= COPY_LOG_UNITS else \
        f", weak: below {COPY_LOG_UNITS:.2f}"
    return (f"copy rate {copying.rate:g} (interval {low:g}..{high:g}, log-LR "
            f"{copying.log_lr:.1f} over none{weak}) over the {copying.shown} answers whose "
            "window showed one")


def _scoping(evidence: Evidence) -> str:
    best = evidence.mechanisms[0]
    copying = evidence.copying
    taken = _contaminated(evidence)
    ratio = _ratio(best, rival(evidence.mechanisms, "scoping"))
    if copying.log_lr >= COPY_LOG_UNITS:
        beyond = "guessing" if "uniform" in _names(best) else f"{best['name']}'s rule and lapse"
        return _join(f"contaminated: copies another agent's visible value for the attribute "
                     f"on about {copying.rate:.0%} of the answers that show one, beyond "
                     f"{beyond}", _copy_clause(copying), taken)
    empty = _unsettled(best, "scoping")
    if empty is not None:
        return _join(empty, taken, _copy_clause(copying))
    (trait,) = _trait(best, "scoping")
    if trait == NEAREST:
        return _join("contaminated: takes the requested key's mention nearest the request, "
                     "whoever's block holds it", taken, ratio)
    if trait == TOP:
        return _join("position bias: answers with the topmost agent block's value for the "
                     "attribute, whoever's block it is", taken, ratio)
    if trait == OWN:
        return _join("rule violation: answers with the requester's own fact even where a "
                     "cascade request says it must match another agent's decision", taken,
                     ratio)
    if trait is None:
        return _join("no evidence: its answers fit a uniform guess, which reads no block",
                     taken, _copy_clause(copying))
    return _join("no deficit: reads only the requester's own evidence (its own block, or the "
                 "cascade source's recorded decision)", taken, _copy_clause(copying), ratio)


def _visibility(evidence: Evidence) -> str:
    missing = sum(v.without_evidence for v in evidence.visibility)
    per = ", ".join(f"{v.label}: {v.without_evidence} of {v.answers}"
                    for v in evidence.visibility)
    if not missing:
        return f"no truncation: every answer's evidence was in the window ({per})"
    expected = 1.0 - 1.0 / evidence.options
    return (f"truncation: the window lacked the requester's evidence at {missing} of "
            f"{evidence.answers} answers ({per}); {evidence.wrong_without_evidence} of them "
            f"were answered wrongly, where a guess among {evidence.options} options is wrong "
            f"{expected:.0%} of the time")


def claimed_hypothesis(evidence: Evidence) -> tuple[str, float, float]:
    """(reader, copy rate, lapse) of the hypothesis the verdicts describe, which the headline
    names and the fit test tests: the best reader with the copy rate and the lapse at their
    joint maximum when scoping names the copying (past COPY_LOG_UNITS), else the best reader
    at its own fitted lapse without copying (a copy rate the verdicts do not claim is not
    part of what the headline claims either)."""
    best = evidence.mechanisms[0]
    if evidence.copying.log_lr >= COPY_LOG_UNITS:
        return str(best["name"]), evidence.copying.rate, evidence.copying.epsilon
    return str(best["name"]), 0.0, float(best["epsilon"])


def _selection(evidence: Evidence) -> str:
    best = evidence.mechanisms[0]
    distractors = evidence.counts.get("distractor", 0)
    fit_no_reason = (f"{distractors} of {evidence.wrong} wrong answers fit no reason in the "
                     "window (distractor)") if evidence.wrong else "no wrong answers"
    if "uniform" in _names(best):
        return _join("no evidence: a uniform guess has no rule to lapse from", fit_no_reason)
    low, high = best["params"]["epsilon_interval"]
    _, rate, epsilon = claimed_hypothesis(evidence)
    joint = "" if not rate else (f"with the copy rate {rate:g} fitted jointly the lapse is "
                                 f"epsilon {epsilon:g}")
    return _join(lapse_words(best["epsilon"], (low, high), LAPSE_STEP, "option", "answers",
                             "g"), joint, fit_no_reason)


def verdicts(evidence: Evidence) -> dict[str, str]:
    """One sentence per component (COMPONENTS), 'component: finding; evidence; ...'."""
    if not evidence.mechanisms:
        raise ValueError("verdicts need at least one fitted reader")
    found = {"ranking": _ranking(evidence), "reading": _reading(evidence),
             "scoping": _scoping(evidence), "visibility": _visibility(evidence),
             "selection": _selection(evidence)}
    return {component: f"{component}: {found[component]}" for component in COMPONENTS}
