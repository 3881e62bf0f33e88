"""diagym's inspect_ai tasks run end to end under inspect's mock model and the openai provider,
and `diagym diagnose --inspect-log` reads their eval logs.

The scripted plays: a tool call with candidate=2018 scores as invalid_action (the text-action
layer's rule) and the eval still succeeds; the exact controller's actions, sent as tool calls,
succeed. The positive control: the text oracle playing the diagnosis task through inspect is
diagnosed exactly as the same oracle played by `diagnose_policy` (two independent paths).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install "
                    "'diagym[inspect]'; the Makefile's dev install adds it)")

from inspect_ai.log import read_eval_log  # noqa: E402

from diagym.analysis.cli.main import main  # noqa: E402
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY, DEFAULT_SHARES, allocate  # noqa: E402
from diagym.analysis.diagnose.report import to_json  # noqa: E402
from diagym.analysis.diagnose.run import diagnose_policy  # noqa: E402
from diagym.analysis.integrations.inspect_eval import STORE_KEY, run_log_of  # noqa: E402
from diagym.analysis.llm_runs import oracle_policy_factory  # noqa: E402
from tests.conftest import play_oracle  # noqa: E402
from tests.llm_fake_server import FakeServer, Reply, scripted, tool_call  # noqa: E402

MOCK = "mockllm/model"
SCRIPT = Path(__file__).with_name("inspect_mock.py")
TOO_FAR = [["execute", {"operation": 0, "candidate": 2018}]]


def evaluate(task: str, outputs: Any, log_dir: Path, **task_args: Any) -> Any:
    """The eval log of `task` under the mock model (inspect_mock.py, in a process started
    in `log_dir`): `outputs` as tool calls, or "oracle"."""
    log_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), task, str(log_dir),
         outputs if isinstance(outputs, str) else json.dumps(outputs), json.dumps(task_args)],
        cwd=log_dir, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return read_eval_log(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def too_far(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The eval log of one episode whose first call sends candidate=2018."""
    return evaluate("diagym/stateful_workflow", TOO_FAR, tmp_path_factory.mktemp("too_far"),
                    episodes=1)


def test_out_of_range_candidate_scores_invalid_action(too_far: Any) -> None:
    log = too_far
    assert log.status == "success" and log.error is None
    (sample,) = log.samples
    assert sample.error is None
    score = sample.scores["episode_outcome"]
    assert score.value == {"success": 0.0, "completed": 0}
    assert score.answer == "invalid_action"
    assert score.metadata["first_failure"] == "invalid_action"
    (call,) = [line for line in sample.store[STORE_KEY] if line["type"] == "call"]
    assert call["action_status"] == "invalid_action"
    assert json.loads(call["tool_calls"][0]["arguments"]) == {"operation": 0,
                                                              "candidate": 2018}


def test_correct_play_succeeds_with_task_knobs(tmp_path: Path) -> None:
    knobs = {"width": 4, "snapshot_period": 0, "candidates": 3}
    seed = 3
    info, _, actions = play_oracle(gym.make("StatefulWorkflow-v0", **knobs), seed)
    assert info["success"]
    log = evaluate("diagym/stateful_workflow",
                   [["execute", {"operation": v, "candidate": a}] for v, a in actions],
                   tmp_path, episodes=1, seed=seed, **knobs)
    (sample,) = log.samples
    score = sample.scores["episode_outcome"]
    assert score.value == {"success": 1.0, "completed": 8}
    assert score.answer == "none"
    lines = sample.store[STORE_KEY]
    (trace,) = [line for line in lines if line["type"] == "trace"]
    assert [tuple(a) for a in trace["actions"]] == actions
    (session,) = [line for line in lines if line["type"] == "session"]
    assert session["run"]["env_kwargs"]["width"] == 4
    assert session["run"]["policy"]["llm"] == MOCK
    assert log.results.scores[0].metrics["mean"].value == 1.0


def test_bad_knob_is_refused_by_name(tmp_path: Path) -> None:
    from diagym.analysis.integrations.inspect_eval import stateful_workflow

    with pytest.raises(TypeError, match="got an unexpected keyword argument 'colour'"):
        stateful_workflow(colour="red")
    message = "harness must be one of 'json' | 'tools' | 'chat'; got 'shell'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        stateful_workflow(harness="shell")
    from diagym.analysis.integrations.inspect_eval import dacs_steering

    with pytest.raises(ValueError, match="^harness 'tools' needs functions to offer"):
        dacs_steering(scoring="keywords")
    assert len(dacs_steering(scoring="keywords", harness="chat", episodes=2).dataset) == 2


