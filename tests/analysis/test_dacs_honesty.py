"""The honest DACS diagnosis: held-out agents outside the hypotheses are rejected by the fit
test and their verdicts worded conditionally, agents inside are accepted with their parameter
inside its interval, the new readers (position bias, rule violation) are named, invalid
replies are evidence of their own, and attribution is set against what guessing gives."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest

from diagym.analysis.diagnose.dacs import diagnosis as dacs_diagnosis
from diagym.analysis.diagnose.dacs import fit as dacs_fit
from diagym.analysis.diagnose.dacs import replay as dacs_replay
from diagym.analysis.diagnose.dacs.mixture import MIXTURE_EPSILONS, best_mixture
from diagym.analysis.diagnose.dacs.verdicts import COMPONENTS
from diagym.analysis.diagnose.honesty import FIT_ALPHA, MIN_OUTCOMES
from diagym.analysis.diagnose.mixture import margin, pairs_searched
from diagym.analysis.diagnose.report import mixture_lines, to_markdown
from diagym.controllers.dacs.readers import dacs_controller
from tests.analysis.dacs_agents import HELD_OUT
from tests.analysis.test_dacs_verdicts import CopyingReader

INTERVAL = re.compile(r"interval ([\d.]+)\.\.([\d.]+)")


@functools.cache
def diagnosed(agent: str, seed: int = 0) -> dict[str, Any]:
    make, _, _ = HELD_OUT[agent]
    return dacs_diagnosis.diagnosis(dacs_replay.play_battery(make(), seed=seed))


@pytest.mark.parametrize("agent", sorted(HELD_OUT))
def test_held_out_agents_are_fitted_or_rejected(agent: str) -> None:
    """Outside the family: the fit rejects, the headline says so and every inferred verdict
    reads "if it were". Inside: the fit holds and names the truth's reader; a lapse or copy
    rate falls inside its profile-likelihood interval, which spans more than one value; a
    per-episode mixture of two readers is named with its weights, and no other inside agent
    gains a mixture."""
    _, truth, inside = HELD_OUT[agent]
    result = diagnosed(agent)
    fit, hypothesis = result["fit"], result["hypothesis"]
    assert fit["hypothesis"] == hypothesis["name"]
    if not inside:
        assert fit["verdict"] == "outside the family" and fit["p_value"] < FIT_ALPHA
        assert result["headline"].startswith("outside the family: no reference mechanism "
                                             "explains the outcomes (fit p < 0.005")
        assert result["headline"].endswith(f"closest: {hypothesis['name']}")
        for component in dacs_diagnosis.INFERRED:
            assert result["verdicts"][component].startswith(
                f"{component}: if it were {hypothesis['name']} (it fits badly): ")
        assert "if it were" not in result["verdicts"]["visibility"]
        return
    assert fit["verdict"] == "fits", fit
    assert result["headline"] == (f"best mechanism: {hypothesis['name']}, which fits the "
                                  f"outcomes (fit p = {fit['p_value']:.2g})")
    if truth.startswith("mixture of "):
        # each episode drawn 0.5 / 0.5 by the agent's own stream: 32 episodes, sd 0.09
        mixture = result["mixture"]
        assert sorted(mixture["components"]) == ["dacs-reader", "flat-recency"], mixture
        assert all(abs(w - 0.5) <= 0.15 for w in mixture["weights"]), mixture
        assert [c["name"] for c in hypothesis["components"]] == mixture["components"]
        return
    assert result["mixture"] is None, result["mixture"]
    reader = truth.split("@")[0].split("+")[0]
    assert hypothesis["reader"] == reader
    best = result["mechanisms"][0]
    assert reader in [best["name"], *best["aliases"]]
    if "@" in truth:
        low, high = best["params"]["epsilon_interval"]
        assert low < float(truth.split("@")[1]) < high
    if "+copy" in truth:
        low, high = (float(x) for x in INTERVAL.search(
            result["verdicts"]["scoping"].split("copy rate")[1]).groups())
        assert low < float(truth.split("+copy ")[1]) < high


@pytest.mark.parametrize(("reader", "opening"), [
    ("first-agent", "scoping: position bias: answers with the topmost agent block's value"),
    ("own-fact", "scoping: rule violation: answers with the requester's own fact even where a "
                 "cascade request says it must match another agent's decision"),
])
def test_the_new_readers_are_named_for_their_mechanism(reader: str, opening: str) -> None:
    result = diagnosed(reader)
    assert result["mechanisms"][0]["name"] == reader
    assert result["verdicts"]["scoping"].startswith(opening)
    assert result["verdicts"]["selection"].startswith("selection: no lapse")


BATTERY = [dict(c) for c in dacs_replay.DEFAULT_BATTERY]


def test_episodes_that_end_on_an_invalid_reply_with_no_answer_leave_nothing_to_fit() -> None:
    traces = [dacs_replay.DacsTrace(BATTERY[i % 4], i, (), "invalid_json") for i in range(8)]
    result = dacs_diagnosis.diagnosis(traces)
    assert result["headline"] == ("8 of 8 episodes ended on an invalid reply or without an "
                                  "env outcome; nothing to fit")
    assert result["fit"] is None and result["hypothesis"] is None
    assert result["mechanisms"] == []
    assert result["invalid"] == {"invalid_json": 8}
    assert result["evidence"] == {"episodes": 8, "with_env_outcome": 0,
                                  "without_env_outcome": 8,
                                  "invalid_replies": {"invalid_json": 8}, "failed_calls": 0}
    assert result["verdicts"] == {
        c: f"{c}: withheld: no episode ended with an env outcome" for c in COMPONENTS}


def test_the_answers_before_an_invalid_reply_are_evidence_and_the_reply_is_tallied() -> None:
    """An episode an invalid reply ended keeps its answers (each window replays exactly); the
    reply is tallied by its category, or as after_env_failures when a wrong answer came
    first. A full battery beside them: the reader is still found and fits."""
    full = dacs_replay.play_battery(dacs_controller("dacs-reader"))
    cut = [dacs_replay.DacsTrace(t.env_kwargs, t.seed, t.actions[:5], f)
           for t, f in zip(dacs_replay.play_battery(dacs_controller("dacs-reader"), seed=100)[:2],
                           ("invalid_json", "wrong"), strict=True)]
    result = dacs_diagnosis.diagnosis([*full, *cut])
    assert result["invalid"] == {"after_env_failures": 1, "invalid_json": 1}
    assert result["decisions"] == 32 * 15 + 2 * 5
    assert result["evidence"]["with_env_outcome"] == 34
    assert result["mechanisms"][0]["name"] == "dacs-reader"
    assert result["fit"]["verdict"] == "fits"


def test_a_handful_of_episodes_is_too_little_evidence_for_a_claim() -> None:
    traces = dacs_replay.play(dacs_controller("flat-recency"), BATTERY[1], 4)
    result = dacs_diagnosis.diagnosis(traces)
    assert result["evidence"]["with_env_outcome"] == 4 < MIN_OUTCOMES
    for component in dacs_diagnosis.INFERRED:
        assert result["verdicts"][component].startswith(
            f"{component}: too little evidence for a claim (4 episodes with an env outcome")
    assert result["verdicts"]["visibility"].startswith("visibility: no truncation")


def test_a_guessers_contamination_is_no_excess_over_chance_and_a_copiers_is() -> None:
    """Where other agents' values are among the options, many of a uniform guesser's wrong
    answers are "contamination" (about 3 in 10 on the battery): the count alone would name
    it; against chance it is what guessing gives. A reader copying at rate 0.5 is in
    excess."""
    guesser = dacs_diagnosis.diagnosis(dacs_replay.play_battery(dacs_controller("uniform")))
    chance = guesser["attribution_vs_chance"]
    wrong = guesser["decisions"] - guesser["attribution"]["correct"]
    assert chance["contamination"]["observed"] > wrong / 4
    assert sum(c["expected_if_guessing"] for c in chance.values()) == pytest.approx(wrong,
                                                                                    abs=0.05)
    assert all(c["excess_p"] >= 0.01 for c in chance.values())
    assert "against guessing, contamination: 31% against 30% by chance, not significant at " \
           "n = 397 (p = 0.35)" in guesser["verdicts"]["scoping"]
    copier = dacs_diagnosis.diagnosis(dacs_replay.play_battery(CopyingReader(0.5)))
    excess = copier["attribution_vs_chance"]["contamination"]
    assert excess["observed"] > excess["expected_if_guessing"] and excess["excess_p"] < 0.01
    wrong = copier["decisions"] - copier["attribution"]["correct"]
    assert (f"against guessing, contamination: {excess['observed'] / wrong:.0%} against "
            f"{excess['expected_if_guessing'] / wrong:.0%} by chance") in \
        copier["verdicts"]["scoping"]


@functools.cache
def reader_traces(reader: str) -> tuple[dacs_replay.DacsTrace, ...]:
    return tuple(dacs_replay.play_battery(dacs_controller(reader)))


@pytest.mark.parametrize("share", [0.5, 0.25])
def test_a_per_episode_mixture_of_two_readers_comes_back_with_its_weights(share: float) -> None:
    """dacs-reader on the first `share` of each configuration's scenario seeds, flat-recency
    on the rest (the weights are known exactly): the mixture beats the single best by more
    than the workflow's margin, log(episodes) + log(pairs weighed), names the two readers
    with weights within 0.1 of the truth, and, unlike the single best, fits."""
    cut = round(share * dacs_replay.DEFAULT_EPISODES)
    traces = [*(t for t in reader_traces("dacs-reader") if t.seed < cut),
              *(t for t in reader_traces("flat-recency") if t.seed >= cut)]
    replayed = [(t, dacs_replay.replay(t)) for t in traces]
    decisions = [d for _, group in replayed for d in group]
    fits = dacs_fit.fit_readers(decisions)
    copying = dacs_fit.fit_copying(decisions, fits[0].name, fits[0].epsilon)
    single = dacs_fit.DacsHypothesis(fits[0].name, copying.rate, copying.epsilon)
    found = best_mixture(decisions, fits, single, len(traces))
    pairs = pairs_searched([g for g in range(len(fits)) for _ in MIXTURE_EPSILONS])
    assert found is not None and found.reported, found
    assert found.margin == pytest.approx(margin(len(traces), pairs))
    weights = dict(zip(found.names, (c.weight for c in found.components), strict=True))
    assert set(weights) == {"dacs-reader", "flat-recency"}, found.names
    assert abs(weights["dacs-reader"] - share) <= 0.1, weights
    result = dacs_diagnosis.diagnosis(traces)
    assert result["mixture"] == found.to_json()
    assert "\n".join(mixture_lines(result["mixture"])) in to_markdown(
        result.played_by({"name": "mixed"}))
    assert result["fit"]["verdict"] == "fits", result["fit"]
    per_configuration = [(kwargs, [d for t, group in replayed if dict(t.env_kwargs) == kwargs
                                   for d in group]) for kwargs in BATTERY]
    assert dacs_fit.fit_test(per_configuration, single).rejected


@pytest.mark.parametrize("reader", ["dacs-reader", "flat-recency", "uniform"])
def test_a_pure_reader_gains_no_mixture(reader: str) -> None:
    result = dacs_diagnosis.diagnosis(list(reader_traces(reader)))
    assert result["mixture"] is None
    assert reader in [result["mechanisms"][0]["name"], *result["mechanisms"][0]["aliases"]]
    assert result["fit"]["verdict"] == "fits"
