"""`--executor ray` against `--executor local`: the same records and tables, a killed worker
or driver losing and doubling nothing, one shared rate limit and cost meter for every worker.

One local Ray instance serves the module (2 CPUs, loopback, no dashboard, a small object
store), shut down after it; the runs are small, so the module's time is mostly Ray's start
and its worker processes' imports.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import ray

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.cli import main
from diagym.controllers.executors.ray_executor import RayExecutor
from diagym.controllers.registry import make_reference_policy
from diagym.controllers.rollout import rollout_parallel
from diagym.controllers.tracing import Traced
from diagym.llm_policies.client.limits import AdaptiveLimit
from diagym.llm_policies.client.prices import CostLimitReached, CostMeter
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.oracle import WorkflowOracle
from tests.llm_fake_server import FakeServer, Reply

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", autouse=True)
def ray_instance() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=96 * 1024 * 1024, logging_level="warning",
             log_to_driver=False)
    yield
    ray.shutdown()


def _without(value: Any, drop: tuple[str, ...]) -> Any:
    """`value` without the keys in `drop` at any depth (the measured latencies, which differ
    between any two runs, on any executor)."""
    if isinstance(value, dict):
        return {k: _without(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_without(v, drop) for v in value]
    return value


def _lines(log: Path, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The log's lines without its session lines (when each session started, and with what
    code) and without the fields in `drop`, in a canonical order: the two executors write
    the same lines in different orders."""
    lines = [_without(json.loads(text), drop) for text in log.read_text().splitlines()]
    return sorted((line for line in lines if line["type"] != "session"),
                  key=lambda e: json.dumps(e, sort_keys=True))


# --- the contract, on Ray ---------------------------------------------------------------

def _square(x: int) -> int:
    time.sleep(0.01 * (5 - x % 5))
    return x * x


def _fail_on_zero(failed: Path, x: int) -> int:
    """Unit 0 fails; every other unit ends only after it has (and 0.5 s more), so the units
    handed back are those in flight beside unit 0, whatever order a loaded machine starts
    the workers in."""
    if x == 0:
        failed.touch()
        raise ValueError("unit 0 failed")
    deadline = time.monotonic() + 60
    while not failed.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    return x


def _niceness(_unit: int) -> int:
    import os

    return os.nice(0)


def test_ray_workers_run_at_the_drivers_priority() -> None:
    """Ray's default worker niceness (15) starves its workers beside other CPU jobs; the
    suite sets RAY_worker_niceness=0 (tests/conftest.py, docs/SCALING.md)."""
    import os

    assert RayExecutor(workers=2).map(_niceness, range(2)) == [os.nice(0)] * 2


def test_ray_map_keeps_unit_order_and_hands_each_result_once() -> None:
    seen: list[tuple[int, int]] = []
    executor = RayExecutor(workers=2)
    assert executor.map(_square, range(10), on_result=lambda u, r: seen.append((u, r))) == [
        x * x for x in range(10)]
    assert sorted(seen) == [(x, x * x) for x in range(10)]


def test_ray_map_raises_the_units_own_error_and_starts_nothing_after_it(
        tmp_path: Path) -> None:
    handed: list[int] = []
    with pytest.raises(ValueError, match="^unit 0 failed$"):
        RayExecutor(workers=2).map(functools.partial(_fail_on_zero, tmp_path / "failed"),
                                   range(12),
                                   on_result=lambda u, _r: handed.append(u))
    assert handed in ([], [1])  # unit 1 was in flight beside unit 0; nothing else started


def _fail_at_150(x: int) -> int:
    if x == 150:
        raise ValueError("unit 150 failed")
    return -x


def test_ray_map_batches_short_units_and_still_hands_each_back_once() -> None:
    """Units far shorter than a task's round trip travel in batches; the results are still
    one per unit, in unit order; a unit failing inside a batch ends it, and is never handed."""
    seen: list[int] = []
    executor = RayExecutor(workers=2)
    assert executor.map(_noop_minus, range(400), on_result=lambda u, r: seen.append(u)) == [
        -x for x in range(400)]
    assert sorted(seen) == list(range(400))
    handed: dict[int, int] = {}
    with pytest.raises(ValueError, match="^unit 150 failed$"):
        executor.map(_fail_at_150, range(400), on_result=handed.__setitem__)
    assert 150 not in handed and all(r == -u for u, r in handed.items())


