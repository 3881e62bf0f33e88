"""A diagnosis from episodes: play the battery with any policy, or read a run log of it, and
fit the mechanisms to what came out.

Both ways end in one function (`_diagnose`) over the same data, per battery configuration:
the episode records (their outcomes are the likelihood's evidence) and the traces (the
attribution's), so a log diagnosed later gives the live diagnosis exactly. Each configuration
is its own run in one shared log (the run is named by its env kwargs and the policy's own
description), episode i of every configuration on task seed seed + i; the seeds must stay
below likelihood.SIMULATION_SEED, where the hypotheses' reference distributions are drawn.

DACSSteering is diagnosed by `diagnose_dacs`, over analysis/diagnose/dacs.py's battery and
reader fits (its traces are the answers, which replay the windows exactly).

A text policy (an LLM, the text oracle, a user policy with text_actions = True) plays the env
behind the text-action wrapper; its replies are decoded into the executed (op, slot) by the
wrapper's own rules (parse_json_action, judge_tool_call), and a reply the env never executed
is no call of the trace.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from analysis.diagnose.attribution import ENV_ID, Tally, Trace, attribution_counts
from analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
from analysis.diagnose.likelihood import (
    SIMULATION_SEED,
    FamilyFit,
    Fit,
    MechanismModel,
    build_model,
    count_outcomes,
    fit_family,
    fit_lapse,
    outcome_count,
)
from analysis.diagnose.verdicts import verdicts
from controllers.episodes import Episodes
from controllers.policy import EpisodeRecord, Policy
from controllers.rollout import describe_run, rollout_parallel
from controllers.runlog import RunLog, identity, read_entries
from controllers.tracing import TRACE, Action, Traced, pair
from envs.workflow.params import WorkflowSpec

FAMILIES = ("cache-k", "scan-s")


@dataclass(frozen=True)
class Configuration:
    """One battery configuration as the agent played it: its episodes (in seed order) and the
    trace of each."""

    spec: WorkflowSpec
    episodes: Episodes
    traces: tuple[Trace, ...]

    @property
    def ended_by_env(self) -> np.ndarray:
        """Which episodes the env ended (a success, or more than R failed calls); the others
        ended without an env outcome (an invalid reply, a provider failure) and are outside
        every mechanism's outcome table, so they are not evidence for the fit."""
        columns = self.episodes.columns
        return columns["success"] | (columns["errors"] > self.spec.error_allowance)

    @property
    def counts(self) -> np.ndarray:
        kept = self.episodes.take(np.flatnonzero(self.ended_by_env))
        return count_outcomes(self.spec, kept.columns)


@dataclass(frozen=True)
class Diagnosis:
    """What the battery says about one policy: per configuration its episodes, the ranked
    mechanisms (best first), the cache-k and scan-s family fits, the attribution tally and a
    verdict per component."""

    env: str
    policy: Any
    configurations: tuple[Configuration, ...]
    model: MechanismModel
    ranked: tuple[Fit, ...]
    family_fits: dict[str, FamilyFit]
    tally: Tally
    verdicts: dict[str, str]

    @property
    def episodes(self) -> int:
        return sum(len(c.episodes) for c in self.configurations)


@functools.cache
def mechanism_model(battery: tuple[WorkflowSpec, ...]) -> MechanismModel:
    """The battery's simulated hypotheses, built once per process (about 4 s)."""
    return build_model(battery)


def env_kwargs(spec: WorkflowSpec) -> dict[str, Any]:
    """The gym.make kwargs of a battery configuration."""
    return spec.as_dict()


def label(spec: WorkflowSpec) -> str:
    """A battery configuration in a few words (depth, width, b, feedback, resampling, R);
    it also names the configuration's run in a shared log, which holds one run per name."""
    feedback = {0: "history", 1: "snapshot"}.get(spec.snapshot_period,
                                                 f"every {spec.snapshot_period}")
    hidden = " hidden" if spec.hidden_resampling else ""
    return (f"d{spec.depth} w{spec.width} b{spec.candidates} {feedback}{hidden} "
            f"R{spec.error_allowance}")


def _diagnose(policy: Any, configurations: Sequence[Configuration],
              battery: tuple[WorkflowSpec, ...]) -> Diagnosis:
    model = mechanism_model(battery)
    played = {c.spec: c.counts for c in configurations}
    counts = [played.get(spec, np.zeros(outcome_count(spec), dtype=np.int64))
              for spec in battery]
    ranked = fit_lapse(model, counts)
    family_fits = {family: fit_family(model, counts, family) for family in FAMILIES}
    tally = attribution_counts(trace for c in configurations for trace in c.traces)
    return Diagnosis(ENV_ID, policy, tuple(configurations), model, tuple(ranked), family_fits,
                     tally, verdicts(ranked, family_fits, tally))


