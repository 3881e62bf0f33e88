"""The programmed policies' names, StatefulWorkflow's controllers then DACSSteering's
readers, in one namespace (controllers/registry.py builds each one's factory under them).

Why a module of its own: every help page and argument error of the command line lists or
checks these names, and must not wait for numba and gymnasium to import (over a second on a
loaded machine); this module imports neither.
"""

from __future__ import annotations

from diagym.controllers.dacs.readers import DACS_CONTROLLERS
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES

POLICY_NAMES = (*CONTROLLER_NAMES, *DACS_CONTROLLERS)
