"""The prompt-sufficiency control: programmed readers of the chat messages, as a chat model.

A text policy can only be as good as its prompt. `text-oracle` answers each decision from the
messages the harness sends and nothing else (no env object, no observation dict), with the
decision an exact controller would make from that text, and it plays through the same harness
as a real model (LLMPolicy, the renderer, `parse_json_action`, TextActionWrapper) behind
`InProcessChat`, a chat client whose model is a Python function. If a prompt drops something
a decision needs, the control loses episodes it should win, so its score checks the prompts.

StatefulWorkflow (`WorkflowOracle`): the smallest-identifier ready operation; the slot whose
code equals x[query] mod b, with x read from the current observation when shown, else from
the initial observation plus every applied update in the history; after a success that
resampled the registers, an unshown value is unknown and the oracle guesses the unexamined
slot (no failed attempt on this operation since the last success) whose code is the most
likely residue of a uniform value in 0..7, the smallest such slot on a tie. With no retries
it therefore reaches seed 003's ceiling b^-(N - v) (appendix B.3; v visible decisions, b
dividing 8) and no more.

The messages may be one json-harness prompt or a whole conversation (chat and tools
harnesses: the rules, the opening, then a result per call). Either way the oracle reads what
the harness told it, message by message: a conversation's evidence is spread over its turns,
and a window that dropped old exchanges took their calls with it, so an unshown value is then
guessed, as it would be after a resampling.

DACSSteering (`DacsOracle`): the window read with the reference reader's own parser and
evidence rule (diagym.controllers.dacs.readers: parse_window, Reader.value), so it answers as
`dacs-reader` wherever the window holds the evidence; where it does not, it guesses option 0
(it cannot share the reader's seeded guess stream without the episode seed, which the prompt
does not carry). In a conversation it reads only the newest window: older windows belong to
requests already answered.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagym.controllers.dacs.readers import Reader, parse_window
from diagym.llm_policies.client.transport import ChatResult, ToolCall
from diagym.llm_policies.prompts.dacs import ANSWER_KEY
from diagym.llm_policies.prompts.workflow import INITIAL_HEADER, RESAMPLED_NOTE

Messages = Sequence[dict[str, Any]]
ORACLE_MODEL = "text-oracle"
IN_PROCESS = "in-process"
WINDOW_REQUEST = "## request"  # the header of a DACS window's request block (docs/DACS.md)
REGISTER_VALUES = 8  # registers hold 0..7 (the rules in every system prompt say so)

_TASK = re.compile(r"^op (\d+): after (none|\[[\d, ]*\]); query x\[(\d+)\]; "
                   r"update x\[(\d+)\] \+= (\d+); codes \[([\d ]*)\]$")
_CALL = re.compile(r"^(\d+)\. execute\((\d+), (\d+)\) -> (\w+)"
                   r"(?:; x\[(\d+)\] \+= (\d+))?(; " + re.escape(RESAMPLED_NOTE) + r")?$")
_REGISTER = re.compile(r"x\[(\d+)\]=(\d+)")
_MODULUS = re.compile(r"codes\[v\]\[a\] == x\[query\[v\]\] mod (\d+)")


class InProcessChat:
    """A chat client whose model is a function of the messages, for LLMPolicy.

    It has the attributes LLMPolicy reads from a ChatClient and answers every call with
    status "ok", no provider token counts and the wall time of the function; no HTTP, no
    retries, no structured output (response_format "none": the function writes the JSON).
    Tool calls are numbered per client ("call_1", "call_2", ...).
    """

    base_url = IN_PROCESS
    temperature = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    response_format = "none"
    mode = "none"

    def __init__(self, answer: Callable[[Messages], str], model: str = ORACLE_MODEL) -> None:
        self.answer = answer
        self.model = model
        self.tool_calls = 0  # numbers the calls' ids, as a provider's ids are unique per run

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> ChatResult:
        """With `tools`, the answer is sent as a call of the tool that takes it (see
        `_tool_call`; text ""); an answer no tool takes stays text, as a model's reply that
        calls no tool would."""
        started = time.perf_counter()
        text = self.answer(messages)
        calls: tuple[ToolCall, ...] = ()
        call = _tool_call(text, tools) if tools else None
        if call is not None:
            self.tool_calls += 1
            calls, text = (ToolCall(f"call_{self.tool_calls}", *call),), ""
        return ChatResult(text=text, status="ok", error=None, http_status=None,
                          prompt_tokens=None, completion_tokens=None,
                          latency_s=time.perf_counter() - started, retries=0,
                          response_format=self.response_format, tool_calls=calls)

    def close(self) -> None:
        pass


def _tool_call(answer: str, tools: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """(tool name, arguments) for an answer: the tool whose parameters are exactly the
    answer's keys, with the answer as its arguments; else, for a one-key answer, the
    one-parameter tool named after the key, with the value under its parameter's name (the
    json harness's {"answer": i} is the tools harness's answer(option=i))."""
    try:
        parsed = json.loads(answer)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    functions = [tool.get("function", {}) for tool in tools]
    for function in functions:
        if set(function.get("parameters", {}).get("properties", {})) == set(parsed):
            return str(function["name"]), answer
    if len(parsed) == 1:
        ((key, value),) = parsed.items()
        for function in functions:
            names = list(function.get("parameters", {}).get("properties", {}))
            if function.get("name") == key and len(names) == 1:
                return key, json.dumps({names[0]: value})
    return None


def _content(message: dict[str, Any]) -> str:
    """A message's text; an assistant message that only calls a tool has content None."""
    return str(message.get("content") or "")


