"""SIGINT and SIGTERM unwind a command the same way: cleanup runs, one resume line, 130/143."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diagym.analysis.interrupts import Interrupted, exit_status, interruptible
from tests.conftest import scaled

DIAGYM = str(Path(sys.executable).with_name("diagym"))


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_either_signal_raises_once_and_unwinds_finally_blocks(signum: int, status: int) -> None:
    cleaned = []
    with pytest.raises(Interrupted) as caught, interruptible():
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises here
        finally:
            os.kill(os.getpid(), signum)  # a second signal during cleanup does not cut it short
            time.sleep(0.05)
            cleaned.append(True)
    assert cleaned == [True]
    assert caught.value.signum == signum
    assert exit_status(caught.value) == status


def test_handlers_are_restored_after_the_block() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with interruptible():
        assert signal.getsignal(signal.SIGTERM) is not before[0]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_plain_keyboard_interrupt_counts_as_sigint() -> None:
    assert exit_status(KeyboardInterrupt()) == 130


def _wait_for_episodes(log: Path, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if log.exists() and log.read_text().count('"type": "episode"') >= 3:
            return
        time.sleep(0.1)
    raise AssertionError("the run logged no episodes")


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_prints_the_resume_command_and_no_traceback(
        tmp_path: Path, signum: int, status: int) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "text-oracle",
            "--episodes", "200000", "--log", str(log)]
    process = subprocess.Popen([DIAGYM, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        _wait_for_episodes(log, process)
        process.send_signal(signum)
        _out, err = process.communicate(timeout=scaled(60))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == status, err
    assert "Traceback" not in err
    hints = [line for line in err.splitlines() if "interrupted" in line]
    assert hints == [f"diagym run: interrupted; continue with: "
                     f"{shlex.join(['diagym', *argv, '--resume'])}"]
    for line in log.read_text().splitlines():  # every line whole: the log was flushed
        json.loads(line)


def test_an_interrupted_run_without_a_log_says_it_cannot_be_resumed() -> None:
    process = subprocess.Popen(
        [DIAGYM, "run", "--env", "StatefulWorkflow-v0", "--policy", "text-oracle",
         "--episodes", "200000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # the progress line: the run is playing
        assert first.startswith("diagym run: 0/200000"), first
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=scaled(60))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, err
    assert "diagym run: interrupted; nothing was logged" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("url_flag", [["--base-url", "http://alice:s3cr%40t@127.0.0.1:9/v1"],
                                      ["--base-url=http://alice:s3cr%40t@127.0.0.1:9/v1"],
                                      ["--base-url", "http://alice:s3cr%40t@[::1/v1"]])
def test_the_resume_command_never_shows_a_urls_credentials(url_flag: list[str]) -> None:
    """The interrupted line repeats the command; a password in --base-url is redacted there
    as in every other output (it was printed verbatim)."""
    import argparse

    from diagym.analysis.cli.main import resume_hint

    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", *url_flag,
            "--log", "run.jsonl"]
    hint = resume_hint(argv, argparse.Namespace(resume=False, log="run.jsonl"))
    assert hint.startswith("interrupted; continue with: diagym run --env StatefulWorkflow-v0 ")
    assert hint.endswith("--log run.jsonl --resume")
    for secret in ("alice", "s3cr%40t", "s3cr@t", "s3cr%40T"):
        assert secret not in hint
    assert "[REDACTED]" in hint


def test_a_second_ctrl_c_while_the_resume_line_is_printed_is_ignored(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Two Ctrl-Cs 0.2 s apart ended the process by the signal: the second arrived while
    the first's resume line was printed, after the handlers were restored. Here the second
    is sent from inside the printing of that line."""
    import argparse
    import importlib
    import os

    cli_main = importlib.import_module("diagym.analysis.cli.main")  # the module, not main()

    def run_then_interrupted(_args: argparse.Namespace) -> int:
        os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C, through diagym's handler
        time.sleep(scaled(30))
        raise AssertionError("the first signal did not interrupt the command")

    real_hint = cli_main.resume_hint

    def hint_with_a_second_signal(argv: list[str], args: argparse.Namespace) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        return real_hint(argv, args)

    monkeypatch.setattr(cli_main, "resume_hint", hint_with_a_second_signal)
    monkeypatch.setattr(importlib.import_module("diagym.analysis.cli.run"), "run",
                        run_then_interrupted)
    status = cli_main.main(["run", "--env", "StatefulWorkflow-v0", "--policy", "cache-2",
                            "--episodes", "1"])
    assert status == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "diagym run: interrupted; nothing was logged (no --log FILE), so it cannot be resumed")


def test_a_keyboard_interrupt_raised_in_place_of_ours_keeps_the_signals_status() -> None:
    """A library waiting in native code (Ray's) may catch our Interrupted and raise a plain
    KeyboardInterrupt: the status is still the signal's (143 for SIGTERM), not 130."""
    with pytest.raises(KeyboardInterrupt) as caught, interruptible():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Interrupted:
            raise KeyboardInterrupt from None  # what such a library does
    assert not isinstance(caught.value, Interrupted)
    assert exit_status(caught.value) == 143
