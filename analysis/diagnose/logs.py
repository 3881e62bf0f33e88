"""A run log as a diagnosis reads it, for either env family: the runs (controllers/logreader.py
`read_log`, the one reader: per task seed the episode that stands, its trace line's actions
and the model's call lines), and the runs matched to battery configurations with the one-line
refusals both families share.

The reader keeps a trace line's actions as logged (lists of ints): StatefulWorkflow's are
(op, slot) pairs, DACSSteering's one-element [option] lists, and each family turns them into
its own actions.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from diagym.controllers.executors import Executor
from diagym.controllers.logreader import LoggedRun, read_log
from diagym.controllers.runlog import read_entries

__all__ = ["DESIGN", "LoggedRun", "design_line", "read_log", "replies_executed",
           "runs_by_configuration", "scratch_log"]

DESIGN = "design"


def design_line(path: Path) -> dict[str, Any] | None:
    """The last "design" line of a log (an adaptive diagnosis writes one per session: its
    budget and first task seed), None when there is none."""
    found = None
    for entry in read_entries(Path(path), Counter()):
        if entry["type"] == DESIGN:
            found = entry
    return found


def replies_executed(calls: Sequence[Mapping[str, Any]],
                     decode: Callable[[Any], Any | None]) -> list[Any]:
    """The env actions of an episode's call lines, for a log without its trace line: each
    call the harness judged "ok" was executed, in decision order; its action is its reply (or
    its one tool call) decoded by `decode` (the text wrapper's rules), a reply decoded to None
    being no action."""
    from diagym.llm_policies.text_actions import ToolCallAction

    actions = []
    for call in sorted(calls, key=lambda c: int(c.get("decision", 0))):
        if call.get("action_status") != "ok":
            continue
        tool_calls = call.get("tool_calls") or []
        reply = (ToolCallAction(tool_calls[0]["name"], tool_calls[0]["arguments"])
                 if tool_calls else call.get("response"))
        action = decode(reply)
        if action is not None:
            actions.append(action)
    return actions


def runs_by_configuration(path: Path, runs: Mapping[str, LoggedRun], env_id: str,
                          configuration: Callable[[dict[str, Any]], int | None],
                          battery_name: str) -> tuple[Any, dict[int, LoggedRun]]:
    """(the policy's description, battery index -> its run) of a log whose runs are all
    `env_id` runs of distinct battery configurations (`configuration(env_kwargs)`: its index,
    None outside the battery) by one policy; ValueError, one line, otherwise."""
    found: dict[int, LoggedRun] = {}
    policies: list[Any] = []
    for logged in runs.values():
        where = f"log {path}: run {logged.run.get('env')} {logged.run.get('env_kwargs')}"
        if logged.run.get("env") != env_id:
            raise ValueError(f"{where} is not {env_id}; diagnose reads {env_id} runs")
        try:
            index = configuration(dict(logged.run.get("env_kwargs", {})))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {error}") from None
        if index is None:
            raise ValueError(f"{where} is not a configuration of the {battery_name}")
        if index in found:
            raise ValueError(f"{where}: the log holds several runs of this configuration")
        found[index] = logged
        if logged.run.get("policy") not in policies:
            policies.append(logged.run.get("policy"))
    if not found:
        raise ValueError(f"log {path} holds no {env_id} run")
    if len(policies) > 1:
        raise ValueError(f"log {path} holds runs of {len(policies)} policies; diagnose reads "
                         "one policy's runs")
    return policies[0], found


def scratch_log(log: Path | None, executor: Executor | None
                ) -> tempfile.TemporaryDirectory[str] | None:
    """A temporary directory for the run log when there is none and episodes play out of
    process: their traces come back to the driver only as the log's trace lines."""
    if log is None and executor is not None and not executor.in_process:
        return tempfile.TemporaryDirectory(prefix="diagym-diagnose-")
    return None
