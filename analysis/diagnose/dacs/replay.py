"""A DACSSteering orchestrator's answers: played on the battery (or read from a run log),
replayed on the env decision by decision, and each wrong answer attributed to its cause.

A DACS answer is a choice among four values, and the window text is everything the agent was
shown, so the diagnosis is held to that text: each decision is replayed on the env (which is
deterministic given the scenario seed and the answers, the answers entering later windows as
history and cascade decisions), and the window is parsed by the readers' own parser
(controllers/dacs/readers.py `parse_window`, `evidence`), never by a second one. The reader
fits and the fit test are analysis/diagnose/dacs/fit.py; the diagnosis that joins them is
analysis/diagnose/dacs/diagnosis.py.

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
(480 decisions), over battery seeds 0, 100, ..., 900 (measured with the five readers before
first-agent and own-fact, and grid-point intervals): every reader is ranked first in 10 of 10
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

## Against chance (`DacsTally.expected`)
A count means little alone: where the window shows three other agents' values among four
options, a uniform guesser's wrong answers are nearly all "contamination". For each wrong
answer the tally also adds, per category, the share of the decision's wrong options that
would be given that category: the count a uniform guesser (uniform over the wrong options)
would show on the same decisions (honesty.against_chance words the excess).

## Episodes an invalid reply ended
A text agent's reply that names no option ends its episode (llm_policies/text_actions.py).
Its trace holds the answers before that reply, each of which is evidence as any answer is (the
window it was given is replayed exactly); the reply itself is in no trace. `replayed` tells
such an episode (the env did not end it at its last answer) and `DacsTrace.first_failure`
keeps the episode record's first failure, read live and from the log alike, which names the
invalid reply's category unless a wrong answer ("wrong") came first (analysis/diagnose/dacs/
diagnosis.py tallies it as after_env_failures then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import diagym  # noqa: F401  (registers the ids)
from diagym import envs
from diagym.analysis.diagnose.contract import DIAGNOSES
from diagym.analysis.diagnose.defaults import DACS_BATTERY, DACS_EPISODES
from diagym.analysis.diagnose.logs import (
    LoggedRun,
    read_log,
    replies_executed,
    runs_by_configuration,
)
from diagym.controllers.dacs.readers import ParsedWindow, evidence, parse_window
from diagym.controllers.executors import Executor
from diagym.controllers.policy import EpisodeRecord, MakePolicy, Policy
from diagym.controllers.rollout import rollout_parallel
from diagym.controllers.runlog import RunLog
from diagym.controllers.tracing import Traced
from diagym.envs.dacs.scenario import ATTRIBUTE_OF, KEYS

ENV_ID = DIAGNOSES[envs.DACS].env_id
CORRECT, CONTAMINATION, TRUNCATION, DISTRACTOR = "correct", "contamination", "truncation", \
    "distractor"
AMBIGUOUS = "ambiguous"
COUNT_KEYS = (CORRECT, CONTAMINATION, TRUNCATION, DISTRACTOR, AMBIGUOUS)
WEIGHT_KEYS = (CONTAMINATION, TRUNCATION, DISTRACTOR)
DEFAULT_BATTERY = DACS_BATTERY  # analysis/diagnose/defaults.py
DEFAULT_EPISODES = DACS_EPISODES
_KEY_ID = {name: i for i, name in enumerate(KEYS)}


@dataclass(frozen=True)
class DacsTrace:
    """One DACSSteering episode as an agent played it: the env's gym.make kwargs, the scenario
    seed, the option indices answered, in order, and the episode record's first failure
    (which names the invalid reply that ended an episode early; module docstring)."""

    env_kwargs: Mapping[str, Any]
    seed: int
    actions: tuple[int, ...]
    first_failure: str | None = None


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
    right: int = -1  # the option index the env scored right (-1: not known)

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
    agent (the one nearest the request) how many contaminated answers it explains; and per
    category of a wrong answer the count a uniform guesser would show on the same wrong
    answers (module docstring)."""

    counts: dict[str, int]
    weighted: dict[str, float]
    decisions: int
    env_contaminated: int
    sources: dict[str, int]
    expected: dict[str, float] = field(default_factory=dict)

    @property
    def wrong(self) -> int:
        return self.decisions - self.counts[CORRECT]


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
         *, make_policy: MakePolicy | None = None, text_actions: bool = False,
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
            from diagym.llm_policies.text_actions import TextActionWrapper

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
    failures = dict(zip(seeds, played.columns["first_failure"], strict=True))
    if log is not None and any(s not in kept for s in seeds):
        logged = read_log(log.path).get(log.run_id)
        for s, actions in ({} if logged is None else logged_answers(logged)).items():
            kept.setdefault(s, actions)
    missing = [s for s in seeds if s not in kept]
    if missing:
        raise ValueError(f"{len(missing)} episodes of {ENV_ID} {kwargs} have no trace (first: "
                         f"scenario seed {missing[0]}); diagnose needs each episode's answers")
    return [DacsTrace(kwargs, s, kept[s], _failure(failures[s])) for s in seeds]


