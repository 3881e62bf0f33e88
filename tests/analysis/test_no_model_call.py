"""A run in which no model call succeeded measured nothing: it ends with one line saying so,
with the server's last error, and exit status 4 (it ended 0, its 0% read as the model's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from diagym.analysis.cli import main
from diagym.llm_policies.client.probe import ASK_JSON, ASK_PLAIN, ASK_TOOL
from tests.llm_fake_server import FakeServer, Reply

RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--model", "m",
       "--episodes", "2"]
NO_WAIT = {"Retry-After": "0"}  # the client's backoff would wait 7.5 s a failed call
PROBES = {ask[0]["content"] for ask in (ASK_PLAIN, ASK_JSON, ASK_TOOL)}


def _run(server: FakeServer, *more: str) -> int:
    return main([*RUN, "--base-url", server.base_url, *more])


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_every_call_refused_exits_4_with_the_reason(
        json_flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    refuse = Reply(status=501, content="Not Implemented", headers=NO_WAIT)
    with FakeServer(lambda _request: refuse) as server:
        assert _run(server, *json_flag) == 4
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == (
        "diagym run: error: no model call succeeded: all 2 episodes ended on a provider error "
        "(the last: HTTP 501: Not Implemented); check --base-url, --model and the key")
    if json_flag:
        assert json.loads(captured.out)["failures"] == {"provider_error": 2}


def test_a_run_with_one_answered_call_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """Some calls answered: the run measured the model (its failures are in the summary)."""
    decisions = {"n": 0}

    def respond(request: dict[str, Any]) -> Reply:
        if len(request["messages"]) == 1 and request["messages"][0]["content"] in PROBES:
            return Reply(content="OK")  # the pre-flight probe's questions
        decisions["n"] += 1
        if decisions["n"] == 1:
            return Reply(content='{"operation": 0, "candidate": 0}')
        return Reply(status=501, content="Not Implemented", headers=NO_WAIT)

    with FakeServer(respond) as server:
        assert _run(server, "--concurrency", "1") == 0
    assert "no model call succeeded" not in capsys.readouterr().err
