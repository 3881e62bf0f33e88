"""The adaptive design stops only as honestly as the fixed battery: its stop needs the
absolute fit test to hold after a guaranteed share of episodes spent checking where the
leader's prediction is most at risk; an agent outside the family is stopped as "outside the
family", and a budget too small to test the fit says so instead of reporting a pass."""

from __future__ import annotations

import functools

import numpy as np

from diagym.analysis.diagnose import adaptive
from diagym.analysis.diagnose.run import Diagnosis, diagnose_policy
from tests.analysis.heldout_agents import HELD_OUT


@functools.cache
def adaptive_diagnosis(agent: str, budget: int = 512) -> Diagnosis:
    cls = HELD_OUT[agent][0]
    return diagnose_policy(lambda env: cls(env), seed=0, adaptive_budget=budget)


def test_an_agent_outside_the_family_is_not_stopped_confidently() -> None:
    """An agent whose lapse grows with every decision stopped on next-use-4 at posterior 0.99
    after 15 episodes, "which fits"; it is now stopped as outside the family."""
    diagnosis = adaptive_diagnosis("fatigued")
    design = diagnosis.design
    assert design.steps[-1].reason.startswith(f"{adaptive.OUTSIDE_STOP}: the fit test rejects")
    assert diagnosis.fit is not None and diagnosis.fit.rejected
    assert diagnosis.headline.startswith("outside the family")
    assert design.episodes >= adaptive.MIN_FIT_EPISODES


def test_an_agent_inside_stops_on_its_posterior_with_the_fit_test_holding() -> None:
    diagnosis = adaptive_diagnosis("exact lapsing 0.2")
    design = diagnosis.design
    assert design.steps[-1].reason.startswith("posterior of exact reached 0.99 and the fit "
                                              "test holds")
    assert diagnosis.headline.startswith("best mechanism: exact")
    # the check share is spent, and every configuration was played before the stop
    assert design.checked >= adaptive.CHECK_SHARE * design.episodes
    assert all(len(c.episodes) for c in diagnosis.configurations)
    assert len(diagnosis.configurations) == len(diagnosis.model.battery)


def test_a_budget_too_small_for_a_fit_test_reports_no_test() -> None:
    diagnosis = adaptive_diagnosis("exact lapsing 0.2", 32)
    assert diagnosis.design.steps[-1].reason.startswith(adaptive.TOO_LITTLE)
    assert diagnosis.design.too_little and diagnosis.fit is None
    assert "(no fit test)" in diagnosis.headline and adaptive.TOO_LITTLE in diagnosis.headline


def test_the_adaptive_test_is_upper_tailed_and_passes_a_controller_it_fits_closely() -> None:
    """The best of about a hundred hypotheses fitted on few episodes fits better than its
    unrefitted replicates: two-sided, uniform-candidate (these seeds) stopped "outside the
    family" as too consistent after 96 episodes; upper-tailed it is not rejected."""
    from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
    from diagym.analysis.diagnose.likelihood import count_outcomes
    from diagym.analysis.diagnose.run import mechanism_model
    from diagym.controllers.workflow.batched import episode_columns

    model = mechanism_model(DEFAULT_BATTERY)
    counts = [np.zeros(len(log_p[0]), dtype=np.int64) for log_p in model.log_p]
    used = [0] * len(DEFAULT_BATTERY)

    def play(c: int, episodes: int) -> np.ndarray:
        spec = DEFAULT_BATTERY[c]
        seeds = 10**7 + 10**5 + c * 10**4 + used[c] + np.arange(episodes, dtype=np.int64)
        counts[c] = counts[c] + count_outcomes(spec, episode_columns(spec, "uniform-candidate",
                                                                     seeds)[0])
        used[c] += episodes
        return counts[c]

    design = adaptive.run_design(model, 512, play)
    assert not design.steps[-1].reason.startswith(adaptive.OUTSIDE_STOP), design.steps[-1]
    _, test = adaptive.leader_test(model, counts)
    assert test is not None and not test.two_sided and test.to_json()["tails"] == "upper"
    assert adaptive_diagnosis("exact lapsing 0.2").fit.two_sided is False
