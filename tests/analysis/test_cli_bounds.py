"""Inputs that used to end in a traceback or an unbounded read: one line, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagym.analysis.cli import main
from tests.analysis.error_lines import one_error_line as _fail

RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--episodes", "1"]
LLM = ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--base-url",
       "http://127.0.0.1:9/v1", "--model", "m", "--episodes", "1"]




@pytest.mark.parametrize(("argv", "message"), [
    ([*RUN, "--env-kwargs", '{"render_mode": 1}'],
     'diagym run: error: argument --env-kwargs: render_mode must be a name ("ansi", '
     '"rgb_array") or null; got 1 (see diagym run --help)'),
    ([*RUN, "--log", "/dev/full"],
     "diagym run: error: --log /dev/full: is not a regular file; --log needs one"),
    ([*LLM, "--prices", "/dev/zero"],
     "diagym run: error: argument --prices: must be a regular file; /dev/zero is not one "
     "(see diagym run --help)"),
    (["rcwt", "fit", "/dev/zero", "--window", "4096"],
     "diagym rcwt fit: error: argument FILE.csv: must be a regular file; /dev/zero is not one "
     "(see diagym rcwt fit --help)"),
    (["rcwt", "sweep", "--env", "DACSSteering-v0", "--policy", "flat-reader", "--window",
      str(10**30), "--trials", "1", "--out", "unused"],
     f"diagym rcwt sweep: error: argument --window: must be an integer in 1..10000000; got "
     f"{10**30} (see diagym rcwt sweep --help)"),
    (["diagnose", "--policy", "cache-2", "--budget", str(10**19)],
     f"diagym diagnose: error: argument --budget: must be an integer in 1..1000000000; got "
     f"{10**19} (see diagym diagnose --help)"),
    (["train", "--env", "StatefulWorkflow-v0", "--steps", "10", "--n-envs", str(10**7),
      "--out", "unused"],
     "diagym train: error: argument --n-envs: must be an integer in 1..1024; got 10000000 "
     "(see diagym train --help)"),
    ([*RUN, "--episodes", str(10**30)],
     f"diagym run: error: argument --episodes: must be an integer in 1..{10**12}; got "
     f"{10**30} (see diagym run --help)"),
    (["dacs-study", "--episodes", str(10**30)],
     f"diagym dacs-study: error: argument --episodes: must be an integer in 1..{10**12}; got "
     f"{10**30} (see diagym dacs-study --help)"),
    (["train", "--env", "StatefulWorkflow-v0", "--steps", str(10**30), "--out", "unused"],
     f"diagym train: error: argument --steps: must be an integer in 1..{10**12}; got "
     f"{10**30} (see diagym train --help)"),
    (["rl-study", "--steps", str(10**30)],
     f"diagym rl-study: error: argument --steps: must be an integer in 1..{10**12}; got "
     f"{10**30} (see diagym rl-study --help)"),
])
def test_a_hostile_input_is_one_line(argv: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _fail(argv, capsys) == message


def test_a_price_file_too_large_is_refused_unread(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "prices.json"
    with big.open("wb") as handle:
        handle.truncate((1 << 20) + 1)  # sparse: nothing is written
    assert _fail([*LLM, "--prices", str(big)], capsys).endswith(
        f"must be at most 1,048,576 bytes; {big} has 1,048,577 (see diagym run --help)")


ACT_RAISES = "tests.user_policy:ActRaises"
RAISED = (f"--policy {ACT_RAISES}: act() raised ZeroDivisionError: integer division or modulo "
          "by zero (in the episode of task seed 0)")


@pytest.mark.parametrize(("argv", "command"), [
    (["run", "--env", "StatefulWorkflow-v0", "--policy", ACT_RAISES, "--episodes", "2"], "run"),
    (["diagnose", "--policy", ACT_RAISES, "--budget", "20"], "diagnose"),
    (["dacs-study", "--policy", ACT_RAISES, "--episodes", "2", "--phases", "agents"],
     "dacs-study"),  # it stayed at 0/16 arms, the worker's error never reaching the command
])
def test_a_policy_raising_in_act_is_one_line_naming_it_and_the_episode(
        argv: list[str], command: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 2 and "Traceback" not in captured.err
    assert captured.err.splitlines()[-1] == f"diagym {command}: error: {RAISED}"


def test_an_error_line_never_passes_escape_codes_to_the_terminal(
        capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "--env", "Stateful\x1b[31mX\nnext", "--policy", "cache-2",
                   "--episodes", "1"])
    err = capsys.readouterr().err
    assert status == 2 and "\x1b" not in err and len(err.splitlines()) == 1
    assert "Stateful\\x1b[31mX\\nnext" in err


HOSTILE = "\x1b[31mX\x07"  # an escape code that recolours the terminal, and its bell
HOSTILE_SHOWN = "\\x1b[31mX\\x07"


def _logged_run(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main([*RUN, "--episodes", "2", "--log", str(path)]) == 0
    capsys.readouterr()
    return path.read_text().splitlines()


def test_a_warning_line_never_passes_a_file_names_escape_codes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / f"run{HOSTILE}.jsonl"
    lines = _logged_run(log, capsys)
    log.write_text("\n".join(lines) + '\n{"type": "epi')  # a torn last line: one warning
    assert main(["summarize", str(log)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err == (f"diagym summarize: warning: log {tmp_path}/run{HOSTILE_SHOWN}.jsonl: "
                   "skipped 1 torn line; the run resumes from the lines that are entries\n")


def test_a_warning_line_never_passes_a_log_lines_escape_codes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log whose name holds an escape code and that holds no run: the report beside
    diagnose's outputs cannot be built, and its warning quotes the name escaped. (A record
    with a key of its own is skipped as foreign now, so it no longer stops the report.)"""
    from diagym.analysis.report import write_beside

    log = tmp_path / f"run{HOSTILE}.jsonl"
    log.write_text('{"not": "an entry"}\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text("a,b\n1,2\n")
    assert write_beside(out, log, command="diagnose") is None
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err == (f"diagym diagnose: warning: no report.html (ValueError: {tmp_path}/run"
                   f"{HOSTILE_SHOWN}.jsonl: not a run log (no JSONL line with a \"type\"))\n")
