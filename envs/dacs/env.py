"""DACSSteering-v0: seed 002's orchestrator steering N agents, one request per step.

The question the env lets a study ask is how much of an orchestrator's error comes from what
its window holds: the same seeded scenario can be answered from a flat window (every agent's
full context with its steering history, cut by the budget), a DACS window (the requester's
full context and recent steering history, never cut, plus the others' registry entries) or
registry entries only, and the info reports both accuracy and *contamination*
(answering with another agent's value). With `agent_chosen_focus` the policy itself decides
which agent's full context to load, which is the paper's agent-triggered focus as an action.

The contract (kwargs, text formats, observation and info keys) is docs/DACS.md. Generation
lives in envs/dacs/scenario.py and window assembly in envs/dacs/window.py; this class keeps
per-episode block caches so a step only re-renders the blocks a cascade decision changed.
"""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from diagym.envs._core import tokens
from diagym.envs._core.checks import check_render_mode, check_seed
from diagym.envs._core.failures import FAILURES, NO_FAILURE
from diagym.envs.dacs.params import DacsParams
from diagym.envs.dacs.scenario import (
    KEYS,
    MAX_AGENTS,
    MAX_VALUES,
    N_KEYS,
    N_OPTIONS,
    VALUES,
    Scenario,
    generate,
    options_for,
)
from diagym.envs.dacs.scoring import keyword_score, mentions
from diagym.envs.dacs.window import (
    Block,
    Window,
    assemble,
    block_order,
    compressed_block,
    fit_focus,
    full_block,
    registry_block,
    request_text,
)

CHARSET = string.printable
MAX_WINDOW_CHARS = 100_000
MAX_REPLY_CHARS = 4096  # a free-text reply (scoring="keywords")
UNBOUNDED = 10**12  # the budget of window=None: larger than any window
WRONG = FAILURES.index("wrong")  # info["failure"] of a wrong answer


@dataclass(frozen=True)
class PendingRequest:
    """The request waiting for an answer (simulator truth, for tests and oracles).

    key is the key's name, key_id its index in KEYS; options are value strings, option_ids
    their ids in VALUES[key]; correct is the right option index; depends_on the agent whose
    recorded decision the answer must match (-1 if none) and source that decision's index.
    """

    index: int
    requester: int
    key: str
    key_id: int
    options: tuple[str, ...]
    option_ids: tuple[int, ...]
    correct: int
    depends_on: int
    source: int


