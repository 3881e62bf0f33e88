"""The registered DACSSteering ids: each is data, its gym.make kwargs (docs/DACS.md)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "DACSSteering-v0": {
        "n_agents": 5,
        "family": "homogeneous",
        "decisions": 3,
        "context_mode": "dacs",
        "window": 4096,
        "order": "requester_last",
        "agent_chosen_focus": False,
        "focus_cost": 0.0,
    },
}
