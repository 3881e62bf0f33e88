"""DACSSteering-v0 against docs/DACS.md: spaces, determinism, exact token counts, layout
visibility, the families' option structure, focus actions and kwarg validation."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diagym  # noqa: F401  (registers DACSSteering-v0)
from diagym.envs._core import tokens
from diagym.envs._core.failures import failure_name
from diagym.envs.dacs.env import DACSSteeringEnv
from diagym.envs.dacs.scenario import KEYS, SCENARIOS, VALUES, generate
from diagym.envs.dacs.window import CONTEXT_MODES, ORDERS, registry_block

ENV_ID = "DACSSteering-v0"
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make(**kwargs: Any) -> DACSSteeringEnv:
    return gym.make(ENV_ID, **kwargs).unwrapped


def play(env: DACSSteeringEnv, seed: int, policy: Any) -> list[tuple[Any, ...]]:
    """One episode; policy(env) -> action. Returns (obs, reward, terminated, info) per step."""
    obs, info = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(obs, info)]
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(policy(env))
        assert not truncated
        out.append((obs, reward, terminated, info))
    return out


def oracle(env: DACSSteeringEnv) -> int:
    return env.pending.correct


CHECK_KWARGS = [
    {},
    *({"family": f} for f in SCENARIOS),
    *({"context_mode": m} for m in CONTEXT_MODES),
    {"order": "requester_first", "context_mode": "flat", "n_agents": 10},
    {"agent_chosen_focus": True, "focus_cost": 0.1},
    {"family": "cascade", "agent_chosen_focus": True, "n_agents": 3, "window": 300},
    {"family": "dense", "decisions": 15, "n_agents": 10, "window": 2000},
    {"family": "dense", "decisions": 15, "n_agents": 10, "context_mode": "flat", "window": None},
    {"scoring": "keywords", "family": "heterogeneous"},
]
CHOICE_KWARGS = [k for k in CHECK_KWARGS if k.get("scoring") != "keywords"]


# -- registration and Gymnasium's checker ---------------------------------------------------
def test_registered_with_contract_defaults() -> None:
    env = make()
    assert (env.n_agents, env.family, env.decisions) == (5, "homogeneous", 3)
    assert (env.context_mode, env.window, env.order) == ("dacs", 4096, "natural")
    assert (env.agent_chosen_focus, env.focus_cost, env.scoring) == (False, 0.0, "choice")
    assert env.action_space == gym.spaces.Discrete(4)
    assert make(agent_chosen_focus=True, n_agents=7).action_space == gym.spaces.Discrete(11)
    expected = {"window", "visible_facts", "visible_decisions", "requester", "key", "options",
                "depends_on"}
    assert set(env.observation_space.spaces) == expected
    assert env.observation_space["visible_facts"].shape == (10, len(KEYS))


@pytest.mark.parametrize("kwargs", CHECK_KWARGS, ids=str)
def test_check_env(kwargs: dict[str, Any]) -> None:
    env = gym.make(ENV_ID, render_mode="ansi", **kwargs)
    check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("kwargs", CHOICE_KWARGS, ids=str)
def test_same_seed_same_trajectory(kwargs: dict[str, Any]) -> None:
    def trajectory() -> list[Any]:
        env = make(**kwargs)
        actions = np.random.default_rng(3).integers(0, env.action_space.n, size=400)
        out = []
        obs, info = env.reset(seed=21)
        out.append((obs, info))
        for action in actions:
            obs, reward, terminated, _, info = env.step(int(action))
            out.append((obs, reward, terminated, info))
            if terminated:
                out.append(env.reset())  # the next seed comes from np_random
        return out

    first, second = trajectory(), trajectory()
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert data_equivalence(a, b)


def test_reset_seed_selects_scenario() -> None:
    env = make(family="cascade")
    env.reset(seed=5)
    first = env.scenario
    env.reset(seed=6)
    assert env.scenario != first
    env.reset(seed=5)
    assert env.scenario == first and env.scenario.seed == 5
    env.reset()
    assert env.scenario.seed != 5


def test_oracle_is_perfect_and_metrics_are_complete() -> None:
    for family in SCENARIOS:
        env = make(family=family, n_agents=4, decisions=4)
        steps = play(env, 2, oracle)
        assert all(step[1] == 1.0 for step in steps[1:])
        metrics = steps[-1][3]["episode_metrics"]
        assert metrics["accuracy"] == 1.0 and metrics["contamination"] == 0.0
        assert len(metrics["window_tokens"]) == 16
        assert metrics["window_tokens"] == [s[3]["window_tokens"] for s in steps[1:]]
        info = steps[1][3]
        assert {"correct", "contaminated", "window_tokens", "requester", "key",
                "failure"} <= set(info)
        assert env.pending is None


def test_wrong_answers_are_flagged() -> None:
    env = make(n_agents=6)
    env.reset(seed=1)
    pending = env.pending
    wrong = (pending.correct + 1) % 4
    holders = env.scenario.holders(pending.key_id)
    _, reward, _, _, info = env.step(wrong)
    assert reward == 0.0 and failure_name(info["failure"]) == "wrong" and not info["correct"]
    others = {v for j, v in holders.items() if j != pending.requester}
    assert info["contaminated"] == (pending.option_ids[wrong] in others)
    assert info["requester"] == pending.requester and info["key"] == pending.key


def test_render_ansi_is_the_window() -> None:
    env = make(render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.render() == obs["window"]
    assert obs["window"].endswith("\n") and "## request\n" in obs["window"]


# -- registry size --------------------------------------------------------------------------
@FAST
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(3, 10),
    family=st.sampled_from(SCENARIOS),
    d=st.integers(1, 15),
)
def test_registry_entries_never_exceed_200_tokens(seed: int, n: int, family: str, d: int) -> None:
    scenario = generate(seed, n, family, d)
    for agent in scenario.agents:
        assert len(registry_block(agent, None).ids) <= 200
        # Worst case: every key of the agent decided, with the longest value of each key.
        longest = {
            k: max(range(len(VALUES[KEYS[k]])), key=lambda v, k=k: len(VALUES[KEYS[k]][v]))
            for k, _ in agent.facts
        }
        block = registry_block(agent, longest)
        assert len(block.ids) <= 200
        assert tokens.count(block.text) == len(block.ids)


@FAST
@given(seed=st.integers(0, 2**32), n=st.integers(3, 10), d=st.integers(1, 15))
def test_registry_entries_stay_small_along_cascade_episodes(seed: int, n: int, d: int) -> None:
    env = make(family="cascade", n_agents=n, decisions=d, context_mode="registry",
               window=100_000)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    terminated = False
    while not terminated:
        for span in env.current_window.blocks:
            assert span.end - span.start <= 200
        _, _, terminated, _, _ = env.step(int(rng.integers(4)))


# -- window accounting ----------------------------------------------------------------------
@FAST
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(3, 10),
    family=st.sampled_from(SCENARIOS),
    mode=st.sampled_from(CONTEXT_MODES),
    order=st.sampled_from(ORDERS),
    w=st.one_of(st.sampled_from([128, 300, 301, 1000, 4096]), st.integers(128, 6000)),
    focus=st.booleans(),
)
def test_window_tokens_are_exact_and_within_budget(
    seed: int, n: int, family: str, mode: str, order: str, w: int, focus: bool
) -> None:
    env = make(n_agents=n, family=family, context_mode=mode, order=order, window=w,
               decisions=2, agent_chosen_focus=focus)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    assert info["window_tokens"] == env.current_window.tokens
    terminated = False
    while True:
        window = env.current_window
        assert window.tokens == tokens.count(obs["window"]) <= w
        assert obs["window"] == window.text
        check_visibility(env, obs)
        if terminated:
            break
        obs, _, terminated, _, info = env.step(int(rng.integers(env.action_space.n)))
        # An answer reports the window it was given from; a focus step the new window.
        shown = env.current_window if "focus" in info else window
        assert info["window_tokens"] == shown.tokens


def check_visibility(env: DACSSteeringEnv, obs: dict[str, Any]) -> None:
    """The numeric observation agrees with the token layout and the text."""
    window = env.current_window
    facts = np.full((10, len(KEYS)), -1)
    for span in window.lines:
        if span.kind == "fact" and span.end <= window.kept:
            (key, value), = span.shows
            facts[span.agent, key] = value
            assert f"fact: {KEYS[key]} = {VALUES[KEYS[key]][value]}\n" in window.text
    assert np.array_equal(obs["visible_facts"], facts)
    assert window.cut == (window.kept < window.agent_tokens)
    if window.cut:
        text = window.text
        assert text.index("## request\n") == text.rindex("## request\n")


# -- layout ---------------------------------------------------------------------------------
def visible_fact_agents(window: Any) -> set[int]:
    return {agent for agent, _, _ in window.visible_facts}


@pytest.mark.parametrize("family", SCENARIOS)
@pytest.mark.parametrize("seed", [0, 1])
def test_layout_with_a_huge_window(family: str, seed: int) -> None:
    for mode in CONTEXT_MODES:
        env = make(family=family, n_agents=10, context_mode=mode, window=100_000)
        obs, _ = env.reset(seed=seed)
        for _ in range(6):
            requester = env.pending.requester
            window = env.current_window
            assert not window.cut
            own = {(k, v) for k, v in env.scenario.agents[requester].facts}
            shown = {(k, v) for a, k, v in window.visible_facts if a == requester}
            if mode == "registry":
                assert window.visible_facts == () and "fact:" not in window.text
                assert (obs["visible_facts"] == -1).all()
            else:
                assert shown == own
            if mode == "dacs":
                assert visible_fact_agents(window) == {requester}
            if mode == "flat":
                assert visible_fact_agents(window) == set(range(10))
            obs, *_ = env.step(env.pending.correct)


def test_requester_order_decides_which_block_is_cut() -> None:
    for seed in range(5):
        first = make(n_agents=10, context_mode="flat", order="requester_first")
        last = make(n_agents=10, context_mode="flat", order="requester_last")
        first.reset(seed=seed)
        last.reset(seed=seed)
        requester = first.pending.requester
        own = {(k, v) for k, v in first.scenario.agents[requester].facts}
        for env in (first, last):
            assert env.current_window.cut  # ten full contexts do not fit 4096 tokens
        assert first.current_window.blocks[0].agent == requester
        assert last.current_window.blocks[-1].agent == requester
        shown_first = {(k, v) for a, k, v in first.current_window.visible_facts if a == requester}
        shown_last = {(k, v) for a, k, v in last.current_window.visible_facts if a == requester}
        assert shown_first == own
        assert shown_last != own  # the requester's block, last, is what gets cut
        assert last.current_window.text.startswith("## agent-")


def test_a_cut_fact_line_is_invisible() -> None:
    env = make(n_agents=3, context_mode="flat", window=100_000)
    env.reset(seed=4)
    full = env.current_window
    fact = next(s for s in full.lines if s.kind == "fact" and s.start > 50)
    # Budget ending two tokens inside that fact line.
    budget = fact.start + 2 + full.request_tokens
    env = make(n_agents=3, context_mode="flat", window=budget)
    obs, _ = env.reset(seed=4)
    window = env.current_window
    assert window.cut and window.kept == fact.start
    (key, value), = fact.shows
    assert obs["visible_facts"][fact.agent, key] == -1
    assert window.tokens == tokens.count(window.text) <= budget


def _fact_shown(env: DACSSteeringEnv, obs: dict[str, Any], fact: Any) -> bool:
    """Whether a fact line counts as visible, asked of the window and of the observation,
    which must agree."""
    (key, value), = fact.shows
    in_window = (fact.agent, key, value) in env.current_window.visible_facts
    in_obs = obs["visible_facts"][fact.agent, key] == value
    assert in_window == in_obs
    return in_window


@pytest.mark.parametrize("seed", [0, 4, 9])
def test_a_line_ending_exactly_at_the_budget_is_visible_and_one_token_less_cuts_it(
        seed: int) -> None:
    """Both sides of the boundary, for fact lines all along the window: with room for
    exactly the line's last token it is kept whole (visible, in the text, not the cut line);
    with one token less it is the cut line (invisible, kept stops at its start)."""
    env = make(n_agents=3, context_mode="flat", window=100_000)
    env.reset(seed=seed)
    full = env.current_window
    facts = [s for s in full.lines if s.kind == "fact"
             and s.start > 0 and s.end - 1 + full.request_tokens >= 128]
    assert len(facts) >= 8
    for fact in facts[::max(len(facts) // 6, 1)] + [facts[-1]]:
        text = tokens.decode(tokens.encode(full.text)[fact.start:fact.end])
        assert text.startswith("fact: ") and text.endswith("\n")
        exact = fact.end + full.request_tokens
        env = make(n_agents=3, context_mode="flat", window=exact)
        obs, _ = env.reset(seed=seed)
        window = env.current_window
        assert window.kept == fact.end and window.tokens <= exact
        assert window.cut == (fact.end < full.agent_tokens)
        assert _fact_shown(env, obs, fact)
        assert text in window.text
        env = make(n_agents=3, context_mode="flat", window=exact - 1)
        obs, _ = env.reset(seed=seed)
        window = env.current_window
        assert window.cut and window.kept == fact.start
        assert not _fact_shown(env, obs, fact)
        assert text not in window.text and window.tokens <= exact - 1


@pytest.mark.parametrize("mode", ["flat", "registry"])
def test_blocks_ending_exactly_at_the_budget_are_not_cut(mode: str) -> None:
    """A window whose agent blocks end exactly at the budget is whole and reports no cut;
    one token less cuts the last line."""
    env = make(n_agents=3, context_mode=mode, window=100_000)
    env.reset(seed=2)
    full = env.current_window
    exact = full.agent_tokens + full.request_tokens
    env = make(n_agents=3, context_mode=mode, window=exact)
    obs, _ = env.reset(seed=2)
    window = env.current_window
    assert not window.cut and window.kept == full.agent_tokens
    assert window.text == full.text and window.tokens == exact
    assert window.visible_facts == full.visible_facts
    env = make(n_agents=3, context_mode=mode, window=exact - 1)
    env.reset(seed=2)
    window = env.current_window
    last = full.lines[-1]
    assert window.cut and window.kept == last.start
    assert window.visible_facts == tuple(
        (s.agent, k, v) for s in full.lines[:-1] if s.kind == "fact" for k, v in s.shows)


def test_a_dacs_window_one_token_short_compresses_an_entry_and_cuts_nothing() -> None:
    """Seed 002's rule: F(a_i) is never cut; one token short of the whole window, the least
    recently active other agent's registry entry is compressed (here, at the first request,
    nobody has asked yet: the highest index)."""
    env = make(n_agents=3, context_mode="dacs", window=100_000)
    env.reset(seed=2)
    full = env.current_window
    exact = full.agent_tokens + full.request_tokens
    env = make(n_agents=3, context_mode="dacs", window=exact - 1)
    env.reset(seed=2)
    window = env.current_window
    requester = env.pending.requester
    last = max(j for j in range(3) if j != requester)
    assert not window.cut and window.compressed == (last,) and window.dropped == ()
    assert window.visible_facts == full.visible_facts
    assert window.tokens == tokens.count(window.text) <= exact - 1


def focused_block_text(env: DACSSteeringEnv, agent: int) -> str:
    return env._full[agent].text


@FAST
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(3, 10),
    family=st.sampled_from(SCENARIOS),
    order=st.sampled_from(ORDERS),
    w=st.integers(128, 3000),
)
def test_the_focused_block_is_never_cut_when_it_fits(
    seed: int, n: int, family: str, order: str, w: int
) -> None:
    """Whenever F(a_i) plus the request fits W, the window holds F(a_i) whole; what gives way
    is the other agents' entries: compressed first, dropped after, in the sacrifice order
    (the cascade source last), and never the focused block."""
    env = make(n_agents=n, family=family, order=order, window=w, decisions=3)
    env.reset(seed=seed)
    terminated = False
    while not terminated:
        p, window = env.pending, env.current_window
        block = focused_block_text(env, p.requester)
        fits = len(env._full[p.requester].ids) + window.request_tokens <= w
        if fits:
            assert not window.cut and block in window.text
            assert set(window.visible_facts) >= {
                (p.requester, k, v) for k, v in env.scenario.agents[p.requester].facts}
            sacrifice = env._sacrifice_order(p.requester)
            given_up = [j for j in sacrifice if j in window.compressed or j in window.dropped]
            assert given_up == sacrifice[:len(given_up)]  # a prefix of the sacrifice order
            assert set(window.dropped) <= set(sacrifice[:len(window.dropped)])
            if window.dropped:  # dropping starts only once every other entry is compressed
                assert set(window.compressed) | set(window.dropped) == set(sacrifice)
        else:
            assert window.cut and window.dropped == tuple(env._sacrifice_order(p.requester))
        assert window.tokens == tokens.count(window.text) <= w
        _, _, terminated, _, _ = env.step(p.correct)


def test_a_cascade_source_entry_is_given_up_last() -> None:
    checked = 0
    for seed in range(20):
        env = make(family="cascade", n_agents=10, decisions=3, window=700)
        env.reset(seed=seed)
        terminated = False
        while not terminated:
            p, window = env.pending, env.current_window
            if p.depends_on >= 0 and window.compressed:
                assert env._sacrifice_order(p.requester)[-1] == p.depends_on
                assert p.depends_on not in window.dropped or len(window.dropped) == 9
                checked += 1
            _, _, terminated, _, _ = env.step(p.correct)
    assert checked >= 5


def test_natural_order_is_agent_index_with_the_focused_block_first() -> None:
    for seed in range(4):
        flat = make(n_agents=6, context_mode="flat", window=None)
        dacs = make(n_agents=6, context_mode="dacs", window=None)
        flat.reset(seed=seed)
        dacs.reset(seed=seed)
        requester = dacs.pending.requester
        assert [b.agent for b in flat.current_window.blocks] == list(range(6))
        assert [b.agent for b in dacs.current_window.blocks] == [
            requester, *(j for j in range(6) if j != requester)]
        assert dacs.current_window.blocks[0].kind == "full"


def test_steering_history_enters_the_windows() -> None:
    """After each answer the requester's full block ends with its last (at most
    HISTORY_TURNS) Q/A pairs: in a dacs window the focused agent's, in a flat window
    every agent's."""
    from diagym.envs.dacs.window import HISTORY_TURNS

    for mode in ("dacs", "flat"):
        env = make(family="dense", n_agents=3, decisions=15, context_mode=mode, window=None)
        env.reset(seed=5)
        asked: dict[int, list[str]] = {0: [], 1: [], 2: []}
        terminated = False
        while not terminated:
            p = env.pending
            text = env.current_window.text
            agents = [p.requester] if mode == "dacs" else [0, 1, 2]
            for agent in agents:
                for line in asked[agent][-HISTORY_TURNS:]:
                    assert line in text
                for line in asked[agent][:-HISTORY_TURNS]:
                    assert text.count(line) <= asked[agent][-HISTORY_TURNS:].count(line)
            if mode == "dacs":
                others = {j for j in range(3) if j != p.requester}
                assert all(f"should agent-{j} use? A:" not in text for j in others)
            answer = (p.correct + 1) % 4 if p.index % 3 == 0 else p.correct
            asked[p.requester].append(
                f"history: Q: which {p.key} should agent-{p.requester} use? "
                f"A: {p.options[answer]}\n")
            _, _, terminated, _, _ = env.step(answer)