def _noop_minus(x: int) -> int:
    return -x


def _nap(x: int) -> int:
    time.sleep(0.2)
    return x


@pytest.mark.parametrize("own_instance", [False, True])
def test_an_interrupted_map_cancels_its_tasks_only_on_a_cluster_it_joined(
        monkeypatch: pytest.MonkeyPatch, own_instance: bool) -> None:
    """Tasks on a cluster someone else started would run on after the driver, so they are
    cancelled; on the executor's own local instance its shutdown stops them, and a cancel
    racing a task's reply aborted the driver (Ray 2.60, about 1 SIGTERM in 4)."""
    cancelled: list[Any] = []
    monkeypatch.setattr(ray, "cancel", lambda ref, force=False: cancelled.append(force))
    executor = RayExecutor(workers=2)
    executor._started = own_instance  # the module's instance stands in for one it started

    def interrupt(_unit: int, _result: int) -> None:
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            executor.map(_nap, range(8), on_result=interrupt)
    finally:
        executor._started = False  # the module's instance outlives this test
    assert cancelled == ([] if own_instance else [True] * len(cancelled))
    assert own_instance or cancelled  # the other unit was still in flight


# --- the commands through both executors ------------------------------------------------

def test_run_through_both_executors_gives_the_same_records_and_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The batched path split into chunks on Ray: the same summary and the same log lines."""
    outputs = {}
    for executor in ("local", "ray"):
        log = tmp_path / f"{executor}.jsonl"
        assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "indexed",
                     "--episodes", "300", "--seed", "7", "--log", str(log), "--json",
                     "--executor", executor]) == 0
        summary = json.loads(capsys.readouterr().out)
        summary.pop("provenance")
        outputs[executor] = (summary, _lines(log))
    assert outputs["local"] == outputs["ray"]
    assert Counter(line["type"] for line in outputs["ray"][1]) == {"episode": 300}


def _decider(request: dict[str, Any]) -> Reply:
    """The text oracle as the server's model: its answer is a function of the prompt, so
    episodes run their whole length and equal records mean the same prompts were sent."""
    return Reply(content=WorkflowOracle()(request["messages"]))


def test_llm_study_through_both_executors_gives_the_same_records_and_tables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latency = ("latency_s", "median_decision_latency_s", "mean_decision_latency_s")
    outputs = {}
    with FakeServer(_decider) as server:
        for executor in ("local", "ray"):
            log = tmp_path / f"{executor}.jsonl"
            out = tmp_path / executor
            assert main(["llm-study", "--design", "fractional", "--seeds", "2",
                         "--base-url", server.base_url, "--model", "fake",
                         "--response-format", "none", "--concurrency", "2",
                         "--log", str(log), "--out", str(out), "--json",
                         "--executor", executor]) == 0
            summary = _without(json.loads(capsys.readouterr().out), ("provenance", *latency))
            outputs[executor] = (summary, _lines(log, drop=latency))
    assert outputs["local"] == outputs["ray"]
    kinds = Counter(line["type"] for line in outputs["ray"][1])
    assert kinds["episode"] == 16 and kinds["call"] == outputs["ray"][0]["decisions"] > 16


def test_reproduce_work_through_both_executors_writes_the_same_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for executor in ("local", "ray"):
        assert main(["reproduce", "--grid", "work", "--out", str(tmp_path / executor),
                     "--executor", executor]) == 0
    capsys.readouterr()
    local = (tmp_path / "local" / "results.csv").read_bytes()
    assert local == (tmp_path / "ray" / "results.csv").read_bytes()
    assert local.count(b"\n") == 192 + 1


# --- a killed worker, a killed driver ----------------------------------------------------

KILL_SEED = 5  # the episode whose first attempt kills its worker process mid-episode


class KillsItsWorkerOnce:
    """A reference controller that, in episode KILL_SEED, SIGKILLs its own process at its
    third decision the first time (a marker file says it has): a worker dying mid-unit, at a
    known point, after its policy has logged nothing yet but started the episode."""

    def __init__(self, env: gym.Env, marker: Path | None) -> None:
        self.policy = make_reference_policy("exact", env)
        self.marker = marker
        self.seed: int | None = None
        self.decisions = 0

    def reset(self, *, seed: int | None = None) -> None:
        self.policy.reset(seed=seed)
        self.seed, self.decisions = seed, 0

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        self.decisions += 1
        if (self.marker is not None and self.seed == KILL_SEED and self.decisions == 3
                and not self.marker.exists()):
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.policy.act(observation, info)

    def describe(self) -> str:
        return "exact"


def _make_env() -> gym.Env:
    return gym.make("StatefulWorkflow-v0")


def _traced(env: gym.Env, marker: Path | None = None) -> Traced:
    return Traced(KillsItsWorkerOnce(env, marker))


def _keys(log: Path, kind: str) -> Counter[str]:
    return Counter(line["episode_key"] for line in _lines(log) if line["type"] == kind)


def test_a_worker_killed_mid_episode_loses_and_doubles_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    local_log, ray_log = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    local = rollout_parallel(_make_env, _traced, 10, log=local_log, workers=2)
    remote = rollout_parallel(_make_env, functools.partial(_traced, marker=marker), 10,
                              log=ray_log, executor=RayExecutor(workers=2))
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker did die
    assert list(remote) == list(local)
    assert _lines(ray_log) == _lines(local_log)
    assert set(_keys(ray_log, "episode").values()) == {1} == set(_keys(ray_log, "trace").values())
    assert len(_keys(ray_log, "episode")) == 10


class Interrupted(Exception):
    pass


def test_a_driver_killed_mid_run_resumes_from_its_log_as_locally(tmp_path: Path) -> None:
    log, local_log = tmp_path / "ray.jsonl", tmp_path / "local.jsonl"
    arrived: list[int] = []

    def interrupt_after_three(record: Any) -> None:
        arrived.append(record.episode)
        if len(arrived) == 3:
            raise Interrupted

    with pytest.raises(Interrupted):
        rollout_parallel(_make_env, _traced, 12, log=log, on_record=interrupt_after_three,
                         executor=RayExecutor(workers=2))
    assert len(_keys(log, "episode")) == 3
    resumed = rollout_parallel(_make_env, _traced, 12, log=log, resume=True,
                               executor=RayExecutor(workers=2))
    local = rollout_parallel(_make_env, _traced, 12, log=local_log)
    assert list(resumed) == list(local)
    assert _lines(log) == _lines(local_log)


# --- one limit and one meter for every worker --------------------------------------------

class InFlight:
    """A responder that counts the requests it is answering at once (each takes `delay`).
    With `hold_until` it holds every request until that many have been in flight at once
    (or `hold_seconds` pass), so a loaded machine's late-starting workers still meet."""

    def __init__(self, delay: float, first_status: int = 200, hold_until: int = 0,
                 hold_seconds: float = 10.0) -> None:
        self.delay = delay
        self.now = self.most = self.served = 0
        self.first_status = first_status
        self.hold_until, self.hold_seconds = hold_until, hold_seconds
        self.lock = threading.Condition()

    def __call__(self, _request: dict[str, Any]) -> Reply:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.served += 1
            first = self.served == 1
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.most >= self.hold_until, timeout=self.hold_seconds)
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        if first and self.first_status == 429:
            return Reply(status=429, headers={"Retry-After": "0"})
        return Reply(content="OK")


