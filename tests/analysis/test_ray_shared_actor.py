"""`diagym run --executor ray` on a local Ray instance (loopback) in a subprocess: killing
the actor that holds the run's one rate limit ends the run with one line, no traceback, and
the log is left whole; with --json (run and diagnose), stdout carries only the JSON, whatever
Ray prints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_harness_cli import ENV, oracle_server
from tests.conftest import scaled
from tests.llm_fake_server import FakeServer, Reply

pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[2]


def _host_actors(parent: int) -> list[int]:
    """The pids of Ray's `_Host` actor processes under the process `parent` started (their
    process title is ray::_Host...)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if title.startswith("ray::_Host") and _descends(int(entry.name), parent, stat):
            found.append(int(entry.name))
    return found


def _descends(pid: int, ancestor: int, stat: str) -> bool:
    for _ in range(16):
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == ancestor:
            return True
        if parent <= 1:
            return False
        try:
            stat = Path(f"/proc/{parent}/stat").read_text()
        except OSError:
            return False
    return False


class Paced:
    """The oracle server, answering decisions after 0.2 s, counting them."""

    def __init__(self) -> None:
        self.answer = oracle_server()
        self.decisions = 0
        self.started = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        reply = self.answer(request)
        text = "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
        if "Task (" not in text:
            return reply
        self.decisions += 1
        if self.decisions >= 4:
            self.started.set()
        return Reply(content=reply.content, tool_calls=reply.tool_calls, delay=0.2)


def test_killing_the_shared_limit_actor_is_one_line_and_stdout_stays_json(
        tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    paced = Paced()
    with FakeServer(paced, models=["fake"]) as server:
        argv = [sys.executable, "-m", "diagym.analysis.cli", "run", "--env", ENV, "--policy", "llm",
                "--base-url", server.base_url, "--model", "fake", "--episodes", "40",
                "--concurrency", "2", "--executor", "ray", "--log", str(log), "--json"]
        env = {**os.environ, "RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"}
        process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert paced.started.wait(scaled(240)), process.communicate(timeout=scaled(60))
            deadline = time.monotonic() + scaled(60)
            while not (hosts := _host_actors(process.pid)) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert hosts, "no ray::_Host actor found"
            for pid in hosts:
                os.kill(pid, signal.SIGKILL)
            out, err = process.communicate(timeout=scaled(180))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "Traceback" not in err, err[-3000:]
    assert process.returncode == 2, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("diagym run: error:")]
    assert errors == ["diagym run: error: the Ray actor holding the run's shared AdaptiveLimit "
                      "(one for every worker) died, so the run stops; what it logged is kept: "
                      "continue with --resume"], err[-3000:]
    assert out == ""
    for line in log.read_text().splitlines() if log.exists() else []:  # nothing torn
        json.loads(line)


def test_json_stdout_holds_only_the_json_on_ray(tmp_path: Path) -> None:
    """A policy that prints in its worker: Ray forwards the print to the driver's stdout,
    which --json keeps for the JSON (the print goes to stderr)."""
    policy = tmp_path / "noisy.py"
    policy.write_text("import time\n"
                      "class Noisy:\n"
                      "    def reset(self, *, seed=None):\n"
                      "        print('hello from a worker', flush=True)\n"
                      "        time.sleep(1.5)  # Ray forwards worker output every so often\n"
                      "    def act(self, observation, info):\n"
                      "        return (0, 0)\n")
    done = subprocess.run(
        [sys.executable, "-m", "diagym.analysis.cli", "run", "--env", "StatefulWorkflow-v0",
         "--policy", f"{policy}:Noisy", "--episodes", "4", "--executor", "ray", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(300),
        env={**os.environ, "RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["episodes"] == 4
    assert "hello from a worker" in done.stderr


def test_diagnose_json_stdout_holds_only_the_json_on_ray(tmp_path: Path) -> None:
    """diagnose --executor ray --json with cache-2 made by a factory that prints in its
    worker: stdout is exactly one JSON object, the diagnosis; the print goes to stderr."""
    policy = tmp_path / "noisy.py"
    policy.write_text("import time\n"
                      "from diagym.controllers.registry import make_reference_policy\n"
                      "def noisy(env):\n"
                      "    print('hello from a worker', flush=True)\n"
                      "    time.sleep(1.5)  # Ray forwards worker output every so often\n"
                      "    return make_reference_policy('cache-2', env)\n")
    done = subprocess.run(
        [sys.executable, "-m", "diagym.analysis.cli", "diagnose", "--policy", f"{policy}:noisy",
         "--budget", "4", "--executor", "ray", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(300),
        env={**os.environ, "RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    diagnosis = json.loads(done.stdout)
    assert isinstance(diagnosis, dict) and diagnosis["episodes"] == 4, done.stdout[:300]
    assert "hello from a worker" in done.stderr


def test_sigterm_on_ray_unwinds_and_prints_how_to_resume(tmp_path: Path) -> None:
    """ray.init replaced diagym's SIGTERM handler with one that exits at once (Ray's stack
    dump, status 15, no resume line); and force-cancelling the tasks in flight on diagym's own
    local instance raced their replies, aborting the driver with status 1 in about 1 run of 4
    ("Tried to complete task that was not pending")."""
    import shlex

    from tests.analysis.test_interrupts import _wait_for_episodes

    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "text-oracle", "--episodes",
            "200000", "--executor", "ray", "--log", str(log)]
    process = subprocess.Popen([sys.executable, "-m", "diagym.analysis.cli", *argv],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_episodes(log, process, timeout=scaled(300))
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=scaled(180))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, err[-2000:]
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (f"diagym run: interrupted; continue with: "
                                    f"{shlex.join(['diagym', *argv, '--resume'])}")