@pytest.mark.parametrize("mode", ["dacs", "flat"])
def test_window_tokens_grow_with_the_decision_count_in_dense(mode: str) -> None:
    """The steering history enters the windows, so mean window tokens rise strictly with D
    (same seeds, same N)."""
    means = []
    for d in (1, 4, 8, 15):
        env = make(family="dense", n_agents=5, decisions=d, context_mode=mode, window=None)
        total = []
        for seed in range(4):
            metrics = play(env, seed, oracle)[-1][-1]["episode_metrics"]
            total.extend(metrics["window_tokens"])
        means.append(float(np.mean(total)))
    assert all(a < b for a, b in zip(means, means[1:], strict=False)), means


def test_no_budget_cuts_nothing() -> None:
    for mode in CONTEXT_MODES:
        env = make(n_agents=10, family="dense", decisions=15, context_mode=mode, window=None)
        obs, _ = env.reset(seed=1)
        for _ in range(30):
            window = env.current_window
            assert not window.cut and window.compressed == window.dropped == ()
            assert window.tokens == tokens.count(obs["window"])
            obs, *_ = env.step(env.pending.correct)


def test_budgets_at_4096() -> None:
    """Flat fits at N = 3 and 5 but not 10; dacs fits at every N."""
    for seed in range(3):
        for n, flat_fits in ((3, True), (5, True), (10, False)):
            flat = make(n_agents=n, context_mode="flat")
            flat.reset(seed=seed)
            assert flat.current_window.cut != flat_fits
            dacs = make(n_agents=n, context_mode="dacs")
            dacs.reset(seed=seed)
            assert not dacs.current_window.cut


