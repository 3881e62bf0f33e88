"""One diagnosis contract for every env family: what `diagym diagnose` reads off any
diagnosis, and per family which module plans, plays and reads it.

Why a table: the CLI and the report must not tell the families apart by comparing env ids
or by the type of what came back. `DIAGNOSES` is keyed by the family name
`diagym.envs.family_of` gives, as the other layers' per-family tables are (controllers,
encodings, text families), and analysis/diagnose/report.py renders a `Diagnosis` through a
table keyed the same way. Each entry names its module, imported on first use (the modules
import numba and scipy, which `diagym diagnose --help` must not), which provides:

- `plan(budget, policy, trained, adaptive, seed) -> Plan`: the budget rule (None: the
  family's default), ValueError in one line for a budget, a trained model or a seed it
  cannot play;
- `diagnose_policy(make_policy, *, seed, log, resume, workers, text_actions, on_record,
  executor, forecasts, **plan.play) -> Diagnosis`: the battery played live;
- `diagnose_log(path, forecasts=...) -> Diagnosis`: a run log's episodes, playing nothing;
- `holds_runs(path) -> bool`: whether a log holds runs of the family's env.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from diagym import envs
from diagym.analysis.diagnose.defaults import DACS_BATTERY, DACS_EPISODES, DEFAULT_BUDGET


@runtime_checkable
class Diagnosis(Protocol):
    """What every family's diagnosis holds (run.Diagnosis, dacs.diagnosis.DacsDiagnosis)."""

    @property
    def env(self) -> str: ...

    @property
    def policy(self) -> Any: ...

    @property
    def headline(self) -> str: ...

    @property
    def verdicts(self) -> Mapping[str, str]: ...

    @property
    def episodes(self) -> int: ...


# How the sb3 model of `--policy sb3:PATH` was trained, (env id, env kwargs), read on demand
# (the CLI reads its config.json); None for any other policy.
Trained = Callable[[], tuple[str, dict[str, Any]]] | None


@dataclass(frozen=True)
class Plan:
    """A live diagnosis's plan: the episodes it plays in all, (episodes, env params) per
    configuration for a chat model's run estimate, and the family's diagnose_policy
    arguments."""

    total: int
    estimate: tuple[tuple[int, Any], ...]
    play: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DiagnosisFamily:
    """How one env family is diagnosed (module docstring)."""

    env_id: str
    module: str
    default_budget: int
    adaptive: bool  # --adaptive chooses among its battery's configurations
    forecasts: bool  # --forecast predicts success on its env
    no_input: str  # the error for a diagnosis given neither --policy nor --log

    def implementation(self) -> ModuleType:
        return importlib.import_module(self.module)

    def holds_runs(self, path: Path) -> bool:
        return bool(self.implementation().holds_runs(Path(path)))


def _dacs(env_id: str) -> DiagnosisFamily:
    return DiagnosisFamily(
        env_id, "diagym.analysis.diagnose.dacs.diagnosis", DACS_EPISODES * len(DACS_BATTERY),
        adaptive=False, forecasts=False,
        no_input=f"--env {env_id} plays the DACS battery; give --policy NAME (play it) or "
                 "--log RUN.jsonl (diagnose a log)")


DIAGNOSES: dict[str, DiagnosisFamily] = {
    envs.WORKFLOW: DiagnosisFamily(
        "StatefulWorkflow-v0", "diagym.analysis.diagnose.run", DEFAULT_BUDGET,
        adaptive=True, forecasts=True,
        no_input="give --policy NAME (play the battery) or --log RUN.jsonl (diagnose a log)"),
    envs.DACS: _dacs("DACSSteering-v0"),
}


def family_of(env_id: str) -> DiagnosisFamily | None:
    """The diagnosis family that plays `env_id` (its family's env exactly), else None."""
    found = DIAGNOSES.get(envs.family_of(env_id, strict=False) or "")
    return found if found is not None and found.env_id == env_id else None
