"""Why a DACSSteering orchestrator answered wrongly, which window reader it plays like, and
whether any reader explains it: the DACS diagnosis, held to the rules the workflow diagnosis
keeps (analysis/diagnose/honesty.py).

Its parts are their own modules: the battery, the replay of every decision and the
attribution of each wrong answer (analysis/diagnose/dacs_replay.py, whose names this module
re-exports, so `dacs.play_battery` and `dacs.attribute` read as before), the reader fits, the
copy rate and the fit test (analysis/diagnose/dacs_fit.py), and the words
(analysis/diagnose/dacs_verdicts.py).

## The contract
`diagnosis` returns, beside the attribution and the reader fits: `headline` (one line:
nothing to fit, the best hypothesis and that it fits, or "outside the family", from
honesty.headline), `fit` (the absolute fit test of the best (reader, copy rate, lapse),
honesty.FitTest's JSON), `hypothesis` (that reader, rate and lapse, or the reported
mixture's components), `mixture` (components and weights of a per-episode mixture of two
readers when it beats the single best by the workflow's penalised margin,
analysis/diagnose/dacs_mixture.py, else null; the inferred verdicts are then worded "if it
were one mechanism", mixture.single_verdicts), `evidence` (episodes,
the ones with an env outcome: at least one answer the env scored, the invalid replies by
category, the wrong answers), `invalid` (that tally alone) and `attribution_vs_chance` (per
cause: observed, expected_if_guessing, share; honesty.ChanceCount). The verdicts that infer a
mechanism (ranking, reading, scoping, selection) pass through honesty.conditional: worded
"if it were <closest> (it fits badly)" when the fit test rejects, withheld when nothing was
answered, capped when the evidence is too little (honesty.MIN_OUTCOMES episodes,
MIN_FAILURES wrong answers). Visibility is a count of what the windows held, no inference,
and is never conditioned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from diagym.analysis.diagnose.dacs_fit import (
    ANSWER_CATEGORIES,
    EPSILON_GRID,
    READERS,
    UNIFORM,
    DacsHypothesis,
    ReaderFit,
    choice_probabilities,
    fit_copying,
    fit_readers,
    fit_test,
    lapse_log_likelihood,
)
from diagym.analysis.diagnose.dacs_mixture import as_hypothesis, best_mixture
from diagym.analysis.diagnose.dacs_replay import (
    AMBIGUOUS,
    CONTAMINATION,
    CORRECT,
    COUNT_KEYS,
    DEFAULT_BATTERY,
    DEFAULT_EPISODES,
    DISTRACTOR,
    ENV_ID,
    TRUNCATION,
    WEIGHT_KEYS,
    DacsAttribution,
    DacsDecision,
    DacsTally,
    DacsTrace,
    Source,
    attribute,
    battery_configuration,
    block_offsets,
    configuration_label,
    decisions_of,
    guessing_shares,
    holds_dacs_runs,
    logged_answers,
    lures,
    option,
    play,
    play_battery,
    replay,
    replayed,
    run_name,
    sources,
    tally,
    text_option_decoder,
    traces_from_log,
)
from diagym.analysis.diagnose.dacs_verdicts import (
    COMPONENTS,
    Position,
    Visibility,
    claimed_hypothesis,
    verdicts,
)
from diagym.analysis.diagnose.dacs_verdicts import Evidence as VerdictEvidence
from diagym.analysis.diagnose.honesty import (
    ChanceCount,
    Evidence,
    against_chance,
    conditional,
    headline,
)
from diagym.analysis.diagnose.mixture import single_verdicts
from diagym.controllers.dacs.readers import evidence

__all__ = [
    "AMBIGUOUS", "ANSWER_CATEGORIES", "CONTAMINATION", "CORRECT", "COUNT_KEYS",
    "DEFAULT_BATTERY", "DEFAULT_EPISODES", "DISTRACTOR", "ENV_ID", "EPSILON_GRID", "READERS",
    "TRUNCATION", "UNIFORM", "WEIGHT_KEYS", "DacsAttribution", "DacsDecision", "DacsHypothesis",
    "DacsTally", "DacsTrace", "ReaderFit", "Source", "attribute", "battery_configuration",
    "block_offsets", "choice_probabilities", "configuration_label", "decisions_of",
    "INFERRED", "diagnosis", "evidence_for", "fit_copying", "fit_readers", "fit_test",
    "guessing_shares",
    "holds_dacs_runs", "lapse_log_likelihood", "logged_answers", "lures", "option", "play",
    "play_battery", "replay", "replayed", "run_name", "sources", "tally",
    "text_option_decoder", "traces_from_log",
]
# The verdicts that infer a mechanism, and so are worded conditionally on the fit test.
INFERRED = ("ranking", "reading", "scoping", "selection")


def evidence_for(per_configuration: Sequence[tuple[Mapping[str, Any], list[DacsDecision]]],
                 fits: Sequence[ReaderFit], result: DacsTally,
                 chance: Mapping[str, ChanceCount] | None = None) -> VerdictEvidence:
    """What the verdicts read (dacs_verdicts.Evidence), from the decisions per configuration,
    the reader fits best first, their tally and its causes against guessing."""
    decisions = [d for _, group in per_configuration for d in group]
    positions = []
    wrong_without = right_with = with_evidence = 0
    for decision in decisions:
        visible = bool(evidence(decision.parsed))
        with_evidence += visible
        right_with += visible and decision.correct
        if decision.correct:
            continue
        wrong_without += not visible
        found = attribute(decision).sources
        if found:
            nearest = found[-1]
            positions.append(Position(nearest.rank, nearest.blocks, nearest.offset))
    visibility = [Visibility(configuration_label(kwargs), len(group),
                             sum(not evidence(d.parsed) for d in group))
                  for kwargs, group in per_configuration]
    options = int(np.median([len(d.options) for d in decisions]))
    return VerdictEvidence([f.as_dict() for f in fits], result.counts, result.sources,
                           positions, visibility, wrong_without, right_with, with_evidence,
                           options, fit_copying(decisions, fits[0].name, fits[0].epsilon),
                           dict(chance or {}))


def invalid_category(trace: DacsTrace) -> str:
    """How an episode the env did not end was ended (the workflow diagnosis's keys)."""
    failure = trace.first_failure
    if failure is None:
        return "ended_without_failure"
    return "after_env_failures" if failure == "wrong" else failure


def diagnosis(traces: Sequence[DacsTrace]) -> dict[str, Any]:
    """The issue's output contract for DACS: configurations, episodes, attribution counts
    (COUNT_KEYS) with their likelihood shares, sources and guessing counts, the reader fits
    best first, the fit test of the best hypothesis, the evidence, the headline and a verdict
    per component (module docstring)."""
    per_configuration: list[tuple[dict[str, Any], list[DacsDecision]]] = []
    decisions: list[DacsDecision] = []
    invalid: dict[str, int] = {}
    answered = 0
    for trace in traces:
        kwargs = dict(trace.env_kwargs)
        group = next((g for k, g in per_configuration if k == kwargs), None)
        if group is None:
            group = []
            per_configuration.append((kwargs, group))
        replayed_decisions, ended = replayed(trace)
        if not ended:
            key = invalid_category(trace)
            invalid[key] = invalid.get(key, 0) + 1
        answered += bool(replayed_decisions)
        group += replayed_decisions
        decisions += replayed_decisions
    result = tally(decisions)
    found = Evidence(len(traces), answered, invalid, result.decisions - result.counts[CORRECT])
    chance = against_chance(result.counts, result.expected, result.weighted, result.wrong)
    common = {
        "env": ENV_ID,
        "episodes": len(traces),
        "decisions": result.decisions,
        "configurations": [kwargs for kwargs, _ in per_configuration],
        "attribution": result.counts,
        "attribution_weights": result.weighted,
        "attribution_vs_chance": {cause: c.to_json() for cause, c in chance.items()},
        "env_contaminated": result.env_contaminated,
        "contamination_sources": result.sources,
        "evidence": found.to_json(),
        "invalid": dict(sorted(invalid.items())),
    }
    if not decisions:
        withheld = conditional({c: f"{c}: -" for c in COMPONENTS}, None, "", found)
        return {**common, "headline": headline(None, None, found), "fit": None,
                "hypothesis": None, "mixture": None, "mechanisms": [], "verdicts": withheld}
    fits = fit_readers(decisions)
    words = evidence_for(per_configuration, fits, result, chance)
    single = DacsHypothesis(*claimed_hypothesis(words))
    mixture = best_mixture(decisions, fits, single, answered)
    reported = mixture if mixture is not None and mixture.reported else None
    best = single if reported is None else as_hypothesis(reported, fits)
    test = fit_test(per_configuration, best)
    worded = verdicts(words)
    inferred = {c: worded[c] for c in INFERRED}
    if reported is not None:
        inferred = single_verdicts(inferred, reported, single.name)
    claimed = conditional(inferred, test, best.name, found)
    return {**common, "headline": headline(best.name, test, found),
            "fit": None if test is None else test.to_json(), "hypothesis": best.to_json(),
            "mixture": None if reported is None else reported.to_json(),
            "mechanisms": [f.as_dict() for f in fits],
            "verdicts": {c: claimed.get(c, worded[c]) for c in worded}}
