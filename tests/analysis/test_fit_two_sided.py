"""The fit test rejects in both tails, in both env families: an agent that varies less than
its best hypothesis would (a deterministic chooser matched by a lapse's uniform choices, or
outcome counts matching the tables too well) is outside the family, as one that varies more
is; and a member of the family, drawn from the very hypothesis tested, is rejected no more
often than the nominal FIT_ALPHA allows."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
from scipy.stats import binom

from diagym.analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
from diagym.analysis.diagnose.dacs import diagnosis as dacs_diagnosis
from diagym.analysis.diagnose.dacs import replay as dacs_replay
from diagym.analysis.diagnose.dacs.fit import DacsHypothesis
from diagym.analysis.diagnose.dacs.fit import fit_test as dacs_fit_test
from diagym.analysis.diagnose.dacs.replay import right_value
from diagym.analysis.diagnose.fit_test import Component, Hypothesis, _play_codes, fit_test, tables
from diagym.analysis.diagnose.honesty import FIT_ALPHA, FitTest, two_sided_p_value
from diagym.analysis.diagnose.likelihood import outcome_count
from diagym.analysis.diagnose.run import label, mechanism_model
from diagym.controllers.dacs.readers import Reader, dacs_controller, parse_window

SEEDED_RUNS = 40
# Rejections of a true hypothesis in SEEDED_RUNS runs at FIT_ALPHA: more than this happens
# with probability below 0.001 when the test holds its level.
ALLOWED = int(binom.ppf(0.999, SEEDED_RUNS, FIT_ALPHA))


class Longest(Reader):
    """Reads nothing: the longest option, the first of the longest on a tie."""

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        options = parse_window(str(observation["window"])).options
        return max(range(len(options)), key=lambda j: (len(options[j]), -j))


def test_two_sided_p_value_is_twice_the_smaller_tail() -> None:
    replicates = np.arange(1.0, 100.0)  # 99 replicates
    assert two_sided_p_value(0.0, replicates) == 2 / 100
    assert two_sided_p_value(200.0, replicates) == 2 / 100
    assert two_sided_p_value(50.0, replicates) == 1.0
    assert two_sided_p_value(10.0, replicates) == 2 * 11 / 100


def test_a_statistic_far_below_the_replicates_is_rejected_as_too_consistent() -> None:
    rng = np.random.default_rng(0)
    replicated = rng.chisquare(10, size=(400, 3))
    test = FitTest.of_replicates("h", np.array([0.5, 0.4, 0.3]), replicated, ["a", "b", "c"])
    assert test.rejected and test.too_consistent
    assert test.outside == ("a", "b", "c")
    assert test.p_text() == "p < 0.005"
    typical = FitTest.of_replicates("h", replicated[0], replicated[1:], ["a", "b", "c"])
    assert not typical.rejected


def test_a_deterministic_dacs_agent_that_reads_nothing_is_outside_the_family() -> None:
    result = dacs_diagnosis.diagnosis(dacs_replay.play_battery(Longest(), seed=0))
    assert result["fit"]["verdict"] == "outside the family", result["fit"]
    assert result["headline"].startswith("outside the family")


@functools.cache
def _reader_windows() -> tuple[tuple[dict[str, Any], tuple[dacs_replay.DacsDecision, ...]], ...]:
    """dacs-reader's battery decisions per configuration: the windows the null is drawn on."""
    groups: dict[str, tuple[dict[str, Any], list[dacs_replay.DacsDecision]]] = {}
    for trace in dacs_replay.play_battery(dacs_controller("dacs-reader")):
        kwargs = dict(trace.env_kwargs)
        groups.setdefault(repr(kwargs), (kwargs, []))[1].extend(dacs_replay.decisions_of([trace]))
    return tuple((kwargs, tuple(group)) for kwargs, group in groups.values())


def _drawn_from(hypothesis: DacsHypothesis, decisions: tuple[dacs_replay.DacsDecision, ...],
                rng: np.random.Generator) -> list[dacs_replay.DacsDecision]:
    """The decisions with each answer drawn from `hypothesis` given its window: the fit
    test's null, which conditions on the windows."""
    p = hypothesis.option_probabilities(decisions)
    out = []
    for i, d in enumerate(decisions):
        right = d.options.index(right_value(d)) if right_value(d) in d.options else -1
        action = int(rng.choice(p.shape[1], p=p[i] / p[i].sum()))
        out.append(dataclasses.replace(d, action=action, correct=action == right, right=right))
    return out


def test_a_dacs_family_member_is_rejected_no_more_often_than_the_nominal_rate() -> None:
    hypothesis = DacsHypothesis("dacs-reader", 0.3, 0.2)
    rng = np.random.default_rng(0)
    rejected = 0
    for _ in range(SEEDED_RUNS):
        drawn = [(kwargs, _drawn_from(hypothesis, group, rng))
                 for kwargs, group in _reader_windows()]
        test = dacs_fit_test(drawn, hypothesis, replicates=200)
        rejected += test is not None and test.rejected
    assert rejected <= ALLOWED, rejected


def _workflow() -> tuple[Any, Hypothesis, list[str]]:
    model = mechanism_model(DEFAULT_BATTERY)
    hypothesis = Hypothesis("cache-6@0.05", (Component(model.index["cache-6"], 0.05),))
    return model, hypothesis, [label(s) for s in DEFAULT_BATTERY]


def test_workflow_counts_that_match_the_tables_too_well_are_rejected() -> None:
    """A quota player: its outcome counts are the tables' expected counts rounded, so its
    G-squared is near 0, far below what sampling gives (the one-sided test said p = 1)."""
    model, hypothesis, labels = _workflow()
    counts = []
    for log_p, n in zip(tables(model, hypothesis), DEFAULT_ALLOCATION, strict=True):
        exact = np.exp(log_p) * n
        rounded = np.floor(exact).astype(np.int64)
        rounded[np.argsort(rounded - exact)[:n - int(rounded.sum())]] += 1
        counts.append(rounded)
    test = fit_test(model, counts, hypothesis, labels)
    assert test is not None and test.rejected and test.too_consistent, test


def test_a_workflow_family_member_is_rejected_no_more_often_than_the_nominal_rate() -> None:
    model, hypothesis, labels = _workflow()
    rng = np.random.default_rng(0)
    rejected = 0
    for run in range(SEEDED_RUNS // 2):
        counts = [np.bincount(_play_codes(model, hypothesis, spec, 10**7 * (run + 1)
                                          + c * 10**5 + np.arange(n, dtype=np.int64), rng),
                              minlength=outcome_count(spec))
                  for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, DEFAULT_ALLOCATION,
                                                    strict=True))]
        test = fit_test(model, counts, hypothesis, labels, replicates=200)
        rejected += test is not None and test.rejected
    assert rejected <= int(binom.ppf(0.999, SEEDED_RUNS // 2, FIT_ALPHA)), rejected
