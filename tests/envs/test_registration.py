"""What registration promises beyond the conformance suite: every params field is a
`gym.make` kwarg, ids resolve with the module prefix, the renders show the task (and record as
video), and the first `gym.make` on a cold numba cache says that it compiles.

The per-id Gymnasium contract (checker, seeding, make_vec, copies, render modes) is
tests/envs/test_conformance.py, which runs over every registered id.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest

from diagym import envs
from diagym.envs._core import numba_setup
from diagym.envs.dacs.params import DacsParams

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOW_IDS = sorted(envs.FAMILIES[envs.WORKFLOW].presets)


def test_every_family_registers_its_presets() -> None:
    for family in envs.FAMILIES.values():
        assert family.presets, f"family {family.name} registers no id"
        for env_id in family.presets:
            assert env_id in gym.registry
            assert envs.family_of(env_id) == family.name


@pytest.mark.parametrize("env_id", WORKFLOW_IDS)
def test_every_workflow_parameter_is_a_make_kwarg(env_id: str) -> None:
    env = gym.make(env_id, family="barriers", n_ops=6, depth=3, width=2, candidates=3,
                   snapshot_period=2, error_allowance=1, locality="clustered", updates="static",
                   labels="reversed")
    spec = env.unwrapped.params
    assert (spec.family, spec.n_ops, spec.depth, spec.width, spec.candidates) == (
        "barriers", 6, 3, 2, 3)
    assert env.unwrapped.params is spec
    assert env.action_space == gym.spaces.MultiDiscrete([6, 3])


def test_every_dacs_parameter_is_a_make_kwarg() -> None:
    kwargs = {"n_agents": 7, "family": "cascade", "decisions": 2, "context_mode": "flat",
              "window": 2048, "order": "requester_first", "agent_chosen_focus": True,
              "focus_cost": 0.25, "scoring": "choice", "observation_mode": "numeric"}
    assert set(kwargs) == set(DacsParams().as_dict())
    env = gym.make("DACSSteering-v0", **kwargs)
    assert env.unwrapped.params == DacsParams(**kwargs)
    assert all(getattr(env.unwrapped, name) == value for name, value in kwargs.items())
    assert env.action_space == gym.spaces.Discrete(4 + 7)


def test_make_with_module_prefix_needs_no_import() -> None:
    code = (
        "import gymnasium as gym; env = gym.make('diagym:StatefulWorkflow-v0'); "
        "obs, info = env.reset(seed=0); print(obs['codes'].shape, env.unwrapped.task.codes.shape)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "(32,) (8, 4)"


def test_ansi_render_shows_rules_task_and_observation() -> None:
    env = gym.make("StatefulWorkflow-v0", render_mode="ansi")
    env.reset(seed=3)
    text = env.render()
    task = env.unwrapped.task
    assert "execute(v, a)" in text
    for v in range(8):
        codes = " ".join(str(int(c)) for c in task.codes[v])
        assert f"op {v}: " in text and f"codes [{codes}]" in text
    assert "registers: x[0]=" in text


COMPILE_SCRIPT = "import gymnasium as gym; gym.make('diagym:StatefulWorkflow-v0').reset(seed=0)"
COLD_LINE = "diagym: compiling StatefulWorkflow kernels (first use; cached afterwards) ..."


def _make_in_subprocess(cache_dir: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    return subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], capture_output=True, text=True,
                          check=True, env=environment, cwd=PROJECT)


def test_the_first_make_says_it_compiles_and_a_warm_one_is_silent(tmp_path: Path) -> None:
    cold = _make_in_subprocess(tmp_path)
    lines = [line for line in cold.stderr.splitlines() if line.startswith("diagym:")]
    assert lines[0] == COLD_LINE
    assert re.fullmatch(r"diagym: compiled StatefulWorkflow kernels in \d+ s \(cache: .+\)",
                        lines[1])
    assert len(lines) == 2
    warm = _make_in_subprocess(tmp_path)
    assert "diagym:" not in warm.stderr


class _FakeKernel:
    """A dispatcher as numba_setup reads it: a cache index (empty when cold) and stats."""

    def __init__(self, cached: bool) -> None:
        index = {"sig": "data"} if cached else {}
        self._cache = SimpleNamespace(_cache_file=SimpleNamespace(_load_index=lambda: index))
        self.stats = SimpleNamespace(cache_misses={} if cached else {"sig": 1})


def test_compile_messages_go_to_the_diagym_logger(caplog: pytest.LogCaptureFixture,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """With logging configured the lines are INFO records of "diagym", not stderr lines."""
    with caplog.at_level(logging.INFO, logger="diagym"):
        with numba_setup.compiling("Test", [_FakeKernel(True), _FakeKernel(False)]):
            pass
        with numba_setup.compiling("Warm", [_FakeKernel(True)]):
            pass
    messages = [r.getMessage() for r in caplog.records if r.name == "diagym"]
    assert messages[0] == "diagym: compiling Test kernels (first use; cached afterwards) ..."
    assert messages[1].startswith("diagym: compiled Test kernels in ")
    assert len(messages) == 2
    assert capsys.readouterr().err == ""
    assert numba_setup.is_cached(object()) is None  # unreadable: no claim either way


def test_record_video_writes_an_episode(tmp_path: Path) -> None:
    """gymnasium's RecordVideo over rgb_array frames (it needs moviepy, an optional extra)."""
    pytest.importorskip("moviepy", reason="RecordVideo needs moviepy (pip install moviepy)")
    from gymnasium.wrappers import RecordVideo

    env = RecordVideo(gym.make("StatefulWorkflow-v0", render_mode="rgb_array"),
                      str(tmp_path / "videos"),
                      episode_trigger=lambda episode: True, disable_logger=True)
    _, info = env.reset(seed=0)
    core = env.unwrapped
    terminated = False
    while not terminated:
        v = int(next(i for i in range(8) if info["action_mask"][i]))
        _, _, terminated, _, info = env.step((v, core.correct_slot(v)))
    env.close()
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000
