"""Why a DACSSteering orchestrator answered wrongly, read from its trace, and which window
reader it plays like.

A DACS answer is a choice among four values, and the window text is everything the agent was
shown, so the diagnosis is held to that text: each decision is replayed on the env (which is
deterministic given the scenario seed and the answers, the answers entering later windows as
history and cascade decisions), and the window is parsed by the readers' own parser
(controllers/dacs/readers.py `parse_window`, `evidence`), never by a second one.

## Categories
A right answer is "correct". For a wrong one, two explanations are weighed:

- contamination: the chosen value is mentioned in the window, for the requested key's
  attribute, by another agent's block (a fact, a recorded decision, a steering-history answer
  or a registry "decided" entry). Its sources name each such agent and where its block sat
  (rank from the top, out of how many blocks, and the header's character offset). A value
  the env calls contaminated (another agent holds it) but the window does not show cannot
  have been read there, so it is not this explanation; `DacsDecision.contaminated` keeps the
  env's word for it.
- truncation: the reader's evidence rule (`evidence`: the requester's own fact, or the
  decision a cascade request must match) finds nothing in the window, so the agent could
  not have known the answer.

Neither fitting is "distractor": a wrong value the window gave no reason to choose. Both
fitting is "ambiguous", counted once there, never forced to a label.

## Likelihood shares (`DacsAttribution.weights`), as in the workflow attribution
Contamination is the hypothesis "the agent used one of the other agents' values for the
attribute that the window shows among the options, each equally likely"; its probability
for the chosen option is the share of those values that are the chosen one. A guess gives
every option 1/n; it is named truncation when the evidence was missing (the guess was
forced) and distractor when it was there. With equal priors the weights are these
probabilities normalised (summing to 1 per wrong answer), so a guess keeps a share even
where contamination fits, since a uniform agent lands on a visible lure by chance too.
Right answers weigh nothing in the counts.

## Reader fit
Every reference reader is deterministic given the window, except that it guesses uniformly
(from its seeded stream) when its rule finds no value among the options; as a distribution,
its choice at a decision is therefore one option with probability 1, or uniform over the n
options. Mixed with a lapse epsilon (a uniform option with probability epsilon),
P(choice | reader, epsilon) = (1 - epsilon) P_reader(choice) + epsilon / n, and the trace's
log-likelihood is the sum over its decisions: exact, with no simulation, because the agent's
own windows are the ones each reader is run on. Epsilon is fitted on EPSILON_GRID with the
likelihood-ratio interval of analysis/diagnose/likelihood.py (INTERVAL_LOG_UNITS).
`dacs-reader` and `flat-reader` are one reader, and any readers whose choice distributions
agree on every decision of the traces tie exactly at every epsilon: they are reported as one
fit with aliases, named by the first in READERS order, or "uniform" when uniform is among them
(registry-only guesses wherever no cascade request binds its rule, so on such traces it is
uniform, and the name should say so). Uniform is every reader's lapse-1 member: when no fit
beats it by more than INTERVAL_LOG_UNITS, the data do not reject pure guessing and uniform is
ranked first (a lapse fitted near 1 would otherwise win on sampling noise: 6 of 10 battery
seeds).

## Battery
DEFAULT_BATTERY holds the windows where each reader's rule binds (N = 5, D = 3, 15 decisions
an episode); per decision, the share of the battery's decisions where two readers' choices
differ (seeds 0-7 played by the reader itself; a guess against a rule's pick counts):

    configuration                     reader/recency  reader/registry  registry/uniform
    homogeneous, dacs, W = 4096            0.00            1.00             0.00
    homogeneous, flat, no budget           0.80            1.00             0.00
    cascade, dacs, W = 4096                0.33            0.76             0.24
    homogeneous, flat, W = 1024            0.63            0.40             0.00

The default window separates the readers from registry-only and uniform; the unbudgeted
flat window is where recency contaminates (it takes the highest-index holder's fact); only
cascade requests let registry-only follow a decision, which tells it from uniform; and a
small flat window cuts the later agents' blocks, so the reader guesses (truncation) where
recency still answers from the blocks that remain. At DEFAULT_EPISODES = 8 per configuration
(480 decisions), over battery seeds 0, 100, ..., 900: every reader is ranked first in 10 of 10
(dacs-reader and flat-reader as one fit), the runner-up at a median log-LR of -438
(dacs-reader), -449 (flat-recency), -40 (registry-only); uniform is first in 9 of 10 (once a
reader's lapse fit beat it by more than the margin). A programmed lapse (20 seeds each,
epsilon 0.05 / 0.2 / 0.5) falls inside its interval in 173 of 180 fits; intervals are about
0.04 / 0.08 / 0.11 wide for dacs-reader and flat-recency, 0.13 / 0.30 / 0.42 for
registry-only, whose rule picks an option only on cascade requests.

## Run logs
The battery plays through the one runner (controllers/rollout.py) with each policy under
controllers/tracing.py `Traced`, so `--log` gets every episode, call and trace line as it
plays, one run per configuration (`run_name`), and a resume plays only what the log has not
finished. An answer is traced as a one-element action ([index]). `traces_from_log` reads such
a log back (or any DACSSteering run whose episodes carry trace lines, or a chat model's call
lines, judged again by the text wrapper), matching each run's complete gym.make kwargs to a
battery configuration, so the diagnosis of the log is the live one exactly.

## Verdicts
`diagnosis` ends in one sentence per component (analysis/diagnose/dacs_verdicts.py) from
`evidence_for`: the reader fits, the attribution, the visibility of the evidence per
configuration and `fit_copying`, a copy rate fitted over the best reader and its lapse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from analysis.diagnose.dacs_verdicts import Copying, Evidence, Position, Visibility, verdicts
from analysis.diagnose.likelihood import INTERVAL_LOG_UNITS
from analysis.diagnose.logs import LoggedRun, read_log, replies_executed, runs_by_configuration
from controllers.dacs.readers import (
    DACS_CONTROLLERS,
    ParsedWindow,
    dacs_controller,
    evidence,
    parse_window,
)
from controllers.executors import Executor
from controllers.policy import EpisodeRecord, Policy
from controllers.rollout import rollout_parallel
from controllers.runlog import RunLog
from controllers.tracing import Traced
from envs.dacs.scenario import ATTRIBUTE_OF, KEYS

ENV_ID = "DACSSteering-v0"
CORRECT, CONTAMINATION, TRUNCATION, DISTRACTOR = "correct", "contamination", "truncation", \
    "distractor"
AMBIGUOUS = "ambiguous"
COUNT_KEYS = (CORRECT, CONTAMINATION, TRUNCATION, DISTRACTOR, AMBIGUOUS)
WEIGHT_KEYS = (CONTAMINATION, TRUNCATION, DISTRACTOR)
READERS = tuple(DACS_CONTROLLERS)
UNIFORM = "uniform"
EPSILON_GRID = np.round(np.linspace(0.0, 1.0, 101), 2)
DEFAULT_BATTERY: tuple[dict[str, Any], ...] = (
    {"family": "homogeneous", "context_mode": "dacs", "window": 4096},
    {"family": "homogeneous", "context_mode": "flat", "window": None},
    {"family": "cascade", "context_mode": "dacs", "window": 4096},
    {"family": "homogeneous", "context_mode": "flat", "window": 1024},
)
DEFAULT_EPISODES = 8
_KEY_ID = {name: i for i, name in enumerate(KEYS)}
PolicyMaker = Callable[[gym.Env], Policy]


@dataclass(frozen=True)
class DacsTrace:
    """One DACSSteering episode as an agent played it: the env's gym.make kwargs, the scenario
    seed and the option indices answered, in order."""

    env_kwargs: Mapping[str, Any]
    seed: int
    actions: tuple[int, ...]


@dataclass(frozen=True)
class DacsDecision:
    """One answer: the window shown before it, its parse, the option chosen and what the
    env's info said after it (correct; contaminated: another agent holds the value)."""

    index: int
    window: str
    parsed: ParsedWindow
    action: int
    correct: bool
    contaminated: bool
    requester: int
    key: str

    @property
    def options(self) -> list[str]:
        return self.parsed.options

    @property
    def chosen(self) -> str:
        return self.parsed.options[self.action]


