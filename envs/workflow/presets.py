"""The registered StatefulWorkflow ids: each is data, the kwargs that distinguish it from
WorkflowParams's defaults (seed 003's snapshot, history, hidden-resampling and retry conditions).
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "StatefulWorkflow-v0": {},
    "StatefulWorkflowHistory-v0": {"snapshot_period": 0},
    "StatefulWorkflowHidden-v0": {"snapshot_period": 0, "hidden_resampling": True},
    "StatefulWorkflowRetry-v0": {"snapshot_period": 0, "error_allowance": 8},
}