def _told(messages: Messages) -> list[str]:
    """The texts the harness sent (every message but the replies, which say nothing the
    results do not)."""
    return [_content(m) for m in messages if m.get("role") != "assistant"]


def _registers(line: str) -> dict[int, int]:
    """The shown values of a "registers: ..." line ("hidden" entries are left out)."""
    return {int(r): int(v) for r, v in _REGISTER.findall(line)}


@dataclass
class WorkflowPrompt:
    """What a StatefulWorkflow prompt says, as parsed (see `parse_workflow_prompt`)."""

    candidates: int | None = None  # b, from the rules
    prereq: dict[int, list[int]] = field(default_factory=dict)
    query: dict[int, int] = field(default_factory=dict)
    codes: dict[int, list[int]] = field(default_factory=dict)
    initial: dict[int, int] | None = None
    current: dict[int, int] | None = None
    completed: set[int] | None = None
    calls: dict[int, tuple[int, int, str, tuple[int, int] | None, bool]] = field(
        default_factory=dict)  # index -> (op, slot, outcome, update, resampled)


def _call(line: str) -> tuple[int, tuple[int, int, str, tuple[int, int] | None, bool]] | None:
    call = _CALL.match(line)
    if call is None:
        return None
    update = (int(call.group(5)), int(call.group(6))) if call.group(5) else None
    return int(call.group(1)), (int(call.group(2)), int(call.group(3)), call.group(4), update,
                                bool(call.group(7)))


def _parse_message(text: str) -> WorkflowPrompt:
    """One message; the first occurrence of each item wins, so a budget that repeats the
    evidence block changes nothing. A call line counts in a "History:" section or as the
    message's first line (a conversation's result turn)."""
    parsed = WorkflowPrompt()
    section = ""
    for number, line in enumerate(text.split("\n")):
        modulus = _MODULUS.search(line)
        if modulus and parsed.candidates is None:
            parsed.candidates = int(modulus.group(1))
        task = _TASK.match(line)
        if task:
            v = int(task.group(1))
            if v not in parsed.query:
                after = task.group(2)
                parsed.prereq[v] = [] if after == "none" else json.loads(after)
                parsed.query[v] = int(task.group(3))
                parsed.codes[v] = [int(c) for c in task.group(6).split()]
            continue
        if line == INITIAL_HEADER:
            section = "initial"
        elif line == "Observation:":
            section = "current"
        elif line == "History:":
            section = "history"
        elif line.startswith("registers: "):
            if section == "initial" and parsed.initial is None:
                parsed.initial = _registers(line)
            elif section == "current" and parsed.current is None:
                parsed.current = _registers(line)
        elif line.startswith("completed: ") and parsed.completed is None:
            try:
                parsed.completed = set(json.loads(line[len("completed: "):]))
            except ValueError:
                pass
        elif section == "history" or number == 0:
            call = _call(line)
            if call is not None and call[0] not in parsed.calls:
                parsed.calls[call[0]] = call[1]
    return parsed