@dataclass(frozen=True)
class Source:
    """Another agent's mention of the chosen value: the agent, the mention's kind, its block's
    rank from the top of the window (0 first) out of `blocks`, and the block header's
    character offset in the window text."""

    agent: str
    kind: str
    rank: int
    blocks: int
    offset: int


@dataclass(frozen=True)
class DacsAttribution:
    """A decision's category (COUNT_KEYS), the explanations that fit it, each hypothesis's
    likelihood share for a wrong answer (WEIGHT_KEYS, summing to 1; empty when correct) and
    the contamination sources in reading order."""

    category: str
    explanations: frozenset[str]
    weights: Mapping[str, float]
    sources: tuple[Source, ...]


@dataclass(frozen=True)
class DacsTally:
    """Attributions summed over traces: counts (each decision once), weighted (likelihood
    shares over wrong answers), the env's contaminated count, and per contamination source
    agent (the one nearest the request) how many contaminated answers it explains."""

    counts: dict[str, int]
    weighted: dict[str, float]
    decisions: int
    env_contaminated: int
    sources: dict[str, int]


def option(action: Any) -> tuple[int]:
    """A DACS answer (an option index) as a trace entry: a 1-tuple, so the run log's trace
    line (controllers/tracing.py, a list per action) holds [index]."""
    return (int(action),)


