"""`diagym diagnose --env DACSSteering-v0` end to end: each DACS reader played as an opaque
policy is ranked first, the JSON is the DACS contract, the text env gives the programmed
reader's diagnosis, a run logged with --log (and resumed) is diagnosed from the log alone to
the same JSON, bad flags and bad logs are one line.

The agents below are loaded by `--policy THIS_FILE:Name`, as a user's policy would be: the
command sees an ImportedPolicy whose description names this file and a class, never the reader
inside.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from diagym.analysis.cli.main import main
from diagym.analysis.diagnose.dacs import fit as dacs_fit
from diagym.analysis.diagnose.dacs import replay as dacs_replay
from diagym.analysis.diagnose.dacs.verdicts import COMPONENTS
from diagym.analysis.diagnose.fit_test import REPLICATES
from diagym.controllers.dacs.readers import dacs_controller
from diagym.controllers.runlog import RunLog
from tests.analysis.test_dacs_diagnosis import Contaminating
from tests.analysis.test_dacs_verdicts import assert_names_its_mechanism

HERE = Path(__file__).resolve()
TOP_KEYS = {"env", "policy", "episodes", "decisions", "configurations", "attribution",
            "attribution_weights", "env_contaminated", "contamination_sources", "mechanisms",
            "verdicts", "provenance", "headline", "fit", "hypothesis", "evidence", "invalid",
            "attribution_vs_chance", "mixture"}
FIT_KEYS = {"hypothesis", "statistic", "p_value", "replicates", "expected_statistic",
            "outside", "tails", "verdict"}
MECHANISM_KEYS = {"name", "family", "aliases", "params", "epsilon", "log_likelihood",
                  "log_lr_to_best"}
ATTRIBUTION_KEYS = {"correct", "contamination", "truncation", "distractor", "ambiguous"}
READER_OF = {"AgentA": "dacs-reader", "AgentB": "flat-reader", "AgentC": "flat-recency",
             "AgentD": "registry-only", "AgentE": "uniform"}
# the readers that choose identically on the battery, named as the diagnosis names them
NAMED = {"dacs-reader": "dacs-reader", "flat-reader": "dacs-reader"}


class _Hidden:
    reader = ""

    def __init__(self) -> None:
        self.inner = dacs_controller(self.reader)

    def reset(self, *, seed: int | None = None) -> None:
        self.inner.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> int:
        return self.inner.act(observation, info)


class AgentA(_Hidden):
    reader = "dacs-reader"


class AgentB(_Hidden):
    reader = "flat-reader"


class AgentC(_Hidden):
    reader = "flat-recency"


class AgentD(_Hidden):
    reader = "registry-only"


class AgentE(_Hidden):
    reader = "uniform"


def diagnose(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diagnose", "--env", "DACSSteering-v0", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("agent", sorted(READER_OF))
def test_an_opaque_reader_is_ranked_first_and_named_in_words(
        capsys: pytest.CaptureFixture[str], agent: str) -> None:
    reader = READER_OF[agent]
    result = diagnose(capsys, "--policy", f"{HERE}:{agent}")
    assert reader not in json.dumps(result["policy"])  # its name was hidden
    best, runner_up = result["mechanisms"][:2]
    assert best["name"] == NAMED.get(reader, reader)
    assert reader in [best["name"], *best["aliases"]]
    assert best["log_lr_to_best"] == 0.0
    if reader == "uniform":  # any reader at lapse 1 is uniform: the runner-up ties
        assert best["epsilon"] == 0.0
    else:
        assert best["epsilon"] == 0.0 and runner_up["log_lr_to_best"] < 0
    assert_names_its_mechanism(reader, result)


def test_the_json_is_the_dacs_contract(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    result = diagnose(capsys, "--policy", "flat-recency", "--budget", "8", "--out", str(out))
    assert set(result) == TOP_KEYS
    assert set(result["attribution"]) == ATTRIBUTION_KEYS
    assert set(result["verdicts"]) == set(COMPONENTS)
    assert all(text.startswith(f"{c}: ") for c, text in result["verdicts"].items())
    assert all(set(m) == MECHANISM_KEYS for m in result["mechanisms"])
    assert result["env"] == "DACSSteering-v0"
    assert result["episodes"] == 8
    assert result["configurations"] == [dict(c) for c in dacs_replay.DEFAULT_BATTERY]
    assert sum(result["attribution"].values()) == result["decisions"] == 8 * 15
    assert result["attribution"]["contamination"] > 0  # recency reads the other agents' facts
    assert set(result["fit"]) == FIT_KEYS and result["fit"]["verdict"] == "fits"
    assert result["fit"]["hypothesis"] == result["hypothesis"]["name"] == "flat-recency"
    assert result["headline"].startswith("best mechanism: flat-recency, which fits")
    assert result["evidence"] == {"episodes": 8, "with_env_outcome": 8,
                                  "without_env_outcome": 0, "invalid_replies": {},
                                  "failed_calls": 120 - result["attribution"]["correct"]}
    assert result["invalid"] == {}
    assert set(result["attribution_vs_chance"]) == ATTRIBUTION_KEYS - {"correct"}
    for cause, chance in result["attribution_vs_chance"].items():
        assert chance["observed"] == result["attribution"][cause]
    lrs = [m["log_lr_to_best"] for m in result["mechanisms"]]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] == 0.0
    for m in result["mechanisms"]:
        low, high = m["params"]["epsilon_interval"]
        assert low <= m["epsilon"] <= high
    written = {p.name for p in out.iterdir()}
    assert {"diagnosis.json", "diagnosis.md"} <= written and "diagnosis.png" not in written
    assert json.loads((out / "diagnosis.json").read_text()) == result
    markdown = (out / "diagnosis.md").read_text()
    assert "| 1 | flat-recency |" in markdown
    assert f"**{result['headline']}**" in markdown
    assert ("## Fit test\n\nflat-recency redrawn on the agent's windows "
                f"{REPLICATES} times") in markdown


class FirstLure(Contaminating):
    """Copies the first lure in reading order: no reader's rule."""