def _ask(base_url: str, limiter: Any, _unit: int) -> str:
    with ChatClient(base_url=base_url, model="fake", response_format="none",
                    limiter=limiter, max_retries=2) as client:
        return client.complete([{"role": "user", "content": "hi"}]).status


@pytest.mark.parametrize("shared", [True, False])
def test_the_shared_limit_holds_the_servers_load_with_four_workers(shared: bool) -> None:
    """Four workers, a limit of two calls in flight: the server never sees more than two at
    once with the shared limit, and sees more without one (the control: the test can fail)."""
    # held until the limit is reached (shared) or passed (not shared): the workers meet
    # however late the machine's load starts them (Ray starts the third and fourth worker
    # processes only when they are asked for, which took over 10 s at load 7)
    responder = InFlight(delay=0.05, hold_until=2 if shared else 3, hold_seconds=60)
    executor = RayExecutor(workers=4)
    limiter = executor.share(functools.partial(AdaptiveLimit, 2)) if shared else None
    with FakeServer(responder) as server:
        assert executor.map(functools.partial(_ask, server.base_url, limiter),
                            range(16)) == ["ok"] * 16
    if shared:
        assert responder.most == 2
        assert limiter.snapshot()["ok"] == 16
    else:
        assert responder.most > 2


def test_a_429_seen_by_one_worker_narrows_the_window_of_all() -> None:
    responder = InFlight(delay=0.05, first_status=429)
    executor = RayExecutor(workers=4)
    limiter = executor.share(functools.partial(AdaptiveLimit, 4))
    with FakeServer(responder) as server:
        assert executor.map(functools.partial(_ask, server.base_url, limiter),
                            range(8)) == ["ok"] * 8
    snapshot = limiter.snapshot()
    assert snapshot["throttled"] == 1 and snapshot["ok"] == 8 and snapshot["in_flight"] == 0


