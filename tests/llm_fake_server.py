"""A scriptable, fault-injecting OpenAI-compatible HTTP server on loopback, for tests.

Why a real server rather than an httpx mock transport: timeouts, dropped connections,
truncated bodies and concurrency limits only behave realistically over a real socket, and
every LLM-policy test file can reuse the same stand-in for llama.cpp/vLLM/OpenAI.

    with FakeServer(scripted([Reply(status=500)], then=Reply(content="hi"))) as server:
        client = ChatClient(base_url=server.base_url, model="m")

The responder sees each parsed request JSON and returns a `Reply`. `tool_server()` and
`no_tool_server()` are responders that stand in for a server with native tool calls and for
one without (llama-cpp-python: HTTP 500 on an OpenAI json_schema response_format, tools
ignored). With `models=[...]` the server also lists models at GET /v1/models, and with
`api_key=` it answers 401 to every request without that bearer key. The server speaks
HTTP/1.0 (one request per connection), so handler threads end with their request and
`close()` can join them all; a request with "stream": true is answered with the same
completion as server-sent events (`stream_body`); delays wait on a stop event, so shutting
down never waits for a scripted delay, and a client that hangs up mid-delay only causes a
swallowed write error.
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

from tests.conftest import scaled


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    status: HTTP status. content: for 2xx, the assistant message wrapped into a proper
    chat.completion body with usage; for other statuses, the error message of an
    OpenAI-style error body. body: raw text sent instead of anything generated (malformed or
    truncated JSON). headers: extra response headers. delay: seconds to wait before
    answering. echo_headers: append the received request headers (Authorization included) to
    the error message, like a misbehaving proxy. For 2xx only: tool_calls: the message's
    tool calls as sent (content is then null unless also given); model: the body's "model"
    instead of the requested one; reasoning: message.reasoning_content; usage: fields merged
    into the usage object; finish_reason: instead of "stop" ("tool_calls" with tool calls).
    """

    status: int = 200
    content: str | None = None
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    echo_headers: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    model: str | None = None
    reasoning: str | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None


Responder = Callable[[dict[str, Any]], Reply]


