"""Seed 002's phases on DACSSteering-v0 as data: the cells of each phase and the arms.

Phase "agents" varies N in {3, 5, 10} (homogeneous, D = 3), "diversity" the scenario family
at N = 5 (homogeneous, crossfire, cascade), "density" the decisions per agent at N = 5
(dense, D in {5, 10, 15}). Each arm is a policy facing one context mode (the reference arms:
dacs-reader on dacs windows, flat-reader and flat-recency on flat windows, registry-only on
registry windows, uniform on dacs windows; a chat model on dacs and flat windows).
"""

from __future__ import annotations

from typing import Any

ENV_ID = "DACSSteering-v0"
PHASES: dict[str, list[dict[str, Any]]] = {
    "agents": [{"n_agents": n, "family": "homogeneous", "decisions": 3} for n in (3, 5, 10)],
    "diversity": [{"n_agents": 5, "family": f, "decisions": 3}
                  for f in ("homogeneous", "crossfire", "cascade")],
    "density": [{"n_agents": 5, "family": "dense", "decisions": d} for d in (5, 10, 15)],
}
REFERENCE_ARMS = (
    ("dacs-reader", "dacs"), ("flat-reader", "flat"), ("flat-recency", "flat"),
    ("registry-only", "registry"), ("uniform", "dacs"),
)
LLM_ARMS = (("llm", "dacs"), ("llm", "flat"))


def cell_label(cell: dict[str, Any]) -> str:
    return f"N={cell['n_agents']} {cell['family']} D={cell['decisions']}"
