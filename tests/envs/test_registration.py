"""What registration promises beyond the conformance suite: every params field is a
`gym.make` kwarg, ids resolve with the module prefix, and the ansi render shows the task.

The per-id Gymnasium contract (checker, seeding, make_vec, copies, render modes) is
tests/envs/test_conformance.py, which runs over every registered id.
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

import envs
from envs.dacs.params import DacsParams

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
              "focus_cost": 0.25}
    assert set(kwargs) == set(DacsParams().as_dict())
    env = gym.make("DACSSteering-v0", **kwargs)
    assert env.unwrapped.params == DacsParams(**kwargs)
    assert all(getattr(env.unwrapped, name) == value for name, value in kwargs.items())
    assert env.action_space == gym.spaces.Discrete(4 + 7)


def test_make_with_module_prefix_needs_no_import() -> None:
    code = (
        "import gymnasium as gym; env = gym.make('envs:StatefulWorkflow-v0'); "
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