# -- families -------------------------------------------------------------------------------
def all_pendings(env: DACSSteeringEnv, seed: int, policy: Any = oracle) -> list[Any]:
    env.reset(seed=seed)
    out, terminated = [], False
    while not terminated:
        out.append(env.pending)
        _, _, terminated, _, _ = env.step(policy(env))
    return out


@pytest.mark.parametrize("n", [4, 7, 10])
def test_homogeneous_wrong_options_are_other_agents_values(n: int) -> None:
    env = make(family="homogeneous", n_agents=n, decisions=4)
    for seed in range(4):
        for p in all_pendings(env, seed):
            holders = env.scenario.holders(p.key_id)
            assert set(holders) == set(range(n))
            assert p.option_ids[p.correct] == holders[p.requester]
            others = {v for j, v in holders.items() if j != p.requester}
            wrong = [v for i, v in enumerate(p.option_ids) if i != p.correct]
            assert set(wrong) <= others and len(set(p.option_ids)) == 4


def test_homogeneous_small_n_fills_with_distractors() -> None:
    env = make(family="homogeneous", n_agents=3)
    for p in all_pendings(env, 0):
        holders = env.scenario.holders(p.key_id)
        others = {v for j, v in holders.items() if j != p.requester}
        assert others <= set(p.option_ids) and len(set(p.option_ids)) == 4