def parse_workflow_prompt(messages: Messages) -> WorkflowPrompt:
    """A json-harness prompt or a whole conversation, message by message: the rules, the
    task and the initial registers are read where they first appear (the head, which no
    window cuts), a later message's observation replaces an earlier one's, and the calls are
    collected from every message by their index."""
    parsed = WorkflowPrompt()
    for text in _told(messages):
        part = _parse_message(text)
        if parsed.candidates is None:
            parsed.candidates = part.candidates
        for v in part.query:
            if v not in parsed.query:
                parsed.prereq[v], parsed.query[v] = part.prereq[v], part.query[v]
                parsed.codes[v] = part.codes[v]
        if parsed.initial is None:
            parsed.initial = part.initial
        if part.current is not None:
            parsed.current = part.current
        if part.completed is not None:
            parsed.completed = part.completed
        for i, call in part.calls.items():
            parsed.calls.setdefault(i, call)
    return parsed


def _value(parsed: WorkflowPrompt, register: int) -> int | None:
    """x[register] now: shown, or the initial value plus the applied updates; None when it
    cannot be known (not shown and resampled since, a call missing from the messages, or no
    initial value in them)."""
    if parsed.current and register in parsed.current:
        return parsed.current[register]
    if sorted(parsed.calls) != list(range(1, len(parsed.calls) + 1)):
        return None  # a window dropped calls, and their updates with them
    calls = [parsed.calls[i] for i in sorted(parsed.calls)]
    if any(resampled for *_, resampled in calls):
        return None
    if parsed.initial is None or register not in parsed.initial:
        return None
    value = parsed.initial[register]
    for _, _, outcome, update, _ in calls:
        if outcome == "ok" and update is not None and update[0] == register:
            value += update[1]
    return value % REGISTER_VALUES


class WorkflowOracle:
    """Answers a StatefulWorkflow prompt as an exact history-tracking controller would (see
    the module docstring); `guesses` counts decisions made without the queried value."""

    def __init__(self) -> None:
        self.guesses = 0

    def choose(self, messages: Messages) -> tuple[int, int]:
        parsed = parse_workflow_prompt(messages)
        done = parsed.completed or set()
        ready = [v for v in sorted(parsed.query)
                 if v not in done and all(u in done for u in parsed.prereq[v])]
        if not ready:
            self.guesses += 1
            return 0, 0
        op = ready[0]
        codes = parsed.codes[op]
        b = parsed.candidates or len(codes)
        x = _value(parsed, parsed.query[op])
        if x is not None and x % b in codes:
            return op, codes.index(x % b)
        if len(codes) != b:  # the slots' codes are not in the prompt
            self.guesses += 1
            return op, 0
        self.guesses += 1
        calls = [parsed.calls[i] for i in sorted(parsed.calls)]
        since = calls[max((i for i, c in enumerate(calls) if c[2] == "ok"), default=-1) + 1:]
        tried = {slot for v, slot, outcome, *_ in since if v == op and outcome == "candidate"}
        open_slots = [a for a in range(b) if a not in tried] or list(range(b))
        weight = [sum(1 for y in range(REGISTER_VALUES) if y % b == c) for c in codes]
        return op, max(open_slots, key=lambda a: (weight[a], -a))

    def __call__(self, messages: Messages) -> str:
        op, slot = self.choose(messages)
        return json.dumps({"operation": op, "candidate": slot})


def latest_window(messages: Messages) -> str:
    """The text of the last user or tool message that holds a window (a "## request" block):
    in a conversation every result repeats a whole window, and only the newest one is the
    pending request's."""
    for message in reversed(messages):
        text = _content(message)
        if message.get("role") in ("user", "tool") and WINDOW_REQUEST in text.split("\n"):
            return text
    return ""


class DacsOracle:
    """Answers a DACSSteering prompt with `dacs-reader`'s rule on the window text; `guesses`
    counts requests whose evidence the window lacks (answered with option 0)."""

    def __init__(self) -> None:
        self.guesses = 0
        self._reader = Reader()  # its evidence rule only; its guesses need the episode seed

    def choose(self, messages: Messages) -> int:
        parsed = parse_window(latest_window(messages))
        value = self._reader.value(parsed)
        if value is not None and value in parsed.options:
            return parsed.options.index(value)
        self.guesses += 1
        return 0

    def __call__(self, messages: Messages) -> str:
        return json.dumps({ANSWER_KEY: self.choose(messages)})
