"""How a chat model is asked for its actions: the three harnesses LLMPolicy can play.

`json` (seed 003): a fresh prompt per decision, one JSON object back. `chat`: one
conversation per episode, one JSON object per turn. `tools`: the same conversation, each
decision a native function call. Each lives in its own module (json_action, chat, tools);
conversation.py holds the message list and its window rule, base.py the shared contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from diagym.llm_policies.families import ToolSpec
from diagym.llm_policies.harness.base import Harness, Judged
from diagym.llm_policies.harness.chat import ChatHarness
from diagym.llm_policies.harness.json_action import JsonHarness
from diagym.llm_policies.harness.tools import ToolsHarness

HARNESSES = ("json", "tools", "chat")
CONVERSATION_HARNESSES = ("tools", "chat")

__all__ = ["CONVERSATION_HARNESSES", "HARNESSES", "ChatHarness", "Harness", "JsonHarness",
           "Judged", "ToolsHarness", "make_harness"]


def make_harness(name: str, renderer: Any, *, tools: Sequence[ToolSpec] | None = None,
                 window: int | None = None, invalid_retries: int = 0,
                 bounded_fields: bool = False) -> Harness:
    """The harness called `name` (one of HARNESSES) over `renderer`; `tools` only for
    "tools" (`bounded_fields`: their arguments' ranges in the schema, prompts.schema),
    `window` only for the conversation harnesses."""
    if name not in HARNESSES:
        raise ValueError(f"harness must be one of {' | '.join(HARNESSES)}; got {name!r}")
    if tools is not None and name != "tools":
        raise ValueError(f"tools: only the tools harness offers functions; got harness {name!r}")
    if name == "json":
        if window is not None:
            raise ValueError("window: only the chat and tools harnesses keep a conversation; "
                             "the json harness's budget is the renderer's")
        return JsonHarness(renderer)
    if name == "chat":
        return ChatHarness(renderer, window=window, invalid_retries=invalid_retries)
    if tools is None:
        raise ValueError("tools: the tools harness needs the env's functions "
                         "(diagym.llm_policies.families tools, as LLMPolicy.for_env passes them)")
    return ToolsHarness(renderer, tools, window=window, invalid_retries=invalid_retries,
                        bounded_fields=bounded_fields)
