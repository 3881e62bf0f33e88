"""How a chat model is asked for its actions: the harnesses LLMPolicy can play, and the one
table of them.

`json` (seed 003): a fresh prompt per decision, one JSON object back. `chat`: one
conversation per episode, one JSON object per turn. `tools`: the same conversation, each
decision a native function call. Each lives in its own module (json_action, chat, tools);
conversation.py holds the message list and its window rule, base.py the shared contract.

`HARNESSES` is the one list of harness names: the CLI's --harness choices, the probe's
check of what a harness needs from a server, llm-study's factor and LLMPolicy all read it,
so a harness is added by its module and its entry here. The table names each class by
"module:Class" and imports it only when a harness is made, so the CLI reads the names
without loading the client or the renderers.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagym.llm_policies.families import ToolSpec
    from diagym.llm_policies.harness.base import Harness


@dataclass(frozen=True)
class HarnessKind:
    """One harness: its class ("module:Class" in this package), the server capabilities it
    needs (diagym.llm_policies.client.probe.Capabilities fields: the probe refuses a server
    that did not honour one), whether it keeps a conversation (then it takes the window and
    re-asks in that conversation) and whether it offers the env's functions as native
    tools."""

    cls: str
    needs: tuple[str, ...] = ()
    conversation: bool = False
    offers_tools: bool = False

    def load(self) -> type:
        module, name = self.cls.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)


HARNESSES: dict[str, HarnessKind] = {
    "json": HarnessKind("json_action:JsonHarness"),
    "tools": HarnessKind("tools:ToolsHarness", needs=("tools",), conversation=True,
                         offers_tools=True),
    "chat": HarnessKind("chat:ChatHarness", conversation=True),
}
CONVERSATION_HARNESSES = tuple(name for name, kind in HARNESSES.items() if kind.conversation)
TOOL_HARNESSES = tuple(name for name, kind in HARNESSES.items() if kind.offers_tools)

__all__ = ["CONVERSATION_HARNESSES", "HARNESSES", "TOOL_HARNESSES", "ChatHarness", "Harness",
           "HarnessKind", "JsonHarness", "Judged", "ToolsHarness", "check_harness_name",
           "make_harness"]

_LAZY = {"ChatHarness": "chat", "JsonHarness": "json_action", "ToolsHarness": "tools",
         "Harness": "base", "Judged": "base"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_harness_name(name: Any) -> HarnessKind:
    """The entry of harness `name`, or ValueError naming the harnesses there are."""
    if name not in HARNESSES:
        raise ValueError(f"harness must be one of {' | '.join(HARNESSES)}; got {name!r}")
    return HARNESSES[name]


def make_harness(name: str, renderer: Any, *, tools: Sequence[ToolSpec] | None = None,
                 window: int | None = None, invalid_retries: int = 0,
                 bounded_fields: bool = False, reasoning_tokens: int | None = None) -> Harness:
    """The harness called `name` (one of HARNESSES) over `renderer`; `tools` only for a
    harness that offers them (`bounded_fields`: their arguments' ranges in the schema,
    prompts.schema), `window` only for the conversation harnesses; `reasoning_tokens` the
    think-then-act answer's budget (None: the direct answer; docs/REASONING.md)."""
    kind = check_harness_name(name)
    if tools is not None and not kind.offers_tools:
        raise ValueError(f"tools: only the {' and '.join(sorted(TOOL_HARNESSES))} harness offers "
                         f"functions; got harness {name!r}")
    if window is not None and not kind.conversation:
        kept = " and ".join(sorted(CONVERSATION_HARNESSES))
        raise ValueError(f"window: only the {kept} harnesses keep a conversation; the {name} "
                         "harness's budget is the renderer's")
    options: dict[str, Any] = {}
    if kind.conversation:
        options.update(window=window, invalid_retries=invalid_retries)
    if kind.offers_tools:
        if tools is None:
            raise ValueError(f"tools: the {name} harness needs the env's functions "
                             "(diagym.llm_policies.families tools, as LLMPolicy.for_env "
                             "passes them)")
        options.update(tools=tools, bounded_fields=bounded_fields)
    if reasoning_tokens is not None:
        options["reasoning_tokens"] = reasoning_tokens
    return kind.load()(renderer, **options)
