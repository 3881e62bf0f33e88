"""A steered chat-model agent's turn: the markers it writes (`[[STEER: question]]` to ask the
orchestrator, `[[DONE]]` to end), the system prompt that asks for them, and a chat for models
without a system role.

Why here and not in the study: what an agent is told and how its reply is read are the
model's side of steering, the same for any study that plays such agents; the study
(analysis/studies/dacs_live) decides who answers, how answers are scored and what is logged.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from diagym.llm_policies.client.results import ChatResult

STEER_RE = re.compile(r"\[\[\s*STEER\s*:\s*(.*?)\]\]", re.IGNORECASE | re.DOTALL)
DONE_RE = re.compile(r"\[\[\s*DONE\s*\]\]", re.IGNORECASE)
MAX_QUESTION_CHARS = 600


class Chat(Protocol):
    def complete(self, messages: list[dict[str, Any]]) -> ChatResult: ...


class Agent(Protocol):
    """What an agent's prompt names: its id, its task, and the decisions it must ask about
    (one per line, "- " first)."""

    agent_id: str
    task: str
    hints: str


def steer_question(text: str) -> str | None:
    """The first steering question in an agent turn, or None."""
    match = STEER_RE.search(text)
    if match is None:
        return None
    question = " ".join(match.group(1).split())[:MAX_QUESTION_CHARS]
    return question or None


def is_done(text: str) -> bool:
    return DONE_RE.search(text) is not None


def agent_system_prompt(spec: Agent, max_steers: int) -> str:
    """Seed 002's rule that every listed decision is asked about before [[DONE]], with the
    marker's example last: Qwen2.5-Coder 0.5B answers whichever marker the prompt names last,
    so a prompt ending on "write [[DONE]]" is answered [[DONE]] at once (RESULTS.md)."""
    return (f"You are agent {spec.agent_id}, a specialist working on your own task.\n"
            f"Task: {spec.task}\n"
            f"When your task is finished, write [[DONE]]. Before that, you must ask the "
            f"orchestrator about each of these decisions, one per step, at most {max_steers} "
            f"questions; do not decide them alone:\n{spec.hints}\n"
            f"Work in short steps. To ask, write one question inside the marker and stop; the "
            f"orchestrator's answer will be your next message. Your first step is to ask "
            f"about your first decision, for example: [[STEER: {first_decision(spec)}]]")


def first_decision(spec: Agent) -> str:
    """The agent's first hint as a question: the marker's example names a decision of the
    agent's own (never its answer), so a model that copies the example still asks about its
    task; a generic example is copied word for word by small models (RESULTS.md)."""
    hint = spec.hints.splitlines()[0].lstrip("- ").strip()
    return hint[:1].upper() + hint[1:].rstrip("?.") + "?"


class FoldSystem:
    """A chat whose model takes no system role (Gemma's template): the system text opens
    the first user message instead, as the project's harnesses do for such models."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def complete(self, messages: list[dict[str, Any]]) -> ChatResult:
        if not messages or messages[0]["role"] != "system":
            return self.chat.complete(messages)
        system, rest = messages[0]["content"], list(messages[1:])
        if rest and rest[0]["role"] == "user":
            rest[0] = {"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}
        else:
            rest.insert(0, {"role": "user", "content": system})
        return self.chat.complete(rest)
