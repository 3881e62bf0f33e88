"""What one chat call returns (`ChatResult`, with its `ToolCall`s) and what a client holds
around each HTTP attempt (`Limiter`); the types every layer above the client reads.

Why apart from the client: harnesses, caches, price meters and the run log read results
without needing the HTTP machinery that makes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

ERROR_KINDS = (
    "timeout", "deadline", "connection", "http", "too_large", "too_deep", "bad_encoding",
    "malformed", "request",
)
TOOLS_MODE = "tools"  # the response_format a call with tools records


@dataclass(frozen=True)
class ToolCall:
    """One native tool call of a reply: `arguments` is the raw JSON text the server sent (an
    object a server sent as JSON is encoded back to text), judged by the harness."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one `complete()` call; `text` is "" whenever `status` is "error".

    `truncated`: the answer was longer than `max_answer_chars` and `text` is its beginning.
    `error_kind`: one of `ERROR_KINDS` for an error, None for an answer.
    """

    text: str
    status: Literal["ok", "error"]
    error: str | None
    http_status: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    retries: int
    response_format: str
    truncated: bool = False
    error_kind: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    served_model: str | None = None
    cached_prompt_tokens: int | None = None
    provider_cost_usd: float | None = None
    reasoning: str | None = None  # the reasoning text a server returned beside the answer
    provider_reasoning_tokens: int | None = None  # of completion_tokens, as the server says
    finish_reason: str | None = None
    cache: str | None = None  # None: no cache in use; "hit" or "miss" (client/cache.py)
    cost_usd: float | None = None  # set by client/prices.py's CostedChat; None: unknown


class Limiter(Protocol):
    """What `ChatClient(limiter=...)` holds around each HTTP attempt (limits.AdaptiveLimit)."""

    def acquire(self) -> None: ...

    def release(self, throttled: bool) -> None: ...

