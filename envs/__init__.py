"""diagym environments, registered with Gymnasium on import.

`import envs` (or `gym.make("envs:StatefulWorkflow-v0")`, which imports it) registers every
id below. Each StatefulWorkflow id accepts every WorkflowSpec field as a `gym.make` kwarg and
has a numba-batched vector entry point for `gym.make_vec`.
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

from envs.workflow.params import WorkflowSpec

WORKFLOW_ENTRY = "envs.workflow.env:StatefulWorkflowEnv"
WORKFLOW_VECTOR_ENTRY = "envs.workflow.vector:StatefulWorkflowVectorEnv"
DACS_ENTRY = "envs.dacs.env:DACSSteeringEnv"
DACS_ID = "DACSSteering-v0"
# docs/DACS.md's defaults; every one is also a gym.make kwarg.
DACS_DEFAULTS: dict[str, Any] = {
    "n_agents": 5,
    "family": "homogeneous",
    "decisions": 3,
    "context_mode": "dacs",
    "window": 4096,
    "order": "requester_last",
    "agent_chosen_focus": False,
    "focus_cost": 0.0,
}

# id -> the kwargs that distinguish it from WorkflowSpec's defaults.
WORKFLOW_PRESETS: dict[str, dict[str, Any]] = {
    "StatefulWorkflow-v0": {},
    "StatefulWorkflowHistory-v0": {"snapshot_period": 0},
    "StatefulWorkflowHidden-v0": {"snapshot_period": 0, "hidden_resampling": True},
    "StatefulWorkflowRetry-v0": {"snapshot_period": 0, "error_allowance": 8},
}


def _register_all() -> None:
    for env_id, kwargs in WORKFLOW_PRESETS.items():
        if env_id in registry:
            continue
        register(
            id=env_id,
            entry_point=WORKFLOW_ENTRY,
            vector_entry_point=WORKFLOW_VECTOR_ENTRY,
            kwargs=WorkflowSpec(**kwargs).as_dict(),
            nondeterministic=False,
        )
    if DACS_ID not in registry:
        register(id=DACS_ID, entry_point=DACS_ENTRY, kwargs=dict(DACS_DEFAULTS),
                 nondeterministic=False)


_register_all()

__all__ = ["WORKFLOW_PRESETS", "WorkflowSpec"]
