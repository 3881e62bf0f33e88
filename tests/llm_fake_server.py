"""A scriptable, fault-injecting OpenAI-compatible HTTP server on loopback, for tests.

Why a real server rather than an httpx mock transport: timeouts, dropped connections,
truncated bodies and concurrency limits only behave realistically over a real socket, and
every LLM-policy test file can reuse the same stand-in for llama.cpp/vLLM/OpenAI.

    with FakeServer(scripted([Reply(status=500)], then=Reply(content="hi"))) as server:
        client = ChatClient(base_url=server.base_url, model="m")

The responder sees each parsed request JSON and returns a `Reply`. The server speaks
HTTP/1.0 (one request per connection), so handler threads end with their request and
`close()` can join them all; delays wait on a stop event, so shutting down never waits for a
scripted delay, and a client that hangs up mid-delay only causes a swallowed write error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    status: HTTP status. content: for 2xx, the assistant message wrapped into a proper
    chat.completion body with usage; for other statuses, the error message of an
    OpenAI-style error body. body: raw text sent instead of anything generated (malformed or
    truncated JSON). headers: extra response headers. delay: seconds to wait before
    answering. echo_headers: append the received request headers (Authorization included) to
    the error message, like a misbehaving proxy.
    """

    status: int = 200
    content: str | None = None
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    echo_headers: bool = False


Responder = Callable[[dict[str, Any]], Reply]


def scripted(replies: list[Reply], then: Reply) -> Responder:
    """A responder that plays `replies` in order, then answers `then` forever."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(_request: dict[str, Any]) -> Reply:
        with lock:
            return queue.pop(0) if queue else then

    return respond


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def completion_body(content: str, request: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat.completion body with deterministic usage numbers."""
    prompt = "".join(str(m.get("content", "")) for m in request.get("messages", []))
    prompt_tokens, completion_tokens = _tokens(prompt), _tokens(content)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # socket timeout: a stuck client cannot pin a handler thread forever

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            request = json.loads(raw or b"null")
        except ValueError:
            request = None
        if not isinstance(request, dict):
            owner._record({"_invalid_body": raw.decode("utf-8", "replace")}, self.headers)
            self._send(400, json.dumps({"error": {"message": "request body is not JSON"}}), {})
            return
        owner._record(request, self.headers)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}), {})
            return
        try:
            reply = owner.responder(request)
        except Exception as exc:  # a broken responder is a test bug: report it, answer 500
            owner.errors.append(exc)
            self._send(500, json.dumps({"error": {"message": f"responder failed: {exc}"}}), {})
            return
        if reply.delay > 0 and owner._stopping.wait(reply.delay):
            return  # shutting down: drop the connection, as a dying server would
        self._send(reply.status, self._body(reply, request), reply.headers)

    def _body(self, reply: Reply, request: dict[str, Any]) -> str:
        if reply.body is not None:
            return reply.body
        if 200 <= reply.status < 300:
            return json.dumps(completion_body(reply.content or "", request))
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = "error"
        message = reply.content if reply.content is not None else reason
        if reply.echo_headers:
            message += " | received headers: " + json.dumps(dict(self.headers.items()))
        error = {"message": message, "type": "fake_error", "code": reply.status}
        return json.dumps({"error": error})

    def _send(self, status: int, body: str, headers: dict[str, str]) -> None:
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            pass  # the client hung up (e.g. its timeout fired during our delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins every handler thread
    owner: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # disconnects mid-request are expected in fault tests


class FakeServer:
    """A loopback OpenAI-compatible server in a background thread; use as a context manager.

    `base_url` ends in "/v1"; `requests` is a snapshot of every received request body in
    arrival order and `headers` the matching request headers (case-insensitive mappings).
    """

    def __init__(self, responder: Responder, host: str = "127.0.0.1", port: int = 0) -> None:
        self.responder = responder
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[httpx.Headers] = []
        self._stopping = threading.Event()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False
        self._closed = False

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[httpx.Headers]:
        with self._lock:
            return list(self._headers)

    def _record(self, request: dict[str, Any], headers: Any) -> None:
        with self._lock:
            self._requests.append(request)
            self._headers.append(httpx.Headers(list(headers.items())))

    def start(self) -> FakeServer:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        if self._started:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
