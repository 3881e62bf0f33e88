"""The diagnosis's words claim no more than its evidence (issue 37 item 7): an excess over
guessing the test does not carry says "not significant" with its n; a lapse whose interval
holds 0 is not claimed; an agent that keeps two registers is not told its retention has no
deficit; and the DACS headline names the hypothesis its components describe."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from diagym.analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
from diagym.analysis.diagnose.dacs import diagnosis as dacs_diagnosis
from diagym.analysis.diagnose.dacs import replay as dacs_replay
from diagym.analysis.diagnose.honesty import ChanceCount, lapse_words
from diagym.analysis.diagnose.likelihood import (
    fit_family,
    fit_lapse,
    outcome_count,
    simulate_codes,
)
from diagym.analysis.diagnose.run import diagnose_policy, mechanism_model
from diagym.analysis.diagnose.verdicts import LAPSE_HIDES, verdicts
from diagym.controllers.workflow.parameters import CONTROLLERS
from tests.analysis.dacs_agents import HELD_OUT as DACS_HELD_OUT
from tests.analysis.diagnose_agents import KeepsTwo


def test_a_small_excess_says_it_is_not_significant_with_its_n() -> None:
    count = ChanceCount(observed=13, expected_if_guessing=10.29, share=12.0, decisions=21)
    assert not count.in_excess
    words = count.words("wrong register")
    assert words.startswith("wrong register: 62% against 49% by chance, not significant at "
                            "n = 21 (p = 0.")
    assert "no excess" not in words
    below = ChanceCount(observed=8, expected_if_guessing=10.29, share=7.0, decisions=21)
    assert below.words("guess") == "guess: no excess over guessing (38% against 49% by chance)"


def test_a_lapse_whose_interval_holds_zero_is_not_claimed() -> None:
    words = lapse_words(0.05, (0.0, 0.12), 0.02, "slot", "decisions")
    assert not words.startswith("lapses")
    assert words == "no lapse found (best epsilon 0.05, but its interval 0..0.12 holds 0)"
    assert lapse_words(0.2, (0.15, 0.26), 0.02, "slot", "decisions").startswith(
        "lapses to a uniform slot on about 20% of decisions")


def _exact_fits() -> list:  # type: ignore[type-arg]
    model = mechanism_model(DEFAULT_BATTERY)
    counts = [np.bincount(simulate_codes(spec, CONTROLLERS["exact"], 10**6 + 10**4 * c
                                         + np.arange(n, dtype=np.int64)),
                          minlength=outcome_count(spec))
              for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, DEFAULT_ALLOCATION,
                                                strict=True))]
    families = {f: fit_family(model, counts, f) for f in ("cache-k", "scan-s")}
    return fit_lapse(model, counts), families


def test_the_selection_verdict_claims_no_lapse_its_interval_does_not_exclude() -> None:
    ranked, families = _exact_fits()
    assert "exact" in ranked[0].names
    held = [dataclasses.replace(ranked[0], epsilon=0.05, epsilon_interval=(0.0, 0.12)),
            *ranked[1:]]
    selection = verdicts(held, families, None)["selection"]
    assert "lapses to a uniform slot" not in selection
    assert selection.startswith("selection: no deficit: examines every slot until the code "
                                "matches; no lapse found (best epsilon 0.05")


def test_retention_makes_no_claim_under_a_lapse_on_most_decisions() -> None:
    ranked, families = _exact_fits()
    lapsing = [dataclasses.replace(ranked[0], epsilon=0.8, epsilon_interval=(LAPSE_HIDES,
                                                                             0.85)),
               *ranked[1:]]
    retention = verdicts(lapsing, families, None)["retention"]
    assert "no deficit" not in retention
    assert retention.startswith("retention: no claim: the best fit lapses to a uniform slot "
                                "on about 80% of decisions")
    assert verdicts(ranked, families, None)["retention"].startswith(
        "retention: no deficit: keeps every register")


@pytest.mark.parametrize("seed", [0, 1000])
def test_an_agent_keeping_two_registers_is_not_told_retention_has_no_deficit(seed: int
                                                                             ) -> None:
    diagnosis = diagnose_policy(lambda env: KeepsTwo(), seed=seed)
    assert "no deficit" not in diagnosis.verdicts["retention"], diagnosis.verdicts


@pytest.mark.parametrize("agent", ["dacs-reader lapsing 0.25", "flat-recency lapsing 0.2",
                                   "dacs-reader copying 0.5"])
def test_the_dacs_headline_names_the_hypothesis_the_components_describe(agent: str) -> None:
    make, _, _ = DACS_HELD_OUT[agent]
    result = dacs_diagnosis.diagnosis(dacs_replay.play_battery(make(), seed=0))
    best = result["mechanisms"][0]
    hypothesis = result["hypothesis"]
    copying = result["verdicts"]["scoping"].startswith("scoping: contaminated: copies")
    assert hypothesis["reader"] == best["name"]
    if copying:
        assert hypothesis["copy_rate"] > 0
        assert f"with the copy rate {hypothesis['copy_rate']:g} fitted jointly the lapse is " \
               f"epsilon {hypothesis['epsilon']:g}" in result["verdicts"]["selection"]
    else:
        assert hypothesis["copy_rate"] == 0.0 and hypothesis["epsilon"] == best["epsilon"]
        assert f"lapse epsilon {best['epsilon']:g} " in result["verdicts"]["ranking"]
    assert f"best mechanism: {hypothesis['name']}," in result["headline"]
