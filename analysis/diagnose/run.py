"""A diagnosis from episodes: play the battery with any policy, or read a run log of it, and
fit the mechanisms to what came out.

Both ways end in one function (`_diagnose`) over the same data, per battery configuration:
the episode records (their outcomes are the likelihood's evidence) and the traces (the
attribution's), so a log diagnosed later gives the live diagnosis exactly. Each configuration
is its own run in one shared log (the run is named by its env kwargs and the policy's own
description), episode i of configuration c on task seed seed + c * battery.SEED_BLOCK + i (a
block of tasks per configuration, so the likelihood's independent episodes are independent);
the seeds must stay below likelihood.SIMULATION_SEED, where the hypotheses' reference
distributions are drawn. The log's "design" line records the seed plan; a log written before
(every configuration on seeds seed + i, the "shared" plan) is read by the seeds its episodes
record, as every log is, and a resume of it continues its own plan.

This module is StatefulWorkflow's side of the one diagnosis contract
(analysis/diagnose/contract.py: `plan`, `diagnose_policy`, `diagnose_log`, `holds_runs`);
DACSSteering's is analysis/diagnose/dacs/diagnosis.py. Logs of either family are read by
analysis/diagnose/logs.py.

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

import diagym  # noqa: F401  (registers the ids)
from diagym import envs
from diagym.analysis.diagnose.attribution import ENV_ID, Tally, Trace, attribution_counts
from diagym.analysis.diagnose.battery import (
    BLOCKS,
    DEFAULT_ALLOCATION,
    DEFAULT_BATTERY,
    DEFAULT_SHARES,
    SEED_BLOCK,
    SHARED,
    allocate,
    battery_for,
    first_seed,
)
from diagym.analysis.diagnose.contract import Plan, Trained
from diagym.analysis.diagnose.defaults import DEFAULT_BUDGET
from diagym.analysis.diagnose.failure_check import FailureCheck, check_played
from diagym.analysis.diagnose.fit_test import Forecast, Hypothesis, fit_test, forecast, plausible
from diagym.analysis.diagnose.honesty import (
    ChanceCount,
    Evidence,
    FitTest,
    against_chance,
    conditional,
    headline,
)
from diagym.analysis.diagnose.hypotheses import FITTED_FAMILIES
from diagym.analysis.diagnose.likelihood import (
    SIMULATION_SEED,
    FamilyFit,
    Fit,
    MechanismModel,
    count_outcomes,
    fit_family,
    fit_lapse,
    outcome_count,
)
from diagym.analysis.diagnose.logs import (
    DESIGN,
    LoggedRun,
    design_line,
    read_log,
    replies_executed,
    runs_by_configuration,
    scratch_log,
)
from diagym.analysis.diagnose.mixture import Mixture, best_mixture, single_verdicts
from diagym.analysis.diagnose.model_cache import cached_model, save_lapse_tables
from diagym.analysis.diagnose.verdicts import verdicts
from diagym.controllers.episodes import Episodes
from diagym.controllers.executors import Executor
from diagym.controllers.policy import EpisodeRecord, Policy
from diagym.controllers.rollout import describe_run, rollout_parallel
from diagym.controllers.runlog import RunLog, identity
from diagym.controllers.tracing import Action, Traced, pair
from diagym.envs.workflow.layout import FAILURE_NAMES
from diagym.envs.workflow.params import WorkflowParams


@dataclass(frozen=True)
class Configuration:
    """One battery configuration as the agent played it: its episodes (in seed order) and the
    trace of each."""

    spec: WorkflowParams
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

    def invalid(self) -> dict[str, int]:
        """The episodes without an env outcome by how they ended: the first failure when it is
        no env category (an invalid reply, an aborted episode), else "after_env_failures"."""
        out: dict[str, int] = {}
        env_categories = set(FAILURE_NAMES)
        for failure in self.episodes.take(np.flatnonzero(~self.ended_by_env)).columns[
                "first_failure"]:
            key = ("ended_without_failure" if failure is None else "after_env_failures"
                   if failure in env_categories else str(failure))
            out[key] = out.get(key, 0) + 1
        return out


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
    evidence: Evidence
    fit: FitTest | None
    headline: str
    hypothesis: Hypothesis
    chance: dict[str, ChanceCount]
    forecasts: tuple[Forecast, ...] = ()
    design: Any = None  # adaptive.Design of an adaptive diagnosis; None: the fixed battery
    mixture: Mixture | None = None  # a two-component mixture that beat the single best
    failures: FailureCheck | None = None  # the hypothesis's failed calls against the agent's

    @property
    def episodes(self) -> int:
        return sum(len(c.episodes) for c in self.configurations)


@functools.cache
def mechanism_model(battery: tuple[WorkflowParams, ...]) -> MechanismModel:
    """The battery's simulated hypotheses, once per process, from the on-disk cache when it
    holds them (analysis/diagnose/model_cache.py)."""
    return cached_model(battery)


def env_kwargs(spec: WorkflowParams) -> dict[str, Any]:
    """The gym.make kwargs of a battery configuration."""
    return spec.as_dict()


def label(spec: WorkflowParams) -> str:
    """A battery configuration in a few words (depth, width, b, feedback, resampling, R, and
    the graph family when it is not chains);
    it also names the configuration's run in a shared log, which holds one run per name."""
    feedback = {0: "history", 1: "snapshot"}.get(spec.snapshot_period,
                                                 f"every {spec.snapshot_period}")
    hidden = " hidden" if spec.hidden_resampling else ""
    family = "" if spec.family == "chains" else f" {spec.family}"
    return (f"d{spec.depth} w{spec.width} b{spec.candidates} {feedback}{hidden} "
            f"R{spec.error_allowance}{family}")


