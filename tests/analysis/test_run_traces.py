"""`diagym run --log` traces a user's policy by default, so `report` shows its decisions and
`diagnose --log` can read it (on its battery's configurations); the page never claims
decisions it does not hold. The trace holds, per executed action, its observation's digest
and its outcome, equal to what a fresh replay gives; trace lines written before them (actions
only) still load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gymnasium as gym
import pytest

from diagym.analysis.cli import main
from diagym.analysis.diagnose.run import logged_traces
from diagym.controllers.logreader import read_log
from diagym.controllers.tracing import digest
from diagym.envs._core.failures import failure_name
from diagym.envs.workflow.params import WorkflowParams

SPEC = "tests.user_policy:Greedy"


def _run(tmp_path: Path, *extra: str, spec: str = SPEC) -> Path:
    log = tmp_path / "run.jsonl"
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", spec, "--episodes", "3",
                 "--log", str(log), *extra]) == 0
    return log


def _page(log: Path, tmp_path: Path) -> str:
    out = tmp_path / "page.html"
    assert main(["report", str(log), "--out", str(out), "--force"]) == 0
    return out.read_text()


def _decided(log: Path, tmp_path: Path) -> int:
    found = re.search(r"([\d,]+) with their decisions", _page(log, tmp_path))
    assert found is not None
    return int(found.group(1).replace(",", ""))


def _lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _rewrite(log: Path, out: Path, change) -> Path:  # type: ignore[no-untyped-def]
    """`log` with `change` applied to each trace line, written to `out`."""
    lines = [change(x) if x["type"] == "trace" else x for x in _lines(log)]
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


def _replayed(run: dict, task_seed: int, actions: list[list[int]]) -> tuple[list, list]:
    """The digests and outcomes of `actions` replayed on a fresh env (the documented rule)."""
    env = gym.make(run["env"], **(run.get("env_kwargs") or {}))
    observation, _ = env.reset(seed=task_seed)
    digests, outcomes = [], []
    for action in actions:
        digests.append(digest(observation))
        observation, _, _, _, info = env.step(action[0] if len(action) == 1 else action)
        outcomes.append(failure_name(info["failure"]) or "ok")
    env.close()
    return digests, outcomes


def _check_against_replay(log: Path) -> None:
    lines = _lines(log)
    run = lines[0]["run"]
    # the task seed is the episode key's (a DACS record has no task_seed)
    seeds = {x["episode_key"]: int(x["episode_key"].rsplit(":", 1)[1])
             for x in lines if x["type"] == "episode"}
    traces = [x for x in lines if x["type"] == "trace"]
    assert traces and {t["episode_key"] for t in traces} == set(seeds)
    for trace in traces:
        digests, outcomes = _replayed(run, seeds[trace["episode_key"]], trace["actions"])
        assert trace["observations"] == digests and all(len(d) == 12 for d in digests)
        assert trace["outcomes"] == outcomes


def test_a_users_policy_is_traced_by_default(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = _run(tmp_path)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    traces = {x["episode_key"]: x["actions"] for x in lines if x["type"] == "trace"}
    episodes = {x["episode_key"]: x["record"] for x in lines if x["type"] == "episode"}
    assert set(traces) == set(episodes) and len(traces) == 3
    for key, record in episodes.items():  # one action per call the env executed
        assert len(traces[key]) == record["calls"]
        assert all(len(action) == 2 for action in traces[key])
    assert _decided(log, tmp_path) == 3


def test_no_trace_leaves_them_out_and_the_page_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _run(tmp_path, "--no-trace")
    assert not any(json.loads(line)["type"] == "trace" for line in log.read_text().splitlines())
    assert _decided(log, tmp_path) == 0


def test_the_trace_holds_digests_and_outcomes_a_replay_gives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # slot 0 always: failed calls, two within an episode, the third ending it
    log = _run(tmp_path, "--env-kwargs", '{"error_allowance": 2}',
               spec="tests.user_policy:FirstReady")
    _check_against_replay(log)
    traces = [x for x in _lines(log) if x["type"] == "trace"]
    assert {"ok", "candidate"} <= {o for t in traces for o in t["outcomes"]}
    assert any(t["outcomes"][-1] != "ok" for t in traces)  # the last action's, a failure
    page = _page(log, tmp_path)
    assert page.count("outcomes as traced, and the replay gives the same") == 3
    assert "disagree" not in page


def test_a_trace_the_replay_contradicts_is_said_to(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def flip(trace: dict) -> dict:
        first = trace["outcomes"][0]
        return {**trace, "outcomes": ["dependency" if first == "ok" else "ok",
                                      *trace["outcomes"][1:]]}

    log = _rewrite(_run(tmp_path), tmp_path / "flipped.jsonl", flip)
    page = _page(log, tmp_path)
    assert page.count("the traced outcomes disagree with the replay: decision 0 traced") == 3


def test_old_trace_lines_without_digests_or_outcomes_still_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _run(tmp_path)
    old = _rewrite(log, tmp_path / "old.jsonl",
                   lambda t: {k: v for k, v in t.items() if k not in ("observations", "outcomes")})
    (new_run,), (old_run,) = read_log(log).values(), read_log(old).values()
    assert old_run.actions == new_run.actions and len(new_run.outcomes) == 3
    assert old_run.outcomes == {} and old_run.observations == {}
    spec = WorkflowParams.from_kwargs(**new_run.run["env_kwargs"])
    assert logged_traces(spec, old_run) == logged_traces(spec, new_run)
    assert _decided(old, tmp_path) == 3
    assert "outcomes as traced" not in _page(old, tmp_path)


def test_a_dacs_run_traces_its_answers_and_their_outcomes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "dacs.jsonl"
    assert main(["run", "--env", "DACSSteering-v0", "--policy", "tests.user_policy:FirstOption",
                 "--episodes", "2", "--log", str(log)]) == 0
    _check_against_replay(log)
    for line in _lines(log):
        if line["type"] == "trace":
            record = next(x["record"] for x in _lines(log) if x["type"] == "episode"
                          and x["episode_key"] == line["episode_key"])
            assert (line["outcomes"].count("ok") / len(line["outcomes"])
                    == record["metrics"]["accuracy"])
    page = _page(log, tmp_path)
    assert page.count("decisions as traced, not replayed") == 2
    assert "no decisions recorded" not in page
