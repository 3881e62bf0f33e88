"""The workflow's public rules and current observation as plain text.

`render_mode="ansi"` prints this, and the LLM renderer builds its prompts from the same
functions, so a person reading a rendered episode sees what a text policy is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from diagym.envs.workflow.layout import FAILURE_NAMES, WorkflowTask
from diagym.envs.workflow.params import WorkflowParams


def describe_rules(spec: WorkflowParams) -> str:
    """The rules every episode of `spec` follows, as a policy is told them."""
    n, b, w = spec.n_ops, spec.candidates, spec.width
    if spec.snapshot_period == 0:
        cadence = "Register values are shown only in the initial observation."
    elif spec.snapshot_period == 1:
        cadence = "Register values are shown again after every successful operation."
    else:
        cadence = (
            f"Register values are shown again after every {spec.snapshot_period} successful "
            "operations (after the successes numbered "
            f"{spec.snapshot_period}, {2 * spec.snapshot_period}, ...)."
        )
    if spec.error_allowance == 0:
        failures = "The first failed call ends the episode."
    else:
        failures = (
            f"A failed call changes nothing and reports its category; the episode ends when "
            f"more than {spec.error_allowance} calls have failed."
        )
    update = (
        "After a success, register update[v] increases by delta[v] modulo 8."
        if spec.updates == "additive"
        else "Successful operations do not change any register."
    )
    lines = [
        f"Complete all {n} operations (identifiers 0..{n - 1}) with execute(v, a).",
        f"There are 8 registers with values 0..7; registers 0..{w - 1} are active.",
        "An operation can run only after all of its prerequisites are completed.",
        f"Operation v has {b} candidate slots 0..{b - 1}; slot a is correct iff "
        f"codes[v][a] == x[query[v]] mod {b}, reading the register before v's own update.",
        update,
        cadence,
        failures,
        "Failure categories: dependency (a prerequisite is missing), candidate (wrong slot), "
        "completed (the operation was already done).",
    ]
    if spec.hidden_resampling:
        lines.append(
            "After every success all active registers are redrawn uniformly at random; the new "
            "values are shown only when a snapshot is due."
        )
    return "\n".join(lines)


def describe_task(task: WorkflowTask) -> str:
    """One line per operation: prerequisites, query and update registers, increment, codes."""
    lines = []
    for v in range(task.spec.n_ops):
        pre = [int(u) for u in np.flatnonzero(task.prereq[v])]
        codes = " ".join(str(int(c)) for c in task.codes[v])
        lines.append(
            f"op {v}: after {pre if pre else 'none'}; query x[{int(task.query[v])}]; "
            f"update x[{int(task.update[v])}] += {int(task.delta[v])}; codes [{codes}]"
        )
    return "\n".join(lines)


def describe_observation(observation: Mapping[str, Any]) -> str:
    """The dynamic part of an observation: registers, completed operations, last feedback."""
    regs = observation["registers"]
    shown = (
        " ".join(f"x[{r}]={int(v)}" for r, v in enumerate(regs))
        if regs[0] >= 0
        else "not shown"
    )
    done = [int(v) for v in np.flatnonzero(observation["completed"])]
    reg, delta = (int(x) for x in observation["last_update"])
    last = f"x[{reg}] += {delta}" if reg >= 0 else "none yet"
    return f"registers: {shown}\ncompleted: {done}\nlast update: {last}"


def render_text(spec: WorkflowParams, task: WorkflowTask, observation: Mapping[str, Any]) -> str:
    """The ansi render: rules, the public task and the current observation."""
    failure = FAILURE_NAMES[int(observation["failure"])]
    return "\n".join(
        [
            describe_rules(spec),
            describe_task(task),
            describe_observation(observation),
            f"last failure: {failure or 'none'}; errors: {int(observation['errors'])}",
        ]
    )
