"""The failed StatefulWorkflow episodes of a run log as Who&When-style JSON, one file each, so
that failure attributors built for that dataset (an LLM judge naming the responsible agent
and the decisive step) can be run on diagym traces and scored against exact labels.

Who&When is the dataset of Zhang et al., "Which Agent Causes Task Failures and When? On
Automated Failure Attribution of LLM Multi-Agent Systems" (ICML 2025), published as
Kevin355/Who_and_When on the Hugging Face hub. Its instances (as its public loaders read
them; its Algorithm-Generated subset) carry `question`, `question_ID`, `ground_truth`,
`is_correct`, `history` (a list of {"content", "role", "name"} turns), `mistake_agent`,
`mistake_step` (the index of the decisive turn in `history`, a string) and
`mistake_reason`. A document here has those fields:

- history: turn 0 is the environment's opening (the public task and the initial
  observation, llm_policies' conversation opening); then per decision the agent's reply (its
  JSON action) and the environment's result (the call, its outcome and the new observation).
  A reply the env did not execute (an invalid reply) is the last agent turn, with no result.
  The agent is named AGENT, the environment ENVIRONMENT;
- question: the public rules of the configuration, as the chat harness states them;
- ground_truth: what success is, and the exact controller's calls on the same task;
- is_correct: false (only failed episodes are written);
- mistake_agent, mistake_step, mistake_reason: from the exact label when the episode was
  played by analysis/diagnose/faults.py's injector (its label rides in the episode record),
  the decisive decision d being turn 1 + 2d; null for any other log (a diagnosis of an
  agent whose failures nobody labelled);
- diagym: the env, its kwargs, the task seed, the run id, and the label's fields (null
  without one), so the document can be replayed and the label read back exactly.

The traces are short and synthetic (8 operations, a few dozen turns at most, one agent and
its environment): an attributor's accuracy here is not comparable to its accuracy on
Who&When's human-labelled multi-agent logs; what is comparable is that the labels are exact.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium as gym

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.diagnose.attribution import ENV_ID
from diagym.analysis.diagnose.faults import Label
from diagym.analysis.studies.attribution_bench.run import Case, cases
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.envs.workflow.params import WorkflowParams
from diagym.llm_policies.harness.base import consequence, json_format
from diagym.llm_policies.prompts.workflow import (
    action_fields,
    conversation_rules,
    history_entry,
    opening_prompt,
    result_prompt,
)
from diagym.llm_policies.text_actions import TEXT_FAILURES

FORMAT = "who-and-when"
AGENT, ENVIRONMENT = "Agent", "StatefulWorkflow"


def mistake_turn(decision: int) -> int:
    """The history index of the agent's reply at `decision` (0-based)."""
    return 1 + 2 * decision


def _action_text(op: int, slot: int) -> str:
    return json.dumps({"operation": op, "candidate": slot})


def _reference_calls(spec: WorkflowParams, kwargs: Mapping[str, Any], seed: int) -> list[str]:
    """The exact controller's calls on the task (it solves every configuration whose
    registers stay public)."""
    env = gym.make(ENV_ID, **dict(kwargs))
    try:
        policy = ReferencePolicy("exact", spec)
        policy.reset(seed=seed)
        observation, info = env.reset(seed=seed)
        calls, ended = [], False
        while not ended:
            op, slot = (int(x) for x in policy.act(observation, info))
            calls.append(f"execute({op}, {slot})")
            observation, _, ended, truncated, info = env.step((op, slot))
            ended = ended or truncated
        return calls if info["success"] else []
    finally:
        env.close()


def question(spec: WorkflowParams) -> str:
    """The public rules as the chat harness states them (a conversation of JSON actions, an
    invalid reply ending the episode), which is how the history reads."""
    answer = (f"Answer each turn with exactly one JSON object {json_format(action_fields(spec))} "
              f"and nothing else. {consequence(TEXT_FAILURES, 0)}")
    return conversation_rules(spec, answer)