def without_policy(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "policy"}


@pytest.mark.timeout(600)
def test_diagnosis_task_log_is_diagnosed_as_the_battery_played_directly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    budget = 12
    log = evaluate("diagym/diagnosis", "oracle", tmp_path / "logs",
                   budget=budget)
    assert log.status == "success"
    allocation = allocate(DEFAULT_SHARES, budget)
    assert len(log.samples) == budget
    eval_file = Path(log.location)

    run_log = tmp_path / "inspect.jsonl"
    assert main(["diagnose", "--inspect-log", str(eval_file), "--log", str(run_log),
                 "--json"]) == 0
    through_inspect = json.loads(capsys.readouterr().out)
    assert run_log.is_file()

    direct = diagnose_policy(oracle_policy_factory(harness="tools"), battery=DEFAULT_BATTERY,
                             allocation=allocation, text_actions=True)
    assert without_policy(through_inspect) == without_policy(
        json.loads(json.dumps(to_json(direct))))
    assert through_inspect["episodes"] == budget
    assert through_inspect["policy"]["llm"] == MOCK
    # the same eval log without --log: a temporary run log, the same diagnosis
    assert main(["diagnose", "--inspect-log", str(eval_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == through_inspect


def test_dacs_diagnosis_task_log_is_diagnosed(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    log = evaluate("diagym/diagnosis", "oracle", tmp_path,
                   env="DACSSteering-v0", budget=4)
    assert log.status == "success" and len(log.samples) == 4
    assert main(["diagnose", "--inspect-log", log.location, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["env"] == "DACSSteering-v0"
    assert result["episodes"] == 4 and len(result["configurations"]) == 4


def test_inspect_log_refusals(tmp_path: Path, too_far: Any,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--inspect-log", str(tmp_path / "none.eval")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--inspect-log {tmp_path / 'none.eval'}: no such file")
    log = too_far
    taken = tmp_path / "taken.jsonl"
    taken.write_text("{}\n")
    with pytest.raises(FileExistsError):
        run_log_of(Path(log.location), taken)
    assert main(["diagnose", "--inspect-log", log.location, "--policy", "exact"]) == 2
    assert "give it without --policy" in capsys.readouterr().err


def test_inspect_cli_with_openai_provider_on_a_chat_completions_server(tmp_path: Path) -> None:
    """`inspect eval` from the command line finds the task by its entry point; the openai
    provider reaches a server without the Responses API (the fake, llama.cpp's) only with
    -M responses_api=false: without it, it posts to /v1/responses."""
    pytest.importorskip("openai", reason="inspect's openai provider needs the openai package")
    reply = Reply(tool_calls=[tool_call("execute", json.dumps({"operation": 0,
                                                                "candidate": 2018}))])

    def inspect_cli(*flags: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        with FakeServer(scripted([], then=reply)) as server:
            done = subprocess.run(
                [str(Path(sys.executable).parent / "inspect"), "eval",
                 "diagym/stateful_workflow", "--model", "openai/fake", "--model-base-url",
                 server.base_url, *flags, "-T", "episodes=1", "--log-dir", str(tmp_path),
                 "--display", "none"],
                cwd=tmp_path, capture_output=True, text=True, timeout=300,
                env={**os.environ, "OPENAI_API_KEY": "unused"})
            return done, {path for _, path in server.seen}

    _, paths = inspect_cli()
    assert paths == {"/v1/responses"}
    for stale in tmp_path.glob("*.eval"):
        stale.unlink()
    done, paths = inspect_cli("-M", "responses_api=false")
    assert done.returncode == 0, done.stderr[-2000:]
    assert paths == {"/v1/chat/completions"}
    (eval_file,) = tmp_path.glob("*.eval")
    converted = run_log_of(eval_file, tmp_path / "run.jsonl")
    assert converted.episodes == 1
    episode = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()
               if json.loads(line)["type"] == "episode"]
    assert episode[0]["record"]["first_failure"] == "invalid_action"


def test_inspect_log_without_inspect_ai_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    eval_file = tmp_path / "any.eval"
    eval_file.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # import inspect_ai now fails
    monkeypatch.delitem(sys.modules, "diagym.analysis.integrations.inspect_eval",
                        raising=False)
    assert main(["diagnose", "--inspect-log", str(eval_file)]) == 2
    error = capsys.readouterr().err.strip()
    assert "--inspect-log needs inspect_ai" in error
    assert error.endswith("pip install 'diagym[inspect]'")
