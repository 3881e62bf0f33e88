"""`diagym diagnose` end to end: opaque reference controllers are named, a log gives the live
diagnosis, the JSON is the contract, attribution finds planted mistakes, bad flags are one
line.

The agents below are loaded by `--policy THIS_FILE:Name`, as a user's policy would be: the
command sees an ImportedPolicy whose description names this file and a class, never the
controller inside.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from diagym.analysis.cli.main import main
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.logs import read_log
from diagym.analysis.diagnose.run import logged_traces, mechanism_model
from diagym.controllers.tracing import Traced
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs.workflow.params import WorkflowParams
from tests.analysis.diagnose_agents import HiddenController, WrongRegister

HERE = Path(__file__).resolve()
AGENTS = Path(__file__).resolve().parent / "diagnose_agents.py"
TOP_KEYS = {"env", "policy", "episodes", "headline", "fit", "failures", "mixture", "evidence",
            "invalid",
            "configurations", "attribution", "attribution_shares", "attribution_vs_chance",
            "mechanisms", "verdicts", "forecasts", "provenance"}
MECHANISM_KEYS = {"name", "family", "params", "epsilon", "epsilon_interval", "log_likelihood",
                  "log_lr_to_best"}
ATTRIBUTION_KEYS = {"dependency", "completed", "stale_value", "wrong_register",
                    "initial_value", "guess", "ambiguous"}
VERDICT_KEYS = {"scheduling", "retention", "selection", "recovery"}


class AgentA(HiddenController):
    controller = "cache-2"


class AgentB(HiddenController):
    controller = "scan-2"


class Binding(WrongRegister):
    """WrongRegister made from the env (the loader passes the env, not a width)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env.unwrapped.params.width)


class Mumbler:
    """A text agent whose second reply of every episode is not JSON (an invalid reply ends
    the episode without an env outcome)."""

    text_actions = True

    def reset(self, *, seed: int | None = None) -> None:
        self.replies = 0

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        self.replies += 1
        n = len(observation["completed"])
        op = next(i for i in range(n) if info["action_mask"][i])
        return json.dumps({"operation": op, "candidate": 0}) if self.replies == 1 else "hm"


def diagnose(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diagnose", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def names_of(name: str) -> set[str]:
    """`name` and every hypothesis that plays identically on the battery."""
    model = mechanism_model(tuple(DEFAULT_BATTERY))
    kept = model.mechanisms[model.index[name]].name
    return {kept, *model.aliases[kept]}


@pytest.mark.parametrize(("agent", "controller"), [("AgentA", "cache-2"), ("AgentB", "scan-2")])
def test_an_opaque_reference_controller_is_ranked_first(
        capsys: pytest.CaptureFixture[str], agent: str, controller: str) -> None:
    result = diagnose(capsys, "--policy", f"{HERE}:{agent}")
    assert controller not in json.dumps(result["policy"])  # its name was hidden
    assert result["episodes"] == 512
    assert result["mechanisms"][0]["name"] in names_of(controller)
    assert result["mechanisms"][0]["log_lr_to_best"] == 0.0
    assert result["mechanisms"][1]["log_lr_to_best"] < 0


def test_the_json_is_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    result = diagnose(capsys, "--policy", "cache-2", "--budget", "64")
    assert set(result) == TOP_KEYS
    assert set(result["attribution"]) == ATTRIBUTION_KEYS
    assert set(result["verdicts"]) == VERDICT_KEYS
    assert all(set(m) == MECHANISM_KEYS for m in result["mechanisms"])
    assert len(result["mechanisms"]) == 10
    lrs = [m["log_lr_to_best"] for m in result["mechanisms"]]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] == 0.0
    assert result["episodes"] == 64 == sum(c["episodes"] for c in result["configurations"])
    for configuration in result["configurations"]:
        assert sum(o["episodes"] for o in configuration["outcomes"]) == configuration["episodes"]


def test_a_log_gives_the_live_diagnosis(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    log, out = tmp_path / "run.jsonl", tmp_path / "out"
    live = diagnose(capsys, "--policy", f"{AGENTS}:StaleAgent", "--budget", "48", "--log",
                    str(log), "--out", str(out))
    assert {"diagnosis.json", "diagnosis.md", "diagnosis.png"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "diagnosis.json").read_text()) == live
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    traces = [line for line in lines if line["type"] == "trace"]
    episodes = [line for line in lines if line["type"] == "episode"]
    assert len(traces) == len(episodes) == 48
    assert [len(t["actions"]) for t in traces] == [e["record"]["calls"] for e in episodes]
    assert diagnose(capsys, "--log", str(log)) == live


