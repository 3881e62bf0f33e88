"""The `json` harness, seed 003's: every decision is a fresh prompt (the renderer's rules,
task, observation and history, optionally under an RCWT budget) answered by one JSON
object. Its prompts and call lines are those of every earlier run, so those runs stay
comparable and resumable.

With a reasoning budget (think-then-act, docs/REASONING.md) the renderer's answer
instruction, and only it, is replaced: the model reasons in text first and ends with the
JSON object, and the last action object of the reply is the answer (`judge_reasoned`).
"""

from __future__ import annotations

import re
from typing import Any

from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.harness.base import (
    Judged,
    check_reasoning_tokens,
    cut_note,
    json_format,
    reask_text,
    think_instruction,
)
from diagym.llm_policies.harness.conversation import MessageWindow, message_tokens
from diagym.llm_policies.text_actions import (
    INVALID_JSON,
    REASONING_CUT,
    InvalidReply,
    parse_json_action,
    split_reasoned_reply,
)

# The renderers' direct answer instruction (prompts.workflow, prompts.dacs).
DIRECT_ANSWER = re.compile(r"(Answer|Reply) with exactly one JSON object (\{[^\n]*?\}) and "
                           r"nothing else\.")


def judge_text(fields: Any, text: str) -> Judged:
    """A text reply: the JSON answer of `fields` (None: free text, any reply is the action)."""
    if fields is None:
        return Judged("ok", None, text)
    status, parsed = parse_json_action(text, fields)
    return Judged(status, parsed, text)


def judge_reasoned(fields: Any, result: ChatResult) -> Judged:
    """A think-then-act reply: the last action object is the answer and the text before it
    the reasoning (text_actions.split_reasoned_reply); without one the reply is
    cut_reasoning when the server cut it at the token limit, else invalid_json."""
    reasoning, action = split_reasoned_reply(result.text, fields)
    if action is None:
        status = REASONING_CUT if result.finish_reason == "length" else INVALID_JSON
        return Judged(status, None, InvalidReply(status), reasoning or None, "")
    status, parsed = parse_json_action(action, fields)
    return Judged(status, parsed, action, reasoning or None, action)


def think_messages(messages: list[dict[str, Any]], fields: Any,
                   reasoning_tokens: int) -> list[dict[str, Any]]:
    """`messages` with the renderer's direct answer instruction replaced by the
    think-then-act one; ValueError when no message holds it."""
    what = f"exactly one JSON object {json_format(fields)}"

    def think(match: re.Match[str]) -> str:
        return (f"{match.group(1)} in two parts: {think_instruction(what, reasoning_tokens)}. "
                f"The last JSON object in your reply is your answer; {cut_note()}.")

    out, replaced = [], 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            content, n = DIRECT_ANSWER.subn(think, content)
            replaced += n
            message = {**message, "content": content}
        out.append(message)
    if replaced != 1:
        raise ValueError(f"reasoning_tokens: the prompt holds {replaced} direct answer "
                         "instructions to replace; expected exactly one")
    return out


class JsonHarness:
    """One rendered prompt per decision; a re-ask appends the invalid reply and its category
    to that decision's prompt. `reasoning_tokens`: the think-then-act answer's budget (None:
    seed 003's direct answer)."""

    name = "json"
    tools = None

    def __init__(self, renderer: Any, *, reasoning_tokens: int | None = None) -> None:
        check_reasoning_tokens(reasoning_tokens, renderer.fields)
        self.renderer = renderer
        self.reasoning_tokens = reasoning_tokens
        self.reset()

    def reset(self) -> None:
        self.renderer.reset()
        self._pending: tuple[int, ...] | None = None
        self._messages: list[dict[str, Any]] = []
        self._tokens = 0

    def prompt(self, observation: Any, info: dict[str, Any]) -> MessageWindow:
        if self._pending is not None:  # the outcome of the previous answer
            self.renderer.record(self._pending, observation, info)
        rendered = self.renderer.render(observation)
        self._messages, self._tokens = list(rendered.messages), rendered.text_tokens
        if self.reasoning_tokens is not None:
            self._messages = think_messages(self._messages, self.renderer.fields,
                                            self.reasoning_tokens)
            self._tokens = sum(message_tokens(m) for m in self._messages)
        return MessageWindow(self._messages, self._tokens, 0)

    def judge(self, result: ChatResult) -> Judged:
        if self.reasoning_tokens is not None:
            return judge_reasoned(self.renderer.fields, result)
        return judge_text(self.renderer.fields, result.text)

    def reask(self, result: ChatResult, judged: Judged) -> MessageWindow:
        what = f"exactly one JSON object {json_format(self.renderer.fields)}"
        if self.reasoning_tokens is None:
            again = f"Answer again with {what}."
        else:
            again = f"Answer again: {think_instruction(what, self.reasoning_tokens)}."
        said = result.text if judged.said is None else judged.said
        added = [{"role": "assistant", "content": said},
                 {"role": "user", "content": reask_text(judged.status, again)}]
        self._messages = [*self._messages, *added]
        self._tokens += sum(message_tokens(m) for m in added)
        return MessageWindow(self._messages, self._tokens, 0)

    def accept(self, result: ChatResult, judged: Judged) -> None:
        self._pending = judged.parsed