def _spend(meter: Any, _unit: int) -> None:
    meter.settle(meter.reserve(1.0), 1.0)


def test_the_shared_cost_meter_stops_every_worker_at_the_one_limit() -> None:
    executor = RayExecutor(workers=2)
    meter = executor.share(functools.partial(CostMeter, 2.5))
    with pytest.raises(CostLimitReached,
                       match=r"^cost limit reached: \$2\.0000 spent of the \$2\.5000 limit;"):
        executor.map(functools.partial(_spend, meter), range(8))
    assert meter.spent_usd == 2.0


def test_run_on_ray_stops_at_the_one_cost_limit_and_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`diagym run --policy llm --executor ray`: the workers' calls are priced against one
    meter, so three workers together stop within the limit, and a resume finishes the run
    with each episode once and the score of an unlimited local run."""
    from tests.analysis.test_harness_cli import ENV, PRICES, oracle_server

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    with FakeServer(oracle_server(), models=["fake"]) as server:
        def run(log: Path, *more: str) -> list[str]:
            return ["run", "--env", ENV, "--policy", "llm", "--base-url", server.base_url,
                    "--model", "fake", "--episodes", "6", "--json", "--prices", str(prices),
                    "--log", str(log), "--concurrency", "3", *more]

        whole_log, log = tmp_path / "whole.jsonl", tmp_path / "ray.jsonl"
        assert main(run(whole_log)) == 0
        whole = json.loads(capsys.readouterr().out)
        limit = whole["model_calls"]["cost_usd"] / 3
        assert main(run(log, "--executor", "ray", "--cost-limit", str(limit))) == 3
        capsys.readouterr()
        calls = [line for line in _lines(log) if line["type"] == "call"]
        assert 0 < sum(c["cost_usd"] for c in calls) <= limit
        assert 0 < len(_keys(log, "episode")) < 6
        assert main(run(log, "--executor", "ray", "--resume")) == 0
        resumed = json.loads(capsys.readouterr().out)
    assert resumed["success"] == whole["success"] and resumed["episodes"] == 6
    assert set(_keys(log, "episode").values()) == {1} and len(_keys(log, "episode")) == 6


def test_a_policy_loaded_from_a_file_plays_on_ray_as_locally(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A `path/to/file.py:Name` policy is imported under a name no worker can import: its
    module travels by value, and the run is the local one."""
    policy = f"{Path(__file__).resolve().parents[1] / 'user_policy.py'}:Greedy"
    summaries = []
    for executor in ("local", "ray"):
        assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", policy,
                     "--episodes", "20", "--json", "--executor", executor]) == 0
        summary = json.loads(capsys.readouterr().out)
        summary.pop("provenance")
        summaries.append(summary)
    assert summaries[0] == summaries[1] and summaries[0]["episodes"] == 20


