"""DACS vs flat over paired trials with live agents: a resumable JSONL log, CSV and Markdown.

Trial t of both conditions uses seed `seed + t` for every model, so the two conditions differ
only in the orchestrator's window. A trial's call lines and decisions are appended together
once it ends, so an interrupted study resumes at the first missing (condition, trial) without
duplicating or losing a finished one.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_policies.live_agents.protocol import Decision
from llm_policies.live_agents.scenarios import LiveScenario
from llm_policies.live_agents.summary import summarize
from llm_policies.live_agents.trial import CONDITIONS, Chat, run_trial

Factory = Callable[[str, int], Chat]  # (role, seed) -> chat client


def _done(log: Path) -> dict[tuple[str, int], dict[str, Any]]:
    finished: dict[tuple[str, int], dict[str, Any]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            entry = json.loads(line) if line.strip() else {}
            if entry.get("kind") == "trial":
                finished[(entry["condition"], entry["trial"])] = entry
    return finished


def run_study(scenario: LiveScenario, trials: int, make_chat: Factory, log: Path, *,
              seed: int = 0, max_steps: int = 6, max_steers: int = 3,
              conditions: tuple[str, ...] = CONDITIONS) -> list[dict[str, Any]]:
    """Play every missing trial into `log`; return the trial entries in order."""
    finished = _done(log)
    for t in range(trials):
        for condition in conditions:
            if (condition, t) in finished:
                continue
            lines: list[dict[str, Any]] = []
            decisions, figures = run_trial(
                scenario, condition, t, agent=make_chat("agent", seed + t),
                orchestrator=make_chat("orchestrator", seed + t),
                judge=make_chat("judge", seed + t), sink=lines.append,
                max_steps=max_steps, max_steers=max_steers)
            entry = {"kind": "trial", "scenario": scenario.scenario_id, "condition": condition,
                     "trial": t, **figures,
                     "decisions": [dataclasses.asdict(d) for d in decisions]}
            with log.open("a") as handle:
                for line in [*lines, entry]:
                    handle.write(json.dumps(line) + "\n")
            finished[(condition, t)] = entry
    return [finished[(c, t)] for t in range(trials) for c in conditions]


def tables(scenario: LiveScenario, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    decisions = [Decision(**d) for e in entries for d in e["decisions"]]
    rows = []
    for condition in sorted({e["condition"] for e in entries}):
        mine = [e for e in entries if e["condition"] == condition]
        row = summarize(decisions, condition, len(mine), scenario.n_rubrics)
        row["scenario"] = scenario.scenario_id
        row["agents_done"] = sum(e["done"] for e in mine) / sum(e["agents"] for e in mine)
        row["turns"] = sum(e["turns"] for e in mine)
        rows.append(row)
    return rows


def write_tables(rows: list[dict[str, Any]], out: Path) -> None:
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
