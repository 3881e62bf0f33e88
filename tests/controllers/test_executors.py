"""The executor contract on the local executor, and the executor flags' one-line errors.

The Ray executor is held to the same contract, and against this one, in
tests/analysis/test_ray_executor.py (one Ray instance for that module).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.cli import main
from diagym.controllers.executors import LocalExecutor, make_executor, worker_state
from diagym.controllers.registry import make_reference_policy
from diagym.controllers.rollout import rollout_parallel


def test_results_come_back_in_unit_order_and_each_once_to_the_callers_thread() -> None:
    caller = threading.get_ident()
    seen: list[tuple[int, int, int]] = []

    def slow_square(x: int) -> int:
        time.sleep(0.002 * (7 - x))  # later units finish first
        return x * x

    def handed(unit: int, result: int) -> None:
        seen.append((unit, result, threading.get_ident()))

    results = LocalExecutor(3).map(slow_square, range(8), on_result=handed)
    assert results == [x * x for x in range(8)]
    assert sorted((u, r) for u, r, _ in seen) == [(x, x * x) for x in range(8)]
    assert {thread for _, _, thread in seen} == {caller}


def test_the_first_failure_starts_nothing_new_and_lets_units_in_flight_finish() -> None:
    started: list[int] = []
    handed: list[int] = []
    lock = threading.Lock()

    def unit(x: int) -> int:
        with lock:
            started.append(x)
        if x == 0:
            raise ValueError("unit 0 failed")
        time.sleep(0.05)
        return x

    with pytest.raises(ValueError, match="^unit 0 failed$"):
        LocalExecutor(2).map(unit, range(20), on_result=lambda u, _r: handed.append(u))
    # unit 1 was in flight with unit 0: it finished and was handed back; nothing after it
    # started once the failure was seen (at most one more slot was filled before it was)
    assert handed == [1] and sorted(started) == [0, 1]


def test_one_worker_plays_in_the_callers_thread_in_order() -> None:
    caller = threading.get_ident()
    threads: list[int] = []
    LocalExecutor(1).map(lambda x: threads.append(threading.get_ident()), range(3))
    assert threads == [caller] * 3


def test_worker_state_is_built_once_per_token_and_thread() -> None:
    built: list[str] = []

    def build(token: str) -> object:
        built.append(token)
        return object()

    first = worker_state("a", lambda: build("a"))
    assert worker_state("a", lambda: build("a")) is first
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(worker_state("a", lambda: build("a"))))
    thread.start()
    thread.join()
    assert other[0] is not first and built == ["a", "a"]


def test_rollout_on_a_local_executor_is_rollout_on_threads(tmp_path: Path) -> None:
    """The executor replaced the runner's own thread pool: the same records either way."""
    def make_env() -> gym.Env:
        return gym.make("DACSSteering-v0")

    def make_policy(env: gym.Env) -> object:
        return make_reference_policy("dacs-reader", env)

    threads = rollout_parallel(make_env, make_policy, 6, seed=3, workers=3)
    executor = rollout_parallel(make_env, make_policy, 6, seed=3, executor=LocalExecutor(2))
    assert list(threads) == list(executor)


def test_make_executor_names_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"^executor must be one of local \| ray; got 'dask'$"):
        make_executor("dask")
    with pytest.raises(ValueError, match="^address is only for the ray executor$"):
        make_executor("local", address="auto")
    with pytest.raises(ValueError, match="^workers must be an integer >= 1; got 0$"):
        make_executor("local", workers=0)


RUN = ["run", "--env", "StatefulWorkflow-v0", "--policy", "exact", "--episodes", "3"]


@pytest.mark.parametrize("command", [
    RUN, ["reproduce", "--grid", "work"], ["llm-study", "--design", "fractional",
                                            "--policy", "text-oracle"],
    ["dacs-study", "--episodes", "1"]])
def test_ray_address_without_the_ray_executor_is_one_line(
        command: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = ["--out", str(tmp_path)] if command[0] in ("reproduce", "dacs-study") else []
    assert main([*command, *out, "--ray-address", "auto"]) == 2
    name = command[0]
    assert capsys.readouterr().err == (
        f"diagym {name}: error: --ray-address joins a Ray cluster: it needs --executor ray\n")


def test_the_ray_executor_without_ray_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else find_spec(name, *a))
    assert main([*RUN, "--executor", "ray"]) == 2
    assert capsys.readouterr().err == (
        "diagym run: error: --executor ray needs Ray, which is not installed: "
        "pip install 'diagym[ray]'\n")


def test_an_unknown_executor_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*RUN, "--executor", "dask"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "diagym run: error: argument --executor: invalid choice: 'dask' (choose from "
        "'local', 'ray') (see diagym run --help)\n")


def test_a_ray_address_nobody_answers_at_is_one_line_in_seconds(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ray's own connection attempt retries for minutes; the address is tried first."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert main([*RUN, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"]) == 2
    assert capsys.readouterr().err == (
        f"diagym run: error: --ray-address 127.0.0.1:{port}: no Ray cluster answers there "
        "(Connection refused); start one with `ray start --head`, or check the address\n")
    assert main([*RUN, "--executor", "ray", "--ray-address", "head-node"]) == 2
    assert capsys.readouterr().err == (
        "diagym run: error: --ray-address must be auto or HOST:PORT; got 'head-node'\n")
