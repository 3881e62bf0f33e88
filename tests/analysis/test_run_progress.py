"""`diagym run` shows progress for every policy, with the right total, and a resumed run
says how much the log already holds and counts it as done."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagym.analysis.cli import main

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
    from diagym.analysis.llm_runs import oracle_policy_factory
    from diagym.analysis.studies.llm_study.run import run_design

    log = tmp_path / "study.jsonl"
    run_design("fractional", 0, 2, lambda _harness: oracle_policy_factory(), log=log)
    capsys.readouterr()
    run_design("fractional", 0, 2, lambda _harness: oracle_policy_factory(), log=log,
               resume=True, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("fractional design: 16/16 episode (100%)"), lines


def _bar(lines: list[str], desc: str) -> list[str]:
    """The lines of the bar (and the resuming line) named `desc`, in order."""
    return [line for line in lines if line.startswith(f"{desc}: ")]


def test_llm_study_resume_announces_and_counts_the_finished_episodes_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "study.jsonl"
    argv = ["llm-study", "--policy", "text-oracle", "--design", "fractional", "--json",
            "--log", str(log), "--seeds"]
    assert main([*argv, "1"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "fractional design")
    assert lines[0].startswith("fractional design: 0/8 episode (0%)"), lines
    assert lines[-1].startswith("fractional design: 8/8 episode (100%)"), lines
    assert main([*argv, "2", "--resume"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "fractional design")
    assert lines[0] == (f"fractional design: resuming: 8 of 16 episodes are in {log} "
                        "already; 8 to play")
    assert lines[1].startswith("fractional design: 8/16 episode (50%)"), lines
    assert lines[-1].startswith("fractional design: 16/16 episode (100%)"), lines


def test_dacs_study_counts_episodes_and_a_resume_counts_the_logged_ones_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bar counts episodes (3 cells x 5 arms x K), not arms, so it moves within an arm."""
    log = tmp_path / "dacs.jsonl"
    argv = ["dacs-study", "--phases", "agents", "--json", "--out", str(tmp_path),
            "--log", str(log), "--episodes"]
    assert main([*argv, "1"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "dacs-study")
    assert lines[0].startswith("dacs-study: 0/15 episode (0%)"), lines
    assert lines[-1].startswith("dacs-study: 15/15 episode (100%)"), lines
    assert main([*argv, "2", "--resume"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "dacs-study")
    assert lines[0] == (f"dacs-study: resuming: 15 of 30 episodes are in {log} already; "
                        "15 to play")
    assert lines[1].startswith("dacs-study: 15/30 episode (50%)"), lines
    assert lines[-1].startswith("dacs-study: 30/30 episode (100%)"), lines


def test_rcwt_sweep_counts_to_its_calls_and_a_resume_counts_the_logged_ones_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2 ratios x 2 orders x N trials calls; the bar knows that total from its first line."""
    from diagym.analysis.cli.rcwt import LOG_NAME

    argv = ["rcwt", "sweep", "--policy", "flat-reader", "--window", "700", "--q", "0", "50",
            "--json", "--out", str(tmp_path), "--trials"]
    assert main([*argv, "1"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "rcwt sweep")
    assert lines[0].startswith("rcwt sweep: 0/4 call (0%)"), lines
    assert lines[-1].startswith("rcwt sweep: 4/4 call (100%)"), lines
    assert main([*argv, "2", "--resume"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "rcwt sweep")
    assert lines[0] == (f"rcwt sweep: resuming: 4 of 8 calls are in {tmp_path / LOG_NAME} "
                        "already; 4 to play")
    assert lines[1].startswith("rcwt sweep: 4/8 call (50%)"), lines
    assert lines[-1].startswith("rcwt sweep: 8/8 call (100%)"), lines


def test_train_resume_announces_the_steps_its_checkpoint_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PPO on one env trains whole rollouts of 128 steps: --steps 64 trains 128, and a resume
    to 256 starts its bar at the checkpoint's 128; a resume of a finished run says so."""
    out = tmp_path / "t"
    argv = ["train", "--algo", "ppo", "--env", "StatefulWorkflow-v0", "--n-envs", "1",
            "--eval-episodes", "1", "--out", str(out), "--steps"]
    assert main([*argv, "64"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "ppo")
    assert lines[-1].startswith("ppo: 128/128 step (100%)"), lines
    assert main([*argv, "256", "--resume"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "ppo")
    assert lines[0] == f"ppo: resuming: 128 of 256 steps are in {out} already; 128 to train"
    assert lines[1].startswith("ppo: 128/256 step (50%)"), lines
    assert lines[-1].startswith("ppo: 256/256 step (100%)"), lines
    assert main([*argv, "256", "--resume"]) == 0
    lines = _bar(capsys.readouterr().err.splitlines(), "ppo")
    assert lines[0] == f"ppo: resuming: 256 of 256 steps are in {out} already; 0 to train"
    assert lines[-1].startswith("ppo: 256/256 step (100%)"), lines


def test_the_batched_run_counts_chunks_and_builds_no_record(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`diagym run` of a reference controller without --log plays batched: the bar is told
    each chunk's size, and no EpisodeRecord is built (a record per episode cost 7x the
    batched rate at 4M episodes)."""
    from diagym.controllers.policy import EpisodeRecord

    built = []
    original = EpisodeRecord.__init__

    def counted(self: EpisodeRecord, *args: object, **kwargs: object) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(EpisodeRecord, "__init__", counted)
    assert main([*RUN, "3000", "--policy", "cache-2"]) == 0
    assert built == []
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "diagym run: 3000/3000 episode (100%)")


@pytest.mark.parametrize("policy, fast", [("cache-2", True), ("cache-2", False),
                                          ("tests.user_policy:Greedy", True)])
def test_on_progress_counts_every_episode_once(policy: str, fast: bool, tmp_path: Path) -> None:
    """Whatever the path (batched, per step, a user's policy), with and without a log and
    after a resume, the progress counts add up to the episodes played."""
    import gymnasium as gym

    from diagym.controllers.loading import is_import_path, load_policy_factory
    from diagym.controllers.registry import make_reference_policy
    from diagym.controllers.rollout import rollout

    env = gym.make("StatefulWorkflow-v0")
    policy_made = (load_policy_factory(policy)(env) if is_import_path(policy)
                   else make_reference_policy(policy, env))
    log = tmp_path / "run.jsonl"
    for episodes, resume, expected in ((5, False, 5), (12, True, 7)):
        counts: list[int] = []
        records: list[object] = []
        rollout(env, policy_made, episodes, log=log, resume=resume, fast=fast,
                on_progress=counts.append, on_record=records.append)
        assert sum(counts) == expected == len(records)
    counts = []
    rollout(env, policy_made, 9, fast=fast, on_progress=counts.append)
    assert sum(counts) == 9