class Unpicklable:
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, env: gym.Env) -> Any:
        return make_reference_policy("exact", env)


def test_factories_that_cannot_be_pickled_are_one_error_line() -> None:
    with pytest.raises(TypeError, match=r"^the ray executor sends the run's env and policy "
                                        r"factories to its workers, and they cannot be "
                                        r"pickled: [^\n]*$"):
        rollout_parallel(_make_env, Unpicklable(), 4, fast=False,
                         executor=RayExecutor(workers=2))


def _diagnosis(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diagnose", *argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    result.pop("provenance", None)
    return result


@pytest.mark.parametrize("argv", [
    ("--policy", "cache-2", "--budget", "40"),
    ("--policy", "scan-2", "--adaptive", "--budget", "48"),
    ("--env", "DACSSteering-v0", "--policy", "flat-recency", "--budget", "8"),
])
def test_diagnose_is_the_same_on_both_executors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    """Out of process the traces come back through the log (a temporary one without --log):
    the diagnosis, its rounds and its log's lines equal the local ones."""
    local = _diagnosis(capsys, *argv, "--log", str(tmp_path / "local.jsonl"))
    assert _diagnosis(capsys, *argv, "--executor", "ray",
                      "--log", str(tmp_path / "ray.jsonl")) == local
    assert _diagnosis(capsys, *argv, "--executor", "ray") == local
    drop = ("session", "latency_s", "started")
    assert _lines(tmp_path / "ray.jsonl", drop) == _lines(tmp_path / "local.jsonl", drop)


def test_rl_study_trains_its_arms_as_ray_tasks(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Each arm's training run is one task: the same rows as locally (seeds come from the
    task's config), and the run directories a local resume then finds finished."""
    argv = ["rl-study", "--arch", "entity", "--steps", "256", "--episodes", "4", "--json"]
    assert main([*argv, "--out", str(tmp_path / "local")]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main([*argv, "--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert remote == local
    assert main([*argv, "--out", str(tmp_path / "ray")]) == 0  # resumed: nothing to train
    assert json.loads(capsys.readouterr().out) == local


def test_dacs_live_through_both_executors_gives_the_same_trials(tmp_path: Path) -> None:
    from tests.analysis.test_dacs_live import respond

    logs = {}
    with FakeServer(respond) as server:
        flags = [f"--{role}-{what}={value}" for role in ("agent", "orchestrator", "judge")
                 for what, value in (("base-url", server.base_url), ("model", "m"))]
        for executor in ("local", "ray"):
            logs[executor] = tmp_path / f"{executor}.jsonl"
            assert main(["dacs-live", *flags, "--trials", "2", "--max-steers", "2",
                         "--executor", executor, "--concurrency", "2",
                         "--log", str(logs[executor]), "--out", str(tmp_path / executor)]) == 0
    lines = {name: sorted((_without(json.loads(text), ("latency_s",))
                           for text in log.read_text().splitlines()
                           if json.loads(text)["type"] != "session"),  # when, and which code
                          key=lambda e: json.dumps(e, sort_keys=True))
             for name, log in logs.items()}
    assert lines["ray"] == lines["local"]
    assert sum(line["type"] == "trial" for line in lines["ray"]) == 4
    assert (tmp_path / "ray" / "phase4.csv").read_text() == (
        tmp_path / "local" / "phase4.csv").read_text()


def test_run_on_ray_shows_progress_and_counts_resumed_episodes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The one progress bar of `run`, whichever executor plays: a user's policy on Ray counts
    0/6 .. 6/6, and a resumed run counts the episodes already in its log as done."""
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "tests.user_policy:Greedy",
            "--executor", "ray", "--log", str(log), "--episodes"]
    assert main([*argv, "6"]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("diagym run: ")]
    assert lines[0].startswith("diagym run: 0/6 episode (0%)"), lines
    assert lines[-1].startswith("diagym run: 6/6 episode (100%)"), lines
    assert main([*argv, "10", "--resume"]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("diagym run: ")]
    assert f"diagym run: resuming: 6 of 10 episodes are in {log} already; 4 to play" in lines
    assert lines[-1].startswith("diagym run: 10/10 episode (100%)"), lines
