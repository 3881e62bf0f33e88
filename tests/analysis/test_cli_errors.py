"""Every CLI error is one line, `diagym <command>: error: ...`, naming the flag, with exit
status 2 and no traceback; outputs are checked before any work starts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.analysis.error_lines import one_error_line as _fail

DEEP = '{"a": ' * 5000 + "1" + "}" * 5000  # json.loads would raise RecursionError




@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    """A regular file, a directory, and paths that need the file to be a directory."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory\n")
    (tmp_path / "a_dir").mkdir()
    return {"FILE": str(a_file), "DIR": str(tmp_path / "a_dir"),
            "UNDER": str(a_file / "sub"), "LOG_UNDER": str(a_file / "run.jsonl")}


RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "exact", "--episodes", "2"]
TRAIN = ["train", "--algo", "ppo", "--env", "StatefulWorkflow-v0", "--steps", "64",
         "--n-envs", "1", "--eval-episodes", "1"]
SWEEP = ["rcwt", "sweep", "--policy", "flat-reader", "--window", "700", "--trials", "1"]
LLM = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]

# (command, argv with placeholders, the flag, the message after "error: ")
CASES = [
    ("reproduce", ["reproduce", "--grid", "primary", "--out", "FILE"], "--out",
     "--out FILE: is a file; --out needs a directory"),
    ("reproduce", ["reproduce", "--grid", "primary", "--out", "UNDER"], "--out",
     "--out UNDER: FILE is a file, not a directory"),
    ("dacs-study", ["dacs-study", "--out", "FILE"], "--out",
     "--out FILE: is a file; --out needs a directory"),
    ("dacs-study", ["dacs-study", "--out", "UNDER"], "--out",
     "--out UNDER: FILE is a file, not a directory"),
    ("dacs-study", ["dacs-study", "--json", "--log", "DIR"], "--log",
     "--log DIR: is a directory; --log needs a file"),
    ("dacs-study", ["dacs-study", "--json", "--log", "LOG_UNDER"], "--log",
     "--log LOG_UNDER: FILE is a file, not a directory"),
    ("train", [*TRAIN, "--out", "FILE"], "--out",
     "--out FILE: is a file; --out needs a directory"),
    ("train", [*TRAIN, "--out", "UNDER"], "--out",
     "--out UNDER: FILE is a file, not a directory"),
    ("rl-study", ["rl-study", "--out", "FILE"], "--out",
     "--out FILE: is a file; --out needs a directory"),
    ("rl-study", ["rl-study", "--out", "UNDER"], "--out",
     "--out UNDER: FILE is a file, not a directory"),
    ("run", [*RUN, "--log", "DIR"], "--log", "--log DIR: is a directory; --log needs a file"),
    ("run", [*RUN, "--log", "LOG_UNDER"], "--log",
     "--log LOG_UNDER: FILE is a file, not a directory"),
    ("llm-study", ["llm-study", "--design", "fractional", "--log", "DIR", *LLM], "--log",
     "--log DIR: is a directory; --log needs a file"),
    ("rcwt sweep", [*SWEEP, "--out", "FILE"], "--out",
     "--out FILE: is a file; --out needs a directory"),
    ("rcwt sweep", [*SWEEP, "--out", "UNDER"], "--out",
     "--out UNDER: FILE is a file, not a directory"),
    ("train", [*TRAIN, "--out", "DIR", "--hyperparameters", '{"n_steps": 0}'],
     "hyperparameters",
     "hyperparameters: ppo refused them: `n_steps * n_envs` must be greater than 1. "
     "Currently n_steps=0 and n_envs=1"),
    ("train", [*TRAIN, "--out", "DIR", "--hyperparameters", '{"learning_rate": "fast"}'],
     "hyperparameters",
     "hyperparameters: 'learning_rate' for ppo must be a number (default 0.0003); got \"fast\""),
    ("train", [*TRAIN, "--out", "DIR", "--hyperparameters", '{"batch_size": 1.5}'],
     "hyperparameters",
     "hyperparameters: 'batch_size' for ppo must be an integer (default 64); got 1.5"),
    ("train", [*TRAIN, "--out", "DIR", "--hyperparameters", '{"gamma": null}'],
     "hyperparameters",
     "hyperparameters: 'gamma' for ppo must be a number (default 0.99); got null"),
    ("train", ["train", "--algo", "maskable-ppo", "--env", "DACSSteering-v0", "--steps", "64",
               "--out", "DIR"], "--algo",
     "--algo maskable-ppo needs an env that reports info['action_mask']; DACSSteering-v0 "
     "does not: use --algo ppo or recurrent-ppo"),
    ("run", [*RUN, "--env-kwargs", DEEP], "--env-kwargs",
     "argument --env-kwargs: must be a JSON object nested at most 32 levels deep; got 5000 "
     "levels (see diagym run --help)"),
    ("train", [*TRAIN, "--out", "DIR", "--hyperparameters", DEEP], "--hyperparameters",
     "argument --hyperparameters: must be a JSON object nested at most 32 levels deep; got "
     "5000 levels (see diagym train --help)"),
    ("rcwt sweep", [*SWEEP, "--out", "DIR", "--env-kwargs", DEEP], "--env-kwargs",
     "argument --env-kwargs: must be a JSON object nested at most 32 levels deep; got 5000 "
     "levels (see diagym rcwt sweep --help)"),
    ("rcwt sweep", [*SWEEP, "--out", "DIR", "--budget", "500"], "--budget",
     "unrecognized arguments: --budget 500 (see diagym rcwt sweep --help)"),
    ("rcwt sweep", [*SWEEP, "--out", "DIR", "--harness", "tools"], "--harness",
     "unrecognized arguments: --harness tools (see diagym rcwt sweep --help)"),
    ("run", [*RUN, "--harness", "tools"], "--harness",
     "--harness is a chat-model flag; --policy exact does not use it (only --policy llm "
     "does)"),
    ("run", [*RUN, "--harness", "xml"], "--harness",
     "argument --harness: invalid choice: 'xml' (choose from 'json', 'tools', 'chat') (see "
     "diagym run --help)"),
    ("llm-study", ["llm-study", "--design", "fractional", "--policy", "text-oracle",
                   "--harness", "json,json"], "--harness",
     "argument --harness: must be a comma list of distinct harnesses from json, tools, chat; "
     "got 'json,json' (see diagym llm-study --help)"),
    ("run", [*RUN, "--cost-limit", "-1"], "--cost-limit",
     "argument --cost-limit: must be a finite number >= 0; got '-1' (see diagym run --help)"),
    ("run", ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--episodes", "1",
             "--local", "llama"], "--local",
     "argument --local: invalid choice: 'llama' (choose from 'gemma', 'smollm2', 'qwen0.5b', "
     "'qwen1.5b') (see diagym run --help)"),
    ("run", [*RUN, "--base-url", "http://127.0.0.1:9/v1", "--timeout", "3"], "--base-url",
     "--base-url, --timeout are chat-model flags; --policy exact does not use them (only "
     "--policy llm does)"),
    ("dacs-study", ["dacs-study", "--json", "--model", "m"], "--model",
     "--model is a chat-model flag; --policy reference does not use it (only --policy llm "
     "does)"),
    ("rcwt sweep", [*SWEEP, "--out", "DIR", "--concurrency", "3"], "--concurrency",
     "--concurrency is a chat-model flag; --policy flat-reader does not use it (only "
     "--policy llm does)"),
    ("run", [*RUN, "--temperature", "-1"], "--temperature",
     "argument --temperature: must be a finite number >= 0; got '-1' (see diagym run --help)"),
]