def _diagnose(policy: Any, configurations: Sequence[Configuration],
              battery: tuple[WorkflowParams, ...],
              forecasts: Sequence[dict[str, Any]] = (), design: Any = None) -> Diagnosis:
    model = mechanism_model(battery)
    played = {c.spec: c.counts for c in configurations}
    counts = [played.get(spec, np.zeros(outcome_count(spec), dtype=np.int64))
              for spec in battery]
    ranked = fit_lapse(model, counts)
    family_fits = {family: fit_family(model, counts, family) for family in FITTED_FAMILIES}
    tally = attribution_counts(trace for c in configurations for trace in c.traces)
    invalid: dict[str, int] = {}
    for c in configurations:
        for key, n in c.invalid().items():
            invalid[key] = invalid.get(key, 0) + n
    evidence = Evidence(sum(len(c.episodes) for c in configurations),
                        int(sum(c.ended_by_env.sum() for c in configurations)), invalid,
                        tally.decisions - tally.successes)
    hypothesis = Hypothesis.of_fit(model, ranked[0])
    mixture = None if evidence.nothing_to_fit else best_mixture(model, counts, ranked)
    if mixture is not None and not mixture.reported:
        mixture = None
    if mixture is not None:
        hypothesis = mixture.hypothesis()
    # an adaptive design that ended before it could test the fit reports no test, not a pass
    test = None if evidence.nothing_to_fit or (design is not None and design.too_little) \
        else fit_test(model, counts, hypothesis, [label(s) for s in battery],
                      two_sided=design is None)
    note = "" if design is None else design.posterior_note(test)
    failures = None if evidence.nothing_to_fit else check_played(model, hypothesis,
                                                                 configurations)
    chance = against_chance(tally.counts, tally.expected, tally.weighted, tally.wrong_slots)
    alternatives = plausible(model, ranked)
    played_specs = [c.spec for c in configurations if len(c.episodes)]
    predicted = tuple(forecast(model, hypothesis, alternatives, dict(kwargs),
                               conditional=test is not None and test.rejected,
                               played=played_specs)
                      for kwargs in forecasts)
    found = verdicts(ranked, family_fits, tally, chance)
    save_lapse_tables(model)
    if mixture is not None:
        found = single_verdicts(found, mixture, ranked[0].mechanism.name)
    return Diagnosis(ENV_ID, policy, tuple(configurations), model, tuple(ranked), family_fits,
                     tally, conditional(found, test, hypothesis.name, evidence, failures),
                     evidence, test,
                     headline(None if evidence.nothing_to_fit else hypothesis.name, test,
                              evidence, note, failures),
                     hypothesis, chance, predicted, design, mixture, failures)


