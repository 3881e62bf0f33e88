"""The failure check (analysis/diagnose/failure_check.py): a hypothesis that fits the agent's
outcomes but fails for other causes is named so in the headline and the verdicts; one that
fails as the agent does is not. Positive controls: a family member whose failed calls are
re-routed to another register (same outcomes, other causes) is flagged, the member itself is
not; and the issue's deterministic reader of the wrong register, which fits perseverate-1@1 on
outcomes, is flagged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from diagym.analysis.diagnose.attribution import attribution_counts
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.failure_check import (
    CAUSES,
    FailureCheck,
    failure_check,
    failure_vector,
    hypothesis_traces,
)
from diagym.analysis.diagnose.fit_test import Component, Hypothesis
from diagym.analysis.diagnose.honesty import Evidence, FitTest, conditional, headline
from diagym.analysis.diagnose.report import to_json, to_markdown
from diagym.analysis.diagnose.run import diagnose_policy, mechanism_model
from diagym.controllers.workflow.adapter import ReferencePolicy
from tests.analysis.diagnose_agents import HiddenController, Rerouted, WrongRegister, play


class Cache2(HiddenController):
    controller = "cache-2"


class RerouteCache2(Rerouted):
    controller = "cache-2"


def test_simulated_traces_are_the_controllers_own_play() -> None:
    """The hypothesis's traces from the batched runner equal the same controller played
    through gym.make and the Policy adapter, so their attribution is the agent's kind."""
    model = mechanism_model(DEFAULT_BATTERY)
    spec = DEFAULT_BATTERY[0]
    hypothesis = Hypothesis("cache-2", (Component(model.index["cache-2"], 0.0),))
    seeds = np.arange(40, dtype=np.int64)
    simulated, failed = hypothesis_traces(model, hypothesis, spec, seeds,
                                          np.random.default_rng(0))

    class Adapter:
        def __init__(self) -> None:
            self.inner = ReferencePolicy("cache-2", spec)

        def reset(self, *, seed: int | None = None) -> None:
            self.inner.reset(seed=seed)

        def act(self, observation, info):  # type: ignore[no-untyped-def]
            return self.inner.act(observation, info)

    assert [t.actions for t in simulated] == [
        t.actions for t in play(Adapter(), spec.as_dict(), range(40))]
    steps = spec.n_ops + 1
    vectors = np.array([failure_vector(t, steps) for t in simulated])
    assert vectors[:, :len(CAUSES)].sum(axis=1).tolist() == failed.tolist()
    assert (np.array([failure_vector(t, steps, int(f)) for t, f in zip(simulated, failed,
                                                                       strict=True)])
            == vectors).all()
    tally = attribution_counts(simulated)
    assert vectors[:, :len(CAUSES)].sum(axis=0).tolist() == [tally.counts[k] for k in CAUSES]
    assert vectors[:, :len(CAUSES)].sum() == vectors[:, len(CAUSES):].sum() > 0


def test_a_rerouted_family_member_is_flagged_and_the_member_is_not() -> None:
    member = diagnose_policy(lambda env: Cache2(env), seed=0)
    rerouted = diagnose_policy(lambda env: RerouteCache2(env), seed=0)
    # the same outcomes: the outcome fit cannot tell them apart
    assert [c.counts.tolist() for c in member.configurations] == [
        c.counts.tolist() for c in rerouted.configurations]
    assert member.fit is not None and rerouted.fit is not None
    assert member.fit.verdict == rerouted.fit.verdict == "fits"
    assert member.failures is not None and not member.failures.rejected, member.failures
    assert "but not the failures" not in member.headline
    assert rerouted.failures is not None and rerouted.failures.rejected, rerouted.failures
    assert rerouted.headline.startswith(
        "best mechanism: cache-2, which fits the outcomes (fit p = ")
    assert ", but not the failures (p < 0.0025: wrong register on " in rerouted.headline
    assert all("(its failures differ from the agent's)" in v
               for v in rerouted.verdicts.values())
    data = to_json(rerouted)["failures"]
    assert data["verdict"] == "does not fit" and data["differs_most"]["what"] == "wrong register"
    assert to_json(member)["failures"]["verdict"] == "fits"
    assert "the failures **do not fit**; most different: wrong register on " in \
        to_markdown(rerouted)