def text_option_decoder(env: gym.Env) -> Callable[[Any], tuple[int] | None]:
    """The option a TextActionWrapper `env` executes for a reply, as a trace entry, None for a
    reply it refuses (its own judgement, `TextActionWrapper.env_action`)."""

    def decode(reply: Any) -> tuple[int] | None:
        _, action = env.env_action(reply)
        return None if action is None else option(action)

    return decode


def run_name(env_kwargs: Mapping[str, Any]) -> str:
    """The name of a configuration's run in a diagnosis log (one run per configuration)."""
    return "diagnose " + " ".join(f"{k}={v}" for k, v in sorted(dict(env_kwargs).items()))


def play(policy: Policy | None, env_kwargs: Mapping[str, Any], episodes: int, seed: int = 0,
         *, make_policy: PolicyMaker | None = None, text_actions: bool = False,
         log: RunLog | None = None, workers: int = 1, executor: Executor | None = None,
         on_record: Callable[[EpisodeRecord], None] | None = None) -> list[DacsTrace]:
    """Episodes on scenario seeds seed, seed+1, ... through the one runner
    (controllers/rollout.py), recorded as traces, by `policy` or by the policies
    `make_policy(env)` builds (one per worker); with `text_actions` the policy answers in text
    behind the text-action wrapper and the trace holds the answers it executed. With `log`
    (open, shared by the battery's configurations) every episode, call and trace is logged
    under the configuration's run_name, and an episode the log already finished is not played
    again: its trace is read back from the log."""
    if (policy is None) == (make_policy is None):
        raise ValueError("play needs a policy or make_policy, not both")
    if policy is not None and workers != 1:
        raise ValueError("one policy object plays one episode at a time: workers must be 1")
    kwargs = dict(env_kwargs)
    kept: dict[int, tuple[int, ...]] = {}

    def make_env() -> gym.Env:
        env = gym.make(ENV_ID, **kwargs)
        if text_actions:
            from llm_policies.text_actions import TextActionWrapper

            env = TextActionWrapper(env)
        return env

    def traced(env: gym.Env) -> Traced:
        def keep(task_seed: int | None, actions: tuple[Any, ...]) -> None:
            if task_seed is not None:
                kept[task_seed] = tuple(int(a[0]) for a in actions)

        inner = policy if make_policy is None else make_policy(env)
        return Traced(inner, text_option_decoder(env) if text_actions else option,
                      on_trace=keep)

    played = rollout_parallel(make_env, traced, episodes, seed=seed, workers=workers,
                              executor=executor, log=log, on_record=on_record,
                              run_name=run_name(kwargs))
    seeds = [seed + int(i) for i in played.columns["episode"]]
    if log is not None and any(s not in kept for s in seeds):
        logged = read_log(log.path).get(log.run_id)
        for s, actions in ({} if logged is None else logged_answers(logged)).items():
            kept.setdefault(s, actions)
    missing = [s for s in seeds if s not in kept]
    if missing:
        raise ValueError(f"{len(missing)} episodes of {ENV_ID} {kwargs} have no trace (first: "
                         f"scenario seed {missing[0]}); diagnose needs each episode's answers")
    return [DacsTrace(kwargs, s, kept[s]) for s in seeds]


