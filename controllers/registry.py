"""Every programmed policy by name, for the command line and the studies.

StatefulWorkflow's 19 reference controllers and DACSSteering's window readers share one
namespace, so `diagym run --policy NAME` needs no per-env flag; a name that does not fit the
env is a clear error rather than a wrong run.
"""

from __future__ import annotations

from typing import Any

from controllers.dacs.readers import DACS_CONTROLLERS, dacs_controller
from controllers.policy import Policy
from controllers.workflow.adapter import ReferencePolicy
from controllers.workflow.mechanisms import CONTROLLER_NAMES

POLICY_NAMES = (*CONTROLLER_NAMES, *DACS_CONTROLLERS)


def make_reference_policy(name: str, env: Any) -> Policy:
    """The programmed policy `name` for `env` (StatefulWorkflow or DACSSteering)."""
    if name in CONTROLLER_NAMES:
        return ReferencePolicy.for_env(name, env)
    if name in DACS_CONTROLLERS:
        if type(env.unwrapped).__name__ != "DACSSteeringEnv":
            raise ValueError(f"{name} plays DACSSteering envs; got {env.unwrapped!r}")
        return dacs_controller(name)
    raise ValueError(f"policy must be one of {' | '.join(POLICY_NAMES)} | llm; got {name!r}")
