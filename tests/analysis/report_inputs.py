"""The inputs the report tests build reports from, each made by the real command: a reference
run's log, an LLM run against the loopback fake server (a model that plays the text oracle but
answers a wrong candidate at some decisions), a text-oracle run, a diagnosis and a DACS study.
"""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

from diagym.analysis.cli.main import main
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from tests.llm_fake_server import FakeServer, Reply, tool_server

ENV = "StatefulWorkflow-v0"
HISTORY_ENV = "StatefulWorkflowHistory-v0"  # registers shown once: a small cache fails
FLAWED_EVERY = 11  # the fake model's every 11th task answer is a wrong candidate
PRICES = {"models": {"fake": {"input": 1000.0, "output": 2000.0}}}  # USD per 1M tokens


def flawed_oracle() -> Any:
    """A responder that answers like the text oracle, except that every FLAWED_EVERY-th task
    request gets the oracle's operation with the next candidate slot (a wrong slot)."""
    probe_answers = tool_server()
    counter = itertools.count(1)
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "Task (" not in text or isinstance(request.get("tool_choice"), dict):
            return probe_answers(request)
        answer = json.loads(InProcessChat(WorkflowOracle()).complete(messages).text)
        with lock:
            wrong = next(counter) % FLAWED_EVERY == 0
        if wrong:
            answer["candidate"] = (answer["candidate"] + 1) % 4
        return Reply(content=json.dumps(answer))

    return respond


def run_cli(*argv: str) -> None:
    status = main(list(argv))
    assert status == 0, f"diagym {' '.join(argv)} exited {status}"


def reference_log(directory: Path, episodes: int = 40, policy: str = "exact",
                  env: str = ENV) -> Path:
    log = directory / f"{policy}-{env}.jsonl"
    run_cli("run", "--env", env, "--policy", policy, "--episodes", str(episodes),
            "--log", str(log))
    return log


def oracle_log(directory: Path, episodes: int = 3) -> Path:
    log = directory / "text-oracle.jsonl"
    run_cli("run", "--env", ENV, "--policy", "text-oracle", "--episodes", str(episodes),
            "--log", str(log))
    return log


def llm_log(directory: Path, episodes: int = 8) -> Path:
    """An LLM run over HTTP against the fake server, priced, one worker (calls in order)."""
    prices = directory / "prices.json"
    prices.write_text(json.dumps(PRICES))
    log = directory / "llm.jsonl"
    with FakeServer(flawed_oracle(), models=["fake"]) as server:
        run_cli("run", "--env", ENV, "--policy", "llm", "--base-url", server.base_url,
                "--model", "fake", "--episodes", str(episodes), "--concurrency", "1",
                "--prices", str(prices), "--log", str(log))
    return log


def diagnosis_dir(directory: Path) -> tuple[Path, Path]:
    out, log = directory / "diagnosis", directory / "diagnosis.jsonl"
    run_cli("diagnose", "--policy", "cache-2", "--budget", "32", "--out", str(out),
            "--log", str(log))
    return out, log


def dacs_dir(directory: Path) -> tuple[Path, Path]:
    out, log = directory / "dacs", directory / "dacs.jsonl"
    run_cli("dacs-study", "--episodes", "1", "--phases", "agents", "--out", str(out),
            "--log", str(log))
    return out, log


def battery_dir(directory: Path, policy: str = "cache-2") -> tuple[Path, Path]:
    """`diagnose --out --log` at the default budget: the whole default battery played."""
    out, log = directory / f"battery-{policy}", directory / f"battery-{policy}.jsonl"
    run_cli("diagnose", "--policy", policy, "--out", str(out), "--log", str(log))
    return out, log


def dacs_diagnosis_dir(directory: Path) -> tuple[Path, Path]:
    out, log = directory / "dacs-diagnosis", directory / "dacs-diagnosis.jsonl"
    run_cli("diagnose", "--env", "DACSSteering-v0", "--policy", "dacs-reader", "--out",
            str(out), "--log", str(log))
    return out, log