def domains_of(env: DACSSteeringEnv) -> list[set[str]]:
    return [{KEYS[k].split("_")[0] for k, _ in a.facts} for a in env.scenario.agents]


@pytest.mark.parametrize("n", [3, 5, 10])
def test_crossfire_vocabulary_is_disjoint(n: int) -> None:
    """s5: a domain per agent, disjoint keys, values distinct across agents, and no option
    is a value another agent holds (for any key): choosing wrong never contaminates."""
    env = make(family="crossfire", n_agents=n, decisions=4)
    for seed in range(3):
        for p in all_pendings(env, seed, policy=lambda e: (e.pending.correct + 1) % 4):
            assert set(env.scenario.holders(p.key_id)) == {p.requester}
            foreign = env.scenario.foreign_values(p.requester, p.key_id)
            assert not foreign & set(p.option_ids)
        domains = domains_of(env)
        assert all(len(d) == 1 for d in domains) and len(set().union(*domains)) == n
        assert play(env, seed, lambda e: (e.pending.correct + 1) % 4)[-1][-1][
            "episode_metrics"]["contamination"] == 0.0


@pytest.mark.parametrize("family", ["heterogeneous", "dense"])
def test_heterogeneous_offers_other_domains_values_as_lures(family: str) -> None:
    """Phase 1 and s7/s8: a domain per agent (disjoint keys); the wrong options are other
    agents' values for the same attribute, and choosing one is contamination."""
    env = make(family=family, n_agents=5, decisions=3)
    for seed in range(3):
        env.reset(seed=seed)
        domains = domains_of(env)
        assert all(len(d) == 1 for d in domains) and len(set().union(*domains)) == 5
        terminated = False
        while not terminated:
            p = env.pending
            assert set(env.scenario.holders(p.key_id)) == {p.requester}
            foreign = env.scenario.foreign_values(p.requester, p.key_id)
            wrong = [i for i in range(4) if i != p.correct]
            assert {p.option_ids[i] for i in wrong} <= foreign and len(foreign) == 4
            _, _, terminated, _, info = env.step(wrong[0])
            assert info["contaminated"] and not info["correct"]


