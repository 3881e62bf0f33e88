"""The run log under the ways a run meets it: two writers, damaged lines, replays, changed
settings, other transports, retries of provider failures, and a torn learning curve."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.cli import main
from diagym.controllers.policy import EpisodeAborted, EpisodeRecord
from diagym.controllers.rollout import rollout, rollout_parallel
from diagym.controllers.runlog import (
    PROVIDER_ERROR,
    LogInUse,
    RunChanged,
    RunLog,
    call_totals,
    differences,
    identity,
)
from diagym.controllers.workflow.adapter import ReferencePolicy
from tests.conftest import scaled
from tests.llm_fake_server import FakeServer, Reply, scripted

ENV = "StatefulWorkflow-v0"
ANSWER = Reply(content='{"operation": 0, "candidate": 0}')


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a log, past any damaged line."""
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def episode_keys(path: Path) -> list[str]:
    return [x["episode_key"] for x in lines(path) if x.get("type") == "episode"]


class Stepwise:
    """A reference controller's moves, but not a ReferencePolicy (so it plays step by step),
    with hooks: `gate` holds the first act until released, `failing` seeds abort with a
    provider error."""

    def __init__(self, env: gym.Env, name: str = "exact", failing: frozenset[int] = frozenset(),
                 started: threading.Event | None = None,
                 release: threading.Event | None = None) -> None:
        self.inner = ReferencePolicy.for_env(name, env)
        self.failing, self.started, self.release = failing, started, release
        self.seed: int | None = None

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def reset(self, *, seed: int | None = None) -> None:
        self.seed = seed
        self.inner.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        if self.started is not None and not self.started.is_set():
            self.started.set()
            assert self.release is not None and self.release.wait(timeout=scaled(120))
        if self.seed in self.failing:
            raise EpisodeAborted(PROVIDER_ERROR, "scripted outage")
        return self.inner.act(observation, info)


# -- one writer ------------------------------------------------------------------------------
def test_a_second_resumer_is_refused_and_every_episode_is_played_once(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    env = gym.make(ENV)
    rollout(env, Stepwise(env), 3, seed=0, log=log)
    started, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def first() -> None:
        first_env = gym.make(ENV)
        outcome["records"] = rollout(first_env, Stepwise(first_env, started=started,
                                                         release=release),
                                     8, seed=0, log=log, resume=True)

    thread = threading.Thread(target=first)
    thread.start()
    # the first resumer is inside an episode, holding the log
    assert started.wait(timeout=scaled(120))
    played: list[EpisodeRecord] = []
    with pytest.raises(LogInUse, match="is being written by another run"):
        rollout(env, Stepwise(env), 8, seed=0, log=log, resume=True, on_record=played.append)
    release.set()
    thread.join(timeout=scaled(120))
    assert not played and len(outcome["records"]) == 8
    keys = episode_keys(log)
    assert len(keys) == len(set(keys)) == 8
    # The lock ends with its writer: a third resumer finds everything done.
    assert rollout(env, Stepwise(env), 8, seed=0, log=log, resume=True,
                   on_record=played.append) == outcome["records"]
    assert not played


def test_the_cli_refuses_a_log_another_run_holds_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", ENV, "--policy", "exact", "--episodes", "4", "--log", str(log)]
    assert main(argv) == 0
    capsys.readouterr()
    with RunLog(log, resume=True):
        assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"diagym run: error: log {log} is being written by another run (it holds "
                   "the log's lock): wait for that run to end, or choose another file"]
    assert len(episode_keys(log)) == 4


