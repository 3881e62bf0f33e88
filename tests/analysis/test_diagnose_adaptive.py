"""The adaptive diagnosis and the battery of one agent shape.

Adaptive: opaque reference controllers are named in fewer episodes than the fixed budget, the
design goes where the leaders differ, it is deterministic (a resumed diagnosis replays its
rounds from the log and plays nothing twice), and a log of it is diagnosed as it was live.
Shape: every configuration of an sb3 model's battery has the spaces it was trained on, the
battery separates what it can, and a trained model is diagnosed end to end on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from diagym.analysis.cli.main import main
from diagym.analysis.diagnose import adaptive
from diagym.analysis.diagnose.battery import allocate, battery_for, shape_pool
from diagym.analysis.diagnose.hypotheses import reference_mechanisms
from diagym.analysis.diagnose.likelihood import build_model, outcome_count
from diagym.analysis.diagnose.run import diagnose_policy, mechanism_model
from diagym.analysis.training import TrainConfig, train
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs.workflow.params import WorkflowParams
from tests.analysis.diagnose_agents import HiddenController

HERE = Path(__file__).resolve()


class HiddenCache2(HiddenController):
    controller = "cache-2"


class HiddenEliminate(HiddenController):
    controller = "eliminate"


class HiddenRandomSchedule(HiddenController):
    controller = "random-schedule"


def diagnose(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diagnose", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def without(result: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in keys}


@pytest.mark.parametrize(("agent", "controller"), [
    ("HiddenCache2", "cache-2"), ("HiddenEliminate", "eliminate"),
    ("HiddenRandomSchedule", "random-schedule")])
def test_adaptive_names_an_opaque_controller_before_the_budget(
        capsys: pytest.CaptureFixture[str], agent: str, controller: str) -> None:
    result = diagnose(capsys, "--policy", f"{HERE}:{agent}", "--adaptive")
    model = mechanism_model(tuple(adaptive_battery()))
    best = result["mechanisms"][0]["name"]
    assert controller in {best, *model.aliases.get(best, ())}
    design = result["design"]
    assert design["mode"] == "adaptive" and design["budget"] == 512
    assert design["stopped"].startswith(f"posterior of {design['leader']} reached 0.99 and the "
                                        "fit test holds (p = ")
    assert result["episodes"] == sum(r["episodes"] for r in design["rounds"]) < 512
    assert {r["episodes"] for r in design["rounds"]} <= {1, adaptive.DEFAULT_RULE.round_episodes}
    assert result["episodes"] >= adaptive.MIN_EPISODES
    assert design["leader_posterior"] >= 0.99
    played = {json.dumps(c["kwargs"], sort_keys=True): c["episodes"]
              for c in result["configurations"]}
    assert sum(played.values()) == result["episodes"]


def adaptive_battery() -> list[WorkflowParams]:
    from diagym.analysis.diagnose.battery import DEFAULT_BATTERY

    return list(DEFAULT_BATTERY)


def test_the_design_plays_where_the_leaders_differ() -> None:
    """Two hypotheses that a snapshot after every success cannot tell apart (every value is
    shown) and history can: the first round goes to history, and information is zero where
    the two predict the same outcomes."""
    snapshot = WorkflowParams(width=8, candidates=3, snapshot_period=1)
    history = WorkflowParams(width=8, candidates=3, snapshot_period=0)
    pair = [m for m in reference_mechanisms() if m.name in ("exact", "cache-2")]
    model = build_model([snapshot, history], simulations=256, candidates=pair)
    counts = [np.zeros(outcome_count(s)) for s in model.battery]
    step = adaptive.next_step(model, counts, [0, 0], 64, adaptive.PARSIMONY)
    assert step.configuration == 1
    # the default rule checks first: a configuration not played yet, in battery order
    check = adaptive.next_step(model, counts, [0, 0], 64)
    assert (check.configuration, check.reason) == (0, adaptive.CHECK_REASON)
    tables = [tuple(log_p[i] for log_p in model.log_p) for i in range(2)]
    assert adaptive.information(tables, np.array([0.5, 0.5]), 0) == pytest.approx(0, abs=1e-9)
    assert adaptive.information(tables, np.array([0.5, 0.5]), 1) > 0.05


def test_a_configuration_without_env_outcomes_is_left() -> None:
    """Episodes that end without an env outcome (invalid replies) are no evidence: after 64
    of them on the first choice, the design plays elsewhere."""
    model = mechanism_model(tuple(adaptive_battery()))
    counts = [np.zeros(outcome_count(s)) for s in model.battery]
    first = adaptive.next_step(model, counts, [0] * len(counts), 512).configuration
    assert first is not None
    played = [0] * len(counts)
    played[first] = 64
    assert adaptive.next_step(model, counts, played, 512).configuration != first


def test_the_stop_rule_and_the_budget() -> None:
    model = mechanism_model(tuple(adaptive_battery()))
    counts = [np.zeros(outcome_count(s)) for s in model.battery]
    rest = [0] * (len(counts) - 1)
    assert adaptive.next_step(model, counts, [16] + rest, 16,
                              adaptive.PARSIMONY).reason == "budget spent"
    assert adaptive.next_step(model, counts, [16] + rest, 16).reason == (
        "too little evidence for a fit test (16 episodes; the fit is tested from 64)")
    rounds_of_8 = adaptive.ROUNDS_OF_8
    assert adaptive.round_size(12, 16, rounds_of_8) == 4
    assert adaptive.round_size(0, 16, rounds_of_8) == 8


def test_a_resumed_adaptive_diagnosis_replays_its_rounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stopped by a small budget, then continued with a larger one: the rounds played are
    found in the log, nothing is played twice, and the result is the uninterrupted one."""
    log = tmp_path / "run.jsonl"
    agent = f"{HERE}:HiddenCache2"
    first = diagnose(capsys, "--policy", agent, "--adaptive", "--budget", "24",
                     "--log", str(log))
    assert first["episodes"] == 24
    assert first["design"]["stopped"].startswith(adaptive.TOO_LITTLE) and first["fit"] is None
    resumed = diagnose(capsys, "--policy", agent, "--adaptive", "--log", str(log), "--resume")
    fresh = diagnose(capsys, "--policy", agent, "--adaptive")
    assert without(resumed, "provenance") == without(fresh, "provenance")
    episodes = [json.loads(line) for line in log.read_text().splitlines()
                if json.loads(line)["type"] == "episode"]
    keys = [e["episode_key"] for e in episodes]
    assert len(keys) == len(set(keys)) == fresh["episodes"]
    # The log's "design" line brings the rounds back: the log gives the live diagnosis.
    assert without(diagnose(capsys, "--log", str(log)), "provenance") == \
        without(fresh, "provenance")


