"""The honest diagnosis: lapse found on every hypothesis, profile intervals, the absolute fit
test (accepts what is in the family, rejects what is not), forecasts, attribution against
chance and the nothing-to-fit headline."""

from __future__ import annotations

import numpy as np
import pytest

from diagym.analysis.diagnose.attribution import GUESS, WRONG_REGISTER, attribution_counts
from diagym.analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
from diagym.analysis.diagnose.fit_test import (
    Hypothesis,
    fit_test,
    forecast,
    plausible,
    success_rate,
)
from diagym.analysis.diagnose.honesty import (
    INTERVAL_LOG_UNITS,
    OUTSIDE,
    ChanceCount,
    Evidence,
    FitTest,
    against_chance,
    conditional,
    headline,
    profile_interval,
)
from diagym.analysis.diagnose.likelihood import (
    MechanismModel,
    fit_lapse,
    outcome_count,
    simulate_codes,
    with_lapse,
)
from diagym.analysis.diagnose.run import diagnose_policy, label
from diagym.controllers.workflow.parameters import CONTROLLERS
from diagym.envs.workflow.params import WorkflowParams
from tests.analysis.diagnose_agents import Guesser, play
from tests.analysis.heldout_agents import FAILURE_MODE, HELD_OUT, LAPSE

LABELS = [label(s) for s in DEFAULT_BATTERY]


@pytest.fixture(scope="module")
def model(default_model: MechanismModel) -> MechanismModel:
    return default_model


def counts_of(row: tuple[int, ...], repeat: int) -> list[np.ndarray]:
    return [np.bincount(simulate_codes(spec, row, 10**6 * (repeat + 1) + 10**4 * c
                                       + np.arange(n, dtype=np.int64)),
                        minlength=outcome_count(spec))
            for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, DEFAULT_ALLOCATION, strict=True))]


def test_a_profile_interval_is_never_a_grid_point_by_coarseness() -> None:
    low, high = profile_interval([0.0, 0.1, 0.2, 0.3], [-40.0, -5.0, 0.0, -30.0])
    assert 0.1 < low < 0.2 < high < 0.3
    assert profile_interval([0.0, 0.5, 1.0], [-50.0, -10.0, 0.0])[1] == 1.0  # still rising


@pytest.mark.parametrize(("name", "epsilon"), [("exact", 0.2), ("exact", 0.3),
                                                ("cache-2", 0.2)])
def test_the_lapse_is_found_on_a_hypothesis_that_leads_only_with_it(
        model: MechanismModel, name: str, epsilon: float) -> None:
    """exact lapsing at 0.2 reads as scan-6 or a cache of 7 at epsilon 0: the screen of every
    hypothesis at every lapse rate still profiles the truth, which is within the interval of
    the best (exact and exact with elimination, the weakest reference pair, may swap), with
    the true rate inside both intervals."""
    for repeat in range(2):
        ranked = fit_lapse(model, counts_of(with_lapse(CONTROLLERS[name], epsilon), repeat))
        truth = next(f for f in ranked if name in f.names)
        assert truth.log_lr_to_best > -INTERVAL_LOG_UNITS, (repeat, ranked[0], truth)
        for found in (ranked[0], truth):
            low, high = found.epsilon_interval
            assert low < epsilon < high, (repeat, found)


def test_the_fit_test_accepts_in_family_agents_and_rejects_others(
        model: MechanismModel) -> None:
    for name in ("exact", "cache-2", "scan-2"):
        counts = counts_of(CONTROLLERS[name], 3)
        best = fit_lapse(model, counts)[0]
        test = fit_test(model, counts, Hypothesis.of_fit(model, best), LABELS)
        assert test is not None and test.verdict == "fits", (name, test)
    # An even mixture of exact and uniform-candidate per episode is no single mechanism.
    exact = counts_of(CONTROLLERS["exact"], 4)
    guesser = counts_of(CONTROLLERS["uniform-candidate"], 5)
    mixed = [np.round(a / 2 + b / 2).astype(np.int64) for a, b in zip(exact, guesser,
                                                                      strict=True)]
    best = fit_lapse(model, mixed)[0]
    test = fit_test(model, mixed, Hypothesis.of_fit(model, best), LABELS)
    assert test.verdict == OUTSIDE and test.outside, test
    assert test.statistic > test.expected


