"""diagym environments, registered with Gymnasium on import.

`import diagym` (or `gym.make("diagym:StatefulWorkflow-v0")`, which imports it) imports this
package, which registers every id of every env family: registration is one loop over each
family's presets, which are data (the kwargs that differ from the family's params
defaults). Each id accepts every field of its family's params dataclass (WorkflowParams,
DacsParams) as a `gym.make` kwarg; workflow ids also have a numba-batched vector entry point
for `gym.make_vec`.

To add an env family: a package envs/<name>/ with params.py (a frozen dataclass with
from_kwargs / as_dict), presets.py (PRESETS) and the env class, then one EnvFamily entry in
FAMILIES below; the conformance suite (tests/envs/test_conformance.py) then covers its ids.

The kind of an env is looked up here, once: `family_of(env_or_id)` names its family, and the
layers above keep their own tables keyed by that name (controllers, renderers, encodings),
so nothing above guesses a kind from a class name, an attribute or an id prefix.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal, overload

import gymnasium as gym
from gymnasium.envs.registration import register, registry

from diagym.envs.dacs import presets as dacs_presets
from diagym.envs.dacs.params import DacsParams
from diagym.envs.workflow import presets as workflow_presets
from diagym.envs.workflow.params import WorkflowParams


@dataclass(frozen=True)
class EnvFamily:
    """One kind of diagym env: its entry points, its params dataclass and its registered ids
    with their full kwargs (every params field); title names the kind in messages."""

    name: str
    title: str
    entry_point: str
    vector_entry_point: str | None
    presets: dict[str, dict[str, Any]]
    params: type

    def env_class(self) -> type:
        """The env class (imported on first use, so `import diagym` stays light)."""
        module, _, attribute = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def vector_class(self) -> type | None:
        if self.vector_entry_point is None:
            return None
        module, _, attribute = self.vector_entry_point.partition(":")
        return getattr(importlib.import_module(module), attribute)


WORKFLOW = "workflow"
DACS = "dacs"


def _full(params: type, presets: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {env_id: params(**kwargs).as_dict() for env_id, kwargs in presets.items()}


FAMILIES: dict[str, EnvFamily] = {
    WORKFLOW: EnvFamily(WORKFLOW, "StatefulWorkflow",
                        "diagym.envs.workflow.env:StatefulWorkflowEnv",
                        "diagym.envs.workflow.vector:StatefulWorkflowVectorEnv",
                        _full(WorkflowParams, workflow_presets.PRESETS), WorkflowParams),
    DACS: EnvFamily(DACS, "DACSSteering", "diagym.envs.dacs.env:DACSSteeringEnv", None,
                    _full(DacsParams, dacs_presets.PRESETS), DacsParams),
}
WORKFLOW_PRESETS = workflow_presets.PRESETS


@overload
def family_of(env: Any, strict: Literal[True] = True) -> str: ...


@overload
def family_of(env: Any, strict: bool) -> str | None: ...


def family_of(env: Any, strict: bool = True) -> str | None:
    """The family name of a registered id, or of an env / vector env (wrapped or not).

    When `env` belongs to no family: strict raises ValueError naming the known ones, else
    None (for callers that word their own error, such as "X plays StatefulWorkflow envs").
    """
    if isinstance(env, str):
        for family in FAMILIES.values():
            if env in family.presets:
                return family.name
        if not strict:
            return None
        known = sorted(i for f in FAMILIES.values() for i in f.presets)
        raise ValueError(f"env must be a registered diagym id ({', '.join(known)}); got {env!r}")
    core = env.unwrapped if isinstance(env, gym.Env | gym.vector.VectorEnv) else env
    for family in FAMILIES.values():
        classes = (family.env_class(), family.vector_class())
        if any(cls is not None and isinstance(core, cls) for cls in classes):
            return family.name
    if not strict:
        return None
    raise ValueError(f"env must be a diagym env ({' | '.join(FAMILIES)}); got {env_name(env)}")


def params_of(env_id: str, kwargs: dict[str, Any] | None = None) -> Any:
    """The params dataclass of a registered diagym id made with `kwargs` (its preset's kwargs
    overridden by them), or None for an id of no family; a bad kwarg raises its ValueError."""
    name = family_of(env_id, strict=False)
    if name is None:
        return None
    family = FAMILIES[name]
    return family.params.from_kwargs(**{**family.presets[env_id], **(kwargs or {})})


def env_name(env: Any) -> str:
    """How an error line names an env: its registered id, else its class (an object repr
    with a memory address tells a user nothing)."""
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    core = getattr(env, "unwrapped", env)
    return type(core).__name__


def _register_all() -> None:
    for family in FAMILIES.values():
        for env_id, kwargs in family.presets.items():
            if env_id in registry:
                continue
            register(id=env_id, entry_point=family.entry_point,
                     vector_entry_point=family.vector_entry_point, kwargs=dict(kwargs),
                     nondeterministic=False)


_register_all()

__all__ = ["DACS", "FAMILIES", "WORKFLOW", "WORKFLOW_PRESETS", "DacsParams", "EnvFamily",
           "WorkflowParams", "family_of", "params_of"]
