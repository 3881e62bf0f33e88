"""The registered DACSSteering ids: each is data, the kwargs that distinguish it from
DacsParams' defaults (docs/DACS.md); envs/__init__.py fills in the rest from DacsParams."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "DACSSteering-v0": {},
}
