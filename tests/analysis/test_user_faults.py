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