def test_homogeneous_agents_share_one_domain() -> None:
    env = make(family="homogeneous", n_agents=5, decisions=4)
    for seed in range(3):
        env.reset(seed=seed)
        domains = domains_of(env)
        assert all(d == domains[0] and len(d) == 1 for d in domains)


@pytest.mark.parametrize("n", [3, 4, 5, 10])
def test_conflict_includes_the_partners_value(n: int) -> None:
    env = make(family="conflict", n_agents=n, decisions=4)
    for seed in range(3):
        agents = None
        for p in all_pendings(env, seed):
            agents = env.scenario.agents
            partner = agents[p.requester].partner
            assert partner != p.requester and agents[partner].value(p.key_id) is not None
            assert agents[partner].value(p.key_id) in p.option_ids
            assert agents[partner].value(p.key_id) != p.option_ids[p.correct]
        assert all(a.partner == a.index ^ 1 for a in agents[: n - n % 2])


def test_cascade_dependent_decisions_follow_the_given_answer() -> None:
    """Play a fixed wrong answer for every decision that some later decision depends on; the
    dependent decision's correct option is that wrong value, not the source's fact."""
    env = make(family="cascade", n_agents=5, decisions=4)
    checked = 0
    for seed in range(10):
        env.reset(seed=seed)
        requests = env.scenario.requests
        sources = {r.source for r in requests if r.depends_on >= 0}
        given: dict[int, int] = {}
        terminated = False
        while not terminated:
            p = env.pending
            decision = requests[p.index]
            if decision.depends_on >= 0:
                assert decision.source < p.index
                assert requests[decision.source].agent == p.depends_on != p.requester
                assert requests[decision.source].key == p.key_id
                assert p.option_ids[p.correct] == given[decision.source]
                assert f"It must match the {p.key} decided for agent-{p.depends_on}." in (
                    env.current_window.text
                )
                # The source's value is in the dacs window through its registry entry.
                registry = [s for s in env.current_window.lines
                            if s.kind == "registry" and s.agent == p.depends_on]
                assert (p.key_id, given[decision.source]) in registry[0].shows
                checked += 1
            action = (p.correct + 1) % 4 if p.index in sources else p.correct
            given[p.index] = p.option_ids[action]
            _, _, terminated, _, _ = env.step(action)
        for agent, decided in enumerate(env.decided):
            assert decided == _last_given(requests, given, agent)
    assert checked >= 5


