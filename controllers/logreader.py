"""The one reader of a finished (or running) run log, for every command that reads one: the
report and summarize, diagnose, llm-study's call figures, the attribution bench.

Why one: what stands in a log is a rule (a "replay" line voids an episode's earlier lines; a
result unit repeated under its key counts once; old call lines read in today's meaning,
controllers/callline.py), and a consumer reading the lines its own way would count a voided
call or an old latency as if it stood. Writing, locking and resuming are controllers/runlog.py
`RunLog`'s; this module reads without the lock, streaming (`entries_at`), in one pass.

Why call lines are held without their prompt: a chat model's prompt is its whole context
window, kilobytes to megabytes per call, and no reader but the report's few detailed
episodes shows one; a held call line keeps its line's byte offset instead (PROMPT_AT), and
`prompt_of` reads the prompt back. So reading a log takes memory in proportion to its
lines, not to its bytes (benchmarks/log_reading.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagym.controllers.callline import CALL, normalised
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.runlog import entries_at, entry_at, episode_record
from diagym.controllers.tracing import TRACE

PROMPT_AT = "prompt_at"  # a held call line's byte offset in its log, in place of its prompt


@dataclass
class LoggedRun:
    """One run of a log: its description and, per task seed, the episode line that stands,
    its trace line's actions and its call lines; then the run's session lines (the
    provenance of each open), its name when it was given one, and its result units' call
    lines (an RCWT sweep's), each key once; last, per task seed, its trace line's
    observation digests and outcomes (controllers/tracing.py), for a trace line that holds
    them (a line written before they were traced has actions only)."""

    run_id: str
    run: dict[str, Any]
    episodes: dict[int, EpisodeRecord]
    actions: dict[int, list[Any]]
    calls: dict[int, list[dict[str, Any]]]
    sessions: list[dict[str, Any]] = field(default_factory=list)
    name: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None  # the log it was read from (prompt_of)
    observations: dict[int, list[str]] = field(default_factory=dict)
    outcomes: dict[int, list[str]] = field(default_factory=dict)


def _seed_of(key: Any, runs: dict[str, LoggedRun]) -> tuple[LoggedRun, int] | None:
    if not isinstance(key, str) or ":" not in key or key.split(":", 1)[0] not in runs:
        return None
    try:
        return runs[key.split(":", 1)[0]], int(key.rsplit(":", 1)[1])
    except ValueError:
        return None


def read_log(path: Path, skipped: Counter[str] | None = None) -> dict[str, LoggedRun]:
    """Run id -> its LoggedRun, in the order the runs first appear, from one streaming pass
    over the log's lines (read without the lock); what is not an entry is counted in
    `skipped` (controllers/runlog.py SKIP_KINDS). A run's lines follow its description (its
    first line carries it). An episode line whose record is not an EpisodeRecord (runlog's
    episode_record) is skipped as foreign."""
    runs: dict[str, LoggedRun] = {}
    seen_results: set[tuple[str, str]] = set()
    counted = skipped if skipped is not None else Counter()
    for offset, entry in entries_at(Path(path), counted):
        entry = normalised(entry)
        if entry["type"] == CALL and "prompt" in entry:
            del entry["prompt"]
            entry[PROMPT_AT] = offset
        run_id, run = entry.get("run_id"), entry.get("run")
        if isinstance(run_id, str) and isinstance(run, dict) and run_id not in runs:
            runs[run_id] = LoggedRun(run_id, run, {}, {}, {}, path=Path(path))
        if isinstance(run_id, str) and run_id in runs:
            _take_run_line(entry, runs[run_id], seen_results)
        found = _seed_of(entry.get("episode_key"), runs)
        if found is None:
            continue
        logged, seed = found
        kind = entry["type"]
        if kind == "replay":
            logged.episodes.pop(seed, None)
            logged.actions.pop(seed, None)
            logged.observations.pop(seed, None)
            logged.outcomes.pop(seed, None)
            logged.calls.pop(seed, None)
        elif kind == "episode":
            record = episode_record(entry.get("record"))
            if record is None:
                counted["foreign"] += 1
            else:
                logged.episodes[seed] = record
        elif kind == TRACE and isinstance(entry.get("actions"), list):
            logged.actions[seed] = entry["actions"]
            for name, held in (("observations", logged.observations),
                               ("outcomes", logged.outcomes)):
                if isinstance(entry.get(name), list):
                    held[seed] = entry[name]
                else:  # an older trace line, or a retraced seed whose line lacks them
                    held.pop(seed, None)
        elif kind == CALL:
            logged.calls.setdefault(seed, []).append(entry)
    return runs


def prompt_of(logged: LoggedRun, call: dict[str, Any]) -> Any:
    """The prompt of a call line `read_log` held (read back from its line in the log); None
    for a line without one, or when the log no longer holds that line."""
    if "prompt" in call:
        return call["prompt"]
    offset = call.get(PROMPT_AT)
    if not isinstance(offset, int) or logged.path is None:
        return None
    try:
        entry = entry_at(logged.path, offset)
    except OSError:
        return None
    return None if entry is None else entry.get("prompt")


def _take_run_line(entry: dict[str, Any], logged: LoggedRun,
                   seen: set[tuple[str, str]]) -> None:
    """A line naming its run: a session line, the run's name, or a result unit's call."""
    if entry["type"] == "session":
        logged.sessions.append(entry)
    if logged.name is None and isinstance(entry.get("run_name"), str):
        logged.name = entry["run_name"]
    unit = (logged.run_id, str(entry.get("key")))
    if entry["type"] == CALL and "key" in entry and unit not in seen:
        seen.add(unit)  # a repeated key counts once
        logged.results.append(entry)


def answered_calls(path: Path) -> list[dict[str, Any]]:
    """The answered call lines of the episodes that stand in the log at `path`, one per
    decision (the last line of a decision, should an old log hold it twice), in log order:
    the lines a study's per-decision figures (latency, tokens, cost) are taken over."""
    out = []
    for logged in read_log(path).values():
        for seed, record in logged.episodes.items():
            decisions = int(record.counters.get("decisions", 0))
            last: dict[int, dict[str, Any]] = {}
            for call in logged.calls.get(seed, []):
                decision = call.get("decision")
                if call.get("status") == "ok" and isinstance(decision, int) \
                        and decision < decisions:
                    last[decision] = call
            out.extend(last[d] for d in sorted(last))
    return out