def scripted(replies: list[Reply], then: Reply) -> Responder:
    """A responder that plays `replies` in order, then answers `then` forever."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(_request: dict[str, Any]) -> Reply:
        with lock:
            return queue.pop(0) if queue else then

    return respond


def tool_call(name: str, arguments: Any, call_id: str = "call_0") -> dict[str, Any]:
    """One OpenAI message tool call; `arguments` as given (OpenAI sends a JSON string)."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def example_value(schema: Any) -> Any:
    """A value of a JSON schema's shape, as a constrained model would write: 1 for integers,
    every property of an object filled, for the scripted servers' answers."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: example_value(sub) for name, sub in props.items()}
    if "enum" in schema:
        return schema["enum"][0]
    return {"integer": 1, "number": 1.0, "string": "a", "boolean": True, "array": []}.get(
        str(kind))


def _forced(request: dict[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return choice["function"].get("name")
    return None


def _format_schema(request: dict[str, Any]) -> Any:
    rf = request.get("response_format")
    if not isinstance(rf, dict):
        return None
    if rf.get("type") == "json_schema":
        return (rf.get("json_schema") or {}).get("schema")
    return rf.get("schema") if rf.get("type") == "json_object" else None


def tool_server(text: str = "OK", model: str | None = None) -> Responder:
    """A server with native tool calls and every response_format: a request with tools gets
    a call of the forced function (tool_choice naming one), else of the first tool, with
    arguments of its parameters' shape (`example_value`) as JSON text; a request with a
    schema gets an answer of its shape; anything else gets `text`."""

    def respond(request: dict[str, Any]) -> Reply:
        tools = request.get("tools")
        if tools:
            functions = {t["function"]["name"]: t["function"] for t in tools}
            name = _forced(request) or next(iter(functions))
            arguments = example_value(functions.get(name, {}).get("parameters"))
            return Reply(tool_calls=[tool_call(name, json.dumps(arguments))], model=model)
        schema = _format_schema(request)
        if schema is not None:
            return Reply(content=json.dumps(example_value(schema)), model=model)
        return Reply(content=text, model=model)

    return respond


def no_tool_server(text: str = "OK", model: str | None = None) -> Responder:
    """A server like llama-cpp-python's: HTTP 500 to an OpenAI json_schema response_format,
    a json_object schema enforced, tools ignored (a plain `text` answer)."""

    def respond(request: dict[str, Any]) -> Reply:
        rf = request.get("response_format")
        if isinstance(rf, dict) and rf.get("type") == "json_schema":
            return Reply(status=500, content="Internal Server Error")
        schema = _format_schema(request)
        if schema is not None:
            return Reply(content=json.dumps(example_value(schema)), model=model)
        return Reply(content=text, model=model)

    return respond


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def completion_body(content: str | None, request: dict[str, Any],
                    reply: Reply | None = None) -> dict[str, Any]:
    """An OpenAI chat.completion body with deterministic usage numbers; `reply` adds its tool
    calls, model, reasoning, usage fields and finish reason."""
    reply = reply if reply is not None else Reply()
    prompt = "".join(str(m.get("content", "")) for m in request.get("messages", []))
    prompt_tokens, completion_tokens = _tokens(prompt), _tokens(content or "")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.tool_calls is not None:
        message["tool_calls"] = reply.tool_calls
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": reply.model if reply.model is not None else request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **(reply.usage or {}),
        },
    }


def stream_body(content: str | None, request: dict[str, Any],
                reply: Reply | None = None) -> str:
    """The same completion as `completion_body`, streamed as OpenAI's server-sent events: the
    message in one delta, then its finish reason with the usage, then [DONE]."""
    whole = completion_body(content, request, reply)
    choice = whole["choices"][0]
    head = {"id": whole["id"], "object": "chat.completion.chunk", "created": 0,
            "model": whole["model"]}
    chunks = [{**head, "choices": [{"index": 0, "delta": choice["message"],
                                    "finish_reason": None}]},
              {**head, "choices": [{"index": 0, "delta": {},
                                    "finish_reason": choice["finish_reason"]}],
               "usage": whole["usage"]}]
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # socket timeout: a stuck client cannot pin a handler thread forever

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _refused(self) -> bool:
        """Answers 401 when the server wants a key and the request lacks it."""
        key = self.server.owner.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return False
        self._send(401, json.dumps({"error": {"message": "invalid api key"}}), {})
        return True

    def do_GET(self) -> None:
        owner = self.server.owner
        owner._seen(("GET", self.path))
        if owner.models is None:
            self._send(501, json.dumps({"error": {"message": "Unsupported method"}}), {})
            return
        if self._refused():
            return
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}), {})
            return
        listed = [{"id": m, "object": "model", "owned_by": "fake"} for m in owner.models]
        self._send(200, json.dumps({"object": "list", "data": listed}), {})

    def do_POST(self) -> None:
        owner = self.server.owner
        owner._seen(("POST", self.path))
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
        if self._refused():
            return
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
        if request.get("stream") is True and 200 <= reply.status < 300 and reply.body is None:
            content = reply.content if reply.content is not None or reply.tool_calls else ""
            self._send(reply.status, stream_body(content, request, reply), reply.headers,
                       "text/event-stream")
            return
        self._send(reply.status, self._body(reply, request), reply.headers)

    def _body(self, reply: Reply, request: dict[str, Any]) -> str:
        if reply.body is not None:
            return reply.body
        if 200 <= reply.status < 300:
            content = reply.content if reply.content is not None or reply.tool_calls else ""
            return json.dumps(completion_body(content, request, reply))
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = "error"
        message = reply.content if reply.content is not None else reason
        if reply.echo_headers:
            message += " | received headers: " + json.dumps(dict(self.headers.items()))
        error = {"message": message, "type": "fake_error", "code": reply.status}
        return json.dumps({"error": error})

    def _send(self, status: int, body: str, headers: dict[str, str],
              content_type: str = "application/json") -> None:
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
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
    arrival order and `headers` the matching request headers (case-insensitive mappings);
    `seen` lists (method, path) of every request, GETs included. `models`: the ids GET
    /v1/models lists (None: no GET route at all, HTTP 501). `api_key`: the bearer key every
    request must carry (None: any).
    """

    def __init__(self, responder: Responder, host: str = "127.0.0.1", port: int = 0, *,
                 models: list[str] | None = None, api_key: str | None = None) -> None:
        self.responder = responder
        self.models = list(models) if models is not None else None
        self.api_key = api_key
        self._seen_paths: list[tuple[str, str]] = []
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

    @property
    def seen(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._seen_paths)

    def _seen(self, entry: tuple[str, str]) -> None:
        with self._lock:
            self._seen_paths.append(entry)

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
            self._thread.join(timeout=scaled(5))
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
