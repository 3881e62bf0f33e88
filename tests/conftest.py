"""Shared test helpers."""

from __future__ import annotations

import functools
import os
from typing import Any

import pytest

from diagym.controllers.workflow.adapter import ReferencePolicy


def play_oracle(env: Any, seed: int) -> tuple[dict[str, Any], float, list[tuple[int, int]]]:
    """One episode of the `exact` reference controller; returns the final info, the return
    and the actions."""
    player = ReferencePolicy.for_env("exact", env)
    player.reset(seed=seed)
    observation, info = env.reset(seed=seed)
    total, actions, terminated = 0.0, [], False
    while not terminated:
        action = player.act(observation, info)
        actions.append((int(action[0]), int(action[1])))
        observation, reward, terminated, truncated, info = env.step(action)
        assert not truncated
        total += reward
    return info, total, actions


TIME_SCALE_ENV = "DIAGYM_TEST_TIME_SCALE"


def time_scale() -> float:
    """How much longer than on a quiet machine a test may take before it counts as hung:
    DIAGYM_TEST_TIME_SCALE when set, else 1 + the load per core at the session's start (a
    2-core machine at load 12 allows 7x). Time limits bound hangs, never speed."""
    import os

    text = os.environ.get(TIME_SCALE_ENV, "").strip()
    if text:
        value = float(text)
        if not value > 0:
            raise ValueError(f"{TIME_SCALE_ENV} must be a number > 0; got {text!r}")
        return value
    return _load_scale()


@functools.cache
def _load_scale() -> float:
    """1 + the load per core, once per session (the limits set at collection stay put)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return 1.0 + os.getloadavg()[0] / cores


def scaled(seconds: float) -> float:
    """A test's wait of `seconds` on a quiet machine, scaled to this one (time_scale)."""
    return seconds * time_scale()


# Ray starts its workers at nice 15 (the raylet's worker_niceness) so they yield to the
# driver; beside other CPU jobs at nice 0 they then get a few percent of a core, and a Ray
# test that takes 2 minutes took 27 beside two busy processes. The suite runs them at the
# driver's priority (every Ray instance a test starts, in-process or in a subprocess, reads
# this variable); docs/SCALING.md says the same to users.
os.environ.setdefault("RAY_worker_niceness", "0")

# The models the suite trains are recorded in a store of the suite's own (controllers/sb3/
# trust.py), not in the user's ~/.local/share; subprocesses inherit it.
os.environ.setdefault("DIAGYM_TRUSTED_MODELS", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"diagym-test-trusted-models-{os.getuid()}"))

# Test files that start a whole Ray instance or a llama.cpp server: under pytest-xdist
# (`make test` runs `-n auto --dist loadgroup`) each kind shares one worker, so two Ray
# instances or two model servers never compete for the same cores and memory at once.
SHARED_WORKER_GROUPS = {
    "ray": ("test_ray_executor.py", "test_ray_shared_actor.py", "test_executors.py",
            "test_dacs_live_cli.py"),
    "llama": ("test_local_server.py", "test_local_model.py", "test_dacs_live_local.py",
              "test_local_harnesses.py"),
}


def worker_group(nodeid: str) -> str:
    """The xdist group of a test: its file's shared-worker group, else the file itself (so a
    file's module-scoped fixtures are built once, on one worker)."""
    path = nodeid.split("::", 1)[0]
    name = path.rsplit("/", 1)[-1]
    for group, files in SHARED_WORKER_GROUPS.items():
        if name in files:
            return group
    return path


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # pytest without xdist: unused
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """Under `--dist loadgroup`, tests are scheduled by worker_group. Why a scheduler and not
    xdist_group markers: xdist 3.8 reads the markers into `item._nodeid`, which pytest 9.2's
    nodes no longer read, so the markers group nothing (every test went to either worker)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedWorkerScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return SharedWorkerScheduling(config, log)


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    scale_time_limits(config, items)


def scale_time_limits(config: Any, items: list[Any]) -> None:
    """Every test's time limit (its @pytest.mark.timeout(seconds), else pyproject's
    `timeout`) scaled to this machine (time_scale)."""
    scale = time_scale()
    try:
        default = float(config.getini("timeout") or 0)
    except (ValueError, KeyError):
        default = 0.0
    for item in items:
        marker = item.get_closest_marker("timeout")
        seconds = float(marker.args[0]) if marker is not None and marker.args else default
        if seconds > 0:
            item.add_marker(pytest.mark.timeout(seconds * scale), append=False)
