"""The `chat` harness: one conversation per episode, each decision answered by one JSON
object as plain text.

The rules are sent once (as the system message, or ahead of the opening turn where the chat
template drops system messages), the opening turn gives the task and the initial
observation, and each later turn the result of the last call: what a chat-tuned model sees in
ordinary use, where seed 003's `json` harness re-renders the whole state every time.
"""

from __future__ import annotations

from typing import Any

from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.harness.base import Judged, consequence, json_format, reask_text
from diagym.llm_policies.harness.conversation import (
    Conversation,
    Message,
    MessageWindow,
    check_window,
)
from diagym.llm_policies.harness.json_action import judge_text
from diagym.llm_policies.text_actions import TEXT_FAILURES


class ChatHarness:
    """A conversation under a window of `window` tokens (None: unbounded); see
    harness/conversation.py for the window rule."""

    name = "chat"
    tools: list[dict[str, Any]] | None = None

    def __init__(self, renderer: Any, *, window: int | None = None,
                 invalid_retries: int = 0) -> None:
        check_window(window)
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
        return (f"Answer each turn with exactly one JSON object {json_format(fields)} and "
                f"nothing else. {consequence(TEXT_FAILURES, self.invalid_retries)}")

    def again(self) -> str:
        return (f"Answer again with exactly one JSON object {json_format(self.renderer.fields)}"
                " and nothing else.")

    def judge(self, result: ChatResult) -> Judged:
        return judge_text(self.renderer.fields, result.text)

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
        reply = self.reply_message(result)
        self.conversation.add(reply, *self.answers(reply, judged,
                                                   reask_text(judged.status, self.again())))
        return self.conversation.window(self.window)

    def accept(self, result: ChatResult, judged: Judged) -> None:
        self._pending = (self.reply_message(result), judged)
