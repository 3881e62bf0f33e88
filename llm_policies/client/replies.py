"""What a response means: an HTTP status, an error body or a 2xx chat completion turned into
the `Outcome` the retry loop acts on (answer, retry, fail, or downgrade the structured-output
mode), with every field of a reply checked, scrubbed and bounded.

Why apart from the loop: which statuses retry, which downgrade, and what counts as a
well-formed answer are the client's rules about servers, and they hold for the sync and async
clients alike (client/core.py's `ChatCore` inherits them).
"""

from __future__ import annotations

import codecs
import email.utils
import json
import math
import numbers
from datetime import UTC, datetime
from typing import Any

import httpx

from diagym.llm_policies.client.body import (
    MAX_ERROR_BODY_BYTES,
    MAX_JSON_DEPTH,
    BodyReader,
    Outcome,
    json_depth_exceeds,
    valid_unicode,
)
from diagym.llm_policies.client.config import MODES, ClientConfig
from diagym.llm_policies.client.results import ToolCall

NEGOTIATION_STATUSES = frozenset({400, 422, 500})
NEGOTIATION_WORDS = ("response_format", "response format", "schema", "json_object", "grammar")
RETRYABLE_STATUSES = frozenset({408, 429})
MAX_ERROR_CHARS = 200
MAX_TOOL_CALLS = 16
MAX_FIELD_CHARS = 200
MAX_REPORTED_TOKENS = 10**9  # no call holds more: a larger or negative count is not usage


def _count(value: Any) -> int | None:
    """A reported token count, None (unknown, never 0) when it is not one a call can have."""
    if isinstance(value, int) and not isinstance(value, bool) and (
            0 <= value <= MAX_REPORTED_TOKENS):
        return value
    return None


