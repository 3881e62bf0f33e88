"""How much a diagnosis plays by default: StatefulWorkflow's episode budget over its battery
(analysis/diagnose/battery.py, which says why 512) and DACSSteering's battery and episodes per
configuration (analysis/diagnose/dacs/replay.py, which says why these windows and 8).

Why a module of its own: `diagym diagnose --help` states these defaults, and must not import
scipy and numba (the battery's and the replay's modules) to do so.
"""

from __future__ import annotations

from typing import Any

DEFAULT_BUDGET = 512
DACS_BATTERY: tuple[dict[str, Any], ...] = (
    {"family": "homogeneous", "context_mode": "dacs", "window": 4096},
    {"family": "homogeneous", "context_mode": "flat", "window": None},
    {"family": "cascade", "context_mode": "dacs", "window": 4096},
    {"family": "homogeneous", "context_mode": "flat", "window": 1024},
)
DACS_EPISODES = 8
