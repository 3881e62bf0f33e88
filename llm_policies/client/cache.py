"""A response cache on disk, so a resumed or repeated run does not pay twice for an answer.

Why: at temperature 0 with a seed, the same request to the same model is the same decision,
and a hosted call costs money and seconds. `CachedChat` answers a request it has seen from
the cache; the request key is what decides the answer: model, messages, tools (and with them
the client's tool_choice), the response_format setting, json_schema, temperature, seed and
max_tokens (with a reasoning budget and its control, when set); never how the model is
reached (base URL, key, timeouts), so no credential can
reach a cache file. Only answers (status "ok") are stored: an error is worth retrying next
time.

Layout: `<directory>/<2 hex>/<sha256>.json` for answers and `<directory>/meta/<name>/<2
hex>/<sha256>.json` for other facts worth keeping (`get_meta`/`put_meta`, e.g. a server's
capability probe), each file {"request": ..., "value": ...}, the key the sha256 of the
request's canonical JSON. Directories are created 0700 and files 0600 (prompts and answers
are the user's data). A file is written whole under a temporary name and renamed into place,
so threads and processes may share a directory; a file that is torn, corrupt, over
`MAX_ENTRY_BYTES` or for another request is a miss, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from diagym.controllers.files import write_atomically
from diagym.llm_policies.client.transport import ChatResult, ToolCall
from diagym.llm_policies.client.wrapping import ChatWrapper, Messages, Tools

MAX_ENTRY_BYTES = 4 * 1024 * 1024
DIR_MODE = 0o700
META = "meta"
_META_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(ChatResult))
__all__ = ["MAX_ENTRY_BYTES", "CachedChat", "ResponseCache"]
LOGGER = logging.getLogger("diagym.cache")


def _canonical(request: dict[str, Any]) -> str:
    return json.dumps(request, sort_keys=True, separators=(",", ":"), allow_nan=False)


class ResponseCache:
    """Request (a JSON object) -> value (a JSON object), one file each (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._warned = False
        if not self.directory.is_dir():
            self.directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.chmod(self.directory, DIR_MODE)  # mkdir's mode is cut by the umask

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        return hashlib.sha256(_canonical(request).encode("ascii")).hexdigest()

    def get(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return self._read(self.directory, request)

    def put(self, request: dict[str, Any], value: dict[str, Any]) -> None:
        self._store(self.directory, request, value)

    def get_meta(self, name: str, request: dict[str, Any]) -> dict[str, Any] | None:
        return self._read(self._meta_dir(name), request)

    def put_meta(self, name: str, request: dict[str, Any], value: dict[str, Any]) -> None:
        self._store(self._meta_dir(name), request, value)

    def _store(self, root: Path, request: dict[str, Any], value: dict[str, Any]) -> None:
        """_write, or one warning for the cache's life when the disk refuses (full, read-only):
        the cache saves calls, and a run must not stop because it cannot save them."""
        try:
            self._write(root, request, value)
        except OSError as error:
            if not self._warned:
                self._warned = True
                LOGGER.warning("diagym: warning: the response cache %s cannot be written (%s); "
                               "the run goes on without storing answers", self.directory,
                               error.strerror or error)

    def _meta_dir(self, name: str) -> Path:
        if not isinstance(name, str) or not _META_NAME.fullmatch(name):
            raise ValueError("name must be 1-64 characters of a-z, 0-9, '_' and '-', starting "
                             f"with a letter or digit (got {name!r})")
        return self.directory / META / name

    def _path(self, root: Path, key: str) -> Path:
        return root / key[:2] / f"{key}.json"

    def _mkdirs(self, path: Path) -> None:
        """`path` and its missing ancestors below the cache directory, each 0700."""
        missing = []
        while path != self.directory and not path.is_dir():
            missing.append(path)
            path = path.parent
        for level in reversed(missing):
            try:
                level.mkdir(mode=DIR_MODE)
            except FileExistsError:  # another thread or process made it meanwhile
                continue
            os.chmod(level, DIR_MODE)

    def _read(self, root: Path, request: dict[str, Any]) -> dict[str, Any] | None:
        text = _canonical(request)
        path = self._path(root, self.key(request))
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as handle:
                if os.fstat(handle.fileno()).st_size > MAX_ENTRY_BYTES:
                    return None
                raw = handle.read(MAX_ENTRY_BYTES + 1)
            entry = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        if len(raw) > MAX_ENTRY_BYTES or not isinstance(entry, dict):
            return None
        value = entry.get("value")
        try:
            same = _canonical(entry.get("request")) == text
        except (TypeError, ValueError):
            return None
        return value if same and isinstance(value, dict) else None

    def _write(self, root: Path, request: dict[str, Any], value: dict[str, Any]) -> None:
        data = json.dumps({"request": request, "value": value}, sort_keys=True,
                          allow_nan=False).encode("ascii")
        if len(data) > MAX_ENTRY_BYTES:  # it could never be read back
            return
        path = self._path(root, self.key(request))
        self._mkdirs(path.parent)
        write_atomically(path, lambda handle: handle.write(data))  # mkstemp's mode: 0600


class CachedChat(ChatWrapper):
    """A chat model that answers requests it has answered before from a ResponseCache.

    A hit makes no call: its result is the stored one with cache="hit", retries 0, cost_usd 0
    and the lookup's time as latency_s (the original is kept as "original_latency_s" in the
    file). A miss calls the inner model and returns its result with cache="miss".

    response_format: the structured-output setting the inner model was built with, part of the
    key; None takes the inner model's `response_format` attribute, else its `mode` now (so
    build the wrapper before the first call, while a negotiating client still starts there).
    """

    def __init__(self, inner: Any, cache: ResponseCache,
                 response_format: str | None = None) -> None:
        super().__init__(inner)
        self.cache = cache
        self.response_format = (response_format if response_format is not None
                                else getattr(inner, "response_format", None)
                                or getattr(inner, "mode", None))

    def request(self, messages: Messages, tools: Tools = None) -> dict[str, Any]:
        """The cache key's request: everything that decides the answer, nothing else."""
        inner = self.inner
        return {
            "model": inner.model,
            "messages": messages,
            "tools": tools,
            "tool_choice": getattr(inner, "tool_choice", None) if tools is not None else None,
            "response_format": self.response_format,
            "json_schema": getattr(inner, "json_schema", None),
            "temperature": inner.temperature,
            "seed": inner.seed,
            "max_tokens": inner.max_tokens,
            **({"reasoning_tokens": inner.reasoning_tokens,
                "reasoning_control": inner.reasoning_control}
               if getattr(inner, "reasoning_tokens", None) is not None else {}),
        }

    def complete(self, messages: Messages, tools: Tools = None) -> ChatResult:
        started = time.perf_counter()
        request = self.request(messages, tools)
        stored = _result(self.cache.get(request))
        if stored is not None:
            return dataclasses.replace(stored, cache="hit", retries=0, cost_usd=0.0,
                                       latency_s=time.perf_counter() - started)
        result = self._inner_complete(messages, tools)
        if result.status == "ok":
            self.cache.put(request, _stored(result))
        return dataclasses.replace(result, cache="miss")


def _stored(result: ChatResult) -> dict[str, Any]:
    value = dataclasses.asdict(result)
    value["original_latency_s"] = value.pop("latency_s")
    return value


def _result(value: dict[str, Any] | None) -> ChatResult | None:
    """The ChatResult of a stored value, None for one that is not an answer this code wrote."""
    if value is None or value.get("status") != "ok" or not isinstance(value.get("text"), str):
        return None
    fields = {k: value[k] for k in _RESULT_FIELDS if k in value}
    fields["latency_s"] = 0.0
    calls = value.get("tool_calls", [])
    try:
        fields["tool_calls"] = tuple(ToolCall(id=c["id"], name=c["name"],
                                              arguments=c["arguments"]) for c in calls)
        result = ChatResult(**fields)
    except (TypeError, KeyError):
        return None
    if not all(isinstance(x, str) for c in result.tool_calls
               for x in (c.id, c.name, c.arguments)):
        return None
    return result
