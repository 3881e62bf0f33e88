"""Reading one HTTP response within bounds: the body under a byte limit on what arrives and
what it decodes to (gzip and deflate decoded here in bounded steps), JSON nesting checked
before parsing, and the `Outcome` an attempt ends in.

Why apart: what a server may send (a bomb, a drip, a deep nest) is the client's whole attack
surface, and these bounds are what keep every call finite in memory.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

MAX_ERROR_BODY_BYTES = 65_536
MAX_JSON_DEPTH = 64

# A string token with an optional closing quote and possessive repeats: an unterminated string
# runs to the end instead of being retried from every later quote, so the scan stays linear.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.DOTALL)


@dataclass(frozen=True)
class Outcome:
    """How one HTTP attempt ended, before the retry loop decides what to do with it."""

    action: Literal["ok", "retry", "fail", "downgrade"]
    text: str = ""
    error: str | None = None
    kind: str | None = None
    http_status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retry_after: float | None = None
    truncated: bool = False
    # What a well-formed 2xx reply says besides its text: the ChatResult fields it fills
    # (tool_calls, served_model, cached_prompt_tokens, provider_cost_usd, reasoning,
    # finish_reason), by name.
    answer: Mapping[str, Any] = field(default_factory=dict)


class Stop(Exception):
    """Ends reading a response early with the outcome it deserves."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.error)
        self.outcome = outcome



def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether arrays/objects nest deeper than `limit` (brackets inside strings ignored).
    The bracket count bounds the depth, so an ordinary reply costs two str.count calls."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group(0)
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def valid_unicode(text: str) -> str:
    """JSON can carry lone surrogates ("\\ud800") that no UTF-8 log line can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class BodyReader:
    """Accumulates a response body under a byte limit on both what arrives and what it
    decodes to; gzip and deflate are decoded here, at most `limit + 1` bytes per step.

    `hard`: exceeding the limit is a "too_large" failure (answers); otherwise reading stops
    quietly and keeps the beginning (error bodies, where only the message matters).
    """

    def __init__(self, headers: httpx.Headers, limit: int, *, hard: bool) -> None:
        self.limit = limit
        self.hard = hard
        self.full = False
        self.received = 0
        self.size = 0
        self.parts: list[bytes] = []
        codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1:
            raise self._bad(f"stacked content-encodings {', '.join(codings)!r}")
        self.coding = codings[0] if codings else None
        self._first = True
        self._z: Any = None
        if self.coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self.coding == "deflate":
            self._z = zlib.decompressobj()
        elif self.coding is not None:
            raise self._bad(f"unsupported content-encoding {self.coding[:40]!r}")
        declared = headers.get("content-length", "").strip()
        if hard and declared.isdigit() and int(declared) > limit:
            raise self._large(f"Content-Length {declared} is over the {limit}-byte limit")

    @staticmethod
    def _bad(why: str) -> Stop:
        return Stop(Outcome("fail", error=f"bad encoding: {why}", kind="bad_encoding"))

    def _large(self, why: str) -> Stop:
        return Stop(Outcome("fail", error=f"response too large: {why}", kind="too_large"))

    def feed(self, chunk: bytes) -> None:
        """Raises Stop when the limit is crossed (hard) or sets `full` (soft)."""
        self.received += len(chunk)
        if self.received > self.limit:
            if self.hard:
                raise self._large(f"more than {self.limit} bytes received")
            self.full = True
        if self._z is None:
            self._add(chunk)
            return
        data = chunk
        while data and not self.full:
            room = self.limit - self.size
            try:
                out = self._z.decompress(data, room + 1)
            except zlib.error as exc:
                if self.coding == "deflate" and self._first:  # raw deflate, without zlib header
                    self._first = False
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise self._bad(f"corrupt {self.coding} data ({exc})") from None
            self._first = False
            self._add(out)
            data = b"" if self._z.eof else self._z.unconsumed_tail

    def _add(self, data: bytes) -> None:
        if self.full:
            return
        if self.size + len(data) > self.limit:
            if self.hard:
                raise self._large(f"the body decodes to more than {self.limit} bytes")
            data = data[: self.limit - self.size]
            self.full = True
        self.size += len(data)
        self.parts.append(data)

    def finish(self) -> bytes:
        if self._z is not None and not self.full:
            self._add(self._z.flush())
        return b"".join(self.parts)

