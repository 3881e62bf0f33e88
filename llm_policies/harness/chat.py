"""The `chat` harness: one conversation per episode, each decision answered by one JSON
object as plain text.

The rules are sent once (as the system message, or ahead of the opening turn where the chat
template drops system messages), the opening turn gives the task and the initial
observation, and each later turn the result of the last call: what a chat-tuned model sees in
ordinary use, where seed 003's `json` harness re-renders the whole state every time.

With a reasoning budget (think-then-act, docs/REASONING.md) each reply may reason before its
JSON object; the conversation keeps each reply's answer and not its reasoning (as providers
drop a reasoning model's thinking between turns), so a context window holds turns, not
thoughts, and a resumed episode replays the same messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.harness.base import (
    Judged,
    check_reasoning_tokens,
    consequence,
    cut_note,
    json_format,
    reask_text,
    think_instruction,
)
from diagym.llm_policies.harness.conversation import (
    Conversation,
    Message,
    MessageWindow,
    check_window,
)
from diagym.llm_policies.harness.json_action import judge_reasoned, judge_text
from diagym.llm_policies.text_actions import REASONING_CUT, TEXT_FAILURES


class ChatHarness:
    """A conversation under a window of `window` tokens (None: unbounded); see
    harness/conversation.py for the window rule. `reasoning_tokens`: the think-then-act
    answer's budget (None: a direct answer)."""

    name = "chat"
    tools: list[dict[str, Any]] | None = None

    def __init__(self, renderer: Any, *, window: int | None = None,
                 invalid_retries: int = 0, reasoning_tokens: int | None = None) -> None:
        check_window(window)
        check_reasoning_tokens(reasoning_tokens, renderer.fields)
        self.reasoning_tokens = reasoning_tokens
        self.renderer = renderer
        self.window = window
        self.invalid_retries = invalid_retries
        self.reset()

    def reset(self) -> None:
        self.renderer.reset()
        self.conversation: Conversation | None = None
        self._pending: tuple[Message, Judged] | None = None

    # -- what differs between the conversation harnesses ---------------------------------------
    def answer_instruction(self) -> str:
        """The last line of the rules: how to answer, and what an invalid reply costs."""
        fields = self.renderer.fields
        if fields is None:
            return "Answer each turn in plain text."
        if self.reasoning_tokens is not None:
            what = f"exactly one JSON object {json_format(fields)}"
            return (f"Answer each turn in two parts: "
                    f"{think_instruction(what, self.reasoning_tokens)}; the last JSON object "
                    f"of a reply is its answer and {cut_note()}. "
                    f"{consequence((*TEXT_FAILURES, REASONING_CUT), self.invalid_retries)}")
        return (f"Answer each turn with exactly one JSON object {json_format(fields)} and "
                f"nothing else. {consequence(TEXT_FAILURES, self.invalid_retries)}")

    def again(self) -> str:
        what = f"exactly one JSON object {json_format(self.renderer.fields)}"
        if self.reasoning_tokens is not None:
            return f"Answer again: {think_instruction(what, self.reasoning_tokens)}."
        return f"Answer again with {what} and nothing else."

    def judge(self, result: ChatResult) -> Judged:
        if self.reasoning_tokens is not None:
            return judge_reasoned(self.renderer.fields, result)
        return judge_text(self.renderer.fields, result.text)

    def spoken(self, result: ChatResult, judged: Judged) -> ChatResult:
        """The reply as the conversation keeps it: without its reasoning (module doc)."""
        if judged.said is None:
            return result
        return dataclasses.replace(result, text=judged.said)

    def reply_message(self, result: ChatResult) -> Message:
        return {"role": "assistant", "content": result.text}

    def answers(self, reply: Message, judged: Judged, content: str) -> list[Message]:
        """The message(s) that answer `reply` with `content`."""
        return [{"role": "user", "content": content}]

    # -- the conversation ---------------------------------------------------------------------
    def _head(self, observation: Any) -> list[Message]:
        rules = self.renderer.rules(self.answer_instruction())
        opening = self.renderer.opening(observation)
        if getattr(self.renderer, "system_role", True):
            return [{"role": "system", "content": rules}, {"role": "user", "content": opening}]
        return [{"role": "user", "content": rules + "\n\n" + opening}]

    def prompt(self, observation: Any, info: dict[str, Any]) -> MessageWindow:
        if self.conversation is None:
            self.conversation = Conversation(self._head(observation))
        elif self._pending is not None:  # the outcome of the previous answer
            reply, judged = self._pending
            answer = judged.parsed if judged.parsed is not None else judged.action
            content = self.renderer.result(answer, observation, info)
            self.conversation.add(reply, *self.answers(reply, judged, content))
            self._pending = None
        return self.conversation.window(self.window)

    def reask(self, result: ChatResult, judged: Judged) -> MessageWindow:
        if self.conversation is None:
            raise RuntimeError("reask() before prompt()")
        reply = self.reply_message(self.spoken(result, judged))
        self.conversation.add(reply, *self.answers(reply, judged,
                                                   reask_text(judged.status, self.again())))
        return self.conversation.window(self.window)

    def accept(self, result: ChatResult, judged: Judged) -> None:
        self._pending = (self.reply_message(self.spoken(result, judged)), judged)