def test_adaptive_refuses_what_it_cannot_choose(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    log.write_text("")
    for argv, message in [
        (["--env", "DACSSteering-v0", "--policy", "dacs-reader", "--adaptive"],
         "--adaptive chooses among StatefulWorkflow-v0's battery configurations; --env "
         "DACSSteering-v0 plays its battery in full"),
        (["--log", str(log), "--adaptive"],
         "--adaptive chooses what to play next; --log without --policy only reads the log "
         "(an adaptive log is read as it stands)"),
    ]:
        assert main(["diagnose", *argv]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == \
            f"diagym diagnose: error: {message}"


def test_a_shape_battery_keeps_the_trained_spaces() -> None:
    design = battery_for(8, 4, 0)
    trained = gym.make("StatefulWorkflow-v0")
    for spec in design.battery:
        env = gym.make("StatefulWorkflow-v0", **spec.as_dict())
        assert env.observation_space == trained.observation_space
        assert env.action_space == trained.action_space
    assert set(design.battery) <= set(shape_pool(8, 4, 0))
    assert design.weakest > 0  # every pair the pool separates stays separated
    assert min(allocate(design.shares, 64, minimum=1)) == 1
    assert sum(allocate(design.shares, 64, minimum=1)) == 64


@pytest.mark.parametrize("controller", ["exact", "precomputed-plan", "cache-2"])
def test_a_reference_controller_is_named_on_a_shape_battery(controller: str) -> None:
    design = battery_for(8, 4, 0)
    diagnosis = diagnose_policy(lambda env: ReferencePolicy.for_env(controller, env),
                                battery=design.battery,
                                allocation=allocate(design.shares, 512, minimum=1))
    assert controller in diagnosis.ranked[0].names


def test_an_sb3_model_is_diagnosed_on_its_shape(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    kwargs = {"candidates": 3}
    train(TrainConfig(algo="maskable-ppo", env="StatefulWorkflowHistory-v0", env_kwargs=kwargs,
                      steps=64, n_envs=1, eval_episodes=2), tmp_path)
    result = diagnose(capsys, "--policy", f"sb3:{tmp_path / 'model.zip'}", "--budget", "32")
    shaped = battery_for(8, 3, 0).battery
    assert result["episodes"] == 32
    assert {json.dumps(c["kwargs"], sort_keys=True) for c in result["configurations"]} == \
        {json.dumps(s.as_dict(), sort_keys=True) for s in shaped}
    assert all(c["kwargs"]["candidates"] == 3 for c in result["configurations"])
    log_result = tmp_path / "run.jsonl"
    logged = diagnose(capsys, "--policy", f"sb3:{tmp_path / 'model.zip'}", "--budget", "32",
                      "--log", str(log_result))
    assert without(diagnose(capsys, "--log", str(log_result)), "provenance") == \
        without(logged, "provenance")


def test_the_mechanism_information_is_the_hypotheses_merged() -> None:
    """Grouped by mechanism, the information is the plain one when every group is one
    hypothesis, and never more than it when a group holds several (the lapse a nuisance: a
    function of the hypothesis carries no more information than the hypothesis)."""
    rng = np.random.default_rng(3)
    raw = rng.dirichlet(np.ones(6), size=(5, 2))
    tables = [tuple(np.log(raw[h, c]) for c in range(2)) for h in range(5)]
    weights = rng.dirichlet(np.ones(5))
    for c in range(2):
        plain = adaptive.information(tables, weights, c)
        assert adaptive.information(tables, weights, c, np.arange(5)) == pytest.approx(plain)
        merged = adaptive.information(tables, weights, c, np.array([0, 0, 1, 1, 2]))
        assert 0 <= merged <= plain + 1e-12


def test_a_design_line_names_its_rule() -> None:
    assert adaptive.logged_rule({"type": "design", "budget": 64}) is adaptive.ROUNDS_OF_8
    assert adaptive.logged_rule({"rule": "precision"}) is adaptive.PRECISION
    assert adaptive.logged_rule({"rule": "parsimony"}) is adaptive.PARSIMONY
    with pytest.raises(ValueError, match="^the log's adaptive design rule 'x' is not one of "
                                         "checked, parsimony, precision, rounds-of-8$"):
        adaptive.logged_rule({"rule": "x"})


def test_the_precision_rule_plays_single_items_once_a_mechanism_leads() -> None:
    precision = adaptive.PRECISION
    assert adaptive.round_size(0, 512, precision, 0.2) == precision.round_episodes
    assert adaptive.round_size(40, 512, precision, precision.shrink_at) == 1
    assert adaptive.round_size(512, 512, precision, 0.9) == 0


def test_the_parsimony_rule_gives_a_failure_mode_the_rankings_prior_odds() -> None:
    """Exact against perseverating exact on one configuration with hidden resampling: on the
    same counts, the parsimony rule's odds of exact over the failure mode are the precision
    rule's times exp(INTERVAL_LOG_UNITS), the penalty the ranking gives the failure mode
    (with no counts: 1 : exp(-INTERVAL_LOG_UNITS))."""
    from diagym.analysis.diagnose.hypotheses import families
    from diagym.analysis.diagnose.likelihood import INTERVAL_LOG_UNITS, simulate_codes

    spec = WorkflowParams(depth=2, width=4, candidates=3, snapshot_period=0,
                        hidden_resampling=True, error_allowance=2)
    mode = next(m for m in families()["perseverate-p"] if m.params["p"] == 100)
    pair = [*(m for m in reference_mechanisms() if m.name == "exact"), mode]
    model = build_model([spec], simulations=256, candidates=pair)
    assert len(model.mechanisms) == 2
    prior_share = 1 / (1 + np.exp(-INTERVAL_LOG_UNITS))
    empty = [np.zeros(outcome_count(spec))]
    step = adaptive.next_step(model, empty, [0], 64, adaptive.PARSIMONY)
    assert step.leader == "exact"
    assert step.leader_posterior == pytest.approx(prior_share)
    codes = simulate_codes(spec, mode.row, 10**7 + np.arange(6, dtype=np.int64))
    counts = [np.bincount(codes, minlength=outcome_count(spec)).astype(np.float64)]

    def odds_of_exact(rule: adaptive.Rule) -> float:
        step = adaptive.next_step(model, counts, [6], 64, rule)
        share = step.leader_posterior if step.leader == "exact" else 1 - step.leader_posterior
        return share / (1 - share)

    assert odds_of_exact(adaptive.PARSIMONY) == pytest.approx(
        odds_of_exact(adaptive.PRECISION) * np.exp(INTERVAL_LOG_UNITS), rel=1e-6)
