"""docs/API.md cannot rot: every import path it lists resolves, every env id it lists is
registered, and its commands are exactly the `diagym` commands."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "API.md"
TEXT = API.read_text()
PATHS = re.findall(r"^- `([a-z_][\w.]*)`:", TEXT, flags=re.M)
ENV_IDS = re.findall(r"^\| `([\w-]+-v\d+)` \|", TEXT, flags=re.M)
COMMANDS = re.findall(r"^- `diagym ([\w-]+)`:", TEXT, flags=re.M)


def resolve(path: str) -> Any:
    """The object at a dotted path: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(path)


def test_the_reference_lists_entries() -> None:
    assert len(PATHS) >= 60 and len(ENV_IDS) >= 5 and len(COMMANDS) >= 10
    assert len(set(PATHS)) == len(PATHS), "an entry is listed twice"


# Modules of an optional extra, by the distribution they import: skipped where it is absent.
EXTRAS = {"diagym.analysis.integrations.inspect_eval.": "inspect_ai",
          "diagym.analysis.integrations.verifiers_env.": "verifiers"}


@pytest.mark.parametrize("path", PATHS)
def test_every_listed_path_imports(path: str) -> None:
    for prefix, needed in EXTRAS.items():
        if path.startswith(prefix):
            pytest.importorskip(needed, reason=f"{path} needs {needed} (the [inspect] or "
                                               "[verifiers] extra)")
    assert resolve(path) is not None


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_listed_env_id_is_registered(env_id: str) -> None:
    from diagym import envs

    assert env_id in gym.registry
    assert any(env_id in family.presets for family in envs.FAMILIES.values())


def test_every_registered_id_is_listed() -> None:
    from diagym import envs

    registered = {i for family in envs.FAMILIES.values() for i in family.presets}
    assert registered == set(ENV_IDS)


def test_the_commands_are_the_clis() -> None:
    from diagym.analysis.cli.main import build_parser

    parser = build_parser()
    choices = next(a.choices for a in parser._actions if a.dest == "command")
    assert sorted(COMMANDS) == sorted(choices)


def test_the_old_params_name_is_a_deprecated_alias() -> None:
    from diagym.envs.workflow import params

    with pytest.warns(DeprecationWarning, match="use WorkflowParams"):
        assert params.WorkflowSpec is params.WorkflowParams
    with pytest.raises(AttributeError, match="WorkflowSpecs"):
        params.WorkflowSpecs  # noqa: B018
