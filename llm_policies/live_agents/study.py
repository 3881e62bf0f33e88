"""DACS vs flat over paired trials with live agents: a resumable JSONL log, CSV and Markdown.

Trial t of both conditions uses seed `seed + t` for every model, so the two conditions differ
only in the orchestrator's window. Each (condition, trial) is one executor unit
(diagym.controllers.executors: in this process, or a Ray task under `--executor ray`) that builds
its roles where it plays and returns its call lines and its trial entry; the caller's thread
appends both to the log together when the unit ends, so an interrupted study resumes at the
missing units without duplicating or losing a finished one, whichever executor played it.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagym.llm_policies.live_agents.protocol import Decision
from diagym.llm_policies.live_agents.scenarios import LiveScenario
from diagym.llm_policies.live_agents.summary import summarize
from diagym.llm_policies.live_agents.trial import CONDITIONS, run_trial

# (role, seed, scenario) -> the role's chat model ("agent", "judge") or Policy
# ("orchestrator"); roles.LiveRoles is the one that pickles for Ray.
Roles = Callable[..., Any]


def read_log(log: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The finished trials of a log, by (scenario, condition, trial); a torn last line (an
    interrupted write) is skipped, and rewritten when its trial is played again."""
    finished: dict[tuple[str, str, int], dict[str, Any]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                entry = json.loads(line) if line.strip() else {}
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("kind") == "trial":
                finished[(entry["scenario"], entry["condition"], entry["trial"])] = entry
    return finished


def call_lines(log: Path) -> list[dict[str, Any]]:
    """Every call line of a log (agents', orchestrator's, judge's), in order."""
    lines = []
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("kind") == "call":
            lines.append(entry)
    return lines


def spent_in_log(log: Path) -> float:
    """USD the log's calls cost (what a resumed study's cost limit counts)."""
    return sum(line.get("cost_usd") or 0.0 for line in call_lines(log))


@dataclass(frozen=True)
class TrialUnit:
    """One executor unit: a condition's trial, with everything it needs to play (picklable
    when `roles` is)."""

    scenario: LiveScenario
    condition: str
    trial: int
    seed: int
    roles: Any
    max_steps: int
    max_steers: int
    judge_format: str

    def settings(self) -> dict[str, Any]:
        """What a trial's figures depend on besides its models: a log resumed with other
        values would pool trials that are not comparable."""
        return {"seed": self.seed, "max_steps": self.max_steps,
                "max_steers": self.max_steers, "judge_format": self.judge_format}


def play_unit(unit: TrialUnit) -> list[dict[str, Any]]:
    """The unit's call lines, then its trial entry (the last line)."""
    lines: list[dict[str, Any]] = []
    seed = unit.seed + unit.trial
    made = [unit.roles("agent", seed, unit.scenario),
            unit.roles("orchestrator", seed, unit.scenario),
            unit.roles("judge", seed, unit.scenario)]
    try:
        decisions, figures = run_trial(
            unit.scenario, unit.condition, unit.trial, agent=made[0], orchestrator=made[1],
            judge=made[2], sink=lines.append, max_steps=unit.max_steps,
            max_steers=unit.max_steers, judge_format=unit.judge_format)
    finally:
        for role in made:
            close = getattr(role, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
    entry = {"kind": "trial", "scenario": unit.scenario.scenario_id,
             "condition": unit.condition, "trial": unit.trial, "seed": seed,
             "settings": unit.settings(), **figures,
             "decisions": [dataclasses.asdict(d) for d in decisions]}
    return [*lines, entry]


def run_study(scenario: LiveScenario, trials: int, roles: Roles, log: Path, *,
              seed: int = 0, max_steps: int = 6, max_steers: int = 3,
              conditions: tuple[str, ...] = CONDITIONS, judge_format: str = "tags",
              executor: Any = None) -> list[dict[str, Any]]:
    """Play every missing (condition, trial) into `log` on `executor` (None: one at a time
    here); return the trial entries in order (trial-major, conditions paired)."""
    from diagym.controllers.executors import LocalExecutor

    finished = read_log(log)
    units = [TrialUnit(scenario, condition, t, seed, roles, max_steps, max_steers,
                       judge_format)
             for t in range(trials) for condition in conditions
             if (scenario.scenario_id, condition, t) not in finished]

    wanted = TrialUnit(scenario, "", 0, seed, roles, max_steps, max_steers,
                       judge_format).settings()
    for (name, _condition, _trial), entry in finished.items():
        recorded = entry.get("settings")
        if name == scenario.scenario_id and recorded is not None and recorded != wanted:
            changed = ", ".join(f"{k} {recorded.get(k)!r} -> {v!r}" for k, v in wanted.items()
                                if recorded.get(k) != v)
            raise ValueError(f"{log} holds {name} trials played with other settings ({changed}); "
                             "use another --log or the same settings")

    def append(unit: TrialUnit, lines: list[dict[str, Any]]) -> None:
        with log.open("a") as handle:
            handle.write("".join(json.dumps(line) + "\n" for line in lines))
        finished[(scenario.scenario_id, unit.condition, unit.trial)] = lines[-1]

    log.parent.mkdir(parents=True, exist_ok=True)  # the CLI checked where first
    (executor or LocalExecutor(1)).map(play_unit, units, on_result=append)
    return [finished[(scenario.scenario_id, c, t)] for t in range(trials) for c in conditions]


def tables(scenario: LiveScenario, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    decisions = [Decision(**d) for e in entries for d in e["decisions"]]
    rows = []
    for condition in sorted({e["condition"] for e in entries}):
        mine = [e for e in entries if e["condition"] == condition]
        row = summarize(decisions, condition, len(mine), scenario.n_rubrics)
        row["scenario"] = scenario.scenario_id
        row["n_agents"] = scenario.n_agents
        row["agents_done"] = sum(e["done"] for e in mine) / sum(e["agents"] for e in mine)
        row["turns"] = sum(e["turns"] for e in mine)
        rows.append(row)
    return rows


def write_tables(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0])
    with (out / "phase4.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(fields) + " |", "|" + "---|" * len(fields)]
    for row in rows:
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v)
                                        for v in row.values()) + " |")
    (out / "phase4.md").write_text("\n".join(lines) + "\n")
    return [out / "phase4.csv", out / "phase4.md"]