# -- damaged lines ---------------------------------------------------------------------------
def test_resume_skips_a_torn_a_foreign_and_an_undecodable_line_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    env = gym.make(ENV, snapshot_period=0)
    policy = ReferencePolicy.for_env("cache-2", env)
    whole = rollout(env, policy, 10, seed=7)
    log = tmp_path / "run.jsonl"
    rollout(env, policy, 4, seed=7, log=log)
    ours = episode_keys(log)[0].split(":")[0]
    with log.open("ab") as sink:
        sink.write(b"[1, 2, 3]\n")                                  # JSON, not an entry
        sink.write(b'{"type": "episode", "episode_key": "' + ours.encode()
                   + b':9", "record": {"surprise": 1}}\n')          # our key, not a record
        sink.write(b'{"type": "episode", "episode_key": "0123456789ab:7", "record": '
                   + json.dumps(json.loads(log.read_text().splitlines()[1])["record"]).encode()
                   + b"}\n")                                        # another run's episode
        sink.write(b"not json at all\n")
        sink.write(b'{"type": "call", "response": "\xff\xfe"}\n')  # not UTF-8
        sink.write(b'{"type": "episode", "episode_key": "' + ours.encode() + b":5")  # torn
    with caplog.at_level(logging.WARNING, logger="diagym.runlog"):
        resumed = rollout(env, policy, 10, seed=7, log=log, resume=True)
    assert resumed == whole
    assert [r.message for r in caplog.records] == [
        f"diagym: warning: log {log}: skipped 1 torn line, 1 line that is not UTF-8, 1 line "
        "that is not JSON, 2 lines that are not log entries; the run resumes from the lines "
        "that are entries"]
    keys = [k for k in episode_keys(log) if k.startswith(ours)]
    assert sorted(keys) == sorted(f"{ours}:{seed}" for seed in range(7, 17)) + [f"{ours}:9"]
    with RunLog(log, resume=True) as again:  # the torn tail was cut, the rest kept
        assert again.skipped == Counter({"undecodable": 1, "unparsable": 1, "foreign": 2})
    assert log.read_bytes().endswith(b"\n")