class Stammering(_Hidden):
    """Answers as the reader in JSON text for the first four requests of an episode, then
    replies with prose the text env cannot execute, which ends the episode."""

    reader = "dacs-reader"
    text_actions = True

    def reset(self, *, seed: int | None = None) -> None:
        super().reset(seed=seed)
        self.answered = 0

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        self.answered += 1
        if self.answered > 4:
            return "I would rather not say."
        return json.dumps({"answer": self.inner.act(observation, info)})


class Mute(Stammering):
    """Never gives an answer the env can execute."""

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        return "no"


def test_answers_before_an_invalid_reply_are_evidence_live_and_from_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    live = diagnose(capsys, "--policy", f"{HERE}:Stammering", "--budget", "8", "--log",
                    str(log))
    assert live["decisions"] == 8 * 4
    assert sum(live["invalid"].values()) == 8
    assert set(live["invalid"]) <= {"invalid_json", "after_env_failures"}
    assert live["evidence"]["with_env_outcome"] == 8
    assert live["evidence"]["invalid_replies"] == live["invalid"]
    assert diagnose(capsys, "--log", str(log)) == live


def test_an_agent_that_never_answers_has_nothing_to_fit(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--env", "DACSSteering-v0", "--policy", f"{HERE}:Mute",
                 "--budget", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("4 of 4 episodes ended on an invalid reply or without an env outcome; "
                        "nothing to fit")
    assert lines[2] == "answers: correct 0, contamination 0, truncation 0, distractor 0, " \
                       "ambiguous 0"
    assert all(": withheld: no episode ended with an env outcome" in line
               for line in lines[3:])


def test_the_summary_says_when_no_reader_explains_the_agent(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--env", "DACSSteering-v0", "--policy", f"{HERE}:FirstLure"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("outside the family: no reference mechanism explains the "
                               "outcomes (fit p < 0.005")
    assert lines[2].startswith("best reader: first-agent")
    assert any(line.startswith("scoping: if it were mixture of first-agent")
               for line in lines)


def test_the_text_oracle_is_diagnosed_as_the_reader_it_is(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The text oracle answers as the DACS reader wherever the reader's rule finds a value,
    through the prompts and the text wrapper, and guesses from its own stream elsewhere: its
    best fit is the programmed reader's, to the log-likelihood (a guess weighs 1/n either
    way)."""
    text = diagnose(capsys, "--policy", "text-oracle", "--budget", "4")
    programmed = diagnose(capsys, "--policy", "dacs-reader", "--budget", "4")
    assert text["policy"]["llm"] == "text-oracle"
    assert text["decisions"] == programmed["decisions"] == 4 * 15
    assert text["mechanisms"][0] == programmed["mechanisms"][0]
    assert text["mechanisms"][0]["name"] == "dacs-reader"


def test_a_reader_that_only_guesses_is_named_uniform() -> None:
    """Without cascade requests registry-only's rule never binds: it chooses as uniform does,
    and the one fit is named for guessing."""
    traces = dacs_replay.play_battery(dacs_controller("registry-only"),
                                      dacs_replay.DEFAULT_BATTERY[:2], episodes=2)
    fits = dacs_fit.fit_readers(dacs_replay.decisions_of(traces))
    merged = next(f for f in fits if "registry-only" in f.names)
    assert merged.name == "uniform" and merged.aliases == ("registry-only",)


def test_a_logged_run_is_diagnosed_from_the_log_to_the_same_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Played live with --log, then read back with --log alone (no --policy, no --env: the
    run lines say DACS): the two contracts are equal, field for field."""
    log = tmp_path / "run.jsonl"
    live = diagnose(capsys, "--policy", f"{HERE}:AgentC", "--budget", "8", "--log", str(log))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(line["type"] == "episode" for line in lines) == 8
    assert sum(line["type"] == "trace" for line in lines) == 8
    assert main(["diagnose", "--log", str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == live
    assert diagnose(capsys, "--log", str(log)) == live  # --env DACSSteering-v0 reads it too


def test_a_resumed_diagnosis_loses_and_repeats_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Half the battery, then a kill between an episode's trace line and its episode line
    (the last episode line cut), then a resume to the full budget: the diagnosis equals one
    played in one go without a log, and the log holds each episode once."""
    log = tmp_path / "run.jsonl"
    diagnose(capsys, "--policy", "flat-recency", "--budget", "4", "--log", str(log))
    lines = log.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "episode")
    log.write_text("\n".join(lines[:last] + lines[last + 1:]) + "\n")
    resumed = diagnose(capsys, "--policy", "flat-recency", "--budget", "8", "--log", str(log),
                       "--resume")
    fresh = diagnose(capsys, "--policy", "flat-recency", "--budget", "8")
    assert resumed == fresh
    assert diagnose(capsys, "--log", str(log)) == fresh
    keys = [json.loads(line)["episode_key"] for line in log.read_text().splitlines()
            if json.loads(line)["type"] == "episode"]
    assert len(keys) == len(set(keys)) == 8


def test_a_chat_log_without_trace_lines_is_read_from_its_replies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text oracle's calls are logged as a model's are; with the trace lines removed, the
    answers are recovered from the call lines by the text wrapper's judgement: same JSON."""
    log = tmp_path / "run.jsonl"
    live = diagnose(capsys, "--policy", "text-oracle", "--budget", "4", "--log", str(log))
    kept = [line for line in log.read_text().splitlines()
            if json.loads(line)["type"] != "trace"]
    assert any(json.loads(line)["type"] == "call" for line in kept)
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join(kept) + "\n")
    assert diagnose(capsys, "--log", str(bare)) == live


def complete_kwargs(kwargs: dict[str, Any], env_id: str = "DACSSteering-v0"
                    ) -> dict[str, Any]:
    """The gym.make kwargs a run line records for `kwargs`: the env's defaults filled in."""
    env = gym.make(env_id, **kwargs)
    try:
        return dict(sorted(env.spec.kwargs.items()))  # as the log (sorted keys) holds them
    finally:
        env.close()


def write_log(path: Path, *runs: tuple[str, dict[str, Any]]) -> None:
    """One episode of each (reader, env kwargs) run, logged as a diagnosis logs it."""
    with RunLog(path) as log:
        for reader, kwargs in runs:
            dacs_replay.play(dacs_controller(reader), kwargs, 1, log=log)


BATTERY = [dict(c) for c in dacs_replay.DEFAULT_BATTERY]
SMALL = {"n_agents": 3, "decisions": 1}


@pytest.mark.parametrize(("runs", "message"), [
    ([("uniform", BATTERY[0]), ("dacs-reader", BATTERY[1])],
     "log run.jsonl holds runs of 2 policies; diagnose reads one policy's runs"),
    ([("uniform", SMALL)],
     f"log run.jsonl: run DACSSteering-v0 {complete_kwargs(SMALL)} is not a configuration of "
     "the DACSSteering-v0 battery"),
])
def test_a_log_diagnose_cannot_read_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        runs: list[tuple[str, dict[str, Any]]], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    write_log(Path("run.jsonl"), *runs)
    assert main(["diagnose", "--log", "run.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"diagym diagnose: error: {message}"
    assert "Traceback" not in err


def test_a_log_without_finished_episodes_or_with_other_settings_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed before its first episode line (its trace written), and a resume under
    another policy: each one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    write_log(Path("run.jsonl"), ("uniform", BATTERY[0]))
    lines = Path("run.jsonl").read_text().splitlines()
    Path("cut.jsonl").write_text("\n".join(
        line for line in lines if json.loads(line)["type"] != "episode") + "\n")
    assert main(["diagnose", "--log", "cut.jsonl"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "diagym diagnose: error: log cut.jsonl holds no finished DACSSteering-v0 episode")
    assert main(["diagnose", "--env", "DACSSteering-v0", "--policy", "dacs-reader",
                 "--budget", "4", "--log", "run.jsonl", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("diagym diagnose: error: log run.jsonl holds the run named ")
    assert 'policy.dacs_controller: "uniform" -> "dacs-reader"' in err


def test_a_log_of_another_env_beside_dacs_runs_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from diagym.controllers.rollout import rollout
    from diagym.controllers.workflow.adapter import ReferencePolicy
    from diagym.envs.workflow.params import WorkflowParams

    monkeypatch.chdir(tmp_path)
    write_log(Path("run.jsonl"), ("uniform", BATTERY[0]))
    env = gym.make("StatefulWorkflow-v0")
    rollout(env, ReferencePolicy("exact", WorkflowParams()), 1, log=Path("run.jsonl"),
            resume=True)
    workflow = complete_kwargs({}, "StatefulWorkflow-v0")
    for argv in (["--log", "run.jsonl"], ["--env", "DACSSteering-v0", "--log", "run.jsonl"]):
        assert main(["diagnose", *argv]) == 2
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1] == (
            f"diagym diagnose: error: log run.jsonl: run StatefulWorkflow-v0 {workflow} is not "
            "DACSSteering-v0; diagnose reads DACSSteering-v0 runs")


@pytest.mark.parametrize(("argv", "message"), [
    (["--budget", "6", "--policy", "uniform"],
     "diagym diagnose: error: --budget 6: the DACSSteering-v0 battery has 4 configurations; "
     "give a multiple of 4"),
    ([], "diagym diagnose: error: --env DACSSteering-v0 plays the DACS battery; give --policy "
         "NAME (play it) or --log RUN.jsonl (diagnose a log)"),
    (["--policy", "uniform", "--resume"],
     "diagym diagnose: error: --resume continues --log FILE.jsonl; give the log to continue"),
    (["--log", "run.jsonl", "--resume"],
     "diagym diagnose: error: --resume continues a diagnosis played with --policy; --log "
     "without --policy only reads the log"),
    (["--log", "run.jsonl"], "diagym diagnose: error: --log run.jsonl: no such file"),
])
def test_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str], argv: list[str],
                               message: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", "--env", "DACSSteering-v0", *argv]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == message
    assert "Traceback" not in err
