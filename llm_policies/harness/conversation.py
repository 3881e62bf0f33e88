"""The message list of a conversation harness and the one rule that fits it to a window.

A conversation is a head (the rules and the opening turn, never cut: without them no later
turn can be read) and then exchanges: the model's reply and the message(s) answering it (the
result of the call, or the category of an invalid reply). Under a window of W cl100k_base
tokens the oldest whole exchanges are dropped first, so the sum of the sent contents (and the
argument texts of tool calls, which a model also reads) stays within W. An exchange is never
split: a tool message without the assistant message that called it is refused by providers,
and a user turn without the reply before it breaks the alternation some chat templates
require. The newest exchange holds the pending turn and is always sent, even past W.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from diagym.envs._core.tokens import count

Message = dict[str, Any]


def check_window(budget: Any) -> None:
    """ValueError unless `budget` is a window: an integer >= 1, or None for no window."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < 1):
        raise ValueError(f"budget must be an integer >= 1 or None; got {budget!r}")


def message_tokens(message: Mapping[str, Any]) -> int:
    """cl100k_base tokens of what a message says: its content and its tool calls' arguments
    (role markup, ids and the provider's template are not counted)."""
    tokens = count(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        tokens += count(call["function"]["arguments"])
    return tokens


@dataclass(frozen=True)
class MessageWindow:
    """The messages of one call: `text_tokens` is the sum of their message_tokens and
    `dropped` the exchanges left out to fit the window."""

    messages: list[Message]
    text_tokens: int
    dropped: int


class Conversation:
    """head, then exchanges in order; `window(W)` is what one call sends."""

    def __init__(self, head: Sequence[Message]) -> None:
        if not head:
            raise ValueError("head: a conversation starts with at least one message")
        self.head = [dict(m) for m in head]
        self._head_tokens = sum(message_tokens(m) for m in self.head)
        self.exchanges: list[tuple[list[Message], int]] = []

    def add(self, reply: Message, *answers: Message) -> None:
        """One exchange: the model's `reply` and the messages that answer it."""
        if not answers:
            raise ValueError("answers: an exchange needs the message(s) answering the reply")
        messages = [dict(reply), *(dict(m) for m in answers)]
        self.exchanges.append((messages, sum(message_tokens(m) for m in messages)))

    def window(self, budget: int | None) -> MessageWindow:
        """The head and the newest exchanges whose tokens, with the head's, stay within
        `budget` (None: every exchange); the newest exchange is always kept."""
        check_window(budget)
        total, kept = self._head_tokens, 0
        for position, (_, tokens) in enumerate(reversed(self.exchanges)):
            if position and budget is not None and total + tokens > budget:
                break
            total += tokens
            kept += 1
        messages = list(self.head)
        for exchange, _ in self.exchanges[len(self.exchanges) - kept:]:
            messages.extend(exchange)
        return MessageWindow(messages, total, len(self.exchanges) - kept)
