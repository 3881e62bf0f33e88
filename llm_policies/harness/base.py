"""What every harness shares: a judged reply, the harness contract LLMPolicy drives, and the
words of an answer instruction and of a re-ask.

A harness owns the message list of an episode and the meaning of a reply; LLMPolicy owns the
calls, the run log and the counters. So the three harnesses play on one runner, one log and
one set of records, and differ only in what is sent and how a reply is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.harness.conversation import MessageWindow
from diagym.llm_policies.text_actions import FAILURE_REASONS, REASONING_CUT

ActionFields = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Judged:
    """A reply as the harness reads it: `status` "ok" or its failure category, `parsed` the
    answer's integers (None when it has none, or for a free-text reply), `action` what the
    policy hands to TextActionWrapper.step. In a think-then-act answer (docs/REASONING.md)
    `reasoning` is the text before the action (None: none) and `said` the reply without it
    (the action's JSON text, "" when there is none): what the call line keeps as the
    response and a conversation as the model's turn. `said` None: the reply is all answer."""

    status: str
    parsed: tuple[int, ...] | None
    action: Any
    reasoning: str | None = None
    said: str | None = None

    @property
    def well_formed(self) -> bool:
        """The reply has the answer's form (an out-of-range value is still well formed)."""
        return self.status in ("ok", "invalid_action")


class Harness(Protocol):
    """One episode's messages and the reading of replies, for LLMPolicy.

    Per decision: `prompt` (the first ask, after the outcome of the previous answer), `judge`
    each reply; an invalid one may be followed by `reask` (its reply and category appended);
    the reply that stands is `accept`ed. `tools` are the OpenAI tool dicts sent with every
    call (None: sent without).
    """

    name: str
    tools: list[dict[str, Any]] | None

    def reset(self) -> None: ...

    def prompt(self, observation: Any, info: dict[str, Any]) -> MessageWindow: ...

    def judge(self, result: ChatResult) -> Judged: ...

    def reask(self, result: ChatResult, judged: Judged) -> MessageWindow: ...

    def accept(self, result: ChatResult, judged: Judged) -> None: ...


def json_format(fields: ActionFields) -> str:
    """The JSON answer of `fields` as an instruction shows it: {"operation": <int>, ...}."""
    return "{" + ", ".join(f'"{key}": <int>' for key, _ in fields) + "}"


def think_instruction(what: str, reasoning_tokens: int) -> str:
    """The think-then-act answer: reasoning first, within about `reasoning_tokens` tokens,
    then `what` (the action's form) last."""
    return (f"first your reasoning in plain text (at most about {reasoning_tokens} tokens), "
            f"then {what} as the last thing you write")


def cut_note() -> str:
    """What a think-then-act reply cut before its action is."""
    return f"a reply cut at the token limit before its answer is {REASONING_CUT}"


def check_reasoning_tokens(value: Any, fields: Any) -> None:
    """ValueError unless `value` is a reasoning budget (an integer >= 1, or None for the
    direct answer) that the renderer's answer can take (`fields` None: a free-text reply is
    the action itself, so there is no action to find after the reasoning)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"reasoning_tokens must be an integer >= 1 or None; got {value!r}")
    if fields is None:
        raise ValueError("reasoning_tokens: a free-text answer is the action itself, so there "
                         "is no action to find after the reasoning")


def consequence(categories: Sequence[str], invalid_retries: int) -> str:
    """What an invalid reply costs, naming its categories."""
    named = ", ".join(categories)
    invalid = ("A reply in any other form, or with a value out of range, cannot be executed "
               f"({named})")
    if invalid_retries == 0:
        return f"{invalid} and ends the episode."
    return (f"{invalid}: you are told its category and asked again, at most {invalid_retries} "
            "times per turn, and an invalid last reply ends the episode.")


def reask_text(status: str, again: str) -> str:
    """The message after an invalid reply: its category, what that means, how to answer."""
    return f"That reply was {status}: {FAILURE_REASONS[status]}. {again}"