def _reason(label: Label) -> str:
    call = f"execute({label.op}, {label.slot})"
    reasons = {
        "stale_value": f"{call} used x[{label.register}] = {label.value}, a value the register "
                       "held earlier and no longer holds",
        "initial_value": f"{call} used x[{label.register}]'s initial value {label.value}, which "
                         "it no longer holds",
        "wrong_register": f"{call} used the current value {label.value} of x[{label.register}], "
                          "not of the register the operation queries",
        "guess": f"{call} picked a candidate slot no tracked value supports (a guess)",
        "dependency": f"{call} ran an operation whose prerequisites were not all done",
        "completed": f"{call} ran an operation already completed",
        "invalid_reply": "the reply was not a JSON action, so no call was made and the "
                         "episode ended",
    }
    repeated = (" and repeated it at every later decision until the error allowance was "
                "spent" if label.terminal > label.step else "")
    return f"{label.cause}: {reasons.get(label.cause, call)}{repeated}"


def document(case: Case) -> dict[str, Any]:
    """One failed episode as a Who&When-style instance (module docstring)."""
    spec, trace, record = case.spec, case.trace, case.record
    env = gym.make(ENV_ID, **dict(trace.env_kwargs))
    try:
        observation, info = env.reset(seed=trace.task_seed)
        history = [{"content": opening_prompt(spec, observation), "role": "user",
                    "name": ENVIRONMENT}]
        for k, (op, slot) in enumerate(trace.actions, 1):
            history.append({"content": _action_text(op, slot), "role": "assistant",
                            "name": AGENT})
            observation, _, _, _, info = env.step((op, slot))
            entry = history_entry((op, slot), info, observation)
            history.append({"content": result_prompt(spec, k, entry, observation),
                            "role": "user", "name": ENVIRONMENT})
    finally:
        env.close()
    if record.first_failure in TEXT_FAILURES:
        history.append({"content": f"[a reply the environment did not execute: "
                                   f"{record.first_failure}]", "role": "assistant",
                        "name": AGENT})
    calls = _reference_calls(spec, trace.env_kwargs, trace.task_seed)
    label = case.label
    return {
        "is_correct": False,
        "question": question(spec),
        "question_ID": f"{case.run_id}:{trace.task_seed}",
        "ground_truth": (f"all {spec.n_ops} operations completed; a correct sequence of "
                         f"calls: {', '.join(calls)}" if calls else
                         f"all {spec.n_ops} operations completed"),
        "history": history,
        "mistake_agent": None if label is None else AGENT,
        "mistake_step": None if label is None else str(mistake_turn(label.step)),
        "mistake_reason": None if label is None else _reason(label),
        "diagym": {"format": FORMAT, "env": ENV_ID, "env_kwargs": dict(trace.env_kwargs),
                   "task_seed": trace.task_seed, "run_id": case.run_id,
                   "first_failure": record.first_failure,
                   "label": None if label is None else asdict(label)},
    }


def export(log: Path, out: Path) -> list[Path]:
    """Write every failed StatefulWorkflow episode of `log` to `out` as
    <run id>-<task seed>.json; the paths written. ValueError, one line, for a log without
    StatefulWorkflow episodes or with an episode lacking its trace."""
    written = []
    for case in cases(Path(log)):
        if case.record.success:
            continue
        path = Path(out) / f"{case.run_id}-{case.trace.task_seed}.json"
        path.write_text(json.dumps(document(case), indent=1) + "\n")
        written.append(path)
    return written


def read_label(document: Mapping[str, Any]) -> Label | None:
    """The label an exported document carries (None: unlabelled), read from its Who&When
    fields: mistake_step gives the decision, the agent's turn there the action, and the
    diagym fields the rest."""
    if document.get("mistake_step") is None:
        return None
    turn = int(document["mistake_step"])
    fields = dict(document["diagym"]["label"])
    fields["step"] = (turn - 1) // 2
    if fields["cause"] != "invalid_reply":
        action = json.loads(document["history"][turn]["content"])
        fields["op"], fields["slot"] = int(action["operation"]), int(action["candidate"])
    return Label(**fields)
