"""A hostile OpenAI-compatible server on loopback: every way a provider can hurt a client.

Why a second server beside tests/llm_fake_server.py: FakeServer scripts well-formed HTTP
(statuses, delays, echoed headers); the faults here live below that, in bytes and timing
(a gzip bomb, a body that drips one byte at a time, invalid UTF-8, a reset connection), so
this handler writes raw responses itself.

    with FaultServer("bomb") as server:
        client = ChatClient(base_url=server.base_url, model="m")

Bounds, so that a broken client cannot make a test hang: the server listens on 127.0.0.1
only, answers at most `max_requests` requests (later connections are closed unanswered),
stops by itself after `lifetime` seconds, and no response takes longer than
`max_response_s`. Large bodies are streamed from one small chunk, so the server's own memory
stays small and a test can measure the client's.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, quote_plus

from tests.conftest import scaled

ANSWER = '{"operation": 0, "candidate": 0}'
BOMB_DECODED_BYTES = 1 << 30  # 1 GiB of JSON whitespace inside a 1 MB gzip body
OVERSIZED_BYTES = 50_000_000
LONG_ANSWER_CHARS = 200_000
DEPTH = 1000
MAX_REQUEST_BYTES = 1 << 20

MODES = (
    "ok", "bomb", "oversized", "oversized_unannounced", "oversized_error", "long_answer",
    "drip", "drip_headers", "deep_200", "deep_500", "deep_answer", "bad_utf8", "bad_charset",
    "undefined_charset", "punycode_charset",
    "corrupt_gzip", "lone_surrogate", "echo_key", "echo_key_401", "status_401", "status_403",
    "status_404", "reset", "empty_choices", "null_content",
)

_bomb_lock = threading.Lock()
_bomb: bytes | None = None


def bomb() -> bytes:
    """A gzip body that decodes to a chat completion opening plus 1 GiB of spaces (computed
    once per process, in 1 MiB steps)."""
    global _bomb
    with _bomb_lock:
        if _bomb is None:
            packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
            parts = [packer.compress(b'{"choices": [{"message": {"content": "')]
            block = b" " * (1 << 20)
            for _ in range(BOMB_DECODED_BYTES // len(block)):
                parts.append(packer.compress(block))
            parts.append(packer.flush())
            _bomb = b"".join(parts)
        return _bomb


def completion(content: Any) -> dict[str, Any]:
    """A chat.completion body around `content` (any JSON value, for the shape faults)."""
    return {
        "id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "fault",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def key_forms(key: str) -> dict[str, str]:
    """The encodings of a key a careless server or proxy may echo (what tests search for)."""
    return {
        "raw": key,
        "url": quote(key, safe=""),
        "url_path": quote(key),
        "url_plus": quote_plus(key),
        "json": json.dumps(key)[1:-1],
        "base64": base64.b64encode(key.encode()).decode(),
        "upper": key.upper(),
        "lower": key.lower(),
        "url_upper": quote(key.upper(), safe=""),
        "base64_upper": base64.b64encode(key.upper().encode()).decode(),
        "joined_upper": f"answer{key.upper()}answer",
    }


def _deep() -> str:
    return '{"choices": ' + "[" * DEPTH + "]" * DEPTH + "}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # socket timeout: a stuck client cannot pin a handler thread forever

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        """The fault for GET too (GET /models: the pre-flight check and the probe) when the
        server was made with `answer_get`; otherwise 501, as a chat-only server answers."""
        if self.server.owner.answer_get:
            self.do_POST()
        else:
            self.send_error(501)

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, MAX_REQUEST_BYTES))
        if not owner._admit(self.headers.get("Authorization")):
            self.close_connection = True
            return
        self._started = time.monotonic()
        try:
            getattr(self, "mode_" + owner.mode)()
        except OSError:
            pass  # the client hung up: expected for every bounded client

    # -- writing ---------------------------------------------------------------------------
    def _head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Fault'}", "Connection: close"]
        headers = {"Content-Type": "application/json", **headers}
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def _send(self, status: int, body: bytes | str, **headers: str) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self._head(status, {"Content-Length": str(len(data)), **headers})
        self.wfile.write(data)
        self.wfile.flush()

    def _send_json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value))

    def _alive(self) -> bool:
        owner = self.server.owner
        return (not owner._stopping.is_set()
                and time.monotonic() - self._started < owner.max_response_s)

    def _stream(self, total: int, chunk: bytes, *, announce: bool, status: int = 200) -> None:
        """`total` bytes of a JSON answer string, written from one repeated chunk."""
        opening = b'{"choices": [{"message": {"content": "'
        closing = b'"}}]}'
        filler = total - len(opening) - len(closing)
        headers = {"Content-Length": str(total)} if announce else {}
        self._head(status, headers)
        self.wfile.write(opening)
        while filler > 0 and self._alive():
            part = chunk[: min(len(chunk), filler)]
            self.wfile.write(part)
            filler -= len(part)
        self.wfile.write(closing)
        self.wfile.flush()

    def _drip_bytes(self, data: bytes) -> None:
        for i in range(len(data)):
            if not self._alive():
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            self.server.owner._stopping.wait(self.server.owner.drip_interval)

    # -- the modes -------------------------------------------------------------------------
    def mode_ok(self) -> None:
        self._send_json(200, completion(ANSWER))

    def mode_bomb(self) -> None:
        self._send(200, bomb(), **{"Content-Encoding": "gzip"})

    def mode_oversized(self) -> None:
        self._stream(OVERSIZED_BYTES, b"a" * 65536, announce=True)

    def mode_oversized_unannounced(self) -> None:
        self._stream(OVERSIZED_BYTES, b"a" * 65536, announce=False)

    def mode_oversized_error(self) -> None:
        self._stream(OVERSIZED_BYTES, b"e" * 65536, announce=True, status=400)

    def mode_long_answer(self) -> None:
        self._send_json(200, completion("b" * LONG_ANSWER_CHARS))

    def mode_drip(self) -> None:
        self._head(200, {"Content-Length": "1000000"})
        self.wfile.flush()
        self._drip_bytes(b" " * 1_000_000)

    def mode_drip_headers(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.wfile.flush()
        self._drip_bytes(b"X-Drip: " + b"a" * 1_000_000)

    def mode_deep_200(self) -> None:
        self._send(200, _deep())

    def mode_deep_500(self) -> None:
        self._send(500, _deep())

    def mode_deep_answer(self) -> None:
        self._send_json(200, completion("[" * DEPTH + "]" * DEPTH))

    def mode_bad_utf8(self) -> None:
        self._send(200, b'{"choices": [{"message": {"content": "\xff\xfe\xc0\x80"}}]}')

    def mode_bad_charset(self) -> None:
        body = json.dumps(completion(ANSWER))
        self._send(200, body, **{"Content-Type": "application/json; charset=klingon-8"})

    def mode_undefined_charset(self) -> None:  # a codec that refuses every byte
        body = json.dumps(completion(ANSWER))
        self._send(200, body, **{"Content-Type": "application/json; charset=undefined"})

    def mode_punycode_charset(self) -> None:  # a codec for host names, not for bodies
        body = json.dumps(completion(ANSWER))
        self._send(200, body, **{"Content-Type": "application/json; charset=punycode"})

    def mode_corrupt_gzip(self) -> None:
        data = gzip.compress(json.dumps(completion(ANSWER)).encode())
        corrupt = data[:10] + bytes(b ^ 0x5A for b in data[10:-8]) + data[-8:]
        self._send(200, corrupt, **{"Content-Encoding": "gzip"})

    def mode_lone_surrogate(self) -> None:
        self._send(200, '{"choices": [{"message": {"content": "ok \\ud800 then"}}]}')

    def _echo_text(self) -> str:
        forms = key_forms(self.server.owner.key)
        received = json.dumps(dict(self.headers.items()))
        return " | ".join(f"{name}: {form}" for name, form in forms.items()) + " | " + received

    def mode_echo_key(self) -> None:
        self._send_json(200, completion("your key, every way: " + self._echo_text()))

    def mode_echo_key_401(self) -> None:
        self._send_json(401, {"error": {"message": "bad key " + self._echo_text()}})

    def _status(self, status: int) -> None:
        self._send_json(status, {"error": {"message": f"fault server says {status}"}})

    def mode_status_401(self) -> None:
        self._status(401)

    def mode_status_403(self) -> None:
        self._status(403)

    def mode_status_404(self) -> None:
        self._status(404)

    def mode_reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def mode_empty_choices(self) -> None:
        self._send_json(200, {**completion(ANSWER), "choices": []})

    def mode_null_content(self) -> None:
        self._send_json(200, completion(None))


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins every handler thread
    owner: FaultServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # resets and hang-ups are the point of this server


class FaultServer:
    """One fault `mode` (see MODES) on 127.0.0.1 in a background thread; a context manager.

    `key`: the credential the echo modes send back. `answer_get`: GET requests get the fault
    too (else 501). `requests`: how many requests were answered; `authorization`: the
    Authorization header of each.
    """

    def __init__(self, mode: str, *, key: str = "", max_requests: int = 16,
                 lifetime: float = 60.0, max_response_s: float = 20.0,
                 drip_interval: float = 0.05, answer_get: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} (got {mode!r})")
        self.mode = mode
        self.answer_get = answer_get
        self.key = key
        self.max_requests = max_requests
        self.max_response_s = max_response_s
        self.drip_interval = drip_interval
        self.requests = 0
        self.refused = 0
        self.authorization: list[str | None] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._started = False
        self._closed = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _admit(self, authorization: str | None) -> bool:
        with self._lock:
            if self.requests >= self.max_requests:
                self.refused += 1
                return False
            self.requests += 1
            self.authorization.append(authorization)
            return True

    def start(self) -> FaultServer:
        if not self._started:
            self._started = True
            self._thread.start()
            self._timer.start()
        return self

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stopping.set()
        self._timer.cancel()
        if self._started:
            self._httpd.shutdown()
            self._thread.join(timeout=scaled(5))
        self._httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
