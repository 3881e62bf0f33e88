"""Positive controls of the DACS verdicts: each reader played opaquely gets the verdict that
names its mechanism, with the numbers of its own fit (`assert_names_its_mechanism`, run by
test_diagnose_dacs_cli.py on the readers it plays through the command); a contaminating
agent's scoping verdict names contamination and the agents it copied; a lapse is named inside
its interval and is not taken for copying; a programmed copy rate is recovered; and the
wording rules (aliases, weak ratios, guessing ranked first) hold on evidence built by hand."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

from diagym.analysis.diagnose.dacs import diagnosis as dacs_diagnosis
from diagym.analysis.diagnose.dacs import fit as dacs_fit
from diagym.analysis.diagnose.dacs import replay as dacs_replay
from diagym.analysis.diagnose.dacs.verdicts import (
    COMPONENTS,
    COPY_LOG_UNITS,
    READING,
    SCOPING,
    Copying,
    Evidence,
    Position,
    Visibility,
    verdicts,
)
from diagym.analysis.diagnose.likelihood import INTERVAL_LOG_UNITS
from diagym.controllers.dacs.readers import DACS_CONTROLLERS, Reader, evidence, parse_window
from diagym.envs.dacs.scenario import ATTRIBUTE_OF, KEYS
from tests.analysis.test_dacs_diagnosis import Contaminating, Lapsing, battery_decisions

# The opening of the verdicts that name each reader's mechanism.
FACTS = "reading: answers from the agents' full-context facts"
OWN_BLOCK = "scoping: no deficit: reads only the requester's own evidence"
NAMED: dict[str, dict[str, str]] = {
    "dacs-reader": {"reading": FACTS, "scoping": OWN_BLOCK, "selection": "selection: no lapse"},
    "flat-reader": {"reading": FACTS, "scoping": OWN_BLOCK, "selection": "selection: no lapse"},
    "flat-recency": {"reading": FACTS, "selection": "selection: no lapse",
                     "scoping": "scoping: contaminated: takes the requested key's mention "
                                "nearest the request"},
    "registry-only": {"reading": "reading: reads registry entries only", "scoping": OWN_BLOCK,
                      "selection": "selection: no lapse"},
    "uniform": {"reading": "reading: reads nothing: its answers fit a uniform guess",
                "scoping": "scoping: no evidence: its answers fit a uniform guess",
                "selection": "selection: no evidence: a uniform guess has no rule"},
}
SCOPING_RIVAL = {"dacs-reader", "flat-recency"}  # readers whose scoping verdict names a rival
LAPSE = re.compile(r"epsilon ([\d.]+), interval ([\d.]+)\.\.([\d.]+)")


def lr(mechanisms: list[dict[str, Any]], name: str) -> float:
    """The best fit's log-LR over the fit `name`, from the contract's log-likelihoods."""
    other = next(m for m in mechanisms if m["name"] == name)
    return mechanisms[0]["log_likelihood"] - other["log_likelihood"]


def test_every_reader_has_a_reading_and_a_scoping() -> None:
    assert set(READING) == set(SCOPING) == set(DACS_CONTROLLERS)


def assert_names_its_mechanism(reader: str, result: dict[str, Any]) -> None:
    """The verdicts of `reader`'s diagnosis (the DACS contract) name its mechanism, with the
    log-LRs of the contract's own fits and counts of its own attribution. Called by
    test_diagnose_dacs_cli.py on each reader played opaquely through the command."""
    found, mechanisms = result["verdicts"], result["mechanisms"]
    assert set(found) == set(COMPONENTS)
    for component, opening in NAMED[reader].items():
        assert found[component].startswith(opening), found[component]
    best = mechanisms[0]["name"]
    assert found["ranking"].startswith(f"ranking: {best}")
    for m in mechanisms[1:]:
        if lr(mechanisms, m["name"]) > 0:
            assert f"{m['name']} by log-LR {lr(mechanisms, m['name']):.1f}" in found["ranking"]
    # the scoping rival: the best-ranked reader that reads from other blocks than the best
    rival = next((m["name"] for m in mechanisms[1:] if best in SCOPING_RIVAL
                  and {SCOPING[n] for n in [m["name"], *m["aliases"]]} != {SCOPING[best]}),
                 None)
    if rival is not None:
        assert f"{best} beats {rival} by log-LR {lr(mechanisms, rival):.1f}" in found["scoping"]
    if reader == "flat-recency":  # the agents it copied, with their counts
        for source, count in result["contamination_sources"].items():
            assert f"{source} {count}" in found["scoping"]
    wrong_blind = result["attribution"]["truncation"] + result["attribution"]["ambiguous"]
    if reader in ("dacs-reader", "flat-reader"):  # a reader errs only where it cannot see
        assert f"{wrong_blind} of them were answered wrongly" in found["visibility"]


@functools.cache
def diagnosed(name: str, epsilon: float = 0.0) -> dict[str, Any]:
    """The battery's diagnosis of the agent that copies the first lure ("first-lure") or of
    the reader `name` lapsing with `epsilon`."""
    policy = Contaminating() if name == "first-lure" else Lapsing(name, epsilon)
    return dacs_diagnosis.diagnosis(dacs_replay.play_battery(policy))


class CopyingReader(Reader):
    """The reader, except that at a window showing other agents' values for the requested
    attribute among the options it takes one of them (uniformly) with probability `rate`."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate
        self.rng = np.random.default_rng(11)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        parsed = parse_window(str(observation["window"]))
        attribute = ATTRIBUTE_OF[KEYS.index(parsed.key)]
        right = {m.value for m in evidence(parsed)}
        shown = sorted({m.value for m in parsed.mentions
                        if m.agent != parsed.requester and m.value in parsed.options
                        and m.value not in right
                        and ATTRIBUTE_OF[KEYS.index(m.key)] == attribute})
        if shown and self.rng.random() < self.rate:
            return parsed.options.index(shown[int(self.rng.integers(len(shown)))])
        return self._choose(parsed, self.value(parsed))


