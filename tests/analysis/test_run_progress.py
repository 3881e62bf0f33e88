"""`diagym run` shows progress for every policy, with the right total, and a resumed run
says how much the log already holds and counts it as done."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.cli import main

RUN = ["run", "--env", "StatefulWorkflow-v0", "--episodes"]


@pytest.mark.parametrize("policy", ["tests.user_policy:Greedy", "cache-2"])
def test_run_shows_progress_and_counts_resumed_episodes(
        policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    assert main([*RUN, "6", "--policy", policy, "--log", str(log)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("diagym run: 0/6 episode (0%)")
    assert lines[-1].startswith("diagym run: 6/6 episode (100%)")
    assert main([*RUN, "10", "--policy", policy, "--log", str(log), "--resume"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert f"diagym run: resuming: 6 of 10 episodes are in {log} already; 4 to play" in lines
    assert lines[-1].startswith("diagym run: 10/10 episode (100%)")


def test_train_counts_to_the_steps_sb3_takes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """SB3 collects whole rollouts (PPO's n_steps=128 per env), so --steps 100 on 2 envs
    trains 256 steps: the bar's total is 256 and it ends at 100%, never "256/? (0%)"."""
    assert main(["train", "--algo", "ppo", "--env", "StatefulWorkflow-v0", "--steps", "100",
                 "--n-envs", "2", "--eval-episodes", "4", "--out", str(tmp_path / "t")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("ppo: ")]
    assert lines[-1].startswith("ppo: 256/256 step (100%)"), lines


def test_diagnose_resume_of_a_complete_log_counts_it_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "diag.jsonl"
    argv = ["diagnose", "--policy", "cache-2", "--budget", "20", "--log", str(log)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (f"diagym diagnose: resuming: 20 of 20 episodes are in {log} already; "
                        "0 to play")
    assert all(" 20/20 episode (100%)" in line for line in lines[1:]), lines


def test_a_resumed_llm_study_counts_its_finished_episodes_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Resuming a finished study plays nothing and its bar ends at the full total, never at
    "0/16" with the finished episodes missing."""
    from analysis.llm_runs import oracle_policy_factory
    from analysis.studies.llm_study.run import run_design

    log = tmp_path / "study.jsonl"
    run_design("fractional", 0, 2, lambda _harness: oracle_policy_factory(), log=log)
    capsys.readouterr()
    run_design("fractional", 0, 2, lambda _harness: oracle_policy_factory(), log=log,
               resume=True, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("fractional design: 16/16 episode (100%)"), lines