def _last_given(requests: Any, given: dict[int, int], agent: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in requests:
        if r.agent == agent:
            out[r.key] = given[r.index]
    return out


def test_cascade_decisions_appear_in_full_blocks() -> None:
    env = make(family="cascade", n_agents=3, context_mode="flat", window=100_000)
    env.reset(seed=0)
    p = env.pending
    obs, *_ = env.step(p.correct)
    assert f"decision: {p.key} = {p.options[p.correct]}\n" in env.current_window.text
    assert obs["visible_decisions"][p.requester, p.key_id] == p.option_ids[p.correct]


def test_dense_has_many_decisions_per_agent() -> None:
    env = make(family="dense", n_agents=3, decisions=15)
    pendings = all_pendings(env, 0)
    assert len(pendings) == 45
    for agent in range(3):
        assert sum(p.requester == agent for p in pendings) == 15


# -- focus ----------------------------------------------------------------------------------
def test_focus_loads_one_full_context_and_is_capped() -> None:
    env = make(agent_chosen_focus=True, n_agents=4, focus_cost=0.25)
    obs, _ = env.reset(seed=3)
    p = env.pending
    assert env.current_window.visible_facts == ()  # every request starts from the registry
    obs, reward, terminated, _, info = env.step(4 + p.requester)
    assert reward == -0.25 and not terminated and info["focus"] == p.requester
    assert env.pending == p
    assert visible_fact_agents(env.current_window) == {p.requester}
    other = (p.requester + 1) % 4
    env.step(4 + other)
    assert visible_fact_agents(env.current_window) == {other}
    for _ in range(2):
        env.step(4 + other)
    assert env.pending == p  # four focus actions: the cap
    _, reward, _, _, info = env.step(4 + other)
    assert reward == 0.0 and failure_name(info["failure"]) == "wrong" and not info["contaminated"]
    assert env.pending != p and env.current_window.visible_facts == ()


# -- kwarg validation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_agents": 2}, "n_agents must be an integer in 3..10; got 2"),
        ({"n_agents": 11}, "n_agents must be an integer in 3..10; got 11"),
        ({"n_agents": 5.0}, "n_agents must be an integer in 3..10; got 5.0"),
        ({"family": "mixed"}, "family must be one of 'heterogeneous' | 'homogeneous' | "
                              "'crossfire' | 'cascade' | 'dense' | 'conflict'; got 'mixed'"),
        ({"decisions": 0}, "decisions must be an integer in 1..15; got 0"),
        ({"decisions": 16}, "decisions must be an integer in 1..15; got 16"),
        ({"context_mode": "full"},
         "context_mode must be one of 'dacs' | 'flat' | 'registry'; got 'full'"),
        ({"window": 100}, "window must be an integer in 128..1000000 or None; got 100"),
        ({"window": True}, "window must be an integer in 128..1000000 or None; got True"),
        ({"order": "first"}, "order must be one of 'natural' | 'requester_first' | "
                             "'requester_last'; got 'first'"),
        ({"scoring": "judge"}, "scoring must be one of 'choice' | 'keywords'; got 'judge'"),
        ({"scoring": "keywords", "agent_chosen_focus": True},
         "scoring must be 'choice' with agent_chosen_focus=True (a free-text reply has no "
         "focus actions); got 'keywords'"),
        ({"agent_chosen_focus": 1}, "agent_chosen_focus must be True | False; got 1"),
        ({"focus_cost": -1.0}, "focus_cost must be a finite number >= 0; got -1.0"),
        ({"focus_cost": float("nan")}, "focus_cost must be a finite number >= 0; got nan"),
        # "human" is gymnasium's to grant (HumanRendering over rgb_array), so not refused here.
        ({"render_mode": "video"},
         "render_mode must be one of None | 'ansi' | 'rgb_array'; got 'video'"),
    ],
)
@pytest.mark.filterwarnings("ignore:.*render_mode")
def test_bad_kwargs(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        gym.make(ENV_ID, **kwargs)
    assert str(excinfo.value) == message


def test_keyword_scoring_reads_the_reply_text() -> None:
    """Seed 002's keyword rule: correct iff the reply names the right value (whole words,
    case-insensitive), contaminated iff it names another agent's value; the value recorded
    in the history is the one named."""
    env = make(scoring="keywords", family="homogeneous", n_agents=5, context_mode="flat",
               window=None)
    env.reset(seed=3)
    p = env.pending
    right = p.options[p.correct]
    foreign = env.scenario.foreign_values(p.requester, p.key_id)
    lure = next(i for i in range(4) if p.option_ids[i] in foreign and i != p.correct)
    assert env.score_text(f"Use {right.upper()}.") == {"correct": True, "contaminated": False}
    assert env.score_text(f"{right}x") == {"correct": False, "contaminated": False}
    assert env.score_text(f"either {right} or {p.options[lure]}") == {
        "correct": True, "contaminated": True}
    _, reward, _, _, info = env.step(f"go with {p.options[lure]}")
    assert reward == 0.0 and info["contaminated"] and failure_name(info["failure"]) == "wrong"
    line = f"history: Q: which {p.key} should agent-{p.requester} use? A: {p.options[lure]}\n"
    assert line in env.current_window.text
    with pytest.raises(ValueError, match="action must be a str"):
        env.step(0)


def test_keyword_scoring_matches_choice_scoring_on_the_option_text() -> None:
    """Replying with exactly the chosen option's text scores as choosing that option."""
    for family in ("homogeneous", "heterogeneous", "conflict"):
        text_env = make(scoring="keywords", family=family, decisions=2)
        choice_env = make(family=family, decisions=2)
        rng = np.random.default_rng(0)
        for seed in range(3):
            text_env.reset(seed=seed)
            choice_env.reset(seed=seed)
            terminated = False
            while not terminated:
                a = int(rng.integers(4))
                reply = text_env.pending.options[a]
                _, r1, terminated, _, i1 = text_env.step(reply)
                _, r2, _, _, i2 = choice_env.step(a)
                assert (r1, i1["correct"], i1["contaminated"]) == (
                    r2, i2["correct"], i2["contaminated"])


def test_bad_actions_and_calls() -> None:
    env = make()
    with pytest.raises(RuntimeError):
        env.step(0)
    env.reset(seed=0)
    for action in (4, -1, 1.5, True):
        with pytest.raises(ValueError, match="action must be an integer in 0..3"):
            env.step(action)
    play(env, 0, oracle)
    with pytest.raises(RuntimeError):
        env.step(0)


def test_episode_metrics_so_far_count_an_extra_wrong_decision() -> None:
    env = make(n_agents=3, decisions=3)
    env.reset(seed=4)
    env.step(env.pending.correct)
    wrong = (env.pending.correct + 1) % 4
    env.step(wrong)
    shown = env.current_window.tokens
    metrics = env.episode_metrics(extra_wrong=1)
    assert metrics["accuracy"] == pytest.approx(1 / 3)  # 1 right of 3 decisions made
    assert metrics["invalid"] == 1
    assert len(metrics["window_tokens"]) == 3 and metrics["window_tokens"][-1] == shown
    contaminated = metrics["contamination"] * 3
    assert contaminated == pytest.approx(round(contaminated)) and contaminated <= 1
    assert env.episode_metrics()["accuracy"] == pytest.approx(1 / 2)
    assert env.pending is not None  # asking answers nothing


def test_final_episode_metrics_match_the_method_and_refuse_extra_after_the_end() -> None:
    env = make(n_agents=3, decisions=2)
    final = play(env, 1, oracle)[-1][-1]["episode_metrics"]
    assert final == env.episode_metrics()
    assert final["invalid"] == 0 and final["accuracy"] == 1.0
    with pytest.raises(ValueError, match="extra_wrong"):
        env.episode_metrics(extra_wrong=1)


def test_rgb_array_pictures_the_state_and_follows_each_step() -> None:
    assert DACSSteeringEnv(render_mode="rgb_array").render() is None  # nothing before reset
    env = gym.make(ENV_ID, render_mode="rgb_array", n_agents=4, window=400)
    env.reset(seed=2)
    core = env.unwrapped
    before = env.render()
    assert before.shape == (400, 640, 3) and before.dtype == np.uint8
    env.step((core.pending.correct + 1) % 4)  # a wrong answer: new request, new outcome
    after = env.render()
    assert after.shape == before.shape and (after != before).any()
    while core.pending is not None:
        env.step(core.pending.correct)
    assert (env.render() != after).any()  # the end of the episode is drawn too
    env.close()


def test_render_mode_outside_the_declared_ones_is_refused() -> None:
    with pytest.raises(ValueError, match="'rgb_array'"):
        DACSSteeringEnv(render_mode="human")