def test_the_wrong_register_reader_fits_its_outcomes_but_not_its_failures() -> None:
    """The issue's agent: on outcomes it fits a uniform guesser that perseverates
    (perseverate-1@1, "keeps every register"); its failed calls are another register's value
    far above what that hypothesis gives."""
    diagnosis = diagnose_policy(lambda env: WrongRegister(env.unwrapped.params.width), seed=0)
    assert diagnosis.fit is not None and not diagnosis.fit.rejected
    assert diagnosis.failures is not None and diagnosis.failures.rejected
    what, agent, predicted = diagnosis.failures.differs_most
    assert what == "wrong register" and agent > predicted + 0.05
    assert "but not the failures" in diagnosis.headline
    assert diagnosis.verdicts["retention"].startswith(
        f"retention: if it were {diagnosis.hypothesis.name} (its failures differ")


def test_the_same_failures_are_no_evidence_against_a_hypothesis() -> None:
    """The agent's own traces checked against a hypothesis whose simulated traces are the
    same controller: the permutation p-value is not small, and a check with no failures is
    None."""
    model = mechanism_model(DEFAULT_BATTERY)
    hypothesis = Hypothesis("cache-2", (Component(model.index["cache-2"], 0.0),))
    spec = DEFAULT_BATTERY[0]
    own = hypothesis_traces(model, hypothesis, spec, 10**5 + np.arange(150, dtype=np.int64),
                            np.random.default_rng(1))
    check = failure_check(model, hypothesis, [(spec, *own)])
    assert check is not None and check.p_value > 0.05, check
    exact = Hypothesis("exact", (Component(model.index["exact"], 0.0),))
    perfect = hypothesis_traces(model, exact, spec, np.arange(20, dtype=np.int64),
                                np.random.default_rng(1))
    assert failure_check(model, exact, [(spec, *perfect)]) is None


@pytest.mark.parametrize("rejected", [True, False])
def test_the_headline_says_fits_the_outcomes_but_not_the_failures(rejected: bool) -> None:
    test = FitTest("stale-8", 70.0, 0.17, 200, 72.0)
    failures = FailureCheck("stale-8", 2538.0, 1 / 401 if rejected else 0.4, 400, 25.0, 1256,
                            2576, ("wrong register", 0.65, 0.0))
    evidence = Evidence(episodes=512, with_outcome=512, failures=1256)
    line = headline("stale-8", test, evidence, "", failures)
    verdicts = conditional({"retention": "retention: stale state"}, test, "stale-8", evidence,
                           failures)
    if rejected:
        assert line == ("best mechanism: stale-8, which fits the outcomes (fit p = 0.17), but "
                        "not the failures (p < 0.0025: wrong register on 65% of failed calls "
                        "where stale-8 gives 0%)")
        assert verdicts == {"retention": "retention: if it were stale-8 (its failures differ "
                                         "from the agent's): stale state"}
    else:
        assert line == "best mechanism: stale-8, which fits the outcomes (fit p = 0.17)"
        assert verdicts == {"retention": "retention: stale state"}


def test_a_rejected_p_value_is_never_printed_at_the_level() -> None:
    check = FailureCheck("exact@0.25", 40.0, 4 / 401, 400, 20.0, 150, 300, ("guess", 0.2, 0.1))
    assert check.rejected and check.p_text() == "p = 0.00998"
    assert dataclasses.replace(check, p_value=0.0125).p_text() == "p = 0.013"
    assert dataclasses.replace(check, p_value=1 / 401).p_text() == "p < 0.0025"