class DACSSteeringEnv(gym.Env[dict[str, Any], int]):
    """N agents ask the orchestrator N x D seeded questions; one step answers one.

    ## Description
    Each episode is a seeded scenario (envs/dacs/scenario.py): N agents hold values for keys,
    and ask N x D questions, each with 4 options among which the other agents' real values sit
    where they exist. The window shown with each request (envs/dacs/window.py) holds full
    contexts or registry entries under a token budget W, as context_mode says. Every kwarg is
    a DacsParams field (envs/dacs/params.py, which documents and checks each one); the env
    keeps them as `params` and as attributes (env.n_agents, ...). docs/DACS.md is the contract.

    ## Action space
    Discrete(4): the option index. With agent_chosen_focus, Discrete(4 + N): 4 + j rebuilds
    the window as registry mode with agent j's full block (context_mode is then ignored:
    every request starts from the registry window), costs focus_cost and leaves the request
    pending. At most N focus actions per request: a further one answers the request as wrong
    (failure "wrong", not contaminated) and gives the agent no value, so a cascade decision
    that depends on it becomes an ordinary one (depends_on -1, the requester's own value).
    With scoring="keywords", Text: the reply, scored by seed 002's keyword rule
    (envs/dacs/scoring.py); the value recorded for it is the right one when named, else the
    first option it names, else none.

    ## Observation space
    window (Text), visible_facts / visible_decisions (10 x len(KEYS) value ids, -1 where not
    fully visible), requester, key, options (4 value ids), depends_on (shape (1,), -1 for
    none). With observation_mode="numeric" the window text is left out, the two grids are
    flattened (row-major, agent by agent) and focused (0 for none, j + 1 when agent j's full
    context is loaded) and window_fill (tokens / W, in 0..1) come in, so SB3 takes the
    observation as it is.

    ## Rewards
    1 for a correct answer, 0 for a wrong one, -focus_cost for a focus action.

    ## Termination
    After the N x D-th answer; no truncation. info: correct, contaminated (answered with
    another agent's value), window_tokens, requester (int), key (name), failure (a code: 0
    for none, WRONG for a wrong answer, named "wrong" in envs/_core/failures.py FAILURES);
    focus steps add "focus" (the agent loaded); the final step adds episode_metrics
    {"accuracy", "contamination", "window_tokens" (one per decision), "invalid" (0 here)},
    also readable mid-episode through episode_metrics().

    ## Rendering
    "ansi": the current window text; "rgb_array": a 640x400 picture of the state
    (envs/dacs/viewer.py), drawn only when render() is called.

    reset(seed=s) plays scenario s; reset() without a seed draws the next scenario seed from
    np_random, so a seeded sequence of episodes is reproducible.

    ## Registered configurations
    envs/dacs/presets.py: DACSSteering-v0 (DacsParams' defaults: 5 agents, homogeneous, D = 3,
    the DACS window of 4096 tokens, natural order, no focus actions, multiple choice).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        self.params = DacsParams.from_kwargs(**kwargs)
        # The knobs, readable as attributes as well (env.n_agents, env.context_mode, ...).
        for name, value in self.params.as_dict().items():
            setattr(self, name, value)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self._viewer: Any = None  # the rgb_array figure (envs/dacs/viewer.py), on first render

        n_actions = N_OPTIONS + (self.n_agents if self.agent_chosen_focus else 0)
        self.action_space: spaces.Space[Any] = (
            spaces.Text(MAX_REPLY_CHARS, min_length=0, charset=CHARSET)
            if self.scoring == "keywords" else spaces.Discrete(n_actions))
        i16 = np.int16
        grid = (MAX_AGENTS, N_KEYS)
        self.observation_space = spaces.Dict(
            {
                "window": spaces.Text(MAX_WINDOW_CHARS, min_length=1, charset=CHARSET),
                "visible_facts": spaces.Box(-1, MAX_VALUES - 1, shape=grid, dtype=i16),
                "visible_decisions": spaces.Box(-1, MAX_VALUES - 1, shape=grid, dtype=i16),
                "requester": spaces.Discrete(MAX_AGENTS),
                "key": spaces.Discrete(N_KEYS),
                "options": spaces.Box(0, MAX_VALUES - 1, shape=(N_OPTIONS,), dtype=i16),
                "depends_on": spaces.Box(-1, MAX_AGENTS - 1, shape=(1,), dtype=i16),
            }
        )
        if self.observation_mode == "numeric":
            fields = dict(self.observation_space.spaces)
            del fields["window"]
            for key in ("visible_facts", "visible_decisions"):  # 1-D, as SB3's checker asks
                fields[key] = spaces.Box(-1, MAX_VALUES - 1, shape=(MAX_AGENTS * N_KEYS,),
                                         dtype=i16)
            fields["focused"] = spaces.Discrete(MAX_AGENTS + 1)
            fields["window_fill"] = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
            self.observation_space = spaces.Dict(fields)
        self._scenario: Scenario | None = None
        self._pending: PendingRequest | None = None
        self._current: Window | None = None
        self._last_obs: dict[str, Any] | None = None
        self._last_outcome: str | None = None  # shown by the rgb_array picture

    # -- episode ---------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        seed = check_seed(seed)
        super().reset(seed=seed)
        scenario_seed = int(seed) if seed is not None else int(
            self.np_random.integers(0, 2**63 - 1)
        )
        self._scenario = generate(scenario_seed, self.n_agents, self.family, self.decisions)
        agents = self._scenario.agents
        cascade = self.family == "cascade"
        self._decided: list[dict[int, int]] = [{} for _ in agents]
        self._given: list[int] = []  # value id given at each answered request
        self._history: list[list[tuple[int, int]]] = [[] for _ in agents]
        self._last_asked: list[int] = [-1 for _ in agents]  # index of each agent's last request
        self._full: list[Block] = [full_block(a, {} if cascade else None) for a in agents]
        self._registry: list[Block] = [registry_block(a, {} if cascade else None) for a in agents]
        self._compressed: list[Block] = [compressed_block(a, {} if cascade else None)
                                         for a in agents]
        self._step = 0
        self._correct = 0
        self._contaminated = 0
        self._tokens_per_decision: list[int] = []
        self._last_outcome = None
        self._start_request()
        info = {
            "correct": False,
            "contaminated": False,
            "window_tokens": self._current.tokens,
            "requester": self._pending.requester,
            "key": self._pending.key,
            "failure": NO_FAILURE,
        }
        return self._observation(), info

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self._scenario is None:
            raise RuntimeError("call reset() before step()")
        if self._pending is None:
            raise RuntimeError("the episode has ended; call reset() before step()")
        if self.scoring == "keywords":
            if not isinstance(action, str):
                raise ValueError(f"action must be a str (the reply text) with scoring="
                                 f"'keywords'; got {action!r}")
            return self._answer(*self._keyword_answer(action))
        if isinstance(action, bool | np.bool_) or not self.action_space.contains(action):
            raise ValueError(f"action must be an integer in 0..{self.action_space.n - 1}; "
                             f"got {action!r}")
        action = int(action)
        pending = self._pending
        if action >= N_OPTIONS and self._focus_count < self.n_agents:
            focus = action - N_OPTIONS
            self._focus_count += 1
            self._focused = focus
            self._rebuild_window()
            self._last_outcome = f"focus on agent-{focus}"
            info = {
                "correct": False,
                "contaminated": False,
                "window_tokens": self._current.tokens,
                "requester": pending.requester,
                "key": pending.key,
                "failure": NO_FAILURE,
                "focus": focus,
            }
            return self._observation(), -self.focus_cost, False, False, info

        if action < N_OPTIONS:
            given = pending.option_ids[action]
            correct = action == pending.correct
            foreign = self._scenario.foreign_values(pending.requester, pending.key_id)
            contaminated = not correct and given in foreign
        else:  # focus beyond the cap: the request is answered as wrong
            given, correct, contaminated = -1, False, False
        return self._answer(given, correct, contaminated)

    def _keyword_answer(self, text: str) -> tuple[int, bool, bool]:
        """(value id given, correct, contaminated) of a free-text reply: the value recorded
        (history, cascade decisions) is the right one when named, else the first option named,
        else none (-1)."""
        pending = self._pending
        score = self.score_text(text)
        target = pending.option_ids[pending.correct]
        named = [v for v, name in zip(pending.option_ids, pending.options, strict=True)
                 if mentions(text, name)]
        given = target if score["correct"] else (named[0] if named else -1)
        return given, score["correct"], score["contaminated"]

    def _answer(self, given: int, correct: bool, contaminated: bool
                ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        pending, window = self._pending, self._current
        self._record(pending, given)
        self._correct += correct
        self._contaminated += contaminated
        self._tokens_per_decision.append(window.tokens)
        self._last_outcome = "correct" if correct else "contaminated" if contaminated \
            else "wrong"
        info = {
            "correct": correct,
            "contaminated": contaminated,
            "window_tokens": window.tokens,
            "requester": pending.requester,
            "key": pending.key,
            "failure": NO_FAILURE if correct else WRONG,
        }
        self._step += 1
        terminated = self._step == len(self._scenario.requests)
        if terminated:
            info["episode_metrics"] = self.episode_metrics()
            self._pending = None
            observation = self._copy_obs(self._last_obs)
        else:
            self._start_request()
            observation = self._observation()
        return observation, 1.0 if correct else 0.0, terminated, False, info

    # -- views -----------------------------------------------------------------------------
    @property
    def scenario(self) -> Scenario:
        if self._scenario is None:
            raise RuntimeError("call reset() before reading the scenario")
        return self._scenario

    @property
    def pending(self) -> PendingRequest | None:
        """The request waiting for an answer; None once the episode has ended."""
        return self._pending

    @property
    def current_window(self) -> Window:
        """The window the pending (or last answered) request is shown with."""
        if self._current is None:
            raise RuntimeError("call reset() before reading the window")
        return self._current

    @property
    def decided(self) -> list[dict[int, int]]:
        """Per agent, key id -> the value id last given (recorded in cascade blocks)."""
        return [dict(d) for d in self._decided]

    def episode_metrics(self, extra_wrong: int = 0) -> dict[str, Any]:
        """The episode's metrics over the decisions made so far, the final step's
        info["episode_metrics"] when called there.

        A wrapper that ends an episode early on a reply it cannot execute (TextActionWrapper
        on invalid JSON) passes extra_wrong=1: that reply was a decision on the pending
        request, so it counts as one wrong, uncontaminated decision with the pending window's
        tokens, and the run's accuracy stays a rate over every decision a policy was asked
        for. Rates are over decisions made (not over the scenario's N x D requests), which on
        a completed episode is the same thing. "invalid" counts the extra decisions."""
        if self._scenario is None:
            raise RuntimeError("call reset() before reading episode metrics")
        if extra_wrong < 0 or (extra_wrong and self._pending is None):
            raise ValueError(f"extra_wrong must be 0, or >= 1 while a request is pending; "
                             f"got {extra_wrong!r}")
        window_tokens = list(self._tokens_per_decision)
        window_tokens += [self._current.tokens] * extra_wrong
        total = len(window_tokens)
        return {
            "accuracy": self._correct / total if total else 0.0,
            "contamination": self._contaminated / total if total else 0.0,
            "window_tokens": window_tokens,
            "invalid": int(extra_wrong),
        }

    def score_text(self, text: str) -> dict[str, bool]:
        """Seed 002's keyword scoring of a free-text reply to the pending request
        (envs/dacs/scoring.py), without answering it: the env's own scoring stays multiple
        choice, so RL and controllers are unaffected."""
        if self._pending is None:
            raise RuntimeError("no pending request; call reset() first")
        pending = self._pending
        score = keyword_score(text, self._scenario, pending.requester, pending.key_id,
                              pending.key, pending.option_ids[pending.correct])
        return {"correct": score.correct, "contaminated": score.contaminated}

    def render(self) -> str | np.ndarray | None:
        """The current window as text ("ansi") or an (H, W, 3) uint8 picture of the state
        ("rgb_array", envs/dacs/viewer.py); None before reset or without a render mode."""
        if self._current is None:
            return None
        if self.render_mode == "ansi":
            return self._current.text
        if self.render_mode == "rgb_array":
            from diagym.envs.dacs.viewer import DacsViewer  # matplotlib, on first use

            if self._viewer is None:
                self._viewer = DacsViewer()
            return self._viewer.render(self._frame())
        return None

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the figure, which a copy draws afresh when it renders."""
        state = self.__dict__.copy()
        state["_viewer"] = None
        return state

    def _frame(self) -> Any:
        """The viewer's Frame of the public state."""
        from diagym.envs.dacs.viewer import Frame

        pending = self._pending
        if self.agent_chosen_focus:
            mode = "focus" if self._focused >= 0 else "registry"
        else:
            mode = self.context_mode
        return Frame(
            n_agents=self.n_agents, window=self._current, mode=mode, budget=self.window,
            requester=-1 if pending is None else pending.requester,
            depends_on=-1 if pending is None else pending.depends_on,
            focused=self._focused if pending is not None else -1,
            key="" if pending is None else pending.key,
            options=() if pending is None else pending.options,
            last=self._last_outcome, correct=self._correct,
            decisions=len(self._tokens_per_decision), total=len(self._scenario.requests))

    # -- internals -------------------------------------------------------------------------
    def _record(self, pending: PendingRequest, given: int) -> None:
        """The answer enters the requester's steering history (every family) and, in
        cascade, its recorded decisions; only that agent's blocks are rebuilt."""
        self._given.append(given)
        agent = pending.requester
        ctx = self._scenario.agents[agent]
        self._history[agent].append((pending.key_id, given))
        self._last_asked[agent] = pending.index
        cascade = self.family == "cascade"
        if cascade and given >= 0:
            self._decided[agent][pending.key_id] = given
            self._registry[agent] = registry_block(ctx, self._decided[agent])
            self._compressed[agent] = compressed_block(ctx, self._decided[agent])
        self._full[agent] = full_block(ctx, self._decided[agent] if cascade else None,
                                       self._history[agent])

    def _start_request(self) -> None:
        decision = self._scenario.requests[self._step]
        depends_on, source = decision.depends_on, decision.source
        if depends_on >= 0 and decision.key in self._decided[depends_on]:
            target = self._decided[depends_on][decision.key]
        else:
            # No dependency, or its source was lost to the focus cap (nothing was decided):
            # the request falls back to an ordinary one about the requester's own value.
            depends_on, source = -1, -1
            target = self._scenario.agents[decision.agent].value(decision.key)
        option_ids, correct = options_for(decision, target)
        key = KEYS[decision.key]
        self._pending = PendingRequest(
            index=decision.index,
            requester=decision.agent,
            key=key,
            key_id=decision.key,
            options=tuple(VALUES[key][v] for v in option_ids),
            option_ids=option_ids,
            correct=correct,
            depends_on=depends_on,
            source=source,
        )
        self._focus_count = 0
        self._focused = -1
        self._request = request_text(
            f"agent-{decision.agent}",
            key,
            self._pending.options,
            f"agent-{depends_on}" if depends_on >= 0 else None,
        )
        self._request_tokens = tokens.count(self._request)
        self._rebuild_window()

    def _sacrifice_order(self, focused: int) -> list[int]:
        """The other agents in the order a focus window gives up their registry entries:
        least recently active first (never-asked agents first, higher index first), the
        agent a cascade request depends on last."""
        source = self._pending.depends_on
        others = [j for j in range(self.n_agents) if j != focused]
        return sorted(others, key=lambda j: (j == source, self._last_asked[j], -j))

    def _rebuild_window(self) -> None:
        requester = self._pending.requester
        budget = UNBOUNDED if self.window is None else self.window
        if self.agent_chosen_focus:
            focused = self._focused
        elif self.context_mode == "dacs":
            focused = requester
        else:
            focused = -1
        n = self.n_agents
        if self.context_mode == "flat" and not self.agent_chosen_focus:
            blocks = [self._full[i] for i in block_order(n, requester, self.order)]
            self._current = assemble(blocks, self._request, budget)
            return
        if focused < 0:
            blocks = [self._registry[i] for i in block_order(n, requester, self.order)]
            self._current = assemble(blocks, self._request, budget)
            return
        kept, compressed, dropped = fit_focus(
            focused, self._full[focused], dict(enumerate(self._registry)),
            dict(enumerate(self._compressed)), self._sacrifice_order(focused),
            max(budget - self._request_tokens, 0))
        blocks = [kept[i] for i in block_order(n, requester, self.order, focused) if i in kept]
        window = assemble(blocks, self._request, budget)
        self._current = dataclasses.replace(window, compressed=compressed, dropped=dropped)

    def _observation(self) -> dict[str, Any]:
        window, pending = self._current, self._pending
        facts = np.full((MAX_AGENTS, N_KEYS), -1, dtype=np.int16)
        for agent, key, value in window.visible_facts:
            facts[agent, key] = value
        decisions = np.full((MAX_AGENTS, N_KEYS), -1, dtype=np.int16)
        for agent, key, value in window.visible_decisions:
            decisions[agent, key] = value
        self._last_obs = {
            "window": window.text,
            "visible_facts": facts,
            "visible_decisions": decisions,
            "requester": np.int64(pending.requester),
            "key": np.int64(pending.key_id),
            "options": np.array(pending.option_ids, dtype=np.int16),
            "depends_on": np.array([pending.depends_on], dtype=np.int16),
        }
        if self.observation_mode == "numeric":
            self._last_obs = self._numeric(self._last_obs)
        return self._copy_obs(self._last_obs)

    def _numeric(self, obs: dict[str, Any]) -> dict[str, Any]:
        """observation_mode="numeric": the text gives way to the two things about it a policy
        choosing focus needs in numbers, whose full context is loaded (0 none, j + 1 agent
        j) and the share of the budget the window fills."""
        obs = {k: v for k, v in obs.items() if k != "window"}
        for key in ("visible_facts", "visible_decisions"):
            obs[key] = obs[key].reshape(-1)
        if self.agent_chosen_focus:
            focused = self._focused
        else:
            focused = self._pending.requester if self.context_mode == "dacs" else -1
        obs["focused"] = np.int64(focused + 1)
        budget = UNBOUNDED if self.window is None else self.window
        obs["window_fill"] = np.array([min(self._current.tokens / budget, 1.0)],
                                      dtype=np.float32)
        return obs

    @staticmethod
    def _copy_obs(obs: dict[str, Any]) -> dict[str, Any]:
        return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in obs.items()}