def play_battery(policy: Policy | None = None,
                 battery: Sequence[Mapping[str, Any]] = DEFAULT_BATTERY,
                 episodes: int = DEFAULT_EPISODES, seed: int = 0, *,
                 make_policy: PolicyMaker | None = None, text_actions: bool = False,
                 log: RunLog | None = None, workers: int = 1,
                 executor: Executor | None = None,
                 on_record: Callable[[EpisodeRecord], None] | None = None
                 ) -> list[DacsTrace]:
    """`episodes` episodes on each configuration, scenario seeds seed, seed+1, ... (play)."""
    return [trace for kwargs in battery
            for trace in play(policy, kwargs, episodes, seed, make_policy=make_policy,
                              text_actions=text_actions, log=log, workers=workers,
                              executor=executor,
                              on_record=on_record)]


def logged_answers(logged: LoggedRun) -> dict[int, tuple[int, ...]]:
    """Per scenario seed a run's answers: its trace line's, else recovered from its call
    lines (`replies_executed`, decoded by the text wrapper's rules)."""
    answers = {seed: tuple(int(a[0]) for a in actions)
               for seed, actions in logged.actions.items()}
    missing = [seed for seed in logged.calls if seed not in answers]
    if missing:
        from llm_policies.text_actions import TextActionWrapper

        env = TextActionWrapper(gym.make(ENV_ID, **logged.run.get("env_kwargs", {})))
        decode = text_option_decoder(env)
        env.close()
        for seed in missing:
            answers[seed] = tuple(a[0] for a in replies_executed(logged.calls[seed], decode))
    return answers


def holds_dacs_runs(path: Path) -> bool:
    """Whether any run of the log at `path` is a DACSSteering run (its run line's "env")."""
    return any(logged.run.get("env") == ENV_ID for logged in read_log(path).values())


def battery_configuration(env_kwargs: Mapping[str, Any],
                          battery: Sequence[Mapping[str, Any]] = DEFAULT_BATTERY) -> int | None:
    """The index of the battery configuration whose env has these (complete) gym.make kwargs,
    as a run line records them, or None."""
    for index, kwargs in enumerate(battery):
        env = gym.make(ENV_ID, **dict(kwargs))
        complete = dict(env.spec.kwargs) if env.spec is not None else dict(kwargs)
        env.close()
        if complete == dict(env_kwargs):
            return index
    return None


def traces_from_log(path: Path, battery: Sequence[Mapping[str, Any]] = DEFAULT_BATTERY
                    ) -> tuple[Any, list[DacsTrace]]:
    """(the policy's description, the traces) of a log's DACSSteering runs on battery
    configurations, in battery then seed order, as `play_battery` returns them; ValueError,
    one line, for a log that holds none, other envs or configurations, several policies, or a
    finished episode without its answers."""
    policy, found = runs_by_configuration(
        path, read_log(path), ENV_ID, lambda kwargs: battery_configuration(kwargs, battery),
        f"{ENV_ID} battery")
    traces = []
    for index in sorted(found):
        logged = found[index]
        answers = logged_answers(logged)
        missing = sorted(s for s in logged.episodes if s not in answers)
        if missing:
            raise ValueError(f"log {path}: {len(missing)} episodes of {ENV_ID} "
                             f"{dict(battery[index])} have no trace (first: scenario seed "
                             f"{missing[0]}); diagnose needs each episode's answers")
        traces += [DacsTrace(dict(battery[index]), s, answers[s])
                   for s in sorted(logged.episodes)]
    if not traces:
        raise ValueError(f"log {path} holds no finished {ENV_ID} episode")
    return policy, traces


