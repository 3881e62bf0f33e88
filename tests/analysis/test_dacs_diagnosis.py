"""Positive controls of the DACS diagnosis: attribution of wrong answers whose cause is known
by construction, and reader fits that recover the reader (and lapse) that played."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from diagym.analysis.diagnose.dacs import diagnosis as dacs_diagnosis
from diagym.analysis.diagnose.dacs import fit as dacs_fit
from diagym.analysis.diagnose.dacs import replay as dacs_replay
from diagym.controllers.dacs.readers import Reader, dacs_controller, evidence, parse_window
from diagym.envs.dacs.scenario import ATTRIBUTE_OF, KEYS

HOMOGENEOUS_FLAT = {"family": "homogeneous", "context_mode": "flat", "window": None}


class Lapsing:
    """`reader`, except that with probability `epsilon` it answers a uniform option. The lapse
    stream runs on across episodes: reseeded by the scenario seed, the battery's
    configurations (which share scenario seeds) would lapse at the same decisions."""

    def __init__(self, reader: str, epsilon: float, seed: int = 0) -> None:
        self.reader = dacs_controller(reader)
        self.epsilon = epsilon
        self.rng = np.random.default_rng([7, seed])

    def reset(self, *, seed: int | None = None) -> None:
        self.reader.reset(seed=seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        if self.rng.random() < self.epsilon:
            return int(self.rng.integers(4))
        return self.reader.act(observation, info)


class Contaminating(Reader):
    """Answers with the first other agent's value for the requested attribute that the window
    shows among the options (reading order), else as the reader does."""

    def __init__(self) -> None:
        super().__init__()
        self.picked: list[str | None] = []

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        parsed = parse_window(str(observation["window"]))
        attribute = ATTRIBUTE_OF[KEYS.index(parsed.key)]
        right = {m.value for m in evidence(parsed)}
        for m in parsed.mentions:
            if m.agent != parsed.requester and m.value in parsed.options \
                    and m.value not in right and ATTRIBUTE_OF[KEYS.index(m.key)] == attribute:
                self.picked.append(m.agent)
                return parsed.options.index(m.value)
        self.picked.append(None)
        return self._choose(parsed, self.value(parsed))


@functools.cache
def battery_decisions(name: str, epsilon: float = 0.0) -> tuple[dacs_replay.DacsDecision, ...]:
    policy = Lapsing(name, epsilon) if epsilon else dacs_controller(name)
    return tuple(dacs_replay.decisions_of(dacs_replay.play_battery(policy)))


WINDOW = (
    "## agent-0 (full context)\n"
    "task: tune the api\n"
    "{own}"
    "## agent-1 (full context)\n"
    "task: tune the cache\n"
    "fact: api_region = us-west-1\n"
    "## agent-2 (registry)\n"
    "agent-2 | task: billing | status: fine\n"
    "## request\n"
    "agent-0 asks: which api_region should agent-0 use?\n"
    "options: 0) us-west-1 | 1) us-east-1 | 2) eu-west-1 | 3) sa-east-1\n"
)


def synthetic(action: int, own_fact: bool) -> dacs_replay.DacsDecision:
    text = WINDOW.format(own="fact: api_region = us-east-1\n" if own_fact else "")
    return dacs_replay.DacsDecision(index=0, window=text, parsed=parse_window(text), action=action,
                             correct=action == 1, contaminated=action == 0, requester=0,
                             key="api_region")


def test_a_visible_lure_with_the_evidence_present_is_contamination_with_its_source() -> None:
    result = dacs_replay.attribute(synthetic(0, own_fact=True))
    assert result.category == dacs_replay.CONTAMINATION
    # One lure (probability 1) against a guess (1/4): 0.8 and 0.2.
    assert result.weights == pytest.approx({"contamination": 0.8, "truncation": 0.0,
                                            "distractor": 0.2})
    offset = WINDOW.format(own="fact: api_region = us-east-1\n").index("## agent-1")
    assert result.sources == (dacs_replay.Source("agent-1", "fact", 1, 3, offset),)


def test_missing_evidence_is_truncation_and_a_visible_lure_then_ambiguous() -> None:
    lure = dacs_replay.attribute(synthetic(0, own_fact=False))
    assert lure.category == dacs_replay.AMBIGUOUS
    assert lure.explanations == {dacs_replay.CONTAMINATION, dacs_replay.TRUNCATION}
    assert lure.weights == pytest.approx({"contamination": 0.8, "truncation": 0.2,
                                          "distractor": 0.0})
    other = dacs_replay.attribute(synthetic(2, own_fact=False))
    assert other.category == dacs_replay.TRUNCATION
    assert other.weights == pytest.approx({"contamination": 0.0, "truncation": 1.0,
                                           "distractor": 0.0})
    assert dacs_replay.attribute(synthetic(3, own_fact=True)).category == dacs_replay.DISTRACTOR
    assert dacs_replay.attribute(synthetic(1, own_fact=True)).category == dacs_replay.CORRECT


@pytest.mark.parametrize("name", dacs_fit.READERS)
def test_each_reader_played_opaquely_is_ranked_first(name: str) -> None:
    decisions = battery_decisions(name)
    assert len(decisions) == len(dacs_replay.DEFAULT_BATTERY) * dacs_replay.DEFAULT_EPISODES * 15
    fits = dacs_fit.fit_readers(decisions)
    assert name in fits[0].names
    assert fits[0].epsilon == 0.0
    if name in ("dacs-reader", "flat-reader"):  # one reader under two names
        assert set(fits[0].names) == {"dacs-reader", "flat-reader"}
    else:
        assert fits[0].names == (name,)
    if name == "uniform":
        # Every reader contains uniform as its lapse-1 member, and only there fits as well.
        assert all(f.interval[1] == 1.0 and f.epsilon > 0.9 for f in fits[1:])
    else:
        # The runner-up is rejected decisively (log-LR well past the interval's 1.92).
        assert fits[1].log_lr_to_best < -10


@pytest.mark.parametrize("name", ["dacs-reader", "flat-recency"])
def test_a_programmed_lapse_is_recovered_within_its_interval(name: str) -> None:
    fits = dacs_fit.fit_readers(battery_decisions(name, 0.2))
    assert name in fits[0].names
    low, high = fits[0].interval
    assert low <= 0.2 <= high
    assert high - low < 0.2
    assert 0.0 < low


def test_readers_err_only_where_their_evidence_is_missing() -> None:
    decisions = dacs_replay.decisions_of(dacs_replay.play(
        dacs_controller("flat-reader"),
        {"family": "homogeneous", "context_mode": "flat", "window": 1024}, 4))
    wrong = [dacs_replay.attribute(d) for d in decisions if not d.correct]
    assert len(wrong) > 10
    assert all(dacs_replay.TRUNCATION in a.explanations for a in wrong)
    crossfire = dacs_replay.decisions_of(dacs_replay.play(
        dacs_controller("flat-reader"),
        {"family": "crossfire", "context_mode": "flat", "window": 1024}, 4))
    result = dacs_replay.tally(crossfire)
    assert result.counts[dacs_replay.TRUNCATION] > 10
    truncated = result.counts[dacs_replay.TRUNCATION]
    assert truncated == result.decisions - result.counts[dacs_replay.CORRECT]
    assert result.weighted[dacs_replay.TRUNCATION] == pytest.approx(truncated)


def test_a_contaminating_agent_is_attributed_to_contamination_naming_the_agent() -> None:
    agent = Contaminating()
    traces = dacs_replay.play(agent, HOMOGENEOUS_FLAT, 4)
    decisions = dacs_replay.decisions_of(traces)
    assert len(agent.picked) == len(decisions)
    lured = 0
    for decision, picked in zip(decisions, agent.picked, strict=True):
        result = dacs_replay.attribute(decision)
        if picked is None:
            assert result.category == dacs_replay.CORRECT
            continue
        lured += 1
        assert result.category == dacs_replay.CONTAMINATION
        assert result.sources[0].agent == picked
        assert decision.contaminated
        rank = [a for a, _ in dacs_replay.block_offsets(decision.window)].index(picked)
        assert result.sources[0].rank == rank
    assert lured > 30
    report = dacs_diagnosis.diagnosis(traces)
    assert tuple(report["attribution"]) == dacs_replay.COUNT_KEYS
    assert report["configurations"] == [HOMOGENEOUS_FLAT]
    assert (report["episodes"], report["decisions"]) == (4, 60)
    assert report["attribution"][dacs_replay.CONTAMINATION] == lured
    assert report["env_contaminated"] == lured
    assert report["contamination_sources"] == {"agent-0": 26, "agent-1": 22, "agent-2": 6,
                                               "agent-3": 3, "agent-4": 3}
    # It takes the first lure, no reader's rule: the nearest is the position bias (the topmost
    # block's value, its own included), and the fit test says that none explains it.
    assert report["mechanisms"][0]["name"] == "first-agent"
    assert report["fit"]["verdict"] == "outside the family"
    assert report["headline"].startswith("outside the family: no reference mechanism explains")


def test_replay_refuses_an_answer_after_the_episode_ended() -> None:
    (trace,) = dacs_replay.play(dacs_controller("dacs-reader"), {"n_agents": 3, "decisions": 1}, 1)
    longer = dacs_replay.DacsTrace(trace.env_kwargs, trace.seed, (*trace.actions, 0))
    with pytest.raises(ValueError, match="after the episode ended"):
        dacs_replay.replay(longer)
