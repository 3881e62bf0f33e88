"""A forecast names the knobs it takes outside what the battery played and is marked
extrapolated there, in its JSON and its words; one inside the battery's support is not."""

from __future__ import annotations

from diagym.analysis.diagnose.battery import CHOSEN_BATTERY, DEFAULT_BATTERY
from diagym.analysis.diagnose.fit_test import (
    Component,
    Hypothesis,
    forecast,
    outside_support,
    support,
)
from diagym.analysis.diagnose.run import diagnose_policy, label, mechanism_model
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs.workflow.params import WorkflowParams

BARRIERS = {"family": "barriers", "n_ops": 8, "depth": 2, "width": 8, "candidates": 3,
            "snapshot_period": 0, "error_allowance": 2}


def test_the_support_is_a_range_for_integer_knobs_and_the_values_for_the_others() -> None:
    found = support(DEFAULT_BATTERY)
    assert found["family"] == ("barriers", "chains")
    assert found["hidden_resampling"] == (False, True)
    assert found["width"] == (4, 8) and found["snapshot_period"] == (0, 1, 2)
    inside = WorkflowParams(depth=4, width=6, candidates=5, snapshot_period=2,
                            error_allowance=1)
    assert outside_support(inside, DEFAULT_BATTERY) == {}
    assert outside_support(WorkflowParams.from_kwargs(**BARRIERS), DEFAULT_BATTERY) == {}
    far = WorkflowParams(n_ops=12, depth=3, width=6, candidates=5, snapshot_period=3,
                         updates="static")
    assert outside_support(far, DEFAULT_BATTERY) == {
        "n_ops": (12, (8,)), "snapshot_period": (3, (0, 1, 2)),
        "updates": ("static", ("additive",))}


def test_the_default_battery_varies_the_graph_family_and_not_the_other_categories() -> None:
    """Barriers are played (battery.SUPPORT_BATTERY), so a barriers forecast is in support;
    locality, updates and labels are still played at one value each, so a forecast at
    another value of any of them stays extrapolated, barriers or not."""
    assert {spec.family for spec in DEFAULT_BATTERY} == {"chains", "barriers"}
    for knob, value, played in (("locality", "clustered", "balanced"),
                                ("updates", "static", "additive"),
                                ("labels", "reversed", "random")):
        spec = WorkflowParams.from_kwargs(**{**BARRIERS, knob: value})
        assert outside_support(spec, DEFAULT_BATTERY) == {knob: (value, (played,))}


def test_a_barriers_forecast_from_an_all_chains_battery_is_marked() -> None:
    model = mechanism_model(DEFAULT_BATTERY)
    exact = Hypothesis("exact", (Component(model.index["exact"], 0.0),))
    assert {spec.family for spec in CHOSEN_BATTERY} == {"chains"}
    marked = forecast(model, exact, [], dict(BARRIERS), played=CHOSEN_BATTERY)
    assert marked.extrapolated == {"family": ("barriers", ("chains",))}
    assert marked.to_json()["in_support"] is False
    assert marked.to_json()["extrapolated"] == {
        "family": {"value": "barriers", "battery": ["chains"]}}
    assert marked.note() == " (extrapolated: family barriers where the battery played chains)"
    conditional = forecast(model, exact, [], dict(BARRIERS), conditional=True,
                           played=CHOSEN_BATTERY)
    assert conditional.note() == (" (if the closest hypothesis held; extrapolated: family "
                                  "barriers where the battery played chains)")
    # the default battery plays barriers: the same forecast is in its support
    assert WorkflowParams.from_kwargs(**BARRIERS) in DEFAULT_BATTERY
    inside = forecast(model, exact, [], dict(BARRIERS))
    assert inside.extrapolated == {} and inside.note() == ""
    assert inside.to_json()["in_support"] is True
    assert inside.success == marked.success


def test_a_diagnosis_marks_what_its_played_configurations_do_not_support() -> None:
    """The support is what the agent played, not the whole battery: with episodes on the
    first configuration only (depth 8, width 8, b 3), a barriers forecast and a width-6 one
    are extrapolated, and a forecast on that configuration itself is not."""
    allocation = (4,) + (0,) * (len(DEFAULT_BATTERY) - 1)
    narrow = {**DEFAULT_BATTERY[0].as_dict(), "width": 6}
    diagnosis = diagnose_policy(lambda env: ReferencePolicy.for_env("exact", env),
                                allocation=allocation,
                                forecasts=[BARRIERS, narrow, DEFAULT_BATTERY[0].as_dict()])
    barriers, six, played = diagnosis.forecasts
    assert barriers.extrapolated["family"] == ("barriers", ("chains",))
    assert six.extrapolated == {"width": (6, (8,))}
    assert played.extrapolated == {} and played.to_json()["in_support"] is True


def test_a_configuration_of_another_graph_family_is_its_own_run() -> None:
    chains = DEFAULT_BATTERY[1]
    barriers = WorkflowParams.from_kwargs(**{**chains.as_dict(), "family": "barriers"})
    assert label(barriers) == label(chains) + " barriers"


def test_a_diagnosis_that_played_the_barriers_configuration_holds_barriers_in_support() -> None:
    """Episodes on the first configuration and on the battery's barriers one: the barriers
    forecast is in support (depth 2..8 and b 3 were played); one at clustered locality is
    not."""
    allocation = (4,) + (0,) * (len(DEFAULT_BATTERY) - 2) + (4,)
    assert DEFAULT_BATTERY[-1].family == "barriers"
    clustered = {**BARRIERS, "locality": "clustered"}
    diagnosis = diagnose_policy(lambda env: ReferencePolicy.for_env("exact", env),
                                allocation=allocation, forecasts=[BARRIERS, clustered])
    barriers, other = diagnosis.forecasts
    assert barriers.extrapolated == {} and barriers.to_json()["in_support"] is True
    assert other.extrapolated == {"locality": ("clustered", ("balanced",))}
