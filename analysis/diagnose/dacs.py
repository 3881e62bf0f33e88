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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from analysis.diagnose.likelihood import INTERVAL_LOG_UNITS
from controllers.dacs.readers import (
    DACS_CONTROLLERS,
    ParsedWindow,
    dacs_controller,
    evidence,
    parse_window,
)
from controllers.policy import Policy
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


class _Recorded(gym.Wrapper):
    """The env under the text-action wrapper, keeping the option index of each executed
    answer: a reply the wrapper refused never reaches it, so is no answer of the trace."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.actions: list[int] = []

    def reset(self, **kwargs: Any) -> Any:
        self.actions = []
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        self.actions.append(int(action))
        return self.env.step(action)


def play(policy: Policy | None, env_kwargs: Mapping[str, Any], seeds: Iterable[int], *,
         make_policy: PolicyMaker | None = None, text_actions: bool = False
         ) -> list[DacsTrace]:
    """One episode per scenario seed, recorded as traces, by `policy` or by the policy
    `make_policy(env)` builds for the configuration's env; with `text_actions` the policy
    answers in text behind the text-action wrapper and the trace holds the executed answers."""
    recorded = _Recorded(gym.make(ENV_ID, **dict(env_kwargs)))
    env: gym.Env = recorded
    if text_actions:
        from llm_policies.text_actions import TextActionWrapper

        env = TextActionWrapper(recorded)
    if make_policy is not None:
        policy = make_policy(env)
    if policy is None:
        raise ValueError("play needs a policy or make_policy")
    traces = []
    try:
        for seed in seeds:
            observation, info = env.reset(seed=seed)
            policy.reset(seed=seed)
            ended = False
            while not ended:
                observation, _, terminated, truncated, info = env.step(
                    policy.act(observation, info))
                ended = terminated or truncated
            traces.append(DacsTrace(dict(env_kwargs), int(seed), tuple(recorded.actions)))
    finally:
        env.close()
    return traces


def play_battery(policy: Policy | None = None,
                 battery: Sequence[Mapping[str, Any]] = DEFAULT_BATTERY,
                 episodes: int = DEFAULT_EPISODES, seed: int = 0, *,
                 make_policy: PolicyMaker | None = None, text_actions: bool = False
                 ) -> list[DacsTrace]:
    """`episodes` episodes on each configuration, scenario seeds seed, seed+1, ... (play)."""
    return [trace for kwargs in battery
            for trace in play(policy, kwargs, range(seed, seed + episodes),
                              make_policy=make_policy, text_actions=text_actions)]


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


def decisions_of(traces: Iterable[DacsTrace]) -> list[DacsDecision]:
    return [decision for trace in traces for decision in replay(trace)]


def diagnosis(traces: Sequence[DacsTrace]) -> dict[str, Any]:
    """The issue's output contract for DACS: configurations, episodes, attribution counts
    (COUNT_KEYS) with their likelihood shares and sources, and the reader fits best first."""
    decisions = decisions_of(traces)
    result = tally(decisions)
    configurations: list[dict[str, Any]] = []
    for trace in traces:
        kwargs = dict(trace.env_kwargs)
        if kwargs not in configurations:
            configurations.append(kwargs)
    return {
        "env": ENV_ID,
        "episodes": len(traces),
        "decisions": result.decisions,
        "configurations": configurations,
        "attribution": result.counts,
        "attribution_weights": result.weighted,
        "env_contaminated": result.env_contaminated,
        "contamination_sources": result.sources,
        "mechanisms": [f.as_dict() for f in fit_readers(decisions)],
    }
