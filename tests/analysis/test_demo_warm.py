"""`make demo` leaves gym.make_vec's kernels compiled: a user's first vector env afterwards
starts at once instead of compiling for half a minute or more."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import scaled

PROJECT = Path(__file__).resolve().parents[2]
WARM = "from diagym.analysis.demo import warm_vector_env; warm_vector_env('StatefulWorkflow-v0')"
USE = ("import gymnasium as gym, diagym; v = gym.make_vec('StatefulWorkflow-v0', num_envs=3); "
       "v.reset(seed=1); v.step(v.action_space.sample())")


def _in_subprocess(code: str, cache: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=PROJECT, timeout=scaled(600),
                          env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
    return done.stderr


@pytest.mark.timeout(1200)
def test_the_demos_warm_up_compiles_what_make_vec_needs(tmp_path: Path) -> None:
    said = _in_subprocess(WARM, tmp_path)
    assert "diagym: compiling StatefulWorkflow vector kernels" in said
    assert "diagym:" not in _in_subprocess(USE, tmp_path)