def text_decoder(env: gym.Env) -> Callable[[Any], Action | None]:
    """The (op, slot) a TextActionWrapper `env` executes for a reply, None for one it refuses
    (its own judgement, `TextActionWrapper.env_action`)."""

    def decode(reply: Any) -> Action | None:
        _, action = env.env_action(reply)
        return None if action is None else pair(action)

    return decode


def check_seed(seed: int, allocation: Sequence[int]) -> None:
    """ValueError when the battery's task seeds would reach the simulation seeds."""
    last = seed + max(allocation, default=1) - 1
    if seed < 0 or last >= SIMULATION_SEED:
        raise ValueError(f"--seed must be in 0..{SIMULATION_SEED - max(allocation, default=1)} "
                         f"(task seeds below {SIMULATION_SEED}, where the mechanisms' reference "
                         f"distributions are simulated); got {seed}")


def diagnose_policy(make_policy: Callable[[gym.Env], Policy], *,
                    battery: Sequence[WorkflowSpec] = DEFAULT_BATTERY,
                    allocation: Sequence[int] = DEFAULT_ALLOCATION, seed: int = 0,
                    log: Path | None = None, resume: bool = False, workers: int = 1,
                    text_actions: bool = False,
                    on_record: Callable[[EpisodeRecord], None] | None = None) -> Diagnosis:
    """Play allocation[c] episodes of battery[c] with policies from `make_policy(env)` and
    diagnose them (module docstring). With `log`, every episode, call and trace is logged as
    it happens and resume=True continues an interrupted diagnosis."""
    battery = tuple(battery)
    if len(allocation) != len(battery):
        raise ValueError(f"allocation needs one episode count per battery configuration "
                         f"({len(battery)}); got {len(allocation)}")
    check_seed(seed, allocation)
    run_log = None if log is None else RunLog(Path(log), resume=resume)
    described: list[Any] = []
    configurations = []
    try:
        for spec, episodes in zip(battery, allocation, strict=True):
            if not episodes:
                continue
            kwargs = env_kwargs(spec)
            traces: dict[int, tuple[Action, ...]] = {}

            def make_env(kwargs: dict[str, Any] = kwargs) -> gym.Env:
                if text_actions:
                    from analysis.llm_runs import make_text_env

                    return make_text_env(ENV_ID, **kwargs)
                return gym.make(ENV_ID, **kwargs)

            def traced(env: gym.Env, traces: dict[int, tuple[Action, ...]] = traces) -> Traced:
                def keep(task_seed: int | None, calls: tuple[Action, ...]) -> None:
                    if task_seed is not None:
                        traces[task_seed] = calls

                policy = Traced(make_policy(env), text_decoder(env) if text_actions else pair,
                                on_trace=keep)
                if not described:
                    described.append(identity(describe_run(env, policy)["policy"]))
                return policy

            played = rollout_parallel(make_env, traced, episodes, seed=seed, workers=workers,
                                      log=run_log, on_record=on_record,
                                      run_name=f"diagnose {label(spec)}")
            if run_log is not None and len(traces) < len(played):
                logged = read_log(run_log.path).get(run_log.run_id)
                for key, actions in (logged.traces if logged else {}).items():
                    traces.setdefault(int(key.rsplit(":", 1)[1]), actions)
            configurations.append(_configuration(spec, played, traces))
    finally:
        if run_log is not None:
            run_log.close()
    return _diagnose(described[0] if described else None, configurations, battery)


def _configuration(spec: WorkflowSpec, played: Episodes,
                   traces: Mapping[int, tuple[Action, ...]]) -> Configuration:
    kwargs = env_kwargs(spec)
    seeds = [int(s) for s in played.columns["task_seed"]]
    missing = [s for s in seeds if s not in traces]
    if missing:
        raise ValueError(f"{len(missing)} episodes of {ENV_ID} {kwargs} have no trace (first: "
                         f"task seed {missing[0]}); diagnose needs each episode's actions")
    return Configuration(spec, played, tuple(Trace(kwargs, s, traces[s]) for s in seeds))


@dataclass
class LoggedRun:
    """One run of a log: its description, the episodes, traces and model calls that stand
    (a "replay" line voids an episode's earlier lines)."""

    run: dict[str, Any]
    episodes: dict[str, EpisodeRecord]
    traces: dict[str, tuple[Action, ...]]
    calls: dict[str, list[dict[str, Any]]]