def text_decoder(env: gym.Env) -> Callable[[Any], Action | None]:
    """The (op, slot) a TextActionWrapper `env` executes for a reply, None for one it refuses
    (its own judgement, `TextActionWrapper.env_action`)."""

    def decode(reply: Any) -> Action | None:
        _, action = env.env_action(reply)
        return None if action is None else pair(action)

    return decode


def check_battery_seed(seed: int, allocation: Sequence[int],
               configurations: int = len(DEFAULT_BATTERY)) -> None:
    """ValueError when the battery's task seeds would reach the simulation seeds, or a
    configuration's episodes would run past its block of seeds (battery.first_seed)."""
    most = max(allocation, default=1)
    if most > SEED_BLOCK:
        raise ValueError(f"at most {SEED_BLOCK} episodes per configuration (its block of task "
                         f"seeds); got {most}")
    top = SIMULATION_SEED - first_seed(0, configurations - 1) - most
    if seed < 0 or seed > top:
        raise ValueError(f"--seed must be in 0..{top} (task seeds below {SIMULATION_SEED}, "
                         "where the mechanisms' reference distributions are simulated, in a "
                         f"block of {SEED_BLOCK} per configuration); got {seed}")


def plan(budget: int | None, policy: str, trained: Trained, adaptive: bool,
         seed: int) -> Plan:
    """The battery and its allocation for `budget` episodes (default DEFAULT_BUDGET): the
    default battery by its shares, or for a trained network (`trained`: how it was trained),
    whose input and output sizes are fixed, the battery of its shape (battery.battery_for),
    every configuration played; ValueError, one line, for a model trained on another env, a
    budget under that battery's size or a seed out of range (check_battery_seed). With `adaptive`,
    up to `budget` episodes, each on any configuration."""
    budget = DEFAULT_BUDGET if budget is None else budget
    if trained is None:
        battery, allocation = DEFAULT_BATTERY, allocate(DEFAULT_SHARES, budget)
    else:
        trained_id, kwargs = trained()
        if envs.family_of(trained_id, strict=False) != envs.WORKFLOW:
            raise ValueError(f"--policy {policy} was trained on {trained_id}; --env {ENV_ID} "
                             "diagnoses StatefulWorkflow agents")
        spec = WorkflowParams.from_kwargs(**{**gym.spec(trained_id).kwargs, **kwargs})
        design = battery_for(spec.n_ops, spec.candidates, spec.error_allowance)
        if budget < len(design.battery):
            raise ValueError(f"--budget {budget}: the battery of {policy}'s shape has "
                             f"{len(design.battery)} configurations; give at least "
                             f"{len(design.battery)}")
        battery, allocation = design.battery, allocate(design.shares, budget, minimum=1)
    check_battery_seed(seed, [budget] if adaptive else allocation, len(battery))
    # adaptive: up to the budget, each episode on any configuration of the battery
    estimate = ((budget, max(battery, key=lambda spec: spec.episode_decisions()[1])),) \
        if adaptive else tuple(zip(allocation, battery, strict=True))
    return Plan(sum(allocation), estimate,
                {"battery": battery, "allocation": allocation,
                 "adaptive_budget": budget if adaptive else None})


def holds_runs(path: Path) -> bool:
    """Whether any run of the log at `path` is a StatefulWorkflow run."""
    return any(logged.run.get("env") == ENV_ID for logged in read_log(Path(path)).values())


def seed_plan(log: Path | None, resume: bool) -> str:
    """The seed plan to play under: BLOCKS, except that resuming a log whose episodes were
    played before the plan was recorded (no "seed_plan" in its design line) continues it on
    its own, SHARED, seeds."""
    if log is None or not resume or not Path(log).exists():
        return BLOCKS
    line = design_line(Path(log))
    if line is not None and "seed_plan" in line:
        return str(line["seed_plan"])
    played = any(logged.episodes for logged in read_log(Path(log)).values())
    return SHARED if played else BLOCKS