def test_a_resumed_diagnosis_loses_nothing(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A kill after the last episode's trace line but before its episode line: the resume
    voids that trace, plays the episode again and diagnoses as an uninterrupted run does."""
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    argv = ("--policy", f"{AGENTS}:StaleAgent", "--budget", "24")
    expected = diagnose(capsys, *argv, "--log", str(whole))
    lines = whole.read_text().splitlines(keepends=True)
    assert json.loads(lines[-1])["type"] == "episode"
    assert json.loads(lines[-2])["type"] == "trace"
    cut.write_text("".join(lines[:-1]))
    resumed = diagnose(capsys, *argv, "--log", str(cut), "--resume")
    assert resumed == expected
    assert diagnose(capsys, "--log", str(cut)) == expected
    kinds = [json.loads(line)["type"] for line in cut.read_text().splitlines()]
    assert kinds.count("replay") == 1 and kinds.count("episode") == 24


def test_tracing_keeps_the_run_identity() -> None:
    import gymnasium as gym

    from diagym.controllers.rollout import describe_run

    env = gym.make("StatefulWorkflow-v0")
    inner = ReferencePolicy.for_env("cache-2", env)
    assert describe_run(env, Traced(inner)) == describe_run(env, inner)
    assert describe_run(env, Traced(AgentA(env))) == describe_run(env, AgentA(env))


def test_attribution_finds_the_planted_mistakes(capsys: pytest.CaptureFixture[str]) -> None:
    stale = diagnose(capsys, "--policy", f"{AGENTS}:StaleAgent", "--budget", "48")
    binding = diagnose(capsys, "--policy", f"{HERE}:Binding", "--budget", "48")
    mixed_up = {"stale": stale["attribution"], "binding": binding["attribution"]}
    for name, counts in mixed_up.items():
        tracked = counts["stale_value"] + counts["initial_value"]
        other = counts["wrong_register"] + counts["guess"]
        if name == "stale":
            assert tracked > max(2 * other, 10)
        else:
            assert counts["wrong_register"] > max(2 * (tracked + counts["guess"]), 10)


@pytest.mark.parametrize("harness", ["json", "tools"])
def test_the_text_oracle_is_diagnosed_through_the_text_harness(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], harness: str) -> None:
    log = tmp_path / "oracle.jsonl"
    result = diagnose(capsys, "--policy", "text-oracle", "--harness", harness, "--budget", "12",
                      "--log", str(log))
    assert result["episodes"] == 12
    assert sum(c["successes"] for c in result["configurations"]) == 12
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    traces = [line for line in lines if line["type"] == "trace"]
    episodes = [line for line in lines if line["type"] == "episode"]
    # every decoded reply is an executed call: the trace and the env agree on the call count
    assert [len(t["actions"]) for t in traces] == [e["record"]["calls"] for e in episodes]
    assert sum(e["record"]["calls"] for e in episodes) >= 12 * 8
    # the call lines give the traces back, and without the trace lines the same diagnosis
    for logged in read_log(log).values():
        spec = WorkflowParams.from_kwargs(**logged.run["env_kwargs"])
        from_calls = dataclasses.replace(logged, actions={})
        assert logged_traces(spec, from_calls) == logged_traces(spec, logged) != {}
    calls_only = tmp_path / "calls.jsonl"
    calls_only.write_text("".join(line + "\n" for line in log.read_text().splitlines()
                                  if json.loads(line)["type"] != "trace"))
    assert diagnose(capsys, "--log", str(calls_only)) == result


def test_episodes_an_invalid_reply_ended_are_no_evidence_for_the_fit(
        capsys: pytest.CaptureFixture[str]) -> None:
    result = diagnose(capsys, "--policy", f"{HERE}:Mumbler", "--budget", "24")
    for c in result["configurations"]:
        in_fit = sum(o["episodes"] for o in c["outcomes"])
        assert in_fit == c["episodes"] - c["without_outcome"]
        if c["kwargs"]["error_allowance"] > 0:  # one call cannot end these episodes
            assert c["without_outcome"] == c["episodes"] and in_fit == 0
        else:  # the first call's slot 0 failed, or succeeded, and the env went on
            assert all(o["errors"] == 1 for o in c["outcomes"])
    attributed = sum(result["attribution"].values())
    assert 0 < attributed <= 24  # its first calls were executed and attributed


@pytest.mark.parametrize(("argv", "message"), [
    (["--env", "CartPole-v1", "--policy", "exact"],
     "diagym diagnose: error: --env CartPole-v1: diagnose plays StatefulWorkflow-v0 or "
     "DACSSteering-v0"),
    ([], "diagym diagnose: error: give --policy NAME (play the battery) or --log RUN.jsonl "
         "(diagnose a log)"),
    (["--policy", "exact", "--resume"],
     "diagym diagnose: error: --resume continues --log FILE.jsonl; give the log to continue"),
    (["--log", "missing.jsonl"], "diagym diagnose: error: --log missing.jsonl: no such file"),
    # 3 * 10**9 less the last of 11 configurations' block (10 * 10**6) less its 359 episodes
    (["--policy", "exact", "--seed", "2999999999"],
     "diagym diagnose: error: --seed must be in 0..2989999641 (task seeds below 3000000000, "
     "where the mechanisms' reference distributions are simulated, in a block of 1000000 per "
     "configuration); got 2999999999"),
    (["--policy", "exact", "--temperature", "0.5"],
     "diagym diagnose: error: --temperature is a chat-model flag; --policy exact does not use "
     "it (only --policy llm does)"),
    (["--policy", "exact", "--budget", "0"],
     "diagym diagnose: error: argument --budget: must be an integer in 1..1000000000; got 0 "
     "(see diagym diagnose --help)"),
])
def test_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str], argv: list[str],
                               message: str) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        status = main(["diagnose", *argv])
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == message
    assert "Traceback" not in err