def read_log(path: Path) -> dict[str, LoggedRun]:
    """Run id -> its LoggedRun, from the log's lines (read without the lock)."""
    from collections import Counter

    runs: dict[str, LoggedRun] = {}
    skipped: Counter[str] = Counter()
    for entry in read_entries(Path(path).read_bytes(), skipped):
        run_id, run = entry.get("run_id"), entry.get("run")
        if isinstance(run_id, str) and isinstance(run, dict) and run_id not in runs:
            runs[run_id] = LoggedRun(run, {}, {}, {})
        key = entry.get("episode_key")
        if not isinstance(key, str) or key.split(":", 1)[0] not in runs:
            continue
        logged = runs[key.split(":", 1)[0]]
        kind = entry["type"]
        if kind == "replay":
            logged.episodes.pop(key, None)
            logged.traces.pop(key, None)
            logged.calls.pop(key, None)
        elif kind == "episode" and isinstance(entry.get("record"), dict):
            logged.episodes[key] = EpisodeRecord(**entry["record"])
        elif kind == TRACE and isinstance(entry.get("actions"), list):
            logged.traces[key] = tuple(pair(a) for a in entry["actions"])
        elif kind == "call":
            logged.calls.setdefault(key, []).append(entry)
    return runs


def recovered_traces(spec: WorkflowSpec, logged: LoggedRun) -> dict[str, tuple[Action, ...]]:
    """The traces of a chat model's episodes from their call lines, for a log without trace
    lines: each call the harness judged "ok" was executed, in decision order; its action is
    its reply (or its one tool call) decoded by the text wrapper's rules."""
    from analysis.llm_runs import make_text_env
    from llm_policies.text_actions import ToolCallAction

    if not logged.calls:
        return {}
    env = make_text_env(ENV_ID, **env_kwargs(spec))
    decode = text_decoder(env)
    env.close()
    traces = {}
    for key, calls in logged.calls.items():
        actions = []
        for call in sorted(calls, key=lambda c: int(c.get("decision", 0))):
            if call.get("action_status") != "ok":
                continue
            tool_calls = call.get("tool_calls") or []
            reply = (ToolCallAction(tool_calls[0]["name"], tool_calls[0]["arguments"])
                     if tool_calls else call.get("response"))
            action = decode(reply)
            if action is not None:
                actions.append(action)
        traces[key] = tuple(actions)
    return traces


def diagnose_log(path: Path, battery: Sequence[WorkflowSpec] = DEFAULT_BATTERY) -> Diagnosis:
    """The diagnosis of a log's StatefulWorkflow runs on battery configurations (written by
    diagnose_policy, or any run whose episodes carry trace lines); ValueError, one line, for a
    log that holds none, other envs or configurations, or several policies."""
    battery = tuple(battery)
    runs = read_log(path)
    found: dict[int, LoggedRun] = {}
    policies = []
    for logged in runs.values():
        where = f"log {path}: run {logged.run.get('env')} {logged.run.get('env_kwargs')}"
        if logged.run.get("env") != ENV_ID:
            raise ValueError(f"{where} is not {ENV_ID}; diagnose reads {ENV_ID} runs")
        try:
            spec = WorkflowSpec.from_kwargs(**logged.run.get("env_kwargs", {}))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {error}") from None
        if spec not in battery:
            raise ValueError(f"{where} is not a configuration of the battery")
        index = battery.index(spec)
        if index in found:
            raise ValueError(f"{where}: the log holds several runs of this configuration")
        found[index] = logged
        if logged.run.get("policy") not in policies:
            policies.append(logged.run.get("policy"))
    if not found:
        raise ValueError(f"log {path} holds no {ENV_ID} run")
    if len(policies) > 1:
        raise ValueError(f"log {path} holds runs of {len(policies)} policies; diagnose reads "
                         "one policy's runs")
    configurations = []
    for index in sorted(found):
        logged = found[index]
        records = sorted(logged.episodes.values(), key=lambda r: r.episode)
        traces = {**recovered_traces(battery[index], logged), **logged.traces}
        seeds = {int(key.rsplit(":", 1)[1]): actions for key, actions in traces.items()}
        configurations.append(_configuration(battery[index], Episodes.from_records(records),
                                             seeds))
    return _diagnose(found[min(found)].run.get("policy"), configurations, battery)


def diagnose_dacs(make_policy: Callable[[gym.Env], Policy], *, episodes: int,
                  seed: int = 0, text_actions: bool = False) -> dict[str, Any]:
    """dacs.diagnosis of `episodes` episodes per DACS battery configuration played by the
    policies `make_policy(env)` builds, with the policy's own description under "policy"."""
    from analysis.diagnose import dacs

    described: list[Any] = []

    def make(env: gym.Env) -> Policy:
        policy = make_policy(env)
        if not described:
            described.append(identity(describe_run(env, policy)["policy"]))
        return policy

    traces = dacs.play_battery(episodes=episodes, seed=seed, make_policy=make,
                               text_actions=text_actions)
    return {**dacs.diagnosis(traces), "policy": described[0]}
