"""--tool-choice and --bounded-fields through the command line: what reaches the request
body, what the run's identity records, and the one-line refusals (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagym.analysis.cli import main
from tests.llm_fake_server import FakeServer, tool_server

KWARGS = json.dumps({"depth": 8, "width": 4, "candidates": 3, "snapshot_period": 1,
                     "error_allowance": 2})
NAMED = {"type": "function", "function": {"name": "execute"}}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(tool_server(), models=["fake"]) as running:
        yield running


def _run(server: FakeServer, log: Path, *more: str) -> list[str]:
    return ["run", "--env", "StatefulWorkflow-v0", "--env-kwargs", KWARGS, "--policy", "llm",
            "--base-url", server.base_url, "--model", "fake", "--episodes", "1",
            "--log", str(log), *more]


def _played(server: FakeServer) -> list[dict[str, Any]]:
    """The run's own requests (the probe's are a `ping` tool or a one-field schema)."""
    return [r for r in server.requests if "Task (" in json.dumps(r.get("messages"))]


def _policy(log: Path) -> dict[str, Any]:
    session = json.loads(log.read_text().splitlines()[0])
    return session["run"]["policy"]


def test_required_and_bounded_fields_reach_every_tools_request(
        server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = _run(server, log, "--harness", "tools", "--tool-choice", "required",
                "--bounded-fields")
    assert main(argv) == 0, capsys.readouterr().err
    played = _played(server)
    assert played and all(r["tool_choice"] == NAMED for r in played)
    parameters = [r["tools"][0]["function"]["parameters"]["properties"] for r in played]
    assert all(p == {"operation": {"type": "integer", "enum": list(range(8))},
                     "candidate": {"type": "integer", "enum": [0, 1, 2]}} for p in parameters)
    policy = _policy(log)
    assert (policy["tool_choice"], policy["bounded_fields"]) == ("required", True)


def test_bounded_fields_reach_the_json_schema_and_the_default_sends_seed_003s(
        server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bounded, plain = tmp_path / "bounded.jsonl", tmp_path / "plain.jsonl"
    assert main(_run(server, bounded, "--bounded-fields")) == 0, capsys.readouterr().err
    sent = [r["response_format"]["json_schema"]["schema"] for r in _played(server)]
    assert sent and all(s["properties"]["candidate"] == {"type": "integer", "enum": [0, 1, 2]}
                        for s in sent)
    before = len(server.requests)
    assert main(_run(server, plain, "--harness", "tools")) == 0, capsys.readouterr().err
    played = _played(server)[len(sent):]
    assert len(server.requests) > before and played
    assert all(r["tool_choice"] == "auto" for r in played)
    assert all(r["tools"][0]["function"]["parameters"]["properties"]["candidate"]
               == {"type": "integer", "minimum": 0} for r in played)
    assert "tool_choice" not in _policy(plain) and "bounded_fields" not in _policy(plain)
    assert _policy(bounded)["bounded_fields"] is True


@pytest.mark.parametrize(("more", "message"), [
    (["--tool-choice", "always"],
     "argument --tool-choice: invalid choice: 'always' (choose from 'auto', 'required') "
     "(see diagym run --help)"),
    (["--tool-choice", "required"],
     "--tool-choice required applies to --harness tools only; got --harness json"),
    (["--bounded-fields", "--response-format", "none"],
     "--bounded-fields bounds the schema of constrained decoding or of --harness tools; "
     "--response-format none sends no schema"),
])
def test_a_flag_no_call_would_carry_is_refused_in_one_line(
        more: list[str], message: str, server: FakeServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    try:  # argparse's refusals exit, the settings' return: both status 2, one line
        status = main(_run(server, tmp_path / "run.jsonl", *more))
    except SystemExit as stop:
        status = stop.code
    assert status == 2
    assert capsys.readouterr().err.splitlines() == [f"diagym run: error: {message}"]
    assert _played(server) == []