def diagnose_policy(make_policy: Callable[[gym.Env], Policy], *,
                    battery: Sequence[WorkflowParams] = DEFAULT_BATTERY,
                    allocation: Sequence[int] = DEFAULT_ALLOCATION, seed: int = 0,
                    log: Path | None = None, resume: bool = False, workers: int = 1,
                    text_actions: bool = False,
                    on_record: Callable[[EpisodeRecord], None] | None = None,
                    adaptive_budget: int | None = None,
                    executor: Executor | None = None,
                    forecasts: Sequence[dict[str, Any]] = ()) -> Diagnosis:
    """Play allocation[c] episodes of battery[c] with policies from `make_policy(env)` and
    diagnose them (module docstring); with `adaptive_budget`, play rounds chosen by
    analysis/diagnose/adaptive.py instead, up to that many episodes (`allocation` unused).
    With `log`, every episode, call and trace is logged as it happens and resume=True
    continues an interrupted diagnosis (an adaptive one replays its rounds, whose episodes
    the log already holds). `executor` says where episodes play (diagym.controllers.executors);
    out of process the traces come back as the log's trace lines, so without `log` a
    temporary one is kept. `forecasts` are gym.make kwargs to predict the agent's success on
    (fit_test.forecast)."""
    from diagym.analysis.diagnose import adaptive

    battery = tuple(battery)
    if adaptive_budget is None and len(allocation) != len(battery):
        raise ValueError(f"allocation needs one episode count per battery configuration "
                         f"({len(battery)}); got {len(allocation)}")
    check_battery_seed(seed, allocation if adaptive_budget is None else [adaptive_budget],
               len(battery))
    scratch = scratch_log(log, executor)
    if scratch is not None:
        log = Path(scratch.name) / "diagnose.jsonl"
    plan = seed_plan(log, resume)
    run_log = None if log is None else RunLog(Path(log), resume=resume)
    player = _BatteryPlay(make_policy, battery, seed, run_log, workers=workers,
                          text_actions=text_actions, on_record=on_record, executor=executor,
                          plan=plan)
    design = None
    try:
        if adaptive_budget is None:
            if run_log is not None:
                run_log.write({"type": DESIGN, "mode": "fixed", "seed": seed,
                               "seed_plan": plan})
            for c, episodes in enumerate(allocation):
                if episodes:
                    player.play(c, episodes)
        else:
            if run_log is not None:
                run_log.write({"type": DESIGN, "mode": "adaptive", "budget": adaptive_budget,
                               "seed": seed, "seed_plan": plan,
                               "rule": adaptive.DEFAULT_RULE.name})
            design = adaptive.run_design(mechanism_model(battery), adaptive_budget,
                                         player.play_round, adaptive.DEFAULT_RULE)
    finally:
        if run_log is not None:
            run_log.close()
        if scratch is not None:
            scratch.cleanup()
    ordered = [player.configurations[c] for c in sorted(player.configurations)]
    described = player.described[0] if player.described else None
    return _diagnose(described, ordered, battery, forecasts, design)


