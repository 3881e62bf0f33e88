"""Faults a probe found in how diagym answers a user's mistakes and a hostile world: each is
one clear line, never a silent wrong run or a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.error_lines import one_error_line


def test_a_named_key_variable_that_is_unset_is_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--api-key-env NAME with NAME unset sent no key without a word; the default variable
    unset still means no key (a local server)."""
    monkeypatch.delenv("DIAGYM_NO_SUCH_KEY", raising=False)
    line = one_error_line(["run", "--env", "StatefulWorkflow-v0", "--policy", "llm",
                           "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                           "--api-key-env", "DIAGYM_NO_SUCH_KEY", "--episodes", "1"], capsys)
    assert line == ("diagym run: error: --api-key-env DIAGYM_NO_SUCH_KEY: no such environment "
                    "variable is set (or it is empty); export it, or leave --api-key-env out "
                    "to send no key")


def test_a_new_log_is_readable_by_its_user_only(tmp_path: Path) -> None:
    """A log holds prompts and replies: it was created 0644, readable by every user."""
    import os
    import stat

    from diagym.analysis.cli import main

    log = tmp_path / "run.jsonl"
    old = os.umask(0o022)
    try:
        assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2",
                     "--episodes", "2", "--log", str(log)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    log.chmod(0o640)  # the owner's own choice stands on resume
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2",
                 "--episodes", "3", "--log", str(log), "--resume"]) == 0
    assert stat.S_IMODE(log.stat().st_mode) == 0o640


BAD_POLICIES = '''\
import numpy as np


class Infinite:
    def reset(self, *, seed=None):
        pass

    def act(self, observation, info):
        return (np.inf, 0)


class Masked:
    def reset(self, *, seed=None):
        pass

    def act(self, observation, info):
        return np.ma.masked_array([0, 0], mask=[True, False])


class Exits:
    def reset(self, *, seed=None):
        pass

    def act(self, observation, info):
        raise SystemExit(0)
'''
def last_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The last line of a run that failed once it was playing (its progress lines before):
    status 2 and no traceback."""
    from diagym.analysis.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()[-1]


ACTION_LINE = ("diagym run: error: action must be (operation, candidate): an integer array of "
               "shape (2,) or a tuple or list of two integers, with operation in 0..7 and "
               "candidate in 0..3; got ")


@pytest.mark.parametrize("name, shown", [("Infinite", "(inf, 0)"),
                                         ("Masked", "masked_array(")])
@pytest.mark.parametrize("log", [False, True])
def test_an_action_that_is_no_pair_of_integers_is_the_envs_one_line(
        name: str, shown: str, log: bool, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With --log the tracer converted the action first and raised OverflowError or
    MaskError; a masked array's element was compared as None inside the env."""
    (tmp_path / "bad.py").write_text(BAD_POLICIES)
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", f"{tmp_path / 'bad.py'}:{name}",
            "--episodes", "1", *(["--log", str(tmp_path / "run.jsonl")] if log else [])]
    assert last_error_line(argv, capsys).startswith(ACTION_LINE + shown)


def test_a_policy_that_exits_is_a_policy_error(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """sys.exit(0) inside act ended the run with status 0 and no output."""
    (tmp_path / "bad.py").write_text(BAD_POLICIES)
    spec = f"{tmp_path / 'bad.py'}:Exits"
    line = last_error_line(["run", "--env", "StatefulWorkflow-v0", "--policy", spec,
                            "--episodes", "1"], capsys)
    assert line == (f"diagym run: error: --policy {spec}: act() raised SystemExit: 0 (in the "
                    "episode of task seed 0)")


@pytest.mark.parametrize("deep", ["[" * 20000 + "]" * 20000,
                                  '{"a":' * 20000 + "1" + "}" * 20000])
def test_a_deep_forecast_object_is_one_line(deep: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--forecast parsed its JSON unbounded: 20,000 levels raised RecursionError."""
    line = one_error_line(["diagnose", "--policy", "cache-2", "--forecast", deep], capsys)
    assert line == ("diagym diagnose: error: argument --forecast: must be a JSON object nested "
                    "at most 32 levels deep; got 20000 levels: an object of StatefulWorkflow-v0 "
                    "kwargs, e.g. '{\"width\": 8}' (see diagym diagnose --help)")


@pytest.mark.parametrize("field, value", [("counters", 5), ("success", "yes"),
                                          ("calls", 2.5), ("first_failure", 7),
                                          ("task_seed", True)])
def test_a_record_of_the_wrong_type_is_skipped_as_foreign(
        field: str, value: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A corrupted record blocked --resume, report and summarize with a line naming neither
    file nor line; it is now a foreign line: counted in the warning, its episode played
    again on resume."""
    import json

    from diagym.analysis.cli import main

    log = tmp_path / "run.jsonl"
    run = ["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--log", str(log)]
    assert main([*run, "--episodes", "3"]) == 0
    lines = log.read_text().splitlines()
    episode_lines = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "episode"]
    bad = json.loads(lines[episode_lines[1]])
    bad["record"][field] = value
    lines[episode_lines[1]] = json.dumps(bad)
    log.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    warning = (f"log {log}: skipped 1 line that is not a log entry; the run resumes from the "
               "lines that are entries")
    assert main(["summarize", str(log)]) == 0
    assert warning in capsys.readouterr().err
    assert main(["report", str(log), "--out", str(tmp_path / "page.html")]) == 0
    capsys.readouterr()
    assert main([*run, "--episodes", "3", "--resume", "--json"]) == 0
    captured = capsys.readouterr()
    assert "resuming: 2 of 3 episodes" in captured.err
    assert json.loads(captured.out)["episodes"] == 3


def test_a_number_too_large_for_a_float_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--env-kwargs '{"focus_cost": 10**400}' raised OverflowError inside the check."""
    huge = "1" + "0" * 400
    line = one_error_line(["run", "--env", "DACSSteering-v0", "--env-kwargs",
                           f'{{"focus_cost": {huge}}}', "--policy", "flat-reader",
                           "--episodes", "1"], capsys)
    assert line == ("diagym run: error: focus_cost must be a finite number >= 0; got "
                    "100000000000000000...0000000000000000000")
