"""A run log read once into its runs: each run's description, sessions, standing episodes,
traces and model calls, and the one episode summary of each.

What stands in the log (per task seed the episode, trace actions and calls; each run's
sessions, name and result units) is controllers/logreader.py `read_log`'s, the one reader;
this module orders the episodes and summarises them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagym.analysis.policy_label import policy_label
from diagym.analysis.summary import Summary, format_summary, summarise
from diagym.controllers.logreader import LoggedRun, read_log
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.runlog import format_skipped, read_entries


@dataclass
class LogRun:
    """One run of a log: `logged` holds, per seed of its episode keys, the episode record,
    the trace line's actions and the call lines; `seeds` and `records` are its episodes in
    episode order."""

    run_id: str
    run: dict[str, Any]
    name: str | None
    sessions: list[dict[str, Any]]
    logged: LoggedRun
    seeds: list[int]
    records: list[EpisodeRecord]
    summary: Summary | None               # None for a run without episodes (an RCWT sweep)
    result_calls: list[dict[str, Any]]    # call lines of units that are not episodes

    def call_lines(self) -> list[dict[str, Any]]:
        """The run's call lines that stand: its episodes' and its result units'."""
        return [c for calls in self.logged.calls.values() for c in calls] + self.result_calls

    def key(self, seed: int) -> str:
        """The episode key of `seed` in the run (controllers/runlog.py)."""
        return f"{self.run_id}:{seed}"

    @property
    def label(self) -> str:
        """The run as a person names it: its name, else its policy and run id (the
        provenance table maps run ids to settings)."""
        if self.name:
            return self.name
        return f"{policy_label(self.run.get('policy'))} [{self.run_id}]"

    def header(self) -> str:
        """The first line `diagym run` prints, from what the log recorded."""
        seeds = [r.task_seed for r in self.records if r.task_seed is not None]
        start = f" from seed {min(seeds)}" if seeds else ""
        policy = self.run.get("policy")
        if "env" in self.run:
            where = (f"{self.run['env']} "
                     f"{json.dumps(self.run.get('env_kwargs', {}), sort_keys=True)}")
        else:  # a run whose units are not episodes (an RCWT sweep) says what it played
            where = json.dumps({k: v for k, v in self.run.items() if k != "policy"},
                               sort_keys=True)
        return (f"{policy_label(policy)} on {where}: "
                f"{len(self.records)} episodes{start}")

    def summary_text(self) -> str:
        return self.header() + ("\n" + format_summary(self.summary) if self.summary else
                                "\nno episodes (the run's units are result lines)")


@dataclass
class RunLogFile:
    path: Path
    runs: list[LogRun]
    skipped: dict[str, int]

    def skipped_line(self) -> str | None:
        return format_skipped(self.path, self.skipped) if self.skipped else None


def read_run_log(path: Path) -> RunLogFile:
    """The runs of the log at `path` in the order they first appear (controllers/logreader.py
    `read_log`, one pass); ValueError (one line) for a file that holds no log entry."""
    path = Path(path)
    skipped: Counter[str] = Counter()
    logged = read_log(path, skipped)  # a line whose record is no EpisodeRecord is skipped
    if not logged and not holds_an_entry(path):
        raise ValueError(f"{path}: not a run log (no JSONL line with a \"type\")")
    runs = []
    for run_id, run in logged.items():
        ordered = sorted(run.episodes.items(), key=lambda item: item[1].episode)
        records = [record for _, record in ordered]
        runs.append(LogRun(
            run_id=run_id, run=run.run, name=run.name, sessions=run.sessions, logged=run,
            seeds=[seed for seed, _ in ordered], records=records,
            summary=summarise(records) if records else None, result_calls=run.results))
    return RunLogFile(path, runs, dict(skipped))


def holds_an_entry(path: Path) -> bool:
    """Whether `path` holds one run-log entry (a JSONL line with a "type"): a study folder
    may keep another command's JSONL beside its outputs (dacs-live's call log)."""
    return next(read_entries(path, Counter()), None) is not None