def test_a_forecast_holds_what_the_agent_then_does(model: MechanismModel) -> None:
    row = with_lapse(CONTROLLERS["cache-2"], 0.1)
    ranked = fit_lapse(model, counts_of(row, 6))
    best = Hypothesis.of_fit(model, ranked[0])
    unseen = {"n_ops": 12, "depth": 3, "width": 6, "candidates": 5, "snapshot_period": 3}
    predicted = forecast(model, best, plausible(model, ranked), unseen)
    spec = WorkflowParams.from_kwargs(**unseen)
    codes = simulate_codes(spec, row, np.arange(7 * 10**6, 7 * 10**6 + 4000, dtype=np.int64))
    observed = float(np.mean((codes // (spec.error_allowance + 2)) % (spec.n_ops + 1)
                             == spec.n_ops))
    low, high = predicted.interval
    assert low <= observed <= high, (observed, predicted)
    assert 0.0 < predicted.success == success_rate(model, best, spec) < 1.0


def test_a_guessers_binding_is_no_excess_over_chance() -> None:
    """At b = 3 and width 8 a uniform slot almost always matches another register's value:
    the count says binding, the comparison with chance says it is what guessing gives."""
    kwargs = {"depth": 2, "width": 8, "candidates": 3, "snapshot_period": 0,
              "error_allowance": 2}
    tally = attribution_counts(play(Guesser(), kwargs, range(300)))
    chance = against_chance(tally.counts, tally.expected, tally.weighted, tally.wrong_slots)
    assert tally.counts[WRONG_REGISTER] > tally.wrong_slots / 2
    assert not chance[WRONG_REGISTER].in_excess and not chance[GUESS].in_excess
    assert "no excess over guessing" in chance[WRONG_REGISTER].words("binding")
    assert sum(c.expected_if_guessing for c in chance.values()) == pytest.approx(
        tally.wrong_slots)


def test_an_excess_is_named_with_its_chance_rate() -> None:
    count = ChanceCount(observed=97, expected_if_guessing=60.0, share=80.0, decisions=100)
    assert count.in_excess
    assert count.words("binding") == "binding: 97% against 60% by chance"


def test_nothing_to_fit_and_a_rejected_fit_are_said_plainly() -> None:
    nothing = Evidence(episodes=23, with_outcome=0, invalid={"invalid_action": 23})
    assert headline("exact", None, nothing) == (
        "23 of 23 episodes ended on an invalid reply or without an env outcome; nothing to fit")
    verdicts = {"retention": "retention: no deficit"}
    assert conditional(verdicts, None, "exact", nothing) == {
        "retention": "retention: withheld: no episode ended with an env outcome"}
    rejected = FitTest("scan-6", 5150.0, 2 / 401, 400, 72.0, ("d8 w8 b3 history R2",))
    enough = Evidence(episodes=512, with_outcome=512, failures=400)
    assert headline("scan-6", rejected, enough).startswith(
        "outside the family: no reference mechanism explains the outcomes (fit p < 0.005: "
        "statistic 5150 where about 72 is expected); closest: scan-6")
    assert conditional(verdicts, rejected, "scan-6", enough) == {
        "retention": "retention: if it were scan-6 (it fits badly): no deficit"}
    few = Evidence(episodes=10, with_outcome=10, failures=3)
    assert conditional(verdicts, None, "exact", few)["retention"].startswith(
        "retention: too little evidence for a claim (10 episodes with an env outcome, 3 failed")


@pytest.mark.parametrize("agent", sorted(HELD_OUT))
def test_held_out_agents_are_fitted_or_rejected(agent: str) -> None:
    """Inside the family with a lapse: the truth ranks first with the lapse in its interval and
    the fit test accepts it. Inside by a failure mode or a mixture: that family (or a reported
    mixture) leads and the fit test accepts it. Outside: the fit test rejects, but for the two
    misses measured (docs/RESULTS.md): a recency cache of 2 plays close to cache-2 and cache-1,
    and an exact agent that guesses at width 8 plays as scan-2 does on the battery."""
    cls, truth, where = HELD_OUT[agent]
    diagnosis = diagnose_policy(lambda env: cls(env), seed=0)
    assert diagnosis.fit is not None
    top = diagnosis.ranked[0]
    if where == LAPSE:
        # The truth ranks first, or (a sample's miss: cache-2 lapsing 0.2 on the seed blocks
        # of seed 0 ranks cache-2+scan-6@0.15 first, log-LR 0.84 over cache-2) is not rejected
        # against the first; either way its lapse interval holds the lapse and the fit holds.
        name, epsilon = truth.split("@")
        fitted = next(f for f in diagnosis.ranked if name in f.names)
        assert diagnosis.fit.verdict == "fits", (agent, top, diagnosis.fit)
        assert fitted.log_lr_to_best >= -INTERVAL_LOG_UNITS, (agent, top, fitted)
        assert fitted.epsilon_interval is not None
        low, high = fitted.epsilon_interval
        assert low < float(epsilon) < high
        if fitted is top:
            assert diagnosis.headline.startswith(f"best mechanism: {name}")
    elif where == FAILURE_MODE:
        assert diagnosis.fit.verdict == "fits", (agent, top, diagnosis.fit)
        if truth == "mixture":
            assert diagnosis.mixture is not None, (agent, top)
        else:
            assert any(name.startswith(truth) for name in top.names), (agent, top)
    elif agent == "recency cache 2":
        assert diagnosis.fit.p_value < 0.2
    elif agent == "width-bound":  # plays as scan-2 does on the battery: measured, not caught
        assert "scan-2" in top.names, (agent, top)
    else:
        assert diagnosis.fit.verdict == OUTSIDE, (agent, diagnosis.fit)
        assert diagnosis.headline.startswith("outside the family")
        assert all("if it were" in text for text in diagnosis.verdicts.values())
