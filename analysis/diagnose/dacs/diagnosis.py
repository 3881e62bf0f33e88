"""Why a DACSSteering orchestrator answered wrongly, which window reader it plays like, and
whether any reader explains it: the DACS diagnosis, held to the rules the workflow diagnosis
keeps (analysis/diagnose/honesty.py).

Its parts are their own modules: the battery, the replay of every decision and the
attribution of each wrong answer (replay.py), the reader fits, the copy rate and the fit test
(fit.py), and the words (verdicts.py). This module joins them into a `DacsDiagnosis`, the
DACS side of the one diagnosis contract (analysis/diagnose/contract.py): `plan` is the
battery's budget rule, `diagnose_policy` plays it, `diagnose_log` reads a log of it.

## The contract
`diagnosis` returns a DacsDiagnosis, a mapping of the JSON contract's keys: beside the
attribution and the reader fits, `headline` (one line: nothing to fit, the best hypothesis and
that it fits, or "outside the family", from honesty.headline), `fit` (the absolute fit test of
the best (reader, copy rate, lapse), honesty.FitTest's JSON), `hypothesis` (that reader, rate
and lapse, or the reported mixture's components), `mixture` (components and weights of a per-
episode mixture of two readers when it beats the single best by the workflow's penalised
margin, analysis/diagnose/dacs/mixture.py, else null; the inferred verdicts are then worded "if
it were one mechanism", mixture.single_verdicts), `evidence` (episodes, the ones with an env
outcome: at least one answer the env scored, the invalid replies by category, the wrong
answers), `invalid` (that tally alone) and `attribution_vs_chance` (per cause: observed,
expected_if_guessing, share; honesty.ChanceCount). The verdicts that infer a mechanism
(ranking, reading, scoping, selection) pass through honesty.conditional: worded "if it were
<closest> (it fits badly)" when the fit test rejects, withheld when nothing was answered,
capped when the evidence is too little (honesty.MIN_OUTCOMES episodes, MIN_FAILURES wrong
answers). Visibility is a count of what the windows held, no inference, and is never
conditioned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from diagym import envs
from diagym.analysis.diagnose.contract import Plan, Trained
from diagym.analysis.diagnose.dacs.fit import (
    DacsHypothesis,
    ReaderFit,
    fit_copying,
    fit_readers,
    fit_test,
)
from diagym.analysis.diagnose.dacs.mixture import as_hypothesis, best_mixture
from diagym.analysis.diagnose.dacs.replay import (
    CORRECT,
    DEFAULT_BATTERY,
    DEFAULT_EPISODES,
    ENV_ID,
    DacsDecision,
    DacsTally,
    DacsTrace,
    attribute,
    configuration_label,
    holds_dacs_runs,
    play_battery,
    replayed,
    tally,
    traces_from_log,
)
from diagym.analysis.diagnose.dacs.verdicts import (
    COMPONENTS,
    Position,
    Visibility,
    claimed_hypothesis,
    verdicts,
)
from diagym.analysis.diagnose.dacs.verdicts import Evidence as VerdictEvidence
from diagym.analysis.diagnose.honesty import (
    ChanceCount,
    Evidence,
    against_chance,
    conditional,
    headline,
)
from diagym.analysis.diagnose.logs import scratch_log
from diagym.analysis.diagnose.mixture import single_verdicts
from diagym.controllers.dacs.readers import evidence
from diagym.controllers.executors import Executor
from diagym.controllers.policy import EpisodeRecord, Policy
from diagym.controllers.rollout import describe_run
from diagym.controllers.runlog import RunLog, identity

# The verdicts that infer a mechanism, and so are worded conditionally on the fit test.
INFERRED = ("ranking", "reading", "scoping", "selection")


@dataclass(frozen=True)
class DacsDiagnosis(Mapping[str, Any]):
    """A DACS diagnosis: the JSON contract's keys as a mapping (the module docstring; "policy"
    once a policy played it), with the attributes every family's diagnosis has
    (contract.Diagnosis)."""

    contract: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.contract[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.contract)

    def __len__(self) -> int:
        return len(self.contract)

    @property
    def env(self) -> str:
        return str(self.contract["env"])

    @property
    def policy(self) -> Any:
        return self.contract.get("policy")

    @property
    def headline(self) -> str:
        return str(self.contract["headline"])

    @property
    def verdicts(self) -> Mapping[str, str]:
        return self.contract["verdicts"]

    @property
    def episodes(self) -> int:
        return int(self.contract["episodes"])

    def played_by(self, policy: Any) -> DacsDiagnosis:
        """This diagnosis with the description of the policy that played it."""
        return DacsDiagnosis({**self.contract, "policy": policy})


def evidence_for(per_configuration: Sequence[tuple[Mapping[str, Any], list[DacsDecision]]],
                 fits: Sequence[ReaderFit], result: DacsTally,
                 chance: Mapping[str, ChanceCount] | None = None) -> VerdictEvidence:
    """What the verdicts read (verdicts.Evidence), from the decisions per configuration,
    the reader fits best first, their tally and its causes against guessing."""
    decisions = [d for _, group in per_configuration for d in group]
    positions = []
    wrong_without = right_with = with_evidence = 0
    for decision in decisions:
        visible = bool(evidence(decision.parsed))
        with_evidence += visible
        right_with += visible and decision.correct
        if decision.correct:
            continue
        wrong_without += not visible
        found = attribute(decision).sources
        if found:
            nearest = found[-1]
            positions.append(Position(nearest.rank, nearest.blocks, nearest.offset))
    visibility = [Visibility(configuration_label(kwargs), len(group),
                             sum(not evidence(d.parsed) for d in group))
                  for kwargs, group in per_configuration]
    options = int(np.median([len(d.options) for d in decisions]))
    return VerdictEvidence([f.as_dict() for f in fits], result.counts, result.sources,
                           positions, visibility, wrong_without, right_with, with_evidence,
                           options, fit_copying(decisions, fits[0].name, fits[0].epsilon),
                           dict(chance or {}))


def invalid_category(trace: DacsTrace) -> str:
    """How an episode the env did not end was ended (the workflow diagnosis's keys)."""
    failure = trace.first_failure
    if failure is None:
        return "ended_without_failure"
    return "after_env_failures" if failure == "wrong" else failure


def diagnosis(traces: Sequence[DacsTrace]) -> DacsDiagnosis:
    """The issue's output contract for DACS: configurations, episodes, attribution counts
    (COUNT_KEYS) with their likelihood shares, sources and guessing counts, the reader fits
    best first, the fit test of the best hypothesis, the evidence, the headline and a verdict
    per component (module docstring)."""
    per_configuration: list[tuple[dict[str, Any], list[DacsDecision]]] = []
    decisions: list[DacsDecision] = []
    invalid: dict[str, int] = {}
    answered = 0
    for trace in traces:
        kwargs = dict(trace.env_kwargs)
        group = next((g for k, g in per_configuration if k == kwargs), None)
        if group is None:
            group = []
            per_configuration.append((kwargs, group))
        replayed_decisions, ended = replayed(trace)
        if not ended:
            key = invalid_category(trace)
            invalid[key] = invalid.get(key, 0) + 1
        answered += bool(replayed_decisions)
        group += replayed_decisions
        decisions += replayed_decisions
    result = tally(decisions)
    found = Evidence(len(traces), answered, invalid, result.decisions - result.counts[CORRECT])
    chance = against_chance(result.counts, result.expected, result.weighted, result.wrong)
    common = {
        "env": ENV_ID,
        "episodes": len(traces),
        "decisions": result.decisions,
        "configurations": [kwargs for kwargs, _ in per_configuration],
        "attribution": result.counts,
        "attribution_weights": result.weighted,
        "attribution_vs_chance": {cause: c.to_json() for cause, c in chance.items()},
        "env_contaminated": result.env_contaminated,
        "contamination_sources": result.sources,
        "evidence": found.to_json(),
        "invalid": dict(sorted(invalid.items())),
    }
    if not decisions:
        withheld = conditional({c: f"{c}: -" for c in COMPONENTS}, None, "", found)
        return DacsDiagnosis({**common, "headline": headline(None, None, found), "fit": None,
                              "hypothesis": None, "mixture": None, "mechanisms": [],
                              "verdicts": withheld})
    fits = fit_readers(decisions)
    words = evidence_for(per_configuration, fits, result, chance)
    single = DacsHypothesis(*claimed_hypothesis(words))
    mixture = best_mixture(decisions, fits, single, answered)
    reported = mixture if mixture is not None and mixture.reported else None
    best = single if reported is None else as_hypothesis(reported, fits)
    test = fit_test(per_configuration, best)
    worded = verdicts(words)
    inferred = {c: worded[c] for c in INFERRED}
    if reported is not None:
        inferred = single_verdicts(inferred, reported, single.name)
    claimed = conditional(inferred, test, best.name, found)
    return DacsDiagnosis({**common, "headline": headline(best.name, test, found),
                          "fit": None if test is None else test.to_json(),
                          "hypothesis": best.to_json(),
                          "mixture": None if reported is None else reported.to_json(),
                          "mechanisms": [f.as_dict() for f in fits],
                          "verdicts": {c: claimed.get(c, worded[c]) for c in worded}})


def plan(budget: int | None, policy: str, trained: Trained, adaptive: bool,
         seed: int) -> Plan:
    """The battery's budget rule: `budget` episodes (default DEFAULT_EPISODES per
    configuration) split evenly over its configurations, so it must be a multiple of their
    number (ValueError, one line, otherwise). The battery is played in full, on any policy's
    shape (`policy`, `trained`, `adaptive` and `seed` set nothing here)."""
    configurations = len(DEFAULT_BATTERY)
    budget = DEFAULT_EPISODES * configurations if budget is None else budget
    if budget % configurations:
        raise ValueError(f"--budget {budget}: the {ENV_ID} battery has {configurations} "
                         f"configurations; give a multiple of {configurations}")
    per = budget // configurations
    return Plan(budget, tuple((per, envs.params_of(ENV_ID, kwargs))
                              for kwargs in DEFAULT_BATTERY), {"episodes": per})


def diagnose_policy(make_policy: Callable[[gym.Env], Policy], *, episodes: int,
                    seed: int = 0, text_actions: bool = False, log: Path | None = None,
                    resume: bool = False, workers: int = 1,
                    on_record: Callable[[EpisodeRecord], None] | None = None,
                    executor: Executor | None = None,
                    forecasts: Sequence[dict[str, Any]] = ()) -> DacsDiagnosis:
    """The diagnosis of `episodes` episodes per DACS battery configuration played by the
    policies `make_policy(env)` builds, with the policy's own description under "policy".
    With `log`, every episode, call and trace is logged as it happens (one run per
    configuration, replay.run_name) and resume=True continues an interrupted diagnosis;
    diagnose_log of that log gives this diagnosis exactly. Out of process (`executor`) the
    answers come back as the log's trace lines, so without `log` a temporary one is kept.
    DACS has no forecasts (ValueError for any)."""
    if forecasts:
        raise ValueError(f"{ENV_ID} has no forecast")
    described: list[Any] = []

    def make(env: gym.Env) -> Policy:
        policy = make_policy(env)
        if not described:
            described.append(identity(describe_run(env, policy)["policy"]))
        return policy

    scratch = scratch_log(log, executor)
    if scratch is not None:
        log = Path(scratch.name) / "diagnose.jsonl"
    run_log = None if log is None else RunLog(Path(log), resume=resume)
    try:
        traces = play_battery(episodes=episodes, seed=seed, make_policy=make,
                              text_actions=text_actions, log=run_log, workers=workers,
                              on_record=on_record, executor=executor)
    finally:
        if run_log is not None:
            run_log.close()
        if scratch is not None:
            scratch.cleanup()
    return diagnosis(traces).played_by(described[0])


def diagnose_log(path: Path, forecasts: Sequence[dict[str, Any]] = ()) -> DacsDiagnosis:
    """The DACS diagnosis of a log's DACSSteering runs on DACS battery configurations (written
    by diagnose_policy, or any run whose episodes carry trace or call lines), playing nothing;
    ValueError, one line, for a log diagnose cannot read (replay.traces_from_log) or with
    forecasts."""
    if forecasts:
        raise ValueError(f"{ENV_ID} has no forecast")
    policy, traces = traces_from_log(Path(path))
    return diagnosis(traces).played_by(policy)


holds_runs = holds_dacs_runs