def replay(trace: DacsTrace) -> list[DacsDecision]:
    """The trace's decisions replayed on the env; refuses an action the env refuses and
    actions after the episode ended (ValueError naming the answer)."""
    env = gym.make(ENV_ID, **dict(trace.env_kwargs))
    try:
        observation, info = env.reset(seed=trace.seed)
        decisions: list[DacsDecision] = []
        ended = False
        for index, action in enumerate(trace.actions):
            if ended:
                raise ValueError(f"answer {index} of the trace of seed {trace.seed} comes "
                                 f"after the episode ended ({index} answers)")
            window = str(observation["window"])
            try:
                observation, _, ended, _, info = env.step(int(action))
            except ValueError as error:
                raise ValueError(f"answer {index} of the trace of seed {trace.seed}: "
                                 f"{error}") from error
            if "focus" in info:
                raise ValueError(f"answer {index} of the trace of seed {trace.seed} is a focus "
                                 f"action; the DACS diagnosis reads answers only")
            decisions.append(DacsDecision(
                index=index, window=window, parsed=parse_window(window), action=int(action),
                correct=bool(info["correct"]), contaminated=bool(info["contaminated"]),
                requester=int(info["requester"]), key=str(info["key"])))
        return decisions
    finally:
        env.close()


def block_offsets(window: str) -> list[tuple[str, int]]:
    """(agent, header offset) of each agent block, top to bottom."""
    out, at = [], 0
    for line in window.split("\n"):
        if line.startswith("## agent-"):
            out.append((line[3:].split(" ", 1)[0], at))
        at += len(line) + 1
    return out


def sources(decision: DacsDecision, value: str) -> tuple[Source, ...]:
    """Other agents' mentions of `value` for the requested key's attribute, in reading order."""
    parsed = decision.parsed
    attribute = ATTRIBUTE_OF[_KEY_ID[decision.key]]
    blocks = block_offsets(decision.window)
    rank = {agent: (r, offset) for r, (agent, offset) in enumerate(blocks)}
    return tuple(
        Source(m.agent, m.kind, rank[m.agent][0], len(blocks), rank[m.agent][1])
        for m in parsed.mentions
        if m.agent != parsed.requester and m.value == value
        and ATTRIBUTE_OF[_KEY_ID[m.key]] == attribute)


def lures(decision: DacsDecision) -> set[str]:
    """The options the window shows as other agents' values for the attribute (the evidence's
    own values excluded: a cascade's source decision is the right answer, not a lure)."""
    right = {m.value for m in evidence(decision.parsed)}
    return {option for option in decision.options
            if option not in right and sources(decision, option)}


def attribute(decision: DacsDecision) -> DacsAttribution:
    """The decision's category, fitting explanations, likelihood shares and sources."""
    if decision.correct:
        return DacsAttribution(CORRECT, frozenset(), {}, ())
    likelihood: dict[str, float] = {}
    members = lures(decision)
    if members:
        likelihood[CONTAMINATION] = (decision.chosen in members) / len(members)
    guess = DISTRACTOR if evidence(decision.parsed) else TRUNCATION
    likelihood[guess] = 1.0 / len(decision.options)
    fits = {name for name, p in likelihood.items() if p > 0 and name != DISTRACTOR}
    total = sum(likelihood.values())
    weights = {name: likelihood.get(name, 0.0) / total for name in WEIGHT_KEYS}
    if not fits:
        category = DISTRACTOR
    elif len(fits) == 1:
        (category,) = fits
    else:
        category = AMBIGUOUS
    found = sources(decision, decision.chosen) if CONTAMINATION in fits else ()
    return DacsAttribution(category, frozenset(fits), weights, found)


