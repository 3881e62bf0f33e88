"""Verdicts in words name the mechanism each component of a known agent has.

The agents are reference controllers played opaquely by the batched runner on the default
battery at the default budget (seeds disjoint from the model's simulations), fitted with
lapse rates and every family, as the diagnose command fits an agent.
"""

from __future__ import annotations

import numpy as np
import pytest

from diagym.analysis.diagnose.attribution import Tally
from diagym.analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
from diagym.analysis.diagnose.hypotheses import families
from diagym.analysis.diagnose.likelihood import (
    MechanismModel,
    count_outcomes,
    fit,
    fit_family,
    fit_lapse,
    outcome_count,
    simulate_codes,
    with_lapse,
)
from diagym.analysis.diagnose.verdicts import COMPONENTS, rival, verdicts
from diagym.controllers.workflow.batched import episode_columns
from diagym.controllers.workflow.parameters import CONTROLLERS

REPEATS = 3


def seeds(repeat: int, config: int) -> np.ndarray:
    return repeat * 10**6 + config * 10**4 + np.arange(DEFAULT_ALLOCATION[config],
                                                       dtype=np.int64)


def reference_counts(name: str, repeat: int) -> list[np.ndarray]:
    return [count_outcomes(spec, episode_columns(spec, name, seeds(repeat, c))[0])
            for c, spec in enumerate(DEFAULT_BATTERY)]


@pytest.fixture(scope="module")
def model(default_model: MechanismModel) -> MechanismModel:
    return default_model


def said(model: MechanismModel, counts: list[np.ndarray],
         tally: Tally | None = None) -> dict[str, str]:
    family_fits = {family: fit_family(model, counts, family) for family in families()}
    return verdicts(fit_lapse(model, counts), family_fits, tally)


@pytest.mark.parametrize(("name", "component", "start"), [
    ("cache-2", "retention", "a cache of 2 registers (cache-k MLE 2, interval 2..2)"),
    ("scan-2", "selection", "scans only the first 2 slots, then guesses among the rest "
                            "(scan-s MLE 2, interval 2..2)"),
    ("random-schedule", "scheduling", "picks operations at random among the incomplete ones"),
    ("eliminate", "recovery", "eliminates the slots that failed"),
    ("eliminate", "retention", "retains no register value"),
    ("stale-8", "retention", "stale state"),
    ("next-use-2", "retention", "an adaptive cache of 2 registers chosen by next use"),
])
def test_the_deficit_is_named_in_its_component(model: MechanismModel, name: str,
                                               component: str, start: str) -> None:
    for repeat in range(REPEATS):
        found = said(model, reference_counts(name, repeat))
        assert found[component].startswith(f"{component}: {start}"), (repeat, found)
        others = [c for c in COMPONENTS if c != component]
        if name in ("cache-2", "scan-2", "random-schedule"):  # one deficit each
            for other in others:
                assert found[other].startswith(f"{other}: no deficit"), (repeat, found)


def test_exact_has_no_deficit_anywhere(model: MechanismModel) -> None:
    for repeat in range(REPEATS):
        found = said(model, reference_counts("exact", repeat))
        assert list(found) == list(COMPONENTS)
        for component in COMPONENTS:
            assert found[component].startswith(f"{component}: no deficit"), (repeat, found)


def test_cache_2_in_exact_words(model: MechanismModel) -> None:
    counts = reference_counts("cache-2", 0)
    tally = Tally(counts={"dependency": 0, "completed": 0, "stale_value": 3,
                          "wrong_register": 2, "initial_value": 0, "guess": 41, "ambiguous": 6},
                  weighted={}, decisions=400, successes=348)
    assert said(model, counts, tally) == {
        "scheduling": "scheduling: no deficit: runs a ready operation, prerequisites first; "
                      "0 of 52 failed calls were dependency failures; cache-2 beats "
                      "random-schedule+cache-2 by log-LR 2378.4",
        "retention": "retention: a cache of 2 registers (cache-k MLE 2, interval 2..2); of 52 "
                     "candidate failures 41 fit no known value (a guess), 6 several "
                     "explanations, 3 a stale value (stale state), 2 another register's value "
                     "(binding); cache-2 beats cache-1 by log-LR 16.2",
        "selection": "selection: no deficit: examines every slot until the code matches; no "
                     "lapse (epsilon 0, interval 0..0.0063); cache-2 beats cache-2+scan-6 by "
                     "log-LR 13.2",
        "recovery": "recovery: no deficit: retries draw again as exact does, failed slots not "
                    "excluded; cache-2 beats cache-2+eliminate by log-LR 679.1",
    }


def test_a_lapse_is_named_in_selection(model: MechanismModel) -> None:
    row = with_lapse(CONTROLLERS["cache-2"], 0.1)
    counts = [np.bincount(simulate_codes(spec, row, seeds(0, c)), minlength=outcome_count(spec))
              for c, spec in enumerate(DEFAULT_BATTERY)]
    found = said(model, counts)
    assert found["selection"].startswith(
        "selection: lapses to a uniform slot on about 10% of decisions (epsilon 0.1, interval "
        "0.072..0.14), otherwise examines every slot"), found
    assert found["retention"].startswith("retention: a cache of"), found


def test_no_episodes_give_no_evidence(model: MechanismModel) -> None:
    empty = [np.zeros(outcome_count(spec), dtype=np.int64) for spec in DEFAULT_BATTERY]
    found = verdicts(fit(model, empty), {}, None)
    assert found["scheduling"] == ("scheduling: no evidence: exact and random-schedule fit "
                                   "equally (log-LR 0.0)")
    for component in COMPONENTS:
        assert found[component].startswith(f"{component}: no evidence"), found


def test_the_rival_differs_in_the_component_alone_where_it_can(model: MechanismModel) -> None:
    ranked = fit(model, reference_counts("cache-2", 0))
    assert ranked[0].mechanism.name == "cache-2"
    assert rival(ranked, "retention").mechanism.name == "cache-1"  # type: ignore[union-attr]
    assert rival(ranked, "recovery").mechanism.name == "cache-2+eliminate"  # type: ignore[union-attr]
    only = [ranked[0]]
    assert rival(only, "retention") is None
    assert verdicts(only, {}, None)["retention"] == (
        "retention: no evidence: no fitted alternative differs from cache-2 in retention")
    with pytest.raises(ValueError, match="at least one"):
        verdicts([], {}, None)
