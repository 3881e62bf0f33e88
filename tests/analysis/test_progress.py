"""Progress reaches logs: off a terminal, periodic whole lines on stderr, never a redrawn bar."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diagym.analysis import progress as progress_module
from diagym.analysis.progress import INTERVAL_ENV, progress
from tests.conftest import scaled

DIAGYM = str(Path(sys.executable).with_name("diagym"))


def test_off_a_terminal_each_update_is_one_whole_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTERVAL_ENV, "0.05")
    sink = io.StringIO()
    with progress(total=6, desc="study", unit="cell", file=sink) as bar:
        for _ in range(6):
            time.sleep(0.03)
            bar.update(1)
    text = sink.getvalue()
    assert "\r" not in text and "\n\n" not in text
    lines = text.splitlines()
    assert lines[0].startswith("study: 0/6 cell")
    assert lines[-1].startswith("study: 6/6 cell (100%)")
    assert 3 <= len(lines) < 8  # start, a few timed updates, the end; not one per update


def test_the_interval_bounds_how_often_a_line_is_printed(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv(INTERVAL_ENV, "60")
    sink = io.StringIO()
    with progress(total=1000, desc="run", unit="episode", file=sink) as bar:
        for _ in range(1000):
            bar.update(1)
    assert [line.split(",")[0] for line in sink.getvalue().splitlines()] == [
        "run: 0/1000 episode (0%)", "run: 1000/1000 episode (100%)"]


def test_a_count_without_total_reads_as_a_plain_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTERVAL_ENV, "60")
    sink = io.StringIO()
    with progress(desc="sweep", unit="call", file=sink) as bar:
        bar.update(7)
    assert sink.getvalue().splitlines()[-1].startswith("sweep: 7 call")


@pytest.mark.parametrize("text", ["0", "-1", "soon", "nan", "inf"])
def test_an_interval_that_cannot_work_is_refused_by_name(monkeypatch: pytest.MonkeyPatch,
                                                         text: str) -> None:
    monkeypatch.setenv(INTERVAL_ENV, text)
    with pytest.raises(ValueError, match=INTERVAL_ENV):
        progress_module.interval()


def test_the_default_interval_is_thirty_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert progress_module.interval() == 30.0


def test_a_run_whose_stderr_is_a_file_logs_progress_lines(tmp_path: Path) -> None:
    env = {**os.environ, INTERVAL_ENV: "0.2"}
    result = subprocess.run(
        [DIAGYM, "run", "--env", "StatefulWorkflow-v0", "--policy", "text-oracle",
         "--episodes", "1500", "--log", str(tmp_path / "run.jsonl")],
        capture_output=True, text=True, env=env, timeout=scaled(240))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("diagym run: ")]
    assert len(lines) >= 3, result.stderr
    assert lines[-1].startswith("diagym run: 1500/1500 episode (100%)")
    assert "\r" not in result.stderr