def tally(decisions: Sequence[DacsDecision]) -> DacsTally:
    """The counts and likelihood shares of `decisions`."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    weighted = dict.fromkeys(WEIGHT_KEYS, 0.0)
    by_source: dict[str, int] = {}
    for decision in decisions:
        attribution = attribute(decision)
        counts[attribution.category] += 1
        for name, share in attribution.weights.items():
            weighted[name] += share
        if attribution.sources:
            nearest = attribution.sources[-1].agent
            by_source[nearest] = by_source.get(nearest, 0) + 1
    return DacsTally(counts, weighted, len(decisions),
                     sum(d.contaminated for d in decisions), by_source)


def choice_probabilities(decisions: Sequence[DacsDecision], name: str) -> np.ndarray:
    """P_reader(chosen option) per decision for the reader `name`: 1 or 0 where its rule
    picks an option, 1/n where it would guess (module docstring)."""
    reader = dacs_controller(name)
    out = np.empty(len(decisions))
    for i, decision in enumerate(decisions):
        value = reader.value(decision.parsed)
        if value in decision.options:
            out[i] = float(decision.chosen == value)
        else:
            out[i] = 1.0 / len(decision.options)
    return out


def lapse_log_likelihood(p: np.ndarray, n_options: np.ndarray,
                         epsilons: np.ndarray = EPSILON_GRID) -> np.ndarray:
    """Per epsilon, sum over decisions of log((1 - epsilon) p + epsilon / n)."""
    mixed = (1.0 - epsilons[:, None]) * p[None, :] + epsilons[:, None] / n_options[None, :]
    with np.errstate(divide="ignore"):
        return np.log(mixed).sum(axis=1)


@dataclass(frozen=True)
class ReaderFit:
    """A reader (and its aliases, which choose identically on every decision) mixed with its
    maximum-likelihood lapse epsilon, the likelihood-ratio interval of epsilon, the
    log-likelihood there and the log likelihood ratio to the best fit (<= 0)."""

    name: str
    aliases: tuple[str, ...]
    epsilon: float
    interval: tuple[float, float]
    log_likelihood: float
    log_lr_to_best: float

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def as_dict(self) -> dict[str, Any]:
        """The issue's mechanism entry (a reader is its own family; epsilon its parameter)."""
        return {"name": self.name, "family": self.name, "aliases": list(self.aliases),
                "params": {"epsilon_interval": list(self.interval)}, "epsilon": self.epsilon,
                "log_likelihood": self.log_likelihood, "log_lr_to_best": self.log_lr_to_best}


def fit_readers(decisions: Sequence[DacsDecision], readers: Sequence[str] = READERS
                ) -> list[ReaderFit]:
    """Every distinct reader with its lapse fitted, best first (ties by `readers` order; an
    epsilon tie by the smaller epsilon), uniform first when no fit rejects it (module
    docstring)."""
    if not decisions:
        raise ValueError("fit_readers needs at least one decision")
    n_options = np.array([len(d.options) for d in decisions], dtype=np.float64)
    groups: list[tuple[str, list[str], np.ndarray]] = []
    for name in readers:
        p = choice_probabilities(decisions, name)
        same = next((g for g in groups if np.array_equal(g[2], p)), None)
        if same is None:
            groups.append((name, [], p))
        elif name == UNIFORM:  # a reader that only guesses here is named for guessing
            same[1].insert(0, same[0])
            groups[groups.index(same)] = (UNIFORM, same[1], p)
        else:
            same[1].append(name)
    rows = []
    for name, aliases, p in groups:
        ll = lapse_log_likelihood(p, n_options)
        best = int(np.argmax(ll))
        inside = EPSILON_GRID[ll >= ll[best] - INTERVAL_LOG_UNITS]
        rows.append((name, tuple(aliases), float(EPSILON_GRID[best]),
                     (float(inside.min()), float(inside.max())), float(ll[best])))
    top = max(row[4] for row in rows)
    order = sorted(range(len(rows)), key=lambda i: -rows[i][4])
    guessing = next((i for i, row in enumerate(rows) if UNIFORM in (row[0], *row[1])), None)
    if guessing is not None and rows[guessing][4] >= top - INTERVAL_LOG_UNITS:
        order.remove(guessing)
        order.insert(0, guessing)
    return [ReaderFit(*rows[i], log_lr_to_best=rows[i][4] - top) for i in order]