def test_a_contaminating_agent_is_named_contaminated_with_the_agents_it_copied() -> None:
    result = diagnosed("first-lure")
    scoping = result["verdicts"]["scoping"]
    # No reader copies the first lure, so the claim is conditional on the closest hypothesis,
    # here a reported two-reader mixture that fits badly too: the words are the single best's.
    closest = result["hypothesis"]["name"]
    assert result["fit"]["verdict"] == "outside the family"
    assert closest.startswith("mixture of ") and result["mixture"] is not None
    assert scoping.startswith(f"scoping: if it were {closest} (it fits badly): if it were one "
                              "mechanism (")
    assert "per episode): contaminated: copies another agent's visible value" in scoping
    assert result["contamination_sources"]
    for source, count in result["contamination_sources"].items():
        assert f"{source} {count}" in scoping
    taken = result["attribution"]["contamination"]
    assert f"{taken} of {result['decisions'] - result['attribution']['correct']} wrong " \
           "answers took another agent's value" in scoping


@pytest.mark.parametrize("name", ["dacs-reader", "flat-recency"])
def test_a_lapse_is_named_within_its_interval_and_not_taken_for_copying(name: str) -> None:
    result = diagnosed(name, 0.2)
    best = result["mechanisms"][0]
    assert name in [best["name"], *best["aliases"]]
    selection = result["verdicts"]["selection"]
    assert selection.startswith(f"selection: lapses to a uniform option on about "
                                f"{best['epsilon']:.0%} of answers")
    epsilon, low, high = (float(x) for x in LAPSE.search(selection).groups())
    assert epsilon == best["epsilon"]
    assert (low, high) == tuple(best["params"]["epsilon_interval"])
    assert low <= 0.2 <= high
    assert not result["verdicts"]["scoping"].startswith("scoping: contaminated: copies")


def test_a_programmed_copy_rate_is_recovered_within_its_interval() -> None:
    decisions = dacs_replay.decisions_of(dacs_replay.play_battery(CopyingReader(0.5)))
    fit = dacs_fit.fit_copying(decisions, "dacs-reader")
    low, high = fit.interval
    assert low <= 0.5 <= high and high - low < 0.3
    assert fit.log_lr >= COPY_LOG_UNITS
    none = dacs_fit.fit_copying(battery_decisions("dacs-reader"), "dacs-reader")
    assert none.rate == 0.0 and none.log_lr == 0.0


