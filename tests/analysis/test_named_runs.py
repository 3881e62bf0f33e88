"""The studies' named runs (analysis/studies/named_runs.py): the resume rule before anything
plays, one locked log, the bar over every run, a resumed study's episodes counted done, and
an error inside the study closing the log before it propagates."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.studies.named_runs import NamedRuns
from diagym.controllers.logreader import read_log
from diagym.controllers.registry import make_reference_policy
from diagym.controllers.runlog import LogInUse, ResumeNeeded, RunLog


def env() -> gym.Env:
    return gym.make("StatefulWorkflow-v0")


def test_runs_share_one_locked_log_and_resume_by_name(tmp_path: Path) -> None:
    log = tmp_path / "study.jsonl"
    with NamedRuns(("a", "b"), range(3, 6), log=log) as runs:
        with pytest.raises(LogInUse):
            RunLog(log, resume=True)
        played = {name: runs.play(name, env, lambda e, n=name: make_reference_policy(
            "exact" if n == "a" else "cache-2", e)) for name in ("a", "b")}
    assert {len(v) for v in played.values()} == {3}
    logged = {run.name: sorted(run.episodes) for run in read_log(log).values()}
    assert logged == {"a": [3, 4, 5], "b": [3, 4, 5]}
    with pytest.raises(ResumeNeeded):
        NamedRuns(("a",), range(3, 6), log=log)
    with pytest.raises(ValueError, match="run 'c' is not one of this study's runs"), \
            NamedRuns(("a",), range(3), log=log, resume=True) as runs:
        runs.play("c", env, lambda e: make_reference_policy("exact", e))


def test_the_bar_counts_every_run_and_a_resume_starts_at_what_is_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "study.jsonl"
    with NamedRuns(("a",), range(4), log=log) as runs:
        runs.play("a", env, lambda e: make_reference_policy("exact", e))
    capsys.readouterr()
    with NamedRuns(("a", "b"), range(4), log=log, resume=True, progress=True,
                   desc="mine") as runs:
        assert runs.on_record is not None
        for name in ("a", "b"):
            runs.play(name, env, lambda e: make_reference_policy("exact", e))
    err = capsys.readouterr().err
    assert "mine" in err and "4/8" in err and "8/8" in err


def test_an_error_inside_the_study_closes_the_log_first(tmp_path: Path) -> None:
    log = tmp_path / "study.jsonl"
    with pytest.raises(RuntimeError, match="arm failed"):
        with NamedRuns(("a",), range(2), log=log) as runs:
            runs.play("a", env, lambda e: make_reference_policy("exact", e))
            raise RuntimeError("arm failed")
    RunLog(log, resume=True).close()  # the lock is free again