@pytest.mark.parametrize(("command", "argv", "flag", "message"), CASES,
                         ids=[f"{c[0]}:{c[2]}:{i}" for i, c in enumerate(CASES)])
def test_every_cli_error_is_one_line_naming_the_flag(
        command: str, argv: list[str], flag: str, message: str, paths: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    def fill(text: str) -> str:
        for name in ("LOG_UNDER", "UNDER", "FILE", "DIR"):  # longest placeholders first
            text = text.replace(name, paths[name])
        return text

    line = _fail([fill(a) if a in paths else a for a in argv], capsys)
    assert line == f"diagym {command}: error: {fill(message)}"
    assert flag in line


def test_dacs_study_checks_out_before_the_study(paths: dict[str, str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """All eight scenarios at the default 10 episodes take far longer than this."""
    log = tmp_path / "study.jsonl"
    started = time.perf_counter()
    line = _fail(["dacs-study", "--out", paths["FILE"], "--log", str(log)], capsys)
    assert time.perf_counter() - started < 5
    assert line.startswith("diagym dacs-study: error: --out ")
    assert not log.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_unwritable_place_is_refused_even_for_root(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """Permission bits do not stop root: the check writes a probe file for real."""
    assert _fail(["reproduce", "--grid", "primary", "--out", "/proc/diagym-out"], capsys) == (
        "diagym reproduce: error: --out /proc/diagym-out: cannot write in /proc (No such file "
        "or directory)")
    assert _fail([*RUN, "--log", "/proc/version"], capsys) == (
        "diagym run: error: --log /proc/version: cannot append to the file (Invalid argument)")


def test_a_log_check_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    """The resume rule must still see no log when a run fails before its first episode."""
    log = tmp_path / "new" / "run.jsonl"
    _fail(["run", "--env", "StatefulWorkflow-v0", "--env-kwargs", '{"candidates": 9}',
           "--policy", "exact", "--episodes", "1", "--log", str(log)], capsys)
    assert not log.exists() and not log.parent.exists()


def _model_dir(tmp_path: Path, env: str, env_kwargs: dict[str, int]) -> Path:
    """A run directory as diagym train leaves it, as far as the size check reads it."""
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"env": env, "env_kwargs": env_kwargs}))
    return directory / "model.zip"


@pytest.mark.parametrize(("env", "kwargs"), [
    ("StatefulWorkflow-v0", '{"n_ops": 16}'),
    ("DACSSteering-v0", "{}"),
])
def test_a_model_on_an_env_of_another_size_is_one_line(
        env: str, kwargs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _model_dir(tmp_path, "StatefulWorkflow-v0", {"n_ops": 8})
    line = _fail(["run", "--env", env, "--env-kwargs", kwargs, "--policy", f"sb3:{model}",
                  "--episodes", "1"], capsys)
    assert line == (
        f"diagym run: error: --policy sb3:{model} was trained on StatefulWorkflow-v0 "
        f'{{"n_ops": 8}}, whose observations and actions differ in size from --env {env} '
        f"--env-kwargs {json.dumps(json.loads(kwargs))}; evaluate it on an env of its size")


def test_a_model_without_its_config_is_one_line(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model.zip"
    line = _fail([*RUN, "--policy", f"sb3:{model}"], capsys)
    assert line == (f"diagym run: error: --policy sb3:{model}: no {tmp_path / 'config.json'} "
                    "beside the model; pass a DIR/model.zip written by diagym train")


def test_a_config_naming_a_module_is_not_imported(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model = _model_dir(tmp_path, "os:Nothing-v0", {})
    line = _fail([*RUN, "--policy", f"sb3:{model}"], capsys)
    assert line == (f"diagym run: error: --policy sb3:{model}: {model.parent / 'config.json'} "
                    "names 'os:Nothing-v0', not a registered env id")
