"""Every programmed policy by name, for the command line and the studies.

StatefulWorkflow's reference controllers and DACSSteering's window readers share one
namespace, so `diagym run --policy NAME` needs no per-env flag; a name that does not fit the
env is a clear error rather than a wrong run. FACTORIES is the one table: env family ->
controller name -> factory(env). To add a controller, add its factory under its family.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from diagym import envs
from diagym.controllers.dacs.readers import DACS_CONTROLLERS, dacs_controller
from diagym.controllers.policy import Policy
from diagym.controllers.policy_names import POLICY_NAMES
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES


def _dacs_factory(name: str, env: Any) -> Policy:
    return dacs_controller(name)


FACTORIES: dict[str, dict[str, Callable[[Any], Policy]]] = {
    envs.WORKFLOW: {name: functools.partial(ReferencePolicy.for_env, name)
                    for name in CONTROLLER_NAMES},
    envs.DACS: {name: functools.partial(_dacs_factory, name) for name in DACS_CONTROLLERS},
}


def make_reference_policy(name: str, env: Any) -> Policy:
    """The programmed policy `name` for `env` (any registered family, wrapped or not)."""
    family = envs.family_of(env, strict=False)
    table = FACTORIES.get(family, {}) if family is not None else {}
    if name in table:
        return table[name](env)
    for other, names in FACTORIES.items():
        if name in names:
            title = envs.FAMILIES[other].title
            raise ValueError(f"{name} plays {title} envs; got {envs.env_name(env)}")
    raise ValueError(f"policy must be one of {' | '.join(POLICY_NAMES)} | llm; got {name!r}")
