"""The pre-flight check before a chat-model run: a refused key, a missing endpoint or model and
an unreachable server end the command in one line, exit 2, before any episode is logged."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from diagym.analysis.cli import main
from diagym.analysis.llm_runs import ChatSettings, PreflightError, preflight
from tests.conftest import scaled
from tests.fault_server import FaultServer
from tests.llm_fake_server import completion_body

ANSWER = '{"operation": 0, "candidate": 0}'


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path))
        status = self.server.models_status
        self._reply(status, {"object": "list", "data": [{"id": m} for m in self.server.models]}
                    if status == 200 else {"error": {"message": f"status {status}"}})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append(("POST", self.path))
        status = self.server.chat_status
        self._reply(status, completion_body(ANSWER, request) if status == 200
                    else {"error": {"message": "no such model"}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    models_status = 200
    chat_status = 200
    models: tuple[str, ...] = ("fake",)
    seen: list[tuple[str, str]]


@pytest.fixture
def server() -> Iterator[_Server]:
    """A loopback OpenAI-style server with a models list; tests set its statuses."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=scaled(5))


def _url(httpd: _Server) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(url: str, log: Path, *extra: str) -> list[str]:
    return ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--base-url", url,
            "--model", "fake", "--episodes", "2", "--log", str(log), *extra]


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_run_before_any_episode(
        server: _Server, status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAGYM_TEST_KEY", "sk-SECRET-1")
    server.models_status = status
    log = tmp_path / "run.jsonl"
    assert main(_run(_url(server), log, "--api-key-env", "DIAGYM_TEST_KEY")) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"diagym run: error: the server at {_url(server)} refused the key (HTTP {status}); "
        "check $DIAGYM_TEST_KEY"]
    assert not log.exists()
    assert server.seen == [("GET", "/v1/models")]


def test_no_key_at_all_is_named(server: _Server, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.models_status = 401
    assert main(_run(_url(server), tmp_path / "run.jsonl")) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"diagym run: error: the server at {_url(server)} refused the key (HTTP 401); no key "
        "was sent: set $OPENAI_API_KEY, or --api-key-env NAME"]


def test_an_unreachable_server_stops_every_chat_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    endpoint = ["--base-url", url, "--model", "fake"]
    commands = {
        "run": _run(url, tmp_path / "run.jsonl"),
        "llm-study": ["llm-study", "--design", "fractional", "--log",
                      str(tmp_path / "study.jsonl"), *endpoint],
        "dacs-study": ["dacs-study", "--policy", "llm", "--episodes", "1", "--json", "--log",
                       str(tmp_path / "dacs.jsonl"), *endpoint],
        "rcwt sweep": ["rcwt", "sweep", "--policy", "llm", "--window", "700", "--trials", "1",
                       "--out", str(tmp_path / "rcwt"), *endpoint],
    }
    for command, argv in commands.items():
        assert main(argv) == 2, command
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"diagym {command}: error: the server at {url} cannot be "
                                   "reached (ConnectError: "), lines
        assert lines[0].endswith("; check --base-url and that the server is running")
    assert not list(tmp_path.rglob("*.jsonl"))  # no log was started


def test_a_missing_route_is_confirmed_by_one_completion(
        server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.models_status = 404
    server.chat_status = 404
    log = tmp_path / "run.jsonl"
    assert main(_run(_url(server), log)) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"diagym run: error: the server at {_url(server)} has no chat "
                             "completions for model 'fake' (HTTP 404: no such model)")
    assert err[0].endswith("check that --base-url ends in /v1 and --model names a model it "
                           "serves")
    assert server.seen == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    assert not log.exists()


def test_a_listed_model_needs_no_completion_and_the_run_goes_on(
        server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    assert main(_run(_url(server), log, "--json")) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2
    # The pre-flight's list, then the capability probe's own list: no completion between.
    assert server.seen[:2] == [("GET", "/v1/models")] * 2
    assert server.seen.count(("GET", "/v1/models")) == 2
    assert log.exists()


def test_an_unlisted_model_that_still_answers_is_let_through(server: _Server) -> None:
    """Servers list aliases (llama.cpp lists its file name): the completion decides."""
    server.models = ("other",)
    preflight(ChatSettings(base_url=_url(server), model="fake"))
    assert server.seen == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]


def test_a_server_without_a_models_route_is_let_through(server: _Server) -> None:
    server.models_status = 501
    preflight(ChatSettings(base_url=_url(server), model="fake"))
    assert server.seen == [("GET", "/v1/models")]


def test_the_library_raises_a_preflight_error(server: _Server) -> None:
    server.models_status = 403
    with pytest.raises(PreflightError, match=r"refused the key \(HTTP 403\)"):
        preflight(ChatSettings(base_url=_url(server), model="fake"))


def test_the_check_ends_at_the_timeout_while_the_server_drips_its_headers() -> None:
    """--timeout 1 bounds GET /models by the wall clock (a header drip of one byte each
    0.05 s, kept up for 120 s, never trips a per-read timeout); no answer in time lets the
    run go on, as other transient failures do."""
    with FaultServer("drip_headers", answer_get=True, lifetime=120.0,
                     max_response_s=120.0) as server:
        start = time.monotonic()
        preflight(ChatSettings(base_url=server.base_url, model="m", timeout=1.0))
        elapsed = time.monotonic() - start
        assert server.requests == 1  # the GET; no completion was sent
    assert elapsed < scaled(10.0)


@pytest.mark.parametrize(("value", "message"), [
    ("0", "argument --timeout: must be a finite number > 0; got '0'"),
    ("-1", "argument --timeout: must be a finite number > 0; got '-1'"),
    ("soon", "argument --timeout: must be a finite number > 0; got 'soon'"),
    ("nan", "argument --timeout: must be a finite number > 0; got 'nan'"),
])
def test_a_timeout_that_cannot_work_is_refused_by_flag(
        value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--episodes", "1",
              "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", value])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"diagym run: error: {message} (see diagym run --help)"]


@pytest.mark.parametrize(("url", "message"), [
    ("htp:/x", "--base-url needs an http:// or https:// scheme and a host, like "
               "http://127.0.0.1:8080/v1 (got 'htp:/x')"),
    ("http://127.0.0.1:9/v1?x=1", "--base-url must not have a query or fragment (got "
                                  "'http://127.0.0.1:9/v1?x=1')"),
])
def test_a_malformed_base_url_is_one_line(url: str, message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_run(url, tmp_path / "run.jsonl")) == 2
    assert capsys.readouterr().err.splitlines() == [f"diagym run: error: {message}"]
    assert not (tmp_path / "run.jsonl").exists()
