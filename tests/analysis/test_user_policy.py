"""`--policy module:Name` and `--policy path.py:Name` on the command line: the same episodes
as the policy played in Python, the same log and resume, and a bad spec as one line."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.cli import main
from diagym.analysis.studies.dacs_study.run import play_phases
from diagym.analysis.summary import summarise
from diagym.controllers.policy import Policy
from diagym.controllers.rollout import rollout
from tests import user_policy
from tests.analysis.test_cli_errors import _fail

ROOT = Path(__file__).resolve().parents[2]
FORMS = "package.module:Name or path/to/file.py:Name"


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """File specs are relative to the current directory: the repository root here."""
    monkeypatch.chdir(ROOT)


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> object:
    """The summary `diagym argv --json` printed, without the run's description and
    provenance (a Python summary has neither)."""
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    if isinstance(shown, dict) and "provenance" in shown:
        assert shown.pop("provenance")["diagym_version"]
        assert shown.pop("run")["policy"] == argv[argv.index("--policy") + 1]
    return shown


def _in_python(policy: Policy, episodes: int, env_id: str = "StatefulWorkflow-v0") -> object:
    return summarise(rollout(gym.make(env_id), policy, episodes)).to_json()


def _run(spec: str, *more: str) -> list[str]:
    return ["run", "--env", "StatefulWorkflow-v0", "--policy", spec, "--episodes", "8",
            "--json", *more]


@pytest.mark.parametrize("spec", ["tests/user_policy.py:FirstReady",
                                  "tests.user_policy:FirstReady"])
def test_run_plays_the_policy_as_python_does(spec: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _json(_run(spec), capsys) == _in_python(user_policy.FirstReady(), 8)


def test_the_policys_actions_decide_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    greedy = _json(_run("tests/user_policy.py:Greedy"), capsys)
    assert greedy == _in_python(user_policy.Greedy(), 8)
    assert greedy["success"] == 1.0
    assert _json(_run("tests/user_policy.py:FirstReady"), capsys)["success"] == 0.0


def test_a_text_actions_policy_plays_the_text_env(capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON answers of JsonFirstReady are FirstReady's actions, through the wrapper."""
    assert _json(_run("tests.user_policy:JsonFirstReady"), capsys) == _in_python(
        user_policy.FirstReady(), 8)