class _BatteryPlay:
    """The battery as the agent plays it, a configuration at a time and in rounds: each
    round plays the task seeds after that configuration's last ones (from its first seed
    under the seed `plan`, battery.first_seed), keeps every episode's
    trace (from the policy, else from the log's trace lines when episodes played out of
    process) and the policy's description from the first one built."""

    def __init__(self, make_policy: Callable[[gym.Env], Policy],
                 battery: Sequence[WorkflowParams], seed: int, run_log: RunLog | None, *,
                 workers: int, text_actions: bool,
                 on_record: Callable[[EpisodeRecord], None] | None,
                 executor: Executor | None, plan: str = BLOCKS) -> None:
        self.make_policy, self.battery, self.seed, self.run_log = (make_policy, battery, seed,
                                                                   run_log)
        self.plan = plan
        self.workers, self.text_actions = workers, text_actions
        self.on_record, self.executor = on_record, executor
        self.described: list[Any] = []  # the policy's identity, once one is built
        self.played: dict[int, list[Episodes]] = {}
        self.traces: dict[int, dict[int, tuple[Action, ...]]] = {}
        self.configurations: dict[int, Configuration] = {}

    def play(self, c: int, episodes: int) -> Configuration:
        """`episodes` more episodes of battery[c], on the task seeds after its last ones."""
        spec = self.battery[c]
        kept = self.traces.setdefault(c, {})
        first = first_seed(self.seed, c, self.plan) + sum(len(part)
                                                          for part in self.played.get(c, []))
        # module functions over just what they need: out of process they are pickled
        make_env = functools.partial(_battery_env, env_kwargs(spec), self.text_actions)
        traced = functools.partial(_traced_policy, self.make_policy, self.text_actions, kept,
                                   self.described)
        part = rollout_parallel(make_env, traced, episodes, seed=first, workers=self.workers,
                                executor=self.executor, log=self.run_log,
                                on_record=self.on_record, run_name=f"diagnose {label(spec)}")
        run_log = self.run_log
        if run_log is not None and any(int(s) not in kept for s in part.columns["task_seed"]):
            logged = read_log(run_log.path).get(run_log.run_id)
            for task_seed, actions in (logged_traces(spec, logged) if logged else {}).items():
                kept.setdefault(task_seed, actions)
        self.played.setdefault(c, []).append(part)
        self.configurations[c] = _configuration(spec, _renumbered(self.played[c]), kept)
        return self.configurations[c]

    def play_round(self, c: int, episodes: int) -> np.ndarray:
        """An adaptive round: the outcome counts of battery[c] after playing it further."""
        return self.play(c, episodes).counts


def _battery_env(kwargs: dict[str, Any], text_actions: bool) -> gym.Env:
    """A battery configuration's env, behind the text wrapper for a text policy."""
    if text_actions:
        from diagym.analysis.llm_runs import make_text_env

        return make_text_env(ENV_ID, **kwargs)
    return gym.make(ENV_ID, **kwargs)


def _traced_policy(make_policy: Callable[[gym.Env], Policy], text_actions: bool,
                   kept: dict[int, tuple[Action, ...]], described: list[Any],
                   env: gym.Env) -> Traced:
    """The agent's policy for `env`, keeping each episode's actions in `kept` by task seed;
    the first one built is described into `described`."""
    def keep(task_seed: int | None, calls: tuple[Action, ...]) -> None:
        if task_seed is not None:
            kept[task_seed] = calls

    policy = Traced(make_policy(env), text_decoder(env) if text_actions else pair,
                    on_trace=keep)
    if not described:
        described.append(identity(describe_run(env, policy)["policy"]))
    return policy


def _renumbered(parts: Sequence[Episodes]) -> Episodes:
    """A configuration's rounds as one Episodes in task-seed order, numbered 0.. in it."""
    merged = Episodes.concatenate(list(parts))
    merged = merged.take(np.argsort(merged.columns["task_seed"], kind="stable"))
    merged.columns["episode"] = np.arange(len(merged), dtype=merged.columns["episode"].dtype)
    return merged


def _configuration(spec: WorkflowParams, played: Episodes,
                   traces: Mapping[int, tuple[Action, ...]]) -> Configuration:
    kwargs = env_kwargs(spec)
    seeds = [int(s) for s in played.columns["task_seed"]]
    missing = [s for s in seeds if s not in traces]
    if missing:
        raise ValueError(f"{len(missing)} episodes of {ENV_ID} {kwargs} have no trace (first: "
                         f"task seed {missing[0]}); diagnose needs each episode's actions")
    return Configuration(spec, played, tuple(Trace(kwargs, s, traces[s]) for s in seeds))