def test_a_damaged_line_in_the_middle_of_an_llm_log_does_not_stop_the_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(scripted([], ANSWER)) as server:
        argv = ["run", "--env", ENV, "--policy", "llm", "--base-url", server.base_url,
                "--model", "fake", "--log", str(log), "--json", "--episodes"]
        assert main([*argv, "3"]) == 0
        data = log.read_bytes().splitlines(keepends=True)
        log.write_bytes(b"".join([*data[:2], b"\xc3\x28 bad byte\n", b"{}\n", *data[2:]]))
        capsys.readouterr()
        assert main([*argv, "5", "--resume"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["episodes"] == 5
    assert "Traceback" not in captured.err
    assert any("skipped 1 line that is not UTF-8, 1 line that is not a log entry" in r.message
               for r in caplog.records)
    assert len(set(episode_keys(log))) == 5


# -- identity --------------------------------------------------------------------------------
def test_identity_drops_the_transport_at_any_depth() -> None:
    run = {"env": ENV, "policy": {"llm": "m", "base_url": "http://a/v1", "timeout": 3,
                                  "temperature": 0.0}, "workers": 4, "env_kwargs": {"n_ops": 8}}
    assert identity(run) == {"env": ENV, "policy": {"llm": "m", "temperature": 0.0},
                             "env_kwargs": {"n_ops": 8}}
    assert differences(identity(run), {**identity(run), "env_kwargs": {"n_ops": 16}}) == [
        "env_kwargs.n_ops: 8 -> 16"]


def _llm_run(base_url: str, log: Path, episodes: int, workers: int, timeout: float,
             resume: bool) -> Any:
    from diagym.analysis.llm_runs import ChatSettings, llm_policy_factory, make_text_env

    settings = ChatSettings(base_url=base_url, model="fake", timeout=timeout)
    return rollout_parallel(lambda: make_text_env(ENV, error_allowance=2),
                            llm_policy_factory(settings), episodes, seed=3, workers=workers,
                            log=log, resume=resume)


def test_the_same_run_through_another_address_port_spelling_and_concurrency_resumes(
        tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(scripted([], ANSWER)) as server:
        first = _llm_run(f"http://127.0.0.1:{server.port}/v1", log, 4, 1, 30.0, False)
        calls = len(server.requests)
        second = _llm_run(f"http://localhost:{server.port}/v1", log, 6, 3, 5.0, True)
        decisions = sum(int(r.counters["decisions"]) for r in list(second)[4:])
        assert len(server.requests) == calls + decisions  # only episodes 4 and 5 were played
    assert list(second)[:4] == list(first)
    keys = episode_keys(log)
    assert len(keys) == len(set(keys)) == 6 and len({k.split(":")[0] for k in keys}) == 1
    described = [x for x in lines(log) if "run" in x]
    assert len(described) == 1 and "base_url" not in json.dumps(described[0]["run"])
    assert "127.0.0.1" not in log.read_text() and "localhost" not in log.read_text()


def test_the_cli_resumes_a_run_reached_through_localhost_instead_of_doubling_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(scripted([], ANSWER)) as server:
        common = ["run", "--env", ENV, "--policy", "llm", "--model", "fake", "--episodes", "5",
                  "--log", str(log), "--json"]
        assert main([*common, "--base-url", server.base_url]) == 0
        assert main([*common, "--base-url", f"http://localhost:{server.port}/v1",
                     "--concurrency", "2", "--resume"]) == 0
    capsys.readouterr()
    assert len(episode_keys(log)) == 5


def test_resume_with_other_settings_is_refused_with_the_differences(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", ENV, "--policy", "exact", "--log", str(log), "--episodes"]
    assert main([*argv, "3"]) == 0
    capsys.readouterr()
    changed = ["run", "--env", ENV, "--env-kwargs", '{"n_ops": 16}', "--policy", "cache-2",
               "--episodes", "3", "--log", str(log), "--resume"]
    assert main(changed) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"diagym run: error: log {log} holds the run with other settings "
        '(env_kwargs.n_ops: 8 -> 16; policy.controller: "exact" -> "cache-2"): resume '
        "with the same settings, or choose another file or a --run-name"]
    assert [x["type"] for x in lines(log)] == ["session", "episode", "episode", "episode"]
    # The same settings with more episodes extend the run; a new name starts another beside it.
    assert main([*argv, "5", "--resume"]) == 0
    assert main([*changed, "--run-name", "bigger"]) == 0
    assert len(episode_keys(log)) == 5 + 3
    with pytest.raises(RunChanged, match=r"the run named 'bigger' with other settings "
                                         r"\(env_kwargs.n_ops: 16 -> 8"):
        env = gym.make(ENV)
        rollout(env, ReferencePolicy.for_env("cache-2", env), 3, log=log, resume=True,
                run_name="bigger")


def test_a_named_run_repeats_the_same_settings_as_another_run(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    env = gym.make(ENV)
    policy = Stepwise(env)
    first = rollout(env, policy, 3, seed=0, log=log)
    again = rollout(env, policy, 3, seed=0, log=log, resume=True, run_name="repeat")
    assert again == first
    assert len(set(episode_keys(log))) == 6


# -- replays ---------------------------------------------------------------------------------
class Killed(Exception):
    """Stands for a kill -9 in the middle of an episode."""


class KillAt(gym.Wrapper):
    """Raises Killed at the `at`-th step (after the policy's call line is written)."""

    def __init__(self, env: gym.Env, at: int | None) -> None:
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == self.at:
            raise Killed
        return self.env.step(action)


def test_replayed_calls_are_voided_and_never_counted_twice(tmp_path: Path) -> None:
    from diagym.analysis.llm_runs import ChatSettings, llm_policy_factory, make_text_env

    log = tmp_path / "run.jsonl"
    whole = tmp_path / "whole.jsonl"
    with FakeServer(scripted([], ANSWER)) as server:
        make_policy = llm_policy_factory(ChatSettings(base_url=server.base_url, model="fake"))

        def play(path: Path, kill_at: int | None, resume: bool) -> Any:
            env = KillAt(make_text_env(ENV, error_allowance=3), kill_at)
            return rollout(env, make_policy(env), 4, seed=0, log=path, resume=resume)

        expected = play(whole, None, False)
        sent = len(server.requests)
        with pytest.raises(Killed):
            play(log, int(expected[0].calls) + 2, False)  # two decisions into episode 1
        records = play(log, None, True)
        # the two answered decisions are replayed from the log, not sent again
        assert len(server.requests) - sent == sent

    def outcome(record: EpisodeRecord) -> tuple[Any, ...]:
        counters = {k: v for k, v in record.counters.items()
                    if k not in ("latency_s", "cache_hits")}
        return record.episode, record.success, record.completed, record.first_failure, counters

    assert [outcome(r) for r in records] == [outcome(r) for r in expected]
    assert [r.counters["cache_hits"] for r in records] == [0, 2, 0, 0]
    calls = [x for x in lines(log) if x["type"] == "call"]
    decided = Counter((x["episode_key"], x["decision"]) for x in calls)
    assert sorted(decided.values())[-1] == 2  # the log still holds the replayed decisions
    assert [x["type"] for x in lines(log)].count("replay") == 1
    totals, reference = call_totals(log), call_totals(whole)
    assert totals.calls == reference.calls == sum(int(r.counters["decisions"]) for r in records)
    assert totals.replayed == 2 and reference.replayed == 0
    assert {k: v for k, v in totals.totals.items() if k != "latency_s"} == {
        k: v for k, v in reference.totals.items() if k != "latency_s"}
    assert totals.totals["cl100k_prompt_tokens"] == sum(
        r.counters["cl100k_prompt_tokens"] for r in records)
    assert totals.replayed_totals["cl100k_prompt_tokens"] > 0


# -- retry failed ----------------------------------------------------------------------------
def test_retry_failed_replays_exactly_the_provider_error_episodes(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    env = gym.make(ENV)
    failed = rollout(env, Stepwise(env, failing=frozenset({11, 13})), 6, seed=10, log=log)
    assert [r.first_failure == PROVIDER_ERROR for r in failed] == [
        False, True, False, True, False, False]
    before = log.read_text().splitlines()
    played: list[EpisodeRecord] = []
    kept = rollout(env, Stepwise(env), 6, seed=10, log=log, resume=True, on_record=played.append)
    assert not played and kept == failed  # a plain resume keeps the failures
    retried = rollout(env, Stepwise(env), 6, seed=10, log=log, retry_failed=True,
                      on_record=played.append)
    assert [r.episode for r in played] == [1, 3]
    assert retried == rollout(env, Stepwise(env), 6, seed=10)
    after = log.read_text().splitlines()
    assert after[:len(before)] == before  # append-only: the failed attempts stay, voided
    assert [x["type"] for x in map(json.loads, after[len(before):])] == [
        "session", "replay", "episode", "replay", "episode"]  # a resume that plays nothing
    # writes nothing, not even a session line
    with RunLog(log, resume=True) as again:
        again.open_run(json.loads(after[0])["run"])
        assert len(again.finished) == 6
        assert all(r.first_failure != PROVIDER_ERROR for r in again.finished.values())


def test_the_cli_flag_retry_failed_implies_resume_and_reaches_the_runner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", ENV, "--policy", "exact", "--episodes", "4", "--log", str(log),
            "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    entries = log.read_text().splitlines()
    outage = json.loads(entries[3])  # episode 2's line, after the session line
    outage["record"]["first_failure"] = PROVIDER_ERROR
    log.write_text("\n".join([*entries[:3], json.dumps(outage), *entries[4:]]) + "\n")
    assert main([*argv, "--retry-failed"]) == 0  # no --resume needed
    assert json.loads(capsys.readouterr().out) == first
    tail = lines(log)[5:]
    assert [(x["type"], x.get("episode_key")) for x in tail] == [
        ("session", None),
        ("replay", outage["episode_key"]), ("episode", outage["episode_key"])]


# -- the learning curve ----------------------------------------------------------------------
def test_a_torn_curve_row_does_not_block_train_resume(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from diagym.analysis.training import TrainConfig, read_curve, train

    config = {"algo": "maskable-ppo", "env": ENV, "n_envs": 2, "eval_episodes": 2,
              "eval_every": 128, "env_kwargs": {"n_ops": 4, "depth": 2, "width": 1,
                                                "candidates": 2, "snapshot_period": 1},
              "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 2}}
    train(TrainConfig(steps=256, **config), tmp_path)
    curve = tmp_path / "curve.csv"
    whole = curve.read_text()
    assert [int(r["steps"]) for r in read_curve(curve)] == [0, 128, 256]
    # A kill in the middle of appending a row (it would read as 384 steps, past the model's
    # 256), and a stray row in the middle.
    lines = whole.splitlines(keepends=True)
    curve.write_text("".join([*lines[:2], "128,0.5\n", *lines[2:]]) + "384,0.5,0.1,2")
    with caplog.at_level(logging.WARNING, logger="diagym.training"):
        train(TrainConfig(steps=384, **config), tmp_path, resume=True)
    warnings = [r.message for r in caplog.records]
    assert [int(r["steps"]) for r in read_curve(curve, report=False)] == [0, 128, 256, 384]
    assert warnings == [
        f"diagym: warning: curve {curve}: cut 1 torn last row; the run resumes from the others",
        f"diagym: warning: curve {curve}: skipped 1 row that is not whole; the run resumes "
        "from the others"]


def test_a_study_shares_one_open_log_between_named_runs_and_keeps_it_locked(
        tmp_path: Path) -> None:
    log = tmp_path / "study.jsonl"
    cells = [{"n_ops": 8}, {"n_ops": 16}]

    def study(resume: bool) -> list[Any]:
        with RunLog(log, resume=resume) as shared:
            out = []
            for cell in cells:
                env = gym.make(ENV, **cell)
                out.append(rollout(env, Stepwise(env), 3, log=shared, run_name=str(cell)))
                with pytest.raises(LogInUse):  # held between cells too
                    RunLog(log, resume=True)
            return out

    first = study(False)
    assert study(True) == first
    assert len(set(episode_keys(log))) == len(episode_keys(log)) == 6
    assert sorted(x["run_name"] for x in lines(log) if "run" in x) == sorted(map(str, cells))


# -- sessions --------------------------------------------------------------------------------
def test_each_session_writes_its_provenance_once_outside_the_identity(tmp_path: Path) -> None:
    from diagym.controllers.provenance import provenance

    log = tmp_path / "run.jsonl"
    env = gym.make(ENV)
    rollout(env, Stepwise(env), 2, seed=0, log=log)
    rollout(env, Stepwise(env), 2, seed=0, log=log, resume=True)  # nothing to play: no line
    with RunLog(log, resume=True) as again:
        again.open_run(lines(log)[0]["run"], session={"server": {"tools": True},
                                                     "base_url": "http://secret@host/v1"})
        again.write({"type": "note"})
    sessions = [x for x in lines(log) if x["type"] == "session"]
    assert len(sessions) == 2 and sessions[0]["run_id"] == sessions[1]["run_id"]
    assert all(x["provenance"] == provenance() for x in sessions)
    assert provenance()["git_commit"] is None or len(provenance()["git_commit"]) == 40
    assert "run" in sessions[0] and "run" not in sessions[1]  # the run is described once
    assert sessions[1]["server"] == {"tools": True} and "base_url" not in sessions[1]
    assert [x["type"] for x in lines(log)] == ["session", "episode", "episode", "session", "note"]
