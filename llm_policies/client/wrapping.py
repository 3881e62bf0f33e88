"""The base of chat-model wrappers (cache.CachedChat, prices.CostedChat).

A wrapper must stand wherever its inner model stands (LLMPolicy, the run record), so every
attribute it does not define itself is the inner model's, and it must call models that predate
native tool calling: `complete(messages)` takes no `tools` keyword on those, so it is passed
only when there are tools. Wrappers are synchronous: they wrap ChatClient, InProcessChat or
another wrapper, not AsyncChatClient.
"""

from __future__ import annotations

from typing import Any

from diagym.llm_policies.client.transport import ChatResult

Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]] | None


class ChatWrapper:
    """Forwards every attribute it lacks to `inner`; subclasses override `complete`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, unpickling): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def complete(self, messages: Messages, tools: Tools = None) -> ChatResult:
        return self._inner_complete(messages, tools)

    def _inner_complete(self, messages: Messages, tools: Tools) -> ChatResult:
        if tools is None:
            return self.inner.complete(messages)
        return self.inner.complete(messages, tools=tools)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ChatWrapper:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
