"""Attempts that end on time: the sync client's httpcore network backend clamps every
connect, read and write to the time the attempt has left (per-read timeouts alone let a
dripping server hold a call forever), and the chunk iterators check the end between reads for
transports without that backend (a caller's own, an environment proxy, the async client).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpcore
import httpx


class Clock(threading.local):
    """The end of the attempt in progress on this thread (time.monotonic), or None."""

    end: float | None = None

    def clamp(self, timeout: float | None, error: type[Exception]) -> float | None:
        if self.end is None:
            return timeout
        left = self.end - time.monotonic()
        if left <= 0:
            raise error("out of time")
        return left if timeout is None else min(timeout, left)


class _ClampedStream(httpcore.NetworkStream):
    """A socket stream whose every operation ends by the attempt's end."""

    def __init__(self, stream: httpcore.NetworkStream, clock: Clock) -> None:
        self._stream = stream
        self._clock = clock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._clock.clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._clock.clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        limit = self._clock.clamp(timeout, httpcore.ConnectTimeout)
        return _ClampedStream(self._stream.start_tls(ssl_context, server_hostname, limit),
                              self._clock)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _ClampedBackend(httpcore.NetworkBackend):
    """httpcore's own sync backend, with each connect, read and write clamped to the time
    the attempt has left: per-read timeouts alone let a dripping server hold a call forever."""

    def __init__(self, clock: Clock) -> None:
        self._inner = httpcore.SyncBackend()
        self._clock = clock

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        limit = self._clock.clamp(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, limit, local_address, socket_options)
        return _ClampedStream(stream, self._clock)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        limit = self._clock.clamp(timeout, httpcore.ConnectTimeout)
        return _ClampedStream(self._inner.connect_unix_socket(path, limit, socket_options),
                              self._clock)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class ClampedTransport(httpx.HTTPTransport):
    """httpx's HTTP transport over `_ClampedBackend` (httpx has no network-backend option,
    so the connection pool it builds is replaced by the same pool with the backend)."""

    def __init__(self, clock: Clock, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_ClampedBackend(clock),
        )



def raw_chunks(response: httpx.Response) -> Iterator[bytes]:
    """The body as it came over the wire; a response a transport built in memory (httpx reads
    those at once) is its content, still bounded by the reader."""
    return iter((response.content,)) if response.is_stream_consumed else response.iter_raw()


async def one_chunk(content: bytes) -> AsyncIterator[bytes]:
    yield content


def timed(chunks: Iterator[bytes], end: float) -> Iterator[bytes]:
    """The chunks of a body, ending in a timeout once `end` has passed (the check between
    reads, for transports without the clamped backend)."""
    for chunk in chunks:
        if time.monotonic() > end:
            raise TimeoutError("out of time")
        yield chunk


async def atimed(chunks: AsyncIterator[bytes], end: float) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        if time.monotonic() > end:
            raise TimeoutError("out of time")
        yield chunk

