"""Ctrl-C while a model call is in flight: the command says "stopping" at once, abandons
the call instead of waiting for the server's answer, and a resumed run keeps the decisions
the interrupted episode had completed: with no --cache-dir they are answered from the log's
call lines (cache "log"), so the model is not asked them again.

The server is the text oracle behind HTTP (tests/analysis/test_harness_cli.py) that holds
its fourth decision for a minute: a run that waited for it would fail the time bound."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.analysis.test_harness_cli import ENV, oracle_server
from tests.conftest import scaled
from tests.llm_fake_server import FakeServer, Reply

ROOT = Path(__file__).resolve().parents[2]
HELD = 3  # decisions answered before the one the server holds


class SlowOracle:
    """The oracle server, holding decision HELD + 1 for a minute while `hold` is set, and
    counting the decision requests it is sent."""

    def __init__(self) -> None:
        self.answer = oracle_server()
        self.decisions = 0
        self.hold = threading.Event()
        self.hold.set()
        self.held = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        reply = self.answer(request)
        text = "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
        if "Task (" in text:
            self.decisions += 1
            if self.decisions > HELD and self.hold.is_set():
                self.held.set()
                return Reply(content=reply.content, tool_calls=reply.tool_calls, delay=60.0)
        return reply


def _calls(log: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line for line in lines if line["type"] == "call"]


def test_ctrl_c_during_a_call_stops_at_once_and_resume_keeps_the_decisions(
        tmp_path: Path) -> None:
    oracle = SlowOracle()
    log = tmp_path / "run.jsonl"
    with FakeServer(oracle, models=["fake"]) as server:
        argv = [sys.executable, "-m", "diagym.analysis.cli", "run", "--env", ENV, "--policy", "llm",
                "--base-url", server.base_url, "--model", "fake", "--episodes", "1",
                "--log", str(log)]
        process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        try:
            assert oracle.held.wait(scaled(120)), process.communicate(timeout=scaled(30))
            time.sleep(0.5)  # the call is in flight
            signalled = time.monotonic()
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=scaled(30))
            stopped = time.monotonic() - signalled
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 130, err
        assert stopped < 15, f"took {stopped:.1f} s: the run waited for the held call"
        assert "Traceback" not in err
        lines = err.splitlines()
        stopping = lines.index("diagym run: stopping (SIGINT)")
        assert lines[stopping + 1:][-1].startswith("diagym run: interrupted; continue with: ")
        assert [call["decision"] for call in _calls(log)] == list(range(HELD))

        oracle.hold.clear()
        asked = oracle.decisions
        resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=scaled(300))
    assert resumed.returncode == 0, resumed.stderr
    again = _calls(log)[HELD:]
    assert [call["decision"] for call in again[:HELD + 1]] == list(range(HELD + 1))
    assert [call["cache"] for call in again[:HELD]] == ["log"] * HELD
    assert again[HELD]["cache"] != "log"
    assert oracle.decisions - asked == len(again) - HELD  # the replayed ones were not sent