def _cached_tokens(usage: dict[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return cached if cached is not None else _count(usage.get("cache_read_input_tokens"))


def _reasoning_tokens(usage: dict[str, Any]) -> int | None:
    """OpenAI's usage.completion_tokens_details.reasoning_tokens: the completion tokens that
    were hidden reasoning (already inside completion_tokens)."""
    details = usage.get("completion_tokens_details")
    return _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None


def _cost(value: Any) -> float | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)
        return value if math.isfinite(value) and value >= 0 else None
    return None



class ReplyRules:
    """Response classification for the client core: it needs the core's `config`, its
    `scrub` and its negotiation state (`_auto`: the mode is negotiated; `_confirmed`: the
    current mode has produced an answer on this client)."""

    config: ClientConfig
    _auto: bool
    _confirmed: bool

    def scrub(self, text: str) -> str:
        raise NotImplementedError

    def _short(self, text: str) -> str:
        text = self.scrub(" ".join(text[: 4 * MAX_ERROR_CHARS].split()))
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS - 3] + "..."
        return text
    def _retry_after(self, headers: httpx.Headers) -> float | None:
        value = headers.get("retry-after")
        if value is None:
            return None
        value = value.strip()[:64]
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - datetime.now(UTC)).total_seconds()
        if seconds != seconds:  # NaN
            return None
        return min(max(seconds, 0.0), self.config.max_retry_after)

    def _error_text(self, body: str) -> str:
        """The provider's error message when the body is OpenAI-shaped, else the raw body."""
        if json_depth_exceeds(body, MAX_JSON_DEPTH):
            return body
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return body
        if isinstance(data, dict):
            err = data.get("error", data.get("detail", data.get("message")))
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return err["message"]
            if isinstance(err, str):
                return err
        return body

    def _reader(self, response: httpx.Response) -> BodyReader:
        ok = 200 <= response.status_code < 300
        limit = self.config.max_response_bytes if ok else min(self.config.max_response_bytes,
                                                        MAX_ERROR_BODY_BYTES)
        headers = response.headers
        if response.is_stream_consumed:  # in memory already (MockTransport): decoded bytes
            headers = httpx.Headers({k: v for k, v in headers.items()
                                     if k.lower() != "content-encoding"})
        return BodyReader(headers, limit, hard=ok)

    def _classify(self, response: httpx.Response, raw: bytes, mode: str) -> Outcome:
        status = response.status_code
        if 200 <= status < 300:
            return self._parse_ok(response, raw)
        body = raw.decode("utf-8", "replace")
        detail = self._short(self._error_text(body)) or response.reason_phrase
        message = f"HTTP {status}: {detail}"
        if self._auto and mode in MODES[:-1] and status in NEGOTIATION_STATUSES:
            lowered = body.lower()
            if not self._confirmed or any(word in lowered for word in NEGOTIATION_WORDS):
                return Outcome("downgrade", error=message, kind="http", http_status=status)
        if status in RETRYABLE_STATUSES or status >= 500:
            return Outcome(
                "retry",
                error=message,
                kind="http",
                http_status=status,
                retry_after=self._retry_after(response.headers),
            )
        return Outcome("fail", error=message, kind="http", http_status=status)

    def _parse_ok(self, response: httpx.Response, raw: bytes) -> Outcome:
        status = response.status_code

        def malformed(why: str) -> Outcome:
            return Outcome("retry", error=f"malformed response: {why}", kind="malformed",
                            http_status=status)

        def refused(kind: str, why: str) -> Outcome:
            return Outcome("fail", error=why, kind=kind, http_status=status)

        charset = response.charset_encoding or "utf-8"
        try:
            codecs.lookup(charset)
            body = raw.decode(charset)
        except LookupError:
            return refused("bad_encoding", f"bad encoding: unknown charset {charset[:40]!r}")
        except UnicodeDecodeError as exc:
            return refused("bad_encoding", f"bad encoding: not valid {charset[:40]} "
                                           f"(byte {exc.start})")
        except (UnicodeError, ValueError):  # a codec that refuses any bytes ("undefined")
            return refused("bad_encoding", f"bad encoding: {charset[:40]!r} cannot be read")
        body = body.removeprefix("\ufeff")
        if json_depth_exceeds(body, MAX_JSON_DEPTH):
            return refused("too_deep", f"too deeply nested: JSON deeper than {MAX_JSON_DEPTH}")
        try:
            data = json.loads(body)
        except RecursionError:
            return refused("too_deep", "too deeply nested: JSON parser recursion limit")
        except ValueError as exc:
            return malformed(f"not JSON ({self._short(str(exc))})")
        if not isinstance(data, dict):
            return malformed("body is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return malformed("no choices")
        if not isinstance(choices[0], dict):
            return malformed("choices[0] is not an object")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return malformed("no message in choices[0]")
        content = message.get("content")
        calls, calls_cut = self._tool_calls(message.get("tool_calls"))
        reasoning = next((r for r in (message.get("reasoning_content"), message.get("reasoning"))
                          if isinstance(r, str) and r), None)
        # a reasoning model cut while thinking answers no content, only its reasoning
        if content is None and not calls and reasoning is None:
            finish = choices[0].get("finish_reason")
            reason = f" (finish_reason {self._short(finish)!r})" if isinstance(finish, str) else ""
            return malformed(f"null content{reason}")
        if content is not None and not isinstance(content, str):
            return malformed("message content is not a string")
        text = self.scrub(valid_unicode(content or ""))
        truncated = len(text) > self.config.max_answer_chars or calls_cut
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        answer = dict(
            tool_calls=calls,
            served_model=self._field(data.get("model")),
            cached_prompt_tokens=_cached_tokens(usage),
            provider_cost_usd=_cost(usage.get("cost")),
            reasoning=(self.scrub(valid_unicode(reasoning))[: self.config.max_answer_chars]
                       if reasoning is not None else None),
            finish_reason=self._field(choices[0].get("finish_reason")),
            provider_reasoning_tokens=_reasoning_tokens(usage),
        )
        return Outcome(
            "ok",
            text=text[: self.config.max_answer_chars],
            http_status=status,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            truncated=truncated,
            answer=answer,
        )

    def _field(self, value: Any) -> str | None:
        """A short string field of a reply (model, finish reason), scrubbed and bounded."""
        if not isinstance(value, str):
            return None
        return self.scrub(valid_unicode(value[: 4 * MAX_FIELD_CHARS]))[:MAX_FIELD_CHARS]

    def _tool_calls(self, raw: Any) -> tuple[tuple[ToolCall, ...], bool]:
        """The reply's tool calls and whether any was cut (too many, or arguments too long)."""
        if not isinstance(raw, list):
            return (), False
        entries = [entry for entry in raw if isinstance(entry, dict)]
        cut = len(entries) > MAX_TOOL_CALLS
        calls = []
        for entry in entries[:MAX_TOOL_CALLS]:
            function = entry.get("function")
            function = function if isinstance(function, dict) else {}
            arguments = function.get("arguments")
            if arguments is None:
                arguments = ""
            elif not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            arguments = self.scrub(valid_unicode(arguments))
            cut = cut or len(arguments) > self.config.max_answer_chars
            calls.append(ToolCall(id=self._field(entry.get("id")) or "",
                                  name=self._field(function.get("name")) or "",
                                  arguments=arguments[: self.config.max_answer_chars]))
        return tuple(calls), cut