def _failure(value: Any) -> str | None:
    return None if value is None else str(value)


def play_battery(policy: Policy | None = None,
                 battery: Sequence[Mapping[str, Any]] = DEFAULT_BATTERY,
                 episodes: int = DEFAULT_EPISODES, seed: int = 0, *,
                 make_policy: MakePolicy | None = None, text_actions: bool = False,
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
        from diagym.llm_policies.text_actions import TextActionWrapper

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
        traces += [DacsTrace(dict(battery[index]), s, answers[s],
                             _failure(logged.episodes[s].first_failure))
                   for s in sorted(logged.episodes)]
    if not traces:
        raise ValueError(f"log {path} holds no finished {ENV_ID} episode")
    return policy, traces


def replay(trace: DacsTrace) -> list[DacsDecision]:
    """The trace's decisions replayed on the env; refuses an action the env refuses and
    actions after the episode ended (ValueError naming the answer)."""
    return replayed(trace)[0]


def replayed(trace: DacsTrace) -> tuple[list[DacsDecision], bool]:
    """(the trace's decisions, whether the env ended the episode at its last answer: False
    for an episode an invalid reply or an abort ended early), as `replay`."""
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
            pending = env.unwrapped.pending
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
                requester=int(info["requester"]), key=str(info["key"]),
                right=-1 if pending is None else int(pending.correct)))
        return decisions, ended
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
    return _attribute_value(decision, decision.chosen, lures(decision))


def _attribute_value(decision: DacsDecision, value: str, members: set[str]
                     ) -> DacsAttribution:
    """The attribution of a wrong answer `value` at `decision`, whose lures are `members`."""
    likelihood: dict[str, float] = {}
    if members:
        likelihood[CONTAMINATION] = (value in members) / len(members)
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
    found = sources(decision, value) if CONTAMINATION in fits else ()
    return DacsAttribution(category, frozenset(fits), weights, found)


def right_value(decision: DacsDecision) -> str:
    """The option the env scored right: the chosen one when correct, else the evidence's
    value (the requester's own fact, or the decision a cascade request must match)."""
    if decision.correct:
        return decision.chosen
    if decision.right >= 0:
        return decision.options[decision.right]
    found = evidence(decision.parsed)
    return found[-1].value if found else ""


def guessing_shares(decision: DacsDecision) -> dict[str, float]:
    """Per category, the share of the decision's wrong options that would be given it: what
    a guesser uniform over the wrong options shows on average at this wrong answer."""
    members = lures(decision)
    right = right_value(decision)
    wrong = [value for value in decision.options if value != right]
    shares = dict.fromkeys((CONTAMINATION, TRUNCATION, DISTRACTOR, AMBIGUOUS), 0.0)
    for value in wrong:
        shares[_attribute_value(decision, value, members).category] += 1.0 / len(wrong)
    return shares


def tally(decisions: Sequence[DacsDecision]) -> DacsTally:
    """The counts, likelihood shares and guessing counts of `decisions`."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    weighted = dict.fromkeys(WEIGHT_KEYS, 0.0)
    expected = dict.fromkeys((CONTAMINATION, TRUNCATION, DISTRACTOR, AMBIGUOUS), 0.0)
    by_source: dict[str, int] = {}
    for decision in decisions:
        attribution = attribute(decision)
        if attribution.category != CORRECT:
            for name, share in guessing_shares(decision).items():
                expected[name] += share
        counts[attribution.category] += 1
        for name, share in attribution.weights.items():
            weighted[name] += share
        if attribution.sources:
            nearest = attribution.sources[-1].agent
            by_source[nearest] = by_source.get(nearest, 0) + 1
    return DacsTally(counts, weighted, len(decisions),
                     sum(d.contaminated for d in decisions), by_source, expected)


def configuration_label(env_kwargs: Mapping[str, Any]) -> str:
    """A DACS configuration in a few words: family, context mode and window budget (and any
    other kwargs as k=v)."""
    kwargs = dict(env_kwargs)
    family, mode = kwargs.pop("family", "homogeneous"), kwargs.pop("context_mode", "dacs")
    window = kwargs.pop("window", None)
    budget = "no budget" if window is None else f"W={window}"
    return " ".join([str(family), str(mode), budget, *(f"{k}={v}" for k, v in kwargs.items())])


def decisions_of(traces: Iterable[DacsTrace]) -> list[DacsDecision]:
    return [decision for trace in traces for decision in replay(trace)]