def test_visibility_counts_the_answers_the_window_cut() -> None:
    no_budget = {"family": "homogeneous", "context_mode": "flat", "window": None}
    unseen = dacs_diagnosis.diagnosis(dacs_replay.play(Reader(), no_budget, 2))
    assert unseen["verdicts"]["visibility"] == (
        "visibility: no truncation: every answer's evidence was in the window (homogeneous "
        "flat no budget: 0 of 30)")
    small = {"family": "homogeneous", "context_mode": "flat", "window": 1024}
    traces = dacs_replay.play(Reader(), small, 2)
    cut = sum(not evidence(d.parsed) for d in dacs_replay.decisions_of(traces))
    assert cut > 0
    text = dacs_diagnosis.diagnosis(traces)["verdicts"]["visibility"]
    assert text.startswith(f"visibility: truncation: the window lacked the requester's "
                           f"evidence at {cut} of 30 answers (homogeneous flat W=1024: {cut} "
                           "of 30)")


def mechanism(name: str, log_likelihood: float, aliases: tuple[str, ...] = (),
              epsilon: float = 0.0) -> dict[str, Any]:
    return {"name": name, "aliases": list(aliases), "epsilon": epsilon,
            "params": {"epsilon_interval": [0.0, epsilon + 0.05]},
            "log_likelihood": log_likelihood}


def by_hand(*mechanisms: dict[str, Any], copy_log_lr: float = 0.0) -> dict[str, str]:
    counts = {"correct": 30, "contamination": 4, "truncation": 3, "distractor": 2,
              "ambiguous": 1}
    return verdicts(Evidence(
        mechanisms, counts, {"agent-2": 3, "agent-1": 2}, [Position(2, 5, 300)] * 5,
        [Visibility("homogeneous flat W=1024", 40, 4)], 4, 30, 36, 4,
        Copying(0.1 if copy_log_lr else 0.0, (0.0, 0.3), copy_log_lr, 20)))


def test_readers_that_choose_alike_leave_the_component_they_differ_in_unsettled() -> None:
    found = by_hand(mechanism("dacs-reader", -10.0, ("flat-reader", "flat-recency")),
                    mechanism("uniform", -50.0))
    assert found["scoping"].startswith(
        "scoping: no evidence: dacs-reader and flat-reader and flat-recency choose alike on "
        "every answer here, and they differ in scoping")
    assert found["reading"].startswith(f"{FACTS} (and a cascade request's recorded decision)")
    assert found["reading"].endswith("dacs-reader beats uniform by log-LR 40.0")


def test_a_ratio_inside_the_interval_is_weak_and_guessing_first_says_so() -> None:
    close = by_hand(mechanism("dacs-reader", -10.0), mechanism("flat-recency", -11.0))
    assert close["scoping"].endswith("dacs-reader beats flat-recency by log-LR 1.0, weak "
                                     "evidence")
    guessing = by_hand(mechanism("uniform", -20.0), mechanism("registry-only", -19.0))
    assert "ranked first as guessing though registry-only by log-LR 1.0 fits better, within " \
           f"the interval ({INTERVAL_LOG_UNITS:g})" in guessing["ranking"]
    assert guessing["reading"].endswith("registry-only fits better by log-LR 1.0, within the "
                                        f"interval ({INTERVAL_LOG_UNITS:g}), so guessing is "
                                        "not rejected")


def test_copying_is_named_only_past_its_threshold() -> None:
    weak = by_hand(mechanism("dacs-reader", -10.0), mechanism("flat-recency", -30.0),
                   copy_log_lr=(INTERVAL_LOG_UNITS + COPY_LOG_UNITS) / 2)
    assert weak["scoping"].startswith(OWN_BLOCK)
    assert f"weak: below {COPY_LOG_UNITS:.2f}" in weak["scoping"]
    strong = by_hand(mechanism("dacs-reader", -10.0), mechanism("flat-recency", -30.0),
                     copy_log_lr=COPY_LOG_UNITS)
    assert strong["scoping"].startswith(
        "scoping: contaminated: copies another agent's visible value for the attribute on "
        "about 10% of the answers that show one, beyond dacs-reader's rule and lapse")
    assert "4 of 10 wrong answers took another agent's value shown beside the requester's own " \
           "evidence (contamination), 1 more where the evidence was missing (ambiguous with " \
           "truncation); copied from agent-2 3, agent-1 2; the nearest such block at rank 2 " \
           "of 5 from the top" in strong["scoping"]
