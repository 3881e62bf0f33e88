"""DACSSteering's reference orchestrators against what the token layout predicts, the study,
and an LLM policy playing the env through the text-action wrapper."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from diagym import envs  # noqa: F401
from diagym.analysis.cli import main
from diagym.controllers.dacs.readers import DACS_CONTROLLERS, dacs_controller, parse_window
from diagym.controllers.registry import make_reference_policy
from diagym.controllers.rollout import rollout
from diagym.envs.dacs.scenario import SCENARIOS


def _play(env: gym.Env, policy: Any, seed: int) -> list[dict[str, Any]]:
    """One episode; per decision: the info and whether the requester's evidence was visible
    in the window it was answered from (from the layout, not from the controller)."""
    observation, info = env.reset(seed=seed)
    policy.reset(seed=seed)
    steps = []
    done = False
    while not done:
        core = env.unwrapped
        pending, window = core.pending, core.current_window
        if pending.depends_on >= 0:
            wanted = (pending.depends_on, ("decision", "registry"))
        else:
            wanted = (pending.requester, ("fact",))
        visible = any(
            line.agent == wanted[0] and line.kind in wanted[1] and line.end <= window.kept
            and any(key == pending.key_id for key, _ in line.shows)
            for line in window.lines)
        action = policy.act(observation, info)
        observation, _, terminated, truncated, info = env.step(action)
        steps.append({**info, "visible": visible})
        done = terminated or truncated
    return steps


@pytest.mark.parametrize("family", SCENARIOS)
@pytest.mark.parametrize("mode", ["dacs", "flat"])
def test_readers_are_perfect_when_everything_fits(family: str, mode: str) -> None:
    env = gym.make("DACSSteering-v0", n_agents=10, family=family, decisions=4,
                   context_mode=mode, window=100_000)
    records = rollout(env, dacs_controller(f"{mode}-reader"), episodes=4, seed=0)
    assert all(r.metrics["accuracy"] == 1.0 and r.metrics["contamination"] == 0.0
               for r in records)


@pytest.mark.parametrize("family", SCENARIOS)
def test_dacs_reader_is_perfect_at_n10_whenever_the_focused_block_fits(family: str) -> None:
    """Seed 002's rule: F(a_i) is never cut, so the requester's facts are always in a dacs
    window that fits F(a_i) plus the request: perfect at W = 768 for every decision (N = 10,
    where the whole dacs window is about 1,060 tokens); at W = 512 on every decision that
    fits (for a cascade dependent one, F(a_i) plus the source's compressed entry)."""
    env = gym.make("DACSSteering-v0", n_agents=10, family=family, decisions=3, window=768)
    records = rollout(env, dacs_controller("dacs-reader"), episodes=10, seed=0)
    assert all(r.metrics["accuracy"] == 1.0 for r in records)
    env = gym.make("DACSSteering-v0", n_agents=10, family=family, decisions=3, window=512)
    fitting = []
    for seed in range(5):
        observation, info = env.reset(seed=seed)
        policy = dacs_controller("dacs-reader")
        policy.reset(seed=seed)
        done = False
        while not done:
            core = env.unwrapped
            window, source = core.current_window, core.pending.depends_on
            # A cascade answer's evidence is the source's entry, given up last of all.
            fits = not window.cut and source not in window.dropped
            observation, _, done, _, info = env.step(policy.act(observation, info))
            if fits:
                fitting.append(info["correct"])
    assert len(fitting) > 20 and all(fitting)


@pytest.mark.parametrize("order", ["natural", "requester_last", "requester_first"])
def test_flat_reader_fails_exactly_where_the_layout_cuts_the_evidence(order: str) -> None:
    """Correct on every decision whose evidence line survived the cut; on the others a
    uniform guess among 4 options (accuracy 1/4 within binomial noise)."""
    visible_right, hidden = [], []
    for n_agents in (3, 5, 8, 10):
        env = gym.make("DACSSteering-v0", n_agents=n_agents, family="homogeneous",
                       decisions=3, context_mode="flat", window=4096, order=order)
        for seed in range(40):
            for step in _play(env, dacs_controller("flat-reader"), seed):
                (visible_right if step["visible"] else hidden).append(step["correct"])
    assert visible_right and all(visible_right)
    if order == "requester_first":
        assert not hidden  # the requester's block comes first and is never cut
        return
    assert len(hidden) > 100
    rate = np.mean(hidden)
    assert abs(rate - 0.25) < 4 * np.sqrt(0.25 * 0.75 / len(hidden))


def test_flat_reader_accuracy_falls_with_n_as_the_layout_predicts() -> None:
    expected, observed = {}, {}
    for n_agents in (3, 5, 10):
        env = gym.make("DACSSteering-v0", n_agents=n_agents, context_mode="flat")
        steps = [s for seed in range(30) for s in _play(env, dacs_controller("flat-reader"),
                                                        seed)]
        visible = np.array([s["visible"] for s in steps])
        expected[n_agents] = visible.mean() + (1 - visible.mean()) / 4
        observed[n_agents] = np.mean([s["correct"] for s in steps])
        sd = np.sqrt(0.25 * 0.75 * (~visible).sum()) / len(steps)
        assert abs(observed[n_agents] - expected[n_agents]) <= 4 * sd + 1e-12
    # Natural order: the cut removes the highest-index agents' blocks at N = 10.
    assert expected[3] == expected[5] == 1.0 and expected[10] < 0.95


def test_recency_contaminates_homogeneous_scenarios_under_the_natural_order() -> None:
    """Natural order, no budget: the last mention of a shared key belongs to the highest
    index holding it, so flat-recency is right for agent N-1 and contaminates for most other
    requesters (wrong only by guessing when the last agent's value is not among the options)."""
    n = 5
    env = gym.make("DACSSteering-v0", n_agents=n, family="homogeneous", decisions=4,
                   context_mode="flat", window=None)
    steps = [s for seed in range(10) for s in _play(env, dacs_controller("flat-recency"), seed)]
    last = [s["correct"] for s in steps if s["requester"] == n - 1]
    others = [s for s in steps if s["requester"] != n - 1]
    assert last and all(last)
    assert np.mean([s["contaminated"] for s in others]) > 0.5
    assert np.mean([s["contaminated"] for s in steps]) > 0.5


@pytest.mark.parametrize("n", [3, 5, 10])
def test_recency_never_contaminates_in_crossfire(n: int) -> None:
    """s5's disjoint vocabulary: the only mention of the requested key is the requester's."""
    for window in (None, 4096):
        env = gym.make("DACSSteering-v0", n_agents=n, family="crossfire", decisions=4,
                       context_mode="flat", window=window)
        records = rollout(env, dacs_controller("flat-recency"), episodes=10, seed=0)
        assert all(r.metrics["contamination"] == 0.0 for r in records)
        if window is None:
            assert all(r.metrics["accuracy"] == 1.0 for r in records)


def test_registry_only_follows_cascade_decisions_and_guesses_facts() -> None:
    env = gym.make("DACSSteering-v0", family="cascade", context_mode="registry",
                   window=100_000)
    dependent_right, facts = [], []
    for seed in range(20):
        for step in _play(env, dacs_controller("registry-only"), seed):
            (dependent_right if step["visible"] else facts).append(step["correct"])
    assert dependent_right and all(dependent_right)
    assert abs(np.mean(facts) - 0.25) < 0.1


def test_window_parser_reads_the_request_and_mentions() -> None:
    env = gym.make("DACSSteering-v0", family="cascade", context_mode="flat", window=100_000)
    observation, _ = env.reset(seed=3)
    parsed = parse_window(observation["window"])
    pending = env.unwrapped.pending
    assert parsed.requester == f"agent-{pending.requester}"
    assert parsed.key == pending.key
    assert parsed.options == list(pending.options)
    facts = [m for m in parsed.mentions if m.kind == "fact"]
    assert len(facts) == sum(len(a.facts) for a in env.unwrapped.scenario.agents)
    assert not [m for m in parsed.mentions if m.kind == "history"]
    observation, *_ = env.step(pending.correct)
    history = [m for m in parse_window(observation["window"]).mentions if m.kind == "history"]
    assert [(m.agent, m.key, m.value) for m in history] == [
        (f"agent-{pending.requester}", pending.key, pending.options[pending.correct])]


def test_reference_policies_by_name() -> None:
    env = gym.make("DACSSteering-v0")
    for name in DACS_CONTROLLERS:
        assert make_reference_policy(name, env) is not None
    with pytest.raises(ValueError, match="^dacs-reader plays DACSSteering envs; got "
                                         "StatefulWorkflow-v0$"):
        make_reference_policy("dacs-reader", gym.make("StatefulWorkflow-v0"))
    with pytest.raises(ValueError, match="^exact plays StatefulWorkflow envs; got "
                                         "DACSSteering-v0$"):
        make_reference_policy("exact", env)
    with pytest.raises(ValueError, match=r"^policy must be one of .* \| llm; got 'nope'$"):
        make_reference_policy("nope", env)


def test_run_json_reports_steering_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--env", "DACSSteering-v0", "--env-kwargs", '{"n_agents": 10, '
            '"context_mode": "flat"}', "--policy", "flat-reader", "--episodes", "5", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {"accuracy", "contamination", "mean_tokens", "p95_tokens"} <= set(summary)
    assert summary["p95_tokens"] <= 4096 and 0 <= summary["accuracy"] < 1


def test_dacs_study_prints_every_arm(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["dacs-study", "--episodes", "2", "--phases", "agents", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| agents")]
    assert len(rows) == 3 * 5
    assert [row.split(" | ")[1] for row in rows[::5]] == [
        "s1 N=3 D=3 heterogeneous", "s2 N=5 D=3 heterogeneous", "s3 N=10 D=3 heterogeneous"]
    assert "no budget (nothing cut)" in out
    assert (tmp_path / "dacs_agents.png").stat().st_size > 0


def test_dacs_study_defaults_are_seed_002s_cells() -> None:
    from diagym.analysis.studies.dacs_study.design import EPISODES, PHASES, cell_label

    cells = [cell_label(c) for phase in PHASES.values() for c in phase]
    assert [c.split()[0] for c in cells] == [f"s{i}" for i in range(1, 9)]
    sizes = {c["name"]: (c["family"], c["n_agents"], c["decisions"])
             for phase in PHASES.values() for c in phase}
    assert sizes["s4"] == ("homogeneous", 3, 4) and sizes["s5"] == ("crossfire", 5, 4)
    assert sizes["s6"] == ("cascade", 5, 3)
    assert sizes["s7"] == ("dense", 5, 8) and sizes["s8"] == ("dense", 3, 15)
    assert EPISODES == 10


def test_dacs_study_log_resumes_without_losing_or_duplicating(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "dacs.jsonl"
    argv = ["dacs-study", "--episodes", "2", "--phases", "agents", "--out", str(tmp_path),
            "--log", str(log), "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)

    def episode_keys() -> list[str]:
        return [json.loads(line)["episode_key"] for line in log.read_text().splitlines()
                if json.loads(line)["type"] == "episode"]

    assert len(episode_keys()) == 3 * 5 * 2  # N levels x arms x episodes
    # A kill mid-study: the last five episodes and half of a line are lost.
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-5]) + lines[-5][:20])
    assert main(argv) == 2
    assert f"diagym dacs-study: error: log {log} exists: pass --resume" in \
        capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out) == first
    keys = episode_keys()
    assert len(keys) == len(set(keys)) == 30


def test_an_llm_answers_through_the_text_wrapper() -> None:
    from diagym.llm_policies.client.transport import ChatClient
    from diagym.llm_policies.policy import LLMPolicy
    from diagym.llm_policies.prompts.dacs import ANSWER_SCHEMA
    from diagym.llm_policies.text_actions import TextActionWrapper
    from tests.llm_fake_server import FakeServer, Reply

    answers = iter(['{"answer": 1}', '{"answer": 0}', '{"choice": 2}'])
    with FakeServer(lambda _r: Reply(content=next(answers, '{"answer": 9}'))) as server:
        env = TextActionWrapper(gym.make("DACSSteering-v0", n_agents=3, decisions=2))
        client = ChatClient(base_url=server.base_url, model="fake", json_schema=ANSWER_SCHEMA,
                            response_format="json_schema")
        records = rollout(env, LLMPolicy.for_env(client, env), episodes=1, seed=0)
        prompt = server.requests[0]["messages"][-1]["content"]
    assert "## request" in prompt and '{"answer": <option index>}' in server.requests[0][
        "messages"][0]["content"]
    # Episode 0 plays reset(seed=0): the first two answers are scored, the third ends it.
    probe = gym.make("DACSSteering-v0", n_agents=3, decisions=2).unwrapped
    probe.reset(seed=0)
    first_correct = probe.pending.correct
    probe.step(1)
    second_correct = probe.pending.correct
    wrong = 1 != first_correct or 0 != second_correct
    assert records[0].first_failure == ("wrong" if wrong else "invalid_schema")
    assert records[0].counters["decisions"] == 3
    assert records[0].counters["schema_valid"] == 2