def logged_traces(spec: WorkflowParams, logged: LoggedRun) -> dict[int, tuple[Action, ...]]:
    """Per task seed the actions of a run's episode: its trace line's, else, for a chat
    model's log without trace lines, its call lines' (`replies_executed`, decoded by the text
    wrapper's rules)."""
    traces = {seed: tuple(pair(a) for a in actions) for seed, actions in logged.actions.items()}
    missing = [seed for seed in logged.calls if seed not in traces]
    if missing:
        from diagym.analysis.llm_runs import make_text_env

        env = make_text_env(ENV_ID, **env_kwargs(spec))
        decode = text_decoder(env)
        env.close()
        for seed in missing:
            traces[seed] = tuple(replies_executed(logged.calls[seed], decode))
    return traces


def battery_of(specs: Sequence[WorkflowParams]) -> tuple[WorkflowParams, ...] | None:
    """The battery `specs` were played from: the default one, or the battery of their one
    shape (battery.battery_for); None when neither holds them all."""
    if all(spec in DEFAULT_BATTERY for spec in specs):
        return DEFAULT_BATTERY
    shapes = {(s.n_ops, s.candidates, s.error_allowance) for s in specs}
    if len(shapes) == 1:
        shaped = battery_for(*shapes.pop()).battery
        if all(spec in shaped for spec in specs):
            return shaped
    return None


def diagnose_log(path: Path, battery: Sequence[WorkflowParams] | None = None,
                 forecasts: Sequence[dict[str, Any]] = ()) -> Diagnosis:
    """The diagnosis of a log's StatefulWorkflow runs on battery configurations (written by
    diagnose_policy, or any run whose episodes carry trace lines), on `battery` (default: the
    one its runs were played from, `battery_of`); ValueError, one line, for a log that holds
    none, other envs or configurations, or several policies. The log of an adaptive
    diagnosis (its "design" line) has its rounds replayed from the logged episodes, so its
    design comes back as it was played."""
    runs = read_log(path)
    specs: dict[str, WorkflowParams] = {}
    for run_id, logged in runs.items():
        if logged.run.get("env") == ENV_ID:
            try:
                specs[run_id] = WorkflowParams.from_kwargs(**logged.run.get("env_kwargs", {}))
            except (TypeError, ValueError):
                continue  # refused below, with the run named
    if battery is None:
        battery = battery_of(list(specs.values())) or DEFAULT_BATTERY
    battery = tuple(battery)

    def configuration(kwargs: dict[str, Any]) -> int | None:
        spec = WorkflowParams.from_kwargs(**kwargs)
        return battery.index(spec) if spec in battery else None

    policy, found = runs_by_configuration(path, runs, ENV_ID, configuration,
                                          f"{ENV_ID} battery")
    logged_configurations = {}
    for index in sorted(found):
        logged = found[index]
        records = sorted(logged.episodes.values(), key=lambda r: r.task_seed)
        logged_configurations[index] = _configuration(
            battery[index], _renumbered([Episodes.from_records(records)]),
            logged_traces(battery[index], logged))
    line = design_line(path)
    if line is None or not isinstance(line.get("budget"), int):
        return _diagnose(policy, [logged_configurations[i] for i in sorted(found)], battery,
                         forecasts)
    from diagym.analysis.diagnose.adaptive import logged_rule

    design, consumed = _replay_design(battery, int(line["budget"]), logged_configurations,
                                      logged_rule(line))
    return _diagnose(policy, [consumed[i] for i in sorted(consumed)], battery, forecasts,
                     design)


def _replay_design(battery: tuple[WorkflowParams, ...], budget: int,
                   logged: Mapping[int, Configuration], rule: Any
                   ) -> tuple[Any, dict[int, Configuration]]:
    """An adaptive design replayed on logged episodes: each round takes the configuration's
    next episodes in seed order, as the live design played them."""
    from diagym.analysis.diagnose import adaptive

    consumed: dict[int, Configuration] = {}

    def play_round(c: int, episodes: int) -> np.ndarray | None:
        have = (len(consumed[c].episodes) if c in consumed else 0) + episodes
        if c not in logged or len(logged[c].episodes) < have:
            return None
        whole = logged[c]
        consumed[c] = Configuration(whole.spec, whole.episodes.take(np.arange(have)),
                                    whole.traces[:have])
        return consumed[c].counts

    return adaptive.run_design(mechanism_model(battery), budget, play_round, rule), consumed