def fit_copying(decisions: Sequence[DacsDecision], name: str) -> Copying:
    """The copy rate over the reader `name` and its lapse, fitted jointly: at a decision whose
    window shows lures, P = rate * [chosen is a lure] / lures + (1 - rate) * P_lapse, where
    P_lapse = (1 - epsilon) P_reader + epsilon / n is the reader fit's probability (elsewhere
    P = P_lapse). The rate's likelihood is profiled over epsilon (both on EPSILON_GRID), so a
    lapse and copying are told apart by where the wrong answers land; its interval is the
    likelihood-ratio interval, and its log-LR over none is the profile's maximum over its value
    at rate 0, the reader fit itself (dacs_verdicts module docstring)."""
    n_options = np.array([len(d.options) for d in decisions], dtype=np.float64)
    lapse = (1.0 - EPSILON_GRID[:, None]) * choice_probabilities(decisions, name)[None, :] \
        + EPSILON_GRID[:, None] / n_options[None, :]
    members = [lures(d) for d in decisions]
    shown = np.array([bool(m) for m in members])
    if not shown.any():
        return Copying(0.0, (0.0, 1.0), 0.0, 0)
    share = np.array([(d.chosen in m) / len(m) if m else 0.0
                      for d, m in zip(decisions, members, strict=True)])
    with np.errstate(divide="ignore"):
        fixed = np.log(lapse[:, ~shown]).sum(axis=1)
        profile = np.array([
            np.max(fixed + np.log(rate * share[shown] + (1.0 - rate) * lapse[:, shown])
                   .sum(axis=1))
            for rate in EPSILON_GRID])
    best = int(np.argmax(profile))
    inside = EPSILON_GRID[profile >= profile[best] - INTERVAL_LOG_UNITS]
    log_lr = float(profile[best] - profile[0]) if np.isfinite(profile[0]) else float("inf")
    return Copying(float(EPSILON_GRID[best]), (float(inside.min()), float(inside.max())),
                   log_lr, int(shown.sum()))


def configuration_label(env_kwargs: Mapping[str, Any]) -> str:
    """A DACS configuration in a few words: family, context mode and window budget (and any
    other kwargs as k=v)."""
    kwargs = dict(env_kwargs)
    family, mode = kwargs.pop("family", "homogeneous"), kwargs.pop("context_mode", "dacs")
    window = kwargs.pop("window", None)
    budget = "no budget" if window is None else f"W={window}"
    return " ".join([str(family), str(mode), budget, *(f"{k}={v}" for k, v in kwargs.items())])


def evidence_for(per_configuration: Sequence[tuple[Mapping[str, Any], list[DacsDecision]]],
                 fits: Sequence[ReaderFit], result: DacsTally) -> Evidence:
    """What the verdicts read (dacs_verdicts.Evidence), from the decisions per configuration,
    the reader fits best first and their tally."""
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
    return Evidence([f.as_dict() for f in fits], result.counts, result.sources, positions,
                    visibility, wrong_without, right_with, with_evidence, options,
                    fit_copying(decisions, fits[0].name))


def decisions_of(traces: Iterable[DacsTrace]) -> list[DacsDecision]:
    return [decision for trace in traces for decision in replay(trace)]


def diagnosis(traces: Sequence[DacsTrace]) -> dict[str, Any]:
    """The issue's output contract for DACS: configurations, episodes, attribution counts
    (COUNT_KEYS) with their likelihood shares and sources, the reader fits best first and a
    verdict per component (dacs_verdicts)."""
    per_configuration: list[tuple[dict[str, Any], list[DacsDecision]]] = []
    decisions: list[DacsDecision] = []
    for trace in traces:
        kwargs = dict(trace.env_kwargs)
        group = next((g for k, g in per_configuration if k == kwargs), None)
        if group is None:
            group = []
            per_configuration.append((kwargs, group))
        replayed = replay(trace)
        group += replayed
        decisions += replayed
    result = tally(decisions)
    fits = fit_readers(decisions)
    return {
        "env": ENV_ID,
        "episodes": len(traces),
        "decisions": result.decisions,
        "configurations": [kwargs for kwargs, _ in per_configuration],
        "attribution": result.counts,
        "attribution_weights": result.weighted,
        "env_contaminated": result.env_contaminated,
        "contamination_sources": result.sources,
        "mechanisms": [f.as_dict() for f in fits],
        "verdicts": verdicts(evidence_for(per_configuration, fits, result)),
    }
