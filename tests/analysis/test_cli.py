"""The `diagym` console script: audit output in both forms and argparse-style errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from diagym.analysis.audit import audit_table
from diagym.analysis.cli import main
from diagym.analysis.cli.main import build_parser

KEYS = {"family", "depth", "edges", "masks", "orders", "ready_nodes"}


def test_audit_json_matches_audit_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--n-ops", "8", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8
    assert all(set(row) == KEYS for row in rows)
    assert rows == audit_table(8)


def test_audit_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--n-ops", "4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["family", "depth", "edges", "masks", "orders", "ready", "nodes"]
    expected = audit_table(4)
    assert len(lines) == 1 + len(expected)
    assert len({len(line) for line in lines}) == 1  # aligned columns
    for line, row in zip(lines[1:], expected, strict=True):
        fields = line.split()
        assert fields[:5] == [str(row[k]) for k in ("family", "depth", "edges", "masks", "orders")]
        assert fields[5] == f"{row['ready_nodes']:.2f}"


def test_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "diagym.analysis.cli", "audit", "--n-ops", "4", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(result.stdout)
    assert rows == audit_table(4)


@pytest.mark.parametrize("value", ["0", "40", "-3", "eight"])
def test_bad_n_ops_exits_2_naming_the_flag(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["audit", "--n-ops", value])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "--n-ops" in err
    assert "1..32" in err


def test_missing_subcommand_exits_2() -> None:
    with pytest.raises(SystemExit) as excinfo:
        main([])
    assert excinfo.value.code == 2


def test_run_json_summarises_the_batched_runs_episodes(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The gym-API path behind `diagym run` against the batched runner on the same seeds."""
    import numpy as np

    from diagym.controllers.workflow.batched import run_controller
    from diagym.envs.workflow.params import WorkflowParams

    argv = ["run", "--env", "StatefulWorkflow-v0", "--env-kwargs",
            '{"snapshot_period": 0, "candidates": 8}', "--policy", "scan-4", "--episodes", "40",
            "--seed", "7", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) == {"episodes", "success", "success_ci", "mean_completed",
                            "mean_calls", "failures", "run", "provenance"}
    assert summary["run"] == {"env": "StatefulWorkflow-v0", "policy": "scan-4",
                              "env_kwargs": {"snapshot_period": 0, "candidates": 8},
                              "task_seeds": [7, 46]}
    batched = run_controller(WorkflowParams(snapshot_period=0, candidates=8), "scan-4",
                             np.arange(7, 47))
    assert summary["episodes"] == 40
    assert summary["success"] == batched["success"].mean()
    assert summary["mean_calls"] == batched["calls"].mean()
    assert summary["mean_completed"] == batched["completed"].mean()
    low, high = summary["success_ci"]
    assert 0 <= low <= summary["success"] <= high <= 1
    assert sum(summary["failures"].values()) == 40 - batched["success"].sum()


@pytest.mark.parametrize(("argv", "message"), [
    (["--env-kwargs", "[1]"], "argument --env-kwargs: must be a JSON object; got '[1]'"),
    (["--episodes", "0"], "argument --episodes: must be an integer in 1..1000000000000; got 0"),
    (["--seed", "-3"], "argument --seed: must be an integer >= 0; got -3"),
])
def test_run_rejects_bad_flags(argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    base = {"--env": "StatefulWorkflow-v0", "--policy": "exact", "--episodes": "2"}
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        base[flag] = value
    with pytest.raises(SystemExit) as exit_info:
        main(["run", *[x for pair in base.items() for x in pair]])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_run_reports_bad_env_kwargs_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--env", "StatefulWorkflow-v0", "--env-kwargs", '{"candidates": 9}',
            "--policy", "exact", "--episodes", "1"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "diagym run: error: candidates must be in 2..8; got 9")


def test_run_refuses_an_existing_log_in_one_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "exact", "--episodes", "3",
            "--log", str(log), "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    before = log.read_text()
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"diagym run: error: log {log} exists: pass --resume to continue it (in Python: pass "
        "resume=True), or choose another file"]
    assert log.read_text() == before
    assert main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out) == first
    assert log.read_text() == before  # every episode was already there


@pytest.mark.parametrize("command", [
    "audit", "run", "reproduce", "llm-study", "dacs-study", "train", "rl-study", "serve-local",
    "rcwt", "diagnose"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: diagym {command}")


def test_a_chat_model_run_without_an_endpoint_is_one_error_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--episodes",
                 "1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "diagym run: error: --policy llm needs --base-url URL and --model NAME (or --local)"]


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser with its prog, nested ones (rcwt sweep, rcwt fit) included."""
    found = []

    def walk(parser: argparse.ArgumentParser) -> None:
        found.append((parser.prog, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)

    walk(build_parser())
    return found


@pytest.mark.parametrize(("prog", "parser"), _parsers(), ids=[p for p, _ in _parsers()])
def test_every_option_says_what_it_does_and_its_default(
        prog: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert "%%" not in text and "%(" not in text, prog
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        assert action.help, (prog, action.option_strings or action.dest)
        if action.option_strings and not action.required:
            shown = action.help % {**vars(action), "default": action.default}
            assert "default" in shown, (prog, action.option_strings)


def test_run_help_shows_the_interval_as_95_percent(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "Wilson 95% interval" in " ".join(capsys.readouterr().out.split())


def test_an_unknown_flag_is_refused_by_the_command_that_got_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "--n-ops", "4", "--budget", "5"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "diagym audit: error: unrecognized arguments: --budget 5 (see diagym audit --help)"]
