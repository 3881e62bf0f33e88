"""Seed 002's phases on DACSSteering-v0 as data: the cells of each phase and the arms.

The cells are seed 002's eight synthetic scenarios with its sizes (its task suite, ten trials
per cell and condition): phase "agents" s1-s3, heterogeneous agents at N = 3, 5, 10 with
D = 3; phase "diversity" s4 homogeneous (N = 3, D = 4), s5 crossfire (N = 5, D = 4), s6
cascade (N = 5, D = 3); phase "density" s7 dense (N = 5, D = 8) and s8 dense (N = 3, D = 15).
Each arm is a policy facing one context mode (the reference arms: dacs-reader on dacs windows,
flat-reader and flat-recency on flat windows, registry-only on registry windows, uniform on
dacs windows; a chat model on dacs and flat windows). The budget defaults to none (seed 002's
runs never cut a window), so a cut happens only where the user sets W.
"""

from __future__ import annotations

from typing import Any

ENV_ID = "DACSSteering-v0"
EPISODES = 10  # seed 002: 10 trials per scenario and condition
PHASES: dict[str, list[dict[str, Any]]] = {
    "agents": [
        {"name": "s1", "n_agents": 3, "family": "heterogeneous", "decisions": 3},
        {"name": "s2", "n_agents": 5, "family": "heterogeneous", "decisions": 3},
        {"name": "s3", "n_agents": 10, "family": "heterogeneous", "decisions": 3},
    ],
    "diversity": [
        {"name": "s4", "n_agents": 3, "family": "homogeneous", "decisions": 4},
        {"name": "s5", "n_agents": 5, "family": "crossfire", "decisions": 4},
        {"name": "s6", "n_agents": 5, "family": "cascade", "decisions": 3},
    ],
    "density": [
        {"name": "s7", "n_agents": 5, "family": "dense", "decisions": 8},
        {"name": "s8", "n_agents": 3, "family": "dense", "decisions": 15},
    ],
}
REFERENCE_ARMS = (
    ("dacs-reader", "dacs"), ("flat-reader", "flat"), ("flat-recency", "flat"),
    ("registry-only", "registry"), ("uniform", "dacs"),
)
LLM_ARMS = (("llm", "dacs"), ("llm", "flat"))


def env_kwargs(cell: dict[str, Any]) -> dict[str, Any]:
    """The env kwargs of a cell (its name is a label, not a knob)."""
    return {k: v for k, v in cell.items() if k != "name"}


def cell_label(cell: dict[str, Any]) -> str:
    """Seed 002's name of the cell, with its sizes: "s1 N=3 D=3 heterogeneous"."""
    return f"{cell['name']} N={cell['n_agents']} D={cell['decisions']} {cell['family']}"