def test_a_log_resumes_and_names_the_spec(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    spec = "tests/user_policy.py:FirstReady"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", spec, "--json", "--log", str(log)]
    _json([*argv, "--episodes", "4"], capsys)
    resumed = _json([*argv, "--episodes", "8", "--resume"], capsys)
    assert resumed == _in_python(user_policy.FirstReady(), 8)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(entry["type"] == "episode" for entry in lines) == 8
    assert lines[0]["run"]["policy"] == {"import": spec, "policy": "FirstReady"}
    other = "tests.user_policy:FirstReady"
    refused = _fail(["run", "--env", "StatefulWorkflow-v0", "--policy", other, "--episodes",
                     "8", "--log", str(log), "--resume"], capsys)
    assert refused == (f'diagym run: error: log {log} holds the run with other settings '
                       f'(policy.import: "{spec}" -> "{other}"): resume with the same '
                       'settings, or choose another file or a --run-name')


def test_the_console_script_imports_a_module_from_the_current_directory(
        tmp_path: Path) -> None:
    """As the README's `--policy mypkg.agent:MyAgent`: a package beside the user, not
    installed (the console script's sys.path does not hold the current directory)."""
    (tmp_path / "mypkg_xq").mkdir()
    (tmp_path / "mypkg_xq" / "__init__.py").write_text("")
    (tmp_path / "mypkg_xq" / "agent.py").write_text(
        "from tests.user_policy import Greedy as MyAgent  # noqa: F401\n")
    script = Path(sys.executable).parent / "diagym"
    result = subprocess.run(
        [str(script), "run", "--env", "StatefulWorkflow-v0", "--policy",
         "mypkg_xq.agent:MyAgent", "--episodes", "8", "--json"],
        cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown.pop("run")["policy"] == "mypkg_xq.agent:MyAgent" and shown.pop("provenance")
    assert shown == _in_python(user_policy.Greedy(), 8)


@pytest.mark.parametrize(("spec", "message"), [
    ("tests/user_policy.py:NoAct",
     "the object it made has no act(observation, info) method; a policy needs "
     "reset(*, seed=None) and act(observation, info)"),
    ("tests/nope.py:Agent",
     f"no file tests/nope.py (a path is relative to the current directory, {ROOT})"),
    ("nope_xq.agent:Agent",
     "no module named 'nope_xq' (looked in the current directory and sys.path; a file is "
     "given as path/to/file.py:Name)"),
    ("tests.user_policy:Nope", "tests.user_policy has no attribute 'Nope'"),
    ("tests.user_policy:Raises", "Raises() raised RuntimeError: no GPU here"),
    ("tests.user_policy:", f"must be {FORMS}"),
])
def test_a_bad_spec_is_one_line_and_status_2(spec: str, message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _fail(_run(spec), capsys) == f"diagym run: error: --policy {spec}: {message}"
    line = _fail(["dacs-study", "--json", "--policy", spec], capsys)
    assert line == f"diagym dacs-study: error: --policy {spec}: {message}"


def test_an_unknown_name_lists_the_import_form(capsys: pytest.CaptureFixture[str]) -> None:
    line = _fail(_run("nope"), capsys)
    assert re.fullmatch(
        r"diagym run: error: argument --policy: got 'nope'; it must be one of exact, .*, llm, "
        rf"text-oracle, sb3:DIR/model\.zip or your own policy as {FORMS} "
        r"\(see diagym run --help\)", line), line
    assert _fail(["dacs-study", "--policy", "nope"], capsys) == (
        f"diagym dacs-study: error: argument --policy: must be reference, llm or your own "
        f"policy as {FORMS}; got 'nope' (see diagym dacs-study --help)")


def test_chat_flags_and_trust_model_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    spec = "tests.user_policy:FirstReady"
    assert _fail(_run(spec, "--model", "m"), capsys) == (
        f"diagym run: error: --model is a chat-model flag; --policy {spec} does not use it "
        "(only --policy llm does)")
    assert _fail(_run(spec, "--trust-model"), capsys) == (
        f"diagym run: error: --trust-model loads sb3:PATH models; --policy {spec} has none")
    assert _fail(["dacs-study", "--json", "--policy", spec, "--concurrency", "2"], capsys) == (
        f"diagym dacs-study: error: --concurrency is a chat-model flag; --policy {spec} does "
        "not use it (only --policy llm does)")


@pytest.mark.parametrize("spec", ["tests/user_policy.py:FirstOption",
                                  "tests.user_policy:JsonFirstOption"])
def test_dacs_study_plays_a_user_policy_on_dacs_and_flat_windows(
        spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(["dacs-study", "--policy", spec, "--episodes", "2", "--phases", "agents",
                  "--json"], capsys)
    expected = play_phases(lambda _name, _env: user_policy.FirstOption(),
                         arms=((spec, "dacs"), (spec, "flat")), episodes=2, phases=("agents",))
    assert rows == [dataclasses.asdict(r) for r in expected]
    assert [(r["cell"]["name"], r["context_mode"]) for r in rows] == [
        (cell, mode) for cell in ("s1", "s2", "s3") for mode in ("dacs", "flat")]


def test_the_docs_tutorials_agent_is_the_one_tested_here() -> None:
    """docs/AGENTS.md's Greedy is tests/user_policy.py's, so the command lines there and in the
    README run what it shows."""
    page = (ROOT / "docs" / "AGENTS.md").read_text()
    assert inspect.getsource(user_policy.Greedy) in page
    assert "--policy tests/user_policy.py:Greedy" in page
    assert "--policy tests/user_policy.py:Greedy" in (ROOT / "README.md").read_text()
