"""The `tools` harness: the chat conversation, with each decision made by a native function
call (OpenAI tools) instead of JSON text.

The env family's functions (diagym.llm_policies.families: StatefulWorkflow execute(operation,
candidate); DACSSteering answer(option), and focus(agent) where the policy chooses its focus)
are sent with every call as JSON-schema functions of integer arguments; the reply's call goes
to TextActionWrapper as a ToolCallAction and its result comes back as the tool message. A
reply with no call or several is an InvalidReply, judged here because there is no one call to
hand on.

With a reasoning budget (think-then-act, docs/REASONING.md) the reply's text before its call is
its reasoning, kept in the call line and left out of the conversation, and a reply cut at the
token limit before any call is cut_reasoning, not no_tool_call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.families import ToolSpec
from diagym.llm_policies.harness.base import Judged, consequence, cut_note, think_instruction
from diagym.llm_policies.harness.chat import ChatHarness
from diagym.llm_policies.harness.conversation import Message
from diagym.llm_policies.prompts.schema import fields_schema
from diagym.llm_policies.text_actions import (
    INVALID_ACTION,
    MULTIPLE_TOOL_CALLS,
    NO_TOOL_CALL,
    REASONING_CUT,
    TOOL_FAILURES,
    InvalidReply,
    ToolCallAction,
    judge_tool_call,
)


def tool_dict(spec: ToolSpec, bounded: bool = False) -> dict[str, Any]:
    """The OpenAI function of a ToolSpec: every field a required integer >= 0, nothing else
    allowed (upper bounds are the env's to check, so a value past one is invalid_action), or
    with `bounded` each field one of its values (prompts.schema)."""
    return {"type": "function", "function": {
        "name": spec.name,
        "description": spec.description,
        "parameters": fields_schema(spec.fields, bounded),
    }}


def signature(spec: ToolSpec) -> str:
    return f"{spec.name}({', '.join(key for key, _ in spec.fields)})"


class ToolsHarness(ChatHarness):
    """The chat harness over `tools` (a family's ToolSpecs, at least one)."""

    name = "tools"

    def __init__(self, renderer: Any, tools: Sequence[ToolSpec], *, window: int | None = None,
                 invalid_retries: int = 0, bounded_fields: bool = False,
                 reasoning_tokens: int | None = None) -> None:
        if not tools:
            raise ValueError("tools: the tools harness needs at least one function to offer")
        self.specs = tuple(tools)
        self.tools = [tool_dict(spec, bounded_fields) for spec in self.specs]
        super().__init__(renderer, window=window, invalid_retries=invalid_retries,
                         reasoning_tokens=reasoning_tokens)

    def _functions(self) -> str:
        names = [signature(spec) for spec in self.specs]
        if len(names) == 1:
            return f"exactly one function call, {names[0]}"
        return f"exactly one function call, one of {', '.join(names)}"

    def answer_instruction(self) -> str:
        what = f"{self._functions()}, with integer arguments"
        if self.reasoning_tokens is None:
            return (f"Answer each turn with {what}. "
                    f"{consequence((*TOOL_FAILURES, INVALID_ACTION), self.invalid_retries)}")
        failures = (*TOOL_FAILURES, INVALID_ACTION, REASONING_CUT)
        return (f"Answer each turn in two parts: {think_instruction(what, self.reasoning_tokens)};"
                f" {cut_note()}. {consequence(failures, self.invalid_retries)}")

    def again(self) -> str:
        if self.reasoning_tokens is None:
            return f"Answer again with {self._functions()}."
        return f"Answer again: {think_instruction(self._functions(), self.reasoning_tokens)}."

    def judge(self, result: ChatResult) -> Judged:
        judged = self._judge_calls(result)
        if self.reasoning_tokens is None:
            return judged
        reasoning = result.text.strip() or None
        if judged.status == NO_TOOL_CALL and result.finish_reason == "length":
            return Judged(REASONING_CUT, None, InvalidReply(REASONING_CUT), reasoning, "")
        return dataclasses.replace(judged, reasoning=reasoning, said="")

    def _judge_calls(self, result: ChatResult) -> Judged:
        calls = result.tool_calls
        if not calls:
            return Judged(NO_TOOL_CALL, None, InvalidReply(NO_TOOL_CALL))
        if len(calls) > 1:
            return Judged(MULTIPLE_TOOL_CALLS, None,
                          InvalidReply(MULTIPLE_TOOL_CALLS, f"{len(calls)} calls"))
        action = ToolCallAction(calls[0].name, calls[0].arguments)
        status, _, parsed = judge_tool_call(self.specs, action)
        return Judged(status, parsed, action)

    def reply_message(self, result: ChatResult) -> Message:
        """The assistant message as received: its text (None when empty) and its calls."""
        # "" rather than null: llama.cpp's chatml-function-calling answers null with HTTP 500,
        # and OpenAI-compatible servers take an empty content beside tool_calls.
        message: Message = {"role": "assistant", "content": result.text or ""}
        if result.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call in result.tool_calls]
        return message

    def answers(self, reply: Message, judged: Judged, content: str) -> list[Message]:
        """One tool message per call of `reply` (providers refuse a call left unanswered), or
        a user message for a reply without calls."""
        calls = reply.get("tool_calls")
        if not calls:
            return [{"role": "user", "content": content}]
        return [{"role": "tool", "tool_call_id": call["id"], "content": content}
                for call in calls]
