"""The `json` harness, seed 003's: every decision is a fresh prompt (the renderer's rules,
task, observation and history, optionally under an RCWT budget) answered by one JSON
object. Its prompts and call lines are those of every earlier run, so those runs stay
comparable and resumable.
"""

from __future__ import annotations

from typing import Any

from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.harness.base import Judged, json_format, reask_text
from diagym.llm_policies.harness.conversation import MessageWindow, message_tokens
from diagym.llm_policies.text_actions import parse_json_action


def judge_text(fields: Any, text: str) -> Judged:
    """A text reply: the JSON answer of `fields` (None: free text, any reply is the action)."""
    if fields is None:
        return Judged("ok", None, text)
    status, parsed = parse_json_action(text, fields)
    return Judged(status, parsed, text)


class JsonHarness:
    """One rendered prompt per decision; a re-ask appends the invalid reply and its category
    to that decision's prompt."""

    name = "json"
    tools = None

    def __init__(self, renderer: Any) -> None:
        self.renderer = renderer
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
        return MessageWindow(rendered.messages, rendered.text_tokens, 0)

    def judge(self, result: ChatResult) -> Judged:
        return judge_text(self.renderer.fields, result.text)

    def reask(self, result: ChatResult, judged: Judged) -> MessageWindow:
        again = f"Answer again with exactly one JSON object {json_format(self.renderer.fields)}."
        added = [{"role": "assistant", "content": result.text},
                 {"role": "user", "content": reask_text(judged.status, again)}]
        self._messages = [*self._messages, *added]
        self._tokens += sum(message_tokens(m) for m in added)
        return MessageWindow(self._messages, self._tokens, 0)

    def accept(self, result: ChatResult, judged: Judged) -> None:
        self._pending = judged.parsed
