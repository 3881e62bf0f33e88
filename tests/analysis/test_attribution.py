"""Attribution of StatefulWorkflow decisions: public knowledge is true, categories partition the
calls, the batched runner's outcome is replayed exactly, and programmed agents whose mistake is
known have it recovered (positive controls), at the rate theory gives for a uniform guesser."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from diagym import envs
from diagym.analysis.diagnose.attribution import (
    AMBIGUOUS,
    COUNT_KEYS,
    ENV_ID,
    EXPLANATIONS,
    GUESS,
    INITIAL,
    OK,
    STALE,
    WEIGHT_KEYS,
    WRONG_REGISTER,
    Decision,
    Tally,
    Trace,
    attribute,
    attribution_counts,
    explain,
    explanation_values,
    replay,
    tally,
)
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.batched import run_controller
from diagym.controllers.workflow.parameters import CONTROLLERS
from diagym.envs.workflow.params import WorkflowParams
from tests.analysis.diagnose_agents import (
    BadScheduler,
    Guesser,
    Repeater,
    Scripted,
    StaleAgent,
    WrongRegister,
    play,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HISTORY = envs.WORKFLOW_PRESETS["StatefulWorkflowHistory-v0"]
HIDDEN = envs.WORKFLOW_PRESETS["StatefulWorkflowHidden-v0"]
SEEDS = range(200)


@st.composite
def env_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.sampled_from([2, 4, 6, 8]))
    return {
        "family": draw(st.sampled_from(["chains", "barriers"])),
        "n_ops": n,
        "depth": draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0])),
        "width": draw(st.integers(1, 8)),
        "candidates": draw(st.integers(2, 8)),
        "snapshot_period": draw(st.integers(0, 3)),
        "hidden_resampling": draw(st.booleans()),
        "error_allowance": draw(st.integers(0, 12)),
        "updates": draw(st.sampled_from(["additive", "static"])),
    }


scripts = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=30)


def candidate_failures(traces: list[Trace]) -> list[Decision]:
    return [d for trace in traces for d in replay(trace) if d.failure == "candidate"]


# -- exact figures ----------------------------------------------------------------------------


def constructed(slot: int, failure: str | None = "candidate") -> Decision:
    """Op 0 reads register 0 (now 6, residue 2; initially 1; it was 5 after leaving 1), codes
    are slot numbers, b = 4, width 4; the other active registers hold 3, 7 and 0."""
    spec = WorkflowParams(n_ops=1, depth=1, width=4, candidates=4)
    observation = {"query_register": np.array([0]), "codes": np.array([0, 1, 2, 3])}
    return Decision(index=3, spec=spec, observation=observation, action=(0, slot),
                    failure=failure, known=(6, 3, 7, 0, 5, 5, 5, 5),
                    initial=(1, 3, 7, 0, 5, 5, 5, 5),
                    earlier=(frozenset({5, 6}), *[frozenset()] * 7))


def test_weights_of_a_constructed_decision() -> None:
    # Slot 1: initial 1 and stale 5 both fit (residue 1); no other register has residue 1.
    ambiguous = attribute(constructed(1))
    assert ambiguous.category == AMBIGUOUS
    assert ambiguous.explanations == {INITIAL, STALE}
    assert ambiguous.weights == pytest.approx(
        {STALE: 4 / 9, WRONG_REGISTER: 0.0, INITIAL: 4 / 9, GUESS: 1 / 9})
    # Slot 3: registers 1 and 2 (3, 7) fit, 2 of 3 members: 2/3 against 1/4.
    binding = attribute(constructed(3))
    assert binding.category == WRONG_REGISTER
    assert binding.weights == pytest.approx(
        {STALE: 0.0, WRONG_REGISTER: (2 / 3) / (2 / 3 + 1 / 4), INITIAL: 0.0,
         GUESS: (1 / 4) / (2 / 3 + 1 / 4)})
    # Slot 0: register 3 (0) fits, 1 of 3.
    assert attribute(constructed(0)).weights[WRONG_REGISTER] == pytest.approx(
        (1 / 3) / (1 / 3 + 1 / 4))
    assert attribute(constructed(2, failure=None)) == attribute(constructed(2, None))
    assert attribute(constructed(2, failure=None)).category == OK
    assert attribute(constructed(0, failure="dependency")).category == "dependency"


def test_explain_is_one_sentence_with_the_figures() -> None:
    counts = dict.fromkeys(COUNT_KEYS, 0) | {"dependency": 2, STALE: 3, AMBIGUOUS: 1}
    result = Tally(counts, {STALE: 3.0, WRONG_REGISTER: 0.5, INITIAL: 0.0, GUESS: 0.5}, 10, 4)
    assert explain(result) == (
        "Of 10 calls, 4 succeeded (not evidence) and 6 failed: 2 dependency, 0 completed, "
        "4 wrong slots (3 stale value, 0 wrong register, 0 initial value, 0 guess, "
        "1 ambiguous; likelihood shares stale value 75%, wrong register 12%, initial value 0%, "
        "guess 12%).")
    assert explain(Tally(dict.fromkeys(COUNT_KEYS, 0), dict.fromkeys(WEIGHT_KEYS, 0.0), 8, 8)
                   ) == "Of 8 calls, 8 succeeded (not evidence) and 0 failed."


# -- invariants -------------------------------------------------------------------------------


@FAST
@given(env_kwargs(), st.integers(0, 2**40), scripts)
def test_public_values_are_true_and_replay_is_deterministic(kwargs: dict[str, Any], seed: int,
                                                            script: list[tuple[int, int]]) -> None:
    (trace,) = play(Scripted(script), kwargs, [seed])
    decisions = replay(trace)
    assert [(d.action, d.failure, d.known, d.earlier) for d in decisions] == [
        (d.action, d.failure, d.known, d.earlier) for d in replay(trace)]
    env = gym.make(ENV_ID, **kwargs)  # the simulator's truth, which replay must not need
    env.reset(seed=seed)
    width = env.unwrapped.params.width
    for decision in decisions:
        truth = env.unwrapped.registers.tolist()
        assert all(k is None or k == x for k, x in zip(decision.known, truth, strict=True))
        assert all(k is not None for k in decision.known[width:])
        if not kwargs["hidden_resampling"]:
            assert list(decision.known) == truth
        env.step(decision.action)
    assert len(decisions) == len(trace.actions)


@FAST
@given(env_kwargs(), st.integers(0, 2**40), scripts)
def test_categories_partition_decisions(kwargs: dict[str, Any], seed: int,
                                        script: list[tuple[int, int]]) -> None:
    traces = play(Scripted(script), kwargs, [seed])
    decisions = replay(traces[0])
    result = tally(decisions)
    assert set(result.counts) == set(COUNT_KEYS)
    assert sum(result.counts.values()) + result.successes == result.decisions == len(decisions)
    assert result == attribution_counts(traces)
    wrong = 0
    for decision in decisions:
        attribution = attribute(decision)
        if decision.failure != "candidate":
            assert attribution.category == (decision.failure or OK) and not attribution.weights
            continue
        wrong += 1
        weights = attribution.weights
        assert set(weights) == set(WEIGHT_KEYS) and sum(weights.values()) == pytest.approx(1.0)
        assert attribution.explanations == {e for e in EXPLANATIONS if weights[e] > 0}
        expected = {0: GUESS, 1: next(iter(attribution.explanations), None)}.get(
            len(attribution.explanations), AMBIGUOUS)
        assert attribution.category == expected
        assert weights[GUESS] > 0 and (weights[GUESS] == 1.0) == (expected == GUESS)
    assert sum(result.weighted.values()) == pytest.approx(wrong)


@FAST
@given(st.sampled_from(sorted(CONTROLLERS)), st.sampled_from(sorted(envs.WORKFLOW_PRESETS)),
       st.integers(2, 8), st.integers(0, 2**40))
def test_replay_reproduces_the_batched_runner(controller: str, preset: str, b: int,
                                              seed: int) -> None:
    kwargs = {**envs.WORKFLOW_PRESETS[preset], "candidates": b}
    spec = WorkflowParams(**kwargs)
    run = run_controller(spec, controller, np.array([seed]),
                         trace_length=spec.n_ops + spec.error_allowance)
    actions = tuple((int(op), int(slot)) for op, slot in run["trace"][0] if op >= 0)
    decisions = replay(Trace(kwargs, seed, actions))
    completed = sum(d.failure is None for d in decisions)
    assert (completed == spec.n_ops, completed, len(decisions)) == (
        bool(run["success"][0]), int(run["completed"][0]), int(run["calls"][0]))


def test_replay_refuses_calls_the_env_would_not_execute() -> None:
    (trace,) = play(Repeater(), {}, [0])  # R = 0: the repeated call ends the episode
    with pytest.raises(ValueError, match="call 2 of the trace of seed 0 comes after"):
        replay(dataclasses.replace(trace, actions=(*trace.actions, (0, 0))))
    with pytest.raises(ValueError, match="call 0 of the trace of seed 0: action must be"):
        replay(Trace({}, 0, ((9, 0),)))


# -- positive controls ------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {**HISTORY, "candidates": 8},
    {**HISTORY, "candidates": 8, "error_allowance": 8},
    {"snapshot_period": 2, "candidates": 8, "error_allowance": 8},
    {**HIDDEN, "candidates": 8, "error_allowance": 8},
], ids=["history", "history-R8", "period-2", "hidden"])
def test_stale_agent_is_explained_by_stale_or_initial_values(kwargs: dict[str, Any]) -> None:
    failures = candidate_failures(play(StaleAgent(), kwargs, SEEDS))
    assert len(failures) >= 100
    attributions = [attribute(d) for d in failures]
    assert all(a.explanations & {STALE, INITIAL} for a in attributions)
    assert not any(a.category == GUESS for a in attributions)
    if kwargs.get("snapshot_period", 1) == 0:  # shown only initially: it uses the start's
        assert all(INITIAL in a.explanations for a in attributions)
        # A stale value fits too only where the register came back to its initial value.
        assert sum(STALE in a.explanations for a in attributions) < 0.1 * len(attributions)
    else:  # it uses later snapshots too
        assert any(a.explanations == {STALE} for a in attributions)


@pytest.mark.parametrize("width", [2, 4, 8])
def test_wrong_register_is_explained_by_binding(width: int) -> None:
    kwargs = {**HISTORY, "candidates": 8, "width": width, "error_allowance": 8}
    failures = candidate_failures(play(WrongRegister(width), kwargs, SEEDS))
    assert len(failures) >= 100
    assert all(WRONG_REGISTER in attribute(d).explanations for d in failures)


@pytest.mark.parametrize("kwargs", [{}, HISTORY, {**HISTORY, "candidates": 8, "width": 8}],
                         ids=["snapshot", "history", "history-b8-w8"])
def test_exact_controller_has_no_failures_to_attribute(kwargs: dict[str, Any]) -> None:
    policy = ReferencePolicy("exact", WorkflowParams(**kwargs))
    result = attribution_counts(play(policy, kwargs, SEEDS))
    assert result.counts == dict.fromkeys(COUNT_KEYS, 0)
    assert result.successes == result.decisions == len(SEEDS) * WorkflowParams(**kwargs).n_ops


@pytest.mark.parametrize("b", [2, 4, 8])
def test_guesser_is_guess_or_ambiguous_at_the_predicted_rates(b: int) -> None:
    """Given a wrong slot, a uniform guesser's slot is uniform over the b - 1 wrong ones (codes
    are a permutation of 0..b-1). If the explanations' values cover k residues other than the
    current one, the decision is a "guess" with probability (b - 1 - k) / (b - 1); it is
    "ambiguous" with probability (wrong slots two or more explanations fit) / (b - 1). The
    observed counts are held against the summed probabilities (a sum of unequal Bernoullis
    is less spread than the binomial of their mean). Measured at seeds 0..299, R = 16:
    guess 188 of 2408 (b = 2), 1632 of 4768 (b = 4), 3294 of 5095 (b = 8)."""
    kwargs = {**HISTORY, "candidates": b, "error_allowance": 16}
    failures = candidate_failures(play(Guesser(), kwargs, range(300)))
    observed = Counter(attribute(d).category for d in failures)
    expected = {GUESS: 0.0, AMBIGUOUS: 0.0}
    for decision in failures:
        op, slot = decision.action
        current = decision.known[decision.query] % b
        covered = {value % b for members in explanation_values(decision).values()
                   for value in members}
        expected[GUESS] += (b - 1 - len(covered - {current})) / (b - 1)
        wrong = [a for a in range(b) if decision.code(a) != current]
        assert slot in wrong
        expected[AMBIGUOUS] += sum(
            attribute(dataclasses.replace(decision, action=(op, a))).category == AMBIGUOUS
            for a in wrong) / (b - 1)
    assert len(failures) >= 2000
    for category in (GUESS, AMBIGUOUS):
        rate = expected[category] / len(failures)
        assert 0.01 < rate < 0.99
        assert binomtest(observed[category], len(failures), rate).pvalue > 1e-3, category


def test_bad_scheduler_and_repeater_are_scheduling_and_bookkeeping() -> None:
    kwargs = {"error_allowance": 3}
    scheduling = attribution_counts(play(BadScheduler(), kwargs, SEEDS))
    assert scheduling.counts == dict.fromkeys(COUNT_KEYS, 0) | {"dependency": 4 * len(SEEDS)}
    bookkeeping = attribution_counts(play(Repeater(), kwargs, SEEDS))
    assert bookkeeping.counts == dict.fromkeys(COUNT_KEYS, 0) | {"completed": 4 * len(SEEDS)}
    assert bookkeeping.successes == len(SEEDS)
