"""Chat prompts for StatefulWorkflow-v0 and its presets: the text-action harness of seed 003.

Seed 003 (sections 9 and 10) gives the model, at every decision, the complete public task,
the current observation and the interaction history, and takes back one JSON action. This
module renders exactly that, from the env's own observation dict, so any StatefulWorkflow id
or kwargs work. The rules and the task lines come from `diagym.envs.workflow.text` (what
`render_mode="ansi"` prints), so a person reading a rendered episode sees what the model saw.

Message layout (documented because budgets are counted on it):
- no budget, system_role=True: [system: system_prompt(spec), user: decision_prompt(...)];
- no budget, system_role=False: [user: system_prompt + "\\n\\n" + decision_prompt], since some
  local chat templates (llama.cpp's gemma format) drop system messages;
- budget W: `budget.assemble(instructions=system_prompt, coordination, evidence=decision
  prompt, W, q, order)`; with system_role=True the system message is blocks[0] (the
  instructions) and the user message is blocks[1] + blocks[2]; with system_role=False the one
  user message is assembly.text. Either way the contents add up to exactly W cl100k_base
  tokens: `text_tokens` (the sum of the contents' own counts) == assembly.tokens == W.

The conversation harnesses (llm_policies/harness: chat, tools) send the rules once
(`conversation_rules`, ending with the harness's own answer instruction), then the opening
turn (`opening_prompt`: the task, the initial observation) and after every call its result
(`result_prompt`: the call's history line, then the new observation). Every text is built
from the same pieces as `decision_prompt`, so the lines a reader parses are identical in all
harnesses.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym.envs._core.failures import failure_name
from diagym.envs._core.tokens import count
from diagym.envs.workflow.layout import (
    FAILURE_NAMES,
    TASK_ROW,
    RowView,
    task_from_row,
    task_offsets,
)
from diagym.envs.workflow.params import WorkflowParams
from diagym.envs.workflow.text import describe_rules, describe_task
from diagym.llm_policies.prompts.budget import Assembly, assemble
from diagym.llm_policies.prompts.schema import integer_fields_schema

# The one action a reply may contain. Ranges (0..N-1, 0..b-1) are checked by the env, so an
# out-of-range integer is `invalid_action`, not `invalid_schema` (prompts.schema bounds them
# when a run asks for it).
ACTION_SCHEMA: dict[str, Any] = integer_fields_schema(("operation", "candidate"))

OUTCOME_OK = "ok"
INITIAL_HEADER = "Initial observation (before any call):"
RESAMPLED_NOTE = "active registers resampled"
_RESAMPLED_RULE = (
    "Resampling replaces the initial values at the first success, and each redrawn value "
    f"stays unseen until a snapshot shows it; a success's history line says {RESAMPLED_NOTE}."
)


def action_fields(spec: WorkflowParams) -> tuple[tuple[str, int], ...]:
    """The JSON fields of a StatefulWorkflow answer with their exclusive upper bounds."""
    return (("operation", spec.n_ops), ("candidate", spec.candidates))


@dataclass(frozen=True)
class Rendered:
    """One decision's chat messages and their token accounting.

    messages: OpenAI chat messages ({"role", "content"} dicts), in order: a list, as chat
        clients take it (the dataclass is frozen; treat the list as read-only too).
    text_tokens: sum of the cl100k_base counts of the message contents (role markup and the
        provider's chat template are not counted).
    assembly: the fixed-budget Assembly when a budget W was given, else None.
    """

    messages: list[dict[str, str]]
    text_tokens: int
    assembly: Assembly | None = None


def _intro(spec: WorkflowParams) -> list[str]:
    """The rules every harness states first: the call, the public rules, hidden registers."""
    n, b = spec.n_ops, spec.candidates
    return [
        "You control a stateful workflow through one tool call per turn: execute(v, a), with v "
        f"an operation identifier in 0..{n - 1} and a a candidate slot in 0..{b - 1}.",
        describe_rules(spec),
        "Registers that are not shown in an observation are written as hidden.",
    ]


@functools.cache
def _system(spec: WorkflowParams) -> tuple[str, int]:
    n, b = spec.n_ops, spec.candidates
    if spec.error_allowance == 0:
        text_failure = "Such a reply ends the episode like any failed call."
    else:
        text_failure = "Such a reply ends the episode, whatever the error allowance."
    lines = [
        *_intro(spec),
        "A reply that cannot be executed also fails: invalid_json (not one JSON object), "
        "invalid_schema (not exactly the two integer fields below), invalid_action (an "
        f"operation outside 0..{n - 1} or a candidate outside 0..{b - 1}). {text_failure}",
        "Each turn you get the public task, the current observation and the history of your "
        "calls with their outcomes and the register updates they applied; from the second "
        "turn on it also repeats the initial observation (every register value before any "
        "call), so the current values follow from the initial values and the updates even "
        "when the registers are shown as hidden.",
        *([_RESAMPLED_RULE] if spec.hidden_resampling else []),
        'Answer with exactly one JSON object {"operation": <int>, "candidate": <int>} and '
        "nothing else.",
    ]
    text = "\n".join(lines)
    return text, count(text)


def conversation_rules(spec: WorkflowParams, answer: str) -> str:
    """The public rules of `spec` for a conversation, ending with the harness's `answer`
    instruction (which says how a reply is given and what an invalid one costs)."""
    lines = [
        *_intro(spec),
        "A reply that cannot be executed is not a call and the error allowance does not cover "
        "it; the answer instruction below says what follows it.",
        "Each turn you get the result of your last call and the new observation; the first "
        "turn gives the public task and the initial observation (every register value before "
        "any call). A result starts with your call, its outcome and the register update it "
        "applied, so the current values follow from the initial values and the updates even "
        "when the registers are shown as hidden. When the conversation outgrows the context "
        "window its oldest turns after the first are left out.",
        *([_RESAMPLED_RULE] if spec.hidden_resampling else []),
        answer,
    ]
    return "\n".join(lines)


def opening_prompt(spec: WorkflowParams, observation: Mapping[str, Any]) -> str:
    """The first turn of a conversation: the public task, then the initial registers and the
    observation block as `decision_prompt` prints them, with no history."""
    return "\n".join([
        *_task_lines(spec, observation), INITIAL_HEADER,
        f"registers: {_registers(observation['registers'].tolist())}",
        *observation_lines(spec, observation, called=False),
    ])


def result_prompt(spec: WorkflowParams, k: int, entry: Mapping[str, Any],
                  observation: Mapping[str, Any]) -> str:
    """The turn after call k (1-based, `entry` as in `decision_prompt`'s history): its history
    line, then the observation block of the new observation."""
    return "\n".join([_history_line(spec, k, entry),
                       *observation_lines(spec, observation, called=True)])


def system_prompt(spec: WorkflowParams) -> str:
    """The public rules of `spec` and the answer format (cached per spec)."""
    return _system(spec)[0]


@functools.lru_cache(maxsize=256)
def _task_text(spec: WorkflowParams, key: bytes) -> str:
    return describe_task(task_from_row(spec, np.frombuffer(key, dtype=np.int8)))


@functools.cache
def _row_view(n: int, b: int) -> RowView:
    return RowView(n, b)


def _task_key(spec: WorkflowParams, observation: Mapping[str, Any]) -> bytes:
    """The observation's public task as its `task` row (layout.OBS_FIELDS), a cache key."""
    n, b = spec.n_ops, spec.candidates
    row = np.empty(task_offsets(n, b)[-1], dtype=np.int8)
    return _row_view(n, b).write_row(observation, TASK_ROW, row).tobytes()


def _history_line(spec: WorkflowParams, i: int, entry: Mapping[str, Any]) -> str:
    line = f"{i}. execute({int(entry['operation'])}, {int(entry['candidate'])}) -> "
    line += str(entry["outcome"])
    update = entry.get("update")
    if update is not None:
        reg, delta = update
        line += f"; x[{int(reg)}] += {int(delta)}"
        if spec.hidden_resampling:
            line += f"; {RESAMPLED_NOTE}"
    return line


def _registers(values: Sequence[int]) -> str:
    if all(v < 0 for v in values):
        return "hidden"
    return " ".join(f"x[{r}]={v if v >= 0 else 'hidden'}" for r, v in enumerate(values))


def decision_prompt(
    spec: WorkflowParams, observation: Mapping[str, Any], history: Sequence[Mapping[str, Any]],
    initial: Sequence[int] | None = None,
) -> str:
    """The public task, the current observation and the history for one decision, and from
    the second decision on the initial observation's registers.

    Seed 003's history condition removes refreshes, not information: with the initial values
    and every applied update in the prompt, an exact history-tracking reader reconstructs
    every register (docs/DECISIONS.md, "LLM policies").

    history: one dict per earlier call of this episode, in order: {"operation", "candidate",
    "outcome" ("ok" or a failure name), "update": [register, increment] or None}.
    initial: the registers of the episode's first observation; needed once `history` is not
    empty (at the first decision the observation is the initial one).
    """
    if history and initial is None:
        raise ValueError("initial: the first observation's registers are needed once the "
                         "history is not empty")
    lines = _task_lines(spec, observation)
    if history:
        lines += [INITIAL_HEADER, f"registers: {_registers([int(v) for v in initial])}"]
    lines += [*observation_lines(spec, observation, called=bool(history)), "History:"]
    if history:
        lines.extend(_history_line(spec, i, entry) for i, entry in enumerate(history, 1))
    else:
        lines.append("none yet")
    lines.append("Your action (one JSON object):")
    return "\n".join(lines)


def _task_lines(spec: WorkflowParams, observation: Mapping[str, Any]) -> list[str]:
    return [
        "Task (op v: after <prerequisites>; query x[query[v]]; update x[update[v]] += "
        "delta[v]; codes [codes[v][0] .. codes[v][b-1]]):",
        _task_text(spec, _task_key(spec, observation)),
    ]


def observation_lines(spec: WorkflowParams, observation: Mapping[str, Any], *,
                      called: bool) -> list[str]:
    """The "Observation:" block, one text for every harness so their prompts cannot drift.

    called: whether a call has been made in this episode (else "last call: none yet").
    """
    shown = _registers(observation["registers"].tolist())
    done = [v for v, flag in enumerate(observation["completed"].tolist()) if flag]
    reg, delta = observation["last_update"].tolist()
    last = f"x[{reg}] += {delta}" if reg >= 0 else "none yet"
    failure = FAILURE_NAMES[int(observation["failure"])]
    return [
        "Observation:",
        f"registers: {shown}",
        f"completed: {done}",
        f"last update: {last}",
        f"last call: {(failure or OUTCOME_OK) if called else 'none yet'}",
        f"errors so far: {int(observation['errors'])} (allowed: {spec.error_allowance})",
    ]


def render(
    spec: WorkflowParams,
    observation: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    *,
    budget: int | None = None,
    q: float = 0.0,
    coordination: str = "",
    order: str = "reason_first",
    system_role: bool = True,
    initial: Sequence[int] | None = None,
) -> Rendered:
    """The chat messages for one decision; see the module docstring for the layout.

    budget: the window W of a fixed-budget (RCWT) assembly, or None for the plain prompt;
    q, coordination and order are then passed to `budget.assemble`. initial: as in
    `decision_prompt`.
    """
    system, system_tokens = _system(spec)
    decision = decision_prompt(spec, observation, history, initial)
    if budget is None:
        if system_role:
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": decision},
            ]
            return Rendered(messages, system_tokens + count(decision))
        content = system + "\n\n" + decision
        return Rendered([{"role": "user", "content": content}], count(content))
    assembly = assemble(system, coordination, decision, W=budget, q=q, order=order)
    if system_role:
        head, middle, last = assembly.blocks
        messages = [
            {"role": "system", "content": head},
            {"role": "user", "content": middle + last},
        ]
    else:
        messages = [{"role": "user", "content": assembly.text}]
    return Rendered(messages, sum(count(m["content"]) for m in messages), assembly)


def history_entry(
    action: Sequence[int], info: Mapping[str, Any], observation: Mapping[str, Any]
) -> dict[str, Any]:
    """The history dict for one env step: outcome from info["failure"] (the env's code or
    the text layer's name), the update from the observation after a success."""
    failure = failure_name(info.get("failure"))
    update = None
    if failure is None:
        reg, delta = (int(x) for x in observation["last_update"])
        update = [reg, delta]
    return {
        "operation": int(action[0]),
        "candidate": int(action[1]),
        "outcome": failure or OUTCOME_OK,
        "update": update,
    }


class WorkflowRenderer:
    """StatefulWorkflow prompts for LLMPolicy: keeps the episode's initial registers and its
    history of calls and their outcomes, and renders each decision with `render` (optionally
    under a budget), or, for a conversation, its rules, opening and results."""

    schema = ACTION_SCHEMA

    def __init__(self, spec: WorkflowParams, *, budget: int | None = None, q: float = 0.0,
                 coordination: str = "", order: str = "reason_first",
                 system_role: bool = True) -> None:
        self.spec = spec
        self.fields = action_fields(spec)
        self.budget, self.q, self.coordination, self.order = budget, q, coordination, order
        self.system_role = system_role
        self.history: list[dict[str, Any]] = []
        self.initial: list[int] | None = None

    def describe(self) -> dict[str, Any]:
        return {"renderer": "workflow", "budget": self.budget, "q": self.q,
                "order": self.order, "system_role": self.system_role}

    def reset(self) -> None:
        self.history = []
        self.initial = None

    def record(self, action: Sequence[int], observation: Mapping[str, Any],
               info: Mapping[str, Any]) -> None:
        """The outcome of the previous answer, seen in the next observation."""
        self.history.append(history_entry(action, info, observation))

    def render(self, observation: Mapping[str, Any]) -> Rendered:
        """The prompt of the next decision; the first after reset() is the initial one."""
        if self.initial is None:
            self.initial = [int(v) for v in observation["registers"]]
        return render(self.spec, observation, self.history, budget=self.budget, q=self.q,
                      coordination=self.coordination, order=self.order,
                      system_role=self.system_role, initial=self.initial)

    def rules(self, answer: str) -> str:
        return conversation_rules(self.spec, answer)

    def opening(self, observation: Mapping[str, Any]) -> str:
        """The first turn after reset()."""
        self.initial = [int(v) for v in observation["registers"]]
        return opening_prompt(self.spec, observation)

    def result(self, action: Sequence[int], observation: Mapping[str, Any],
               info: Mapping[str, Any]) -> str:
        """The turn after `action`: recorded in the history, as its line and the new
        observation."""
        self.record(action, observation, info)
        return result_prompt(self.spec, len(self.history), self.history[-1], observation)
